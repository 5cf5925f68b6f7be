package httpapi_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestUpdatesCheckReferencesAsCreates: an update naming a user checks it as
// the create does: updateWorkflow with the userId of another bot's user, a
// made-up one or one of another kind is a 404 in the error shape (as
// createWorkflow with it), and nothing is written: the workflow keeps its
// user and does not list under the other. A user of the bot is taken.
func TestUpdatesCheckReferencesAsCreates(t *testing.T) {
	f := newChatFixture(t)
	mine := f.user(nil)
	other := newFixtureOn(f.fixture)
	otherBot := other.createBot(f.AdminToken, map[string]any{"name": "other"})
	theirs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/users", Token: f.AdminToken, Body: map[string]any{"tags": map[string]string{}},
		Headers: map[string]string{"x-bot-id": otherBot}}), 201, "createUser").Str("user.id")
	wf := f.call("POST", "/v1/chat/workflows", map[string]any{"name": "w", "status": "listening", "userId": mine}, 201, "createWorkflow").Str("workflow.id")

	for _, tc := range []struct{ name, userID string }{
		{"another bot's user", theirs},
		{"made-up user", "user_01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"not a user id", f.bot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The create refuses it...
			r := f.req("", "POST", "/v1/chat/workflows", map[string]any{"name": "w2", "status": "listening", "userId": tc.userID})
			if r.Status != 404 || r.Str("type") != "ResourceNotFound" || r.Str("id") == "" {
				t.Fatalf("createWorkflow: %d %s; want 404", r.Status, r.Raw)
			}
			// ...and so does the update, writing nothing.
			r = f.req("", "PUT", "/v1/chat/workflows/"+wf, map[string]any{"userId": tc.userID, "tags": map[string]string{"changed": "yes"}})
			if r.Status != 404 || r.Str("type") != "ResourceNotFound" || r.Str("id") == "" {
				t.Fatalf("updateWorkflow: %d %s; want 404 in the error shape", r.Status, r.Raw)
			}
			got := f.call("GET", "/v1/chat/workflows/"+wf, nil, 200, "getWorkflow")
			if got.Str("workflow.userId") != mine || got.Str("workflow.tags.changed") != "" {
				t.Fatalf("after a refused update: %s", got.Raw)
			}
			if n := len(f.call("GET", "/v1/chat/workflows?userId="+tc.userID, nil, 200, "listWorkflows").List("workflows")); n != 0 {
				t.Fatalf("%d workflows list under %s", n, tc.userID)
			}
		})
	}
	second := f.user(nil)
	if got := f.call("PUT", "/v1/chat/workflows/"+wf, map[string]any{"userId": second}, 200, "updateWorkflow"); got.Str("workflow.userId") != second {
		t.Fatalf("update to a user of the bot: %s", got.Raw)
	}
}
