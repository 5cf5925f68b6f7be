package httpapi_test

import (
	"sync"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
)

// usageRecorder keeps the DynamoDB usage of the last call of each operation.
type usageRecorder struct {
	mu   sync.Mutex
	last map[string]*dynamo.Usage
}

func recordUsage(e *apitest.Env) *usageRecorder {
	r := &usageRecorder{last: map[string]*dynamo.Usage{}}
	e.Platform.OnUsage(func(op string, u *dynamo.Usage) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.last[op] = u
	})
	return r
}

func (r *usageRecorder) of(op string) *dynamo.Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[op]
}

// TestDynamoDBCallsPerOperation pins the DynamoDB calls of each operation:
// every call pays one GetItem to authenticate its token and, in a workspace
// or bot scope, one GetItem for the caller's membership; a read by id then
// takes exactly one GetItem more.
func TestDynamoDBCallsPerOperation(t *testing.T) {
	f := newFixture(t)
	rec := recordUsage(f.Env)
	bot := f.createBot(f.AdminToken, map[string]any{"name": "b"})
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")

	type calls map[string]int
	for _, tc := range []struct {
		op   string
		req  apitest.Req
		want calls
	}{
		{"getAccount", apitest.Req{Method: "GET", Path: "/v1/admin/account/me"}, calls{"GetItem": 2}},
		{"getWorkspace", apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws}, calls{"GetItem": 3}},
		{"getBot", apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot}, calls{"GetItem": 3}},
		{"getWorkspaceMember", apitest.Req{Method: "GET", Path: "/v1/admin/workspace-members/me"}, calls{"GetItem": 2}},
		{"listBots", apitest.Req{Method: "GET", Path: "/v1/admin/bots"}, calls{"GetItem": 2, "Query": 1}},
		{"listWorkspaceMembers", apitest.Req{Method: "GET", Path: "/v1/admin/workspace-members"}, calls{"GetItem": 2, "Query": 1}},
		{"listWorkspaces", apitest.Req{Method: "GET", Path: "/v1/admin/workspaces"}, calls{"GetItem": 1, "Query": 1, "BatchGetItem": 1}},
		{"createBot", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: map[string]any{}}, calls{"GetItem": 2, "TransactWriteItems": 1}},
		{"createWorkspace", apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Body: map[string]any{"name": "n"}}, calls{"GetItem": 2, "TransactWriteItems": 1}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			tc.req.Token = f.AdminToken
			tc.req.Headers = map[string]string{"x-workspace-id": f.ws}
			f.Check(f.Do(tc.req), 200, tc.op)
			u := rec.of(tc.op)
			total := 0
			for op, n := range tc.want {
				total += n
				if got := u.Calls(op); got != n {
					t.Errorf("%s: %d %s calls, want %d (all: %s)", tc.op, got, op, n, u)
				}
			}
			if u.Calls("") != total {
				t.Errorf("%s: %d calls in all, want %d (%s)", tc.op, u.Calls(""), total, u)
			}
			t.Logf("%-22s %s", tc.op, u)
		})
	}
	// With a bot API key, getBot needs no membership read.
	f.Check(f.ws_(key, "GET", "/v1/admin/bots/"+bot, nil), 200, "getBot")
	if u := rec.of("getBot"); u.Calls("GetItem") != 2 || u.Calls("") != 2 {
		t.Errorf("getBot by bot API key: %s, want GetItem=2", u)
	}
}

// BenchmarkGetBot measures getBot end to end on the embedded stand-ins and
// reports DynamoDB calls per operation.
func BenchmarkGetBot(b *testing.B) {
	e := apitest.New(b)
	f := &fixture{Env: e}
	f.ws = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "bench"}}), 200, "createWorkspace").Str("id")
	bot := f.createBot(e.AdminToken, nil)
	var mu sync.Mutex
	calls := 0
	e.Platform.OnUsage(func(op string, u *dynamo.Usage) {
		mu.Lock()
		calls += u.Calls("")
		mu.Unlock()
	})
	req := apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot, Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": f.ws}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.Do(req); r.Status != 200 {
			b.Fatal(r.Status)
		}
	}
	b.ReportMetric(float64(calls)/float64(b.N), "ddb-calls/op")
}
