package httpapi_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestReferenceDynamoDBCalls pins the DynamoDB calls of the operations of
// docs/account.md: every call pays one GetItem for its token; reads by key
// are GetItems, lists one Query a page (O(page)), writes one transaction.
func TestReferenceDynamoDBCalls(t *testing.T) {
	f := newFixture(t)
	rec := recordUsage(f.Env)
	bot := f.createBot(f.AdminToken, map[string]any{"name": "b"})
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + f.ws, Token: f.AdminToken, Body: map[string]any{"isPublic": true}}), 200, "updateWorkspace")
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/preferences/k", Token: f.AdminToken, Body: map[string]any{"value": 1}}), 200, "setAccountPreference")

	type calls map[string]int
	ws := map[string]string{"x-workspace-id": f.ws}
	for _, tc := range []struct {
		op   string
		req  apitest.Req
		want calls
	}{
		{"introspect", apitest.Req{Method: "POST", Path: "/v1/admin/introspect", Body: map[string]any{"botId": bot}}, calls{"GetItem": 3}},
		{"updateAccount", apitest.Req{Method: "PUT", Path: "/v1/admin/account/me", Body: map[string]any{"displayName": "A"}}, calls{"GetItem": 2, "TransactWriteItems": 1}},
		{"getAccountPreference", apitest.Req{Method: "GET", Path: "/v1/admin/account/preferences/k"}, calls{"GetItem": 2}},
		{"setAccountPreference", apitest.Req{Method: "POST", Path: "/v1/admin/account/preferences/k", Body: map[string]any{"value": 2}}, calls{"GetItem": 1, "TransactWriteItems": 1}},
		{"setWorkspacePreference", apitest.Req{Method: "POST", Path: "/v1/admin/workspaces/preferences/k", Headers: ws, Body: map[string]any{"value": 2}}, calls{"GetItem": 2, "TransactWriteItems": 1}},
		{"getPublicWorkspace", apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws + "/public"}, calls{"GetItem": 2}},
		{"listPublicWorkspaces", apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/public"}, calls{"GetItem": 1, "Query": 1}},
		{"listWorkspaceInvoices", apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws + "/billing/invoices"}, calls{"GetItem": 2}},
		{"getUsage", apitest.Req{Method: "GET", Path: "/v1/admin/usages/" + f.ws + "?type=bot_count"}, calls{"GetItem": 3, "Query": 1}},
		{"getUsage", apitest.Req{Method: "GET", Path: "/v1/admin/usages/" + bot + "?type=table_row_count"}, calls{"GetItem": 3, "Query": 1}},
		{"trackAnalytics", apitest.Req{Method: "POST", Path: "/v1/chat/analytics", Headers: map[string]string{"x-bot-id": bot}, Body: map[string]any{"name": "n", "count": 1}}, calls{"GetItem": 4, "TransactWriteItems": 1}},
		{"getBotAnalytics", apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot + "/analytics?startDate=2026-01-01&endDate=2026-01-31", Headers: ws}, calls{"GetItem": 3, "Query": 2, "BatchGetItem": 1}}, // trackAnalytics counters, usage counters (USAGE#<bot>, and the month's spread keys by key)
	} {
		t.Run(tc.op, func(t *testing.T) {
			tc.req.Token = f.AdminToken
			e := *f.Env
			e.T = t
			e.Check(e.Do(tc.req), 200, tc.op)
			u := rec.of(tc.op)
			got := calls{}
			for _, name := range []string{"GetItem", "Query", "BatchGetItem", "TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "Scan"} {
				if n := u.Calls(name); n > 0 {
					got[name] = n
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%s: calls %s, want %v", tc.op, u, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("%s: calls %s, want %v", tc.op, u, tc.want)
				}
			}
		})
	}
}
