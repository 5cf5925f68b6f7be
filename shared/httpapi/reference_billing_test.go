package httpapi_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestBilling: a self-hosted platform bills nobody. Invoices are an empty
// list, the upcoming invoice is zero, there is nothing to charge (an
// invoice id is a 404), and the AI spend quota is the workspace's
// spendingLimit. Billing needs the billing role; a foreign workspace is a
// 404; bad input is a 400 that changes nothing.
func TestBilling(t *testing.T) {
	f := newFixture(t)
	viewer, _ := f.invite("viewer@example.com", "viewer")
	billing, _ := f.invite("billing@example.com", "billing")
	outsider := newFixtureOn(f) // the admin's second workspace
	stranger, _ := outsider.invite("stranger@example.com", "owner")
	ws := "/v1/admin/workspaces/" + f.ws

	for _, tc := range []struct {
		name, method, path string
		token              string
		body               any
		status             int
		op                 string
		want               string // the raw body of a 200
	}{
		{"invoices", "GET", ws + "/billing/invoices", billing, nil, 200, "listWorkspaceInvoices", `{"invoices":[]}`},
		{"upcoming invoice", "GET", ws + "/billing/upcoming-invoice", billing, nil, 200, "getUpcomingInvoice", `{"lineItems":[],"total":0}`},
		{"charge nothing", "POST", ws + "/billing/invoices/charge-unpaid", billing, map[string]any{}, 200, "chargeWorkspaceUnpaidInvoices", `{"chargedInvoices":[],"failedInvoices":[]}`},
		{"charge an unknown invoice", "POST", ws + "/billing/invoices/charge-unpaid", billing, map[string]any{"invoiceIds": []string{"in_1"}}, 404, "", ""},
		{"charge: empty ids", "POST", ws + "/billing/invoices/charge-unpaid", billing, map[string]any{"invoiceIds": []string{}}, 400, "", ""},
		{"viewer: invoices", "GET", ws + "/billing/invoices", viewer, nil, 403, "", ""},
		{"viewer: charge", "POST", ws + "/billing/invoices/charge-unpaid", viewer, map[string]any{}, 403, "", ""},
		{"foreign workspace", "GET", ws + "/billing/invoices", stranger, nil, 404, "", ""},
		{"unknown workspace", "GET", "/v1/admin/workspaces/wkspace_01ARZ3NDEKTSV4RRFFQ69G5FAV/billing/upcoming-invoice", f.AdminToken, nil, 404, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := *f.Env
			e.T = t
			r := e.Check(e.Do(apitest.Req{Method: tc.method, Path: tc.path, Token: tc.token, Body: tc.body}), tc.status, tc.op)
			if tc.status != 200 {
				checkError(t, r)
				return
			}
			if got := string(r.Raw); got != tc.want+"\n" {
				t.Fatalf("%s: %s, want %s", tc.op, got, tc.want)
			}
		})
	}

	limit := func() float64 {
		r := f.Check(f.Do(apitest.Req{Method: "GET", Path: ws, Token: f.AdminToken}), 200, "getWorkspace")
		return r.Body["spendingLimit"].(float64)
	}
	spend := func(token string, body any) apitest.Response {
		return f.ws_(token, "PUT", "/v1/admin/quotas/ai-spend", body)
	}
	f.Check(spend(billing, map[string]any{"monthlySpendingLimit": 25.5}), 200, "changeAISpendQuota")
	if got := limit(); got != 25.5 {
		t.Fatalf("spendingLimit after changeAISpendQuota: %v, want 25.5", got)
	}
	for _, bad := range []struct {
		name   string
		token  string
		body   any
		status int
	}{
		{"negative", billing, map[string]any{"monthlySpendingLimit": -1}, 400},
		{"missing", billing, map[string]any{}, 400},
		{"not a number", billing, map[string]any{"monthlySpendingLimit": "ten"}, 400},
		{"viewer", viewer, map[string]any{"monthlySpendingLimit": 1}, 403},
		{"stranger", stranger, map[string]any{"monthlySpendingLimit": 1}, 404},
	} {
		r := spend(bad.token, bad.body)
		if r.Status != bad.status {
			t.Fatalf("changeAISpendQuota %s: %d %s, want %d", bad.name, r.Status, r.Raw, bad.status)
		}
		checkError(t, r)
	}
	if got := limit(); got != 25.5 {
		t.Fatalf("spendingLimit after refused changes: %v, want 25.5", got)
	}
}
