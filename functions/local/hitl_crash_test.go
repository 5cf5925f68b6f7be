package main_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestHitlSessionSurvivesKill: a humans-in-the-loop session (docs/hitl.md)
// on the real binary, killed (-9) the moment the agent's note is
// acknowledged: after the restart the session is there as acknowledged
// (assigned, the note, the agent's reply and the relayed message in the
// transcript), and a new start for the user still finds it.
func TestHitlSessionSurvivesKill(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	st, w := s.call("POST", "/v1/admin/workspaces", tok, "", map[string]any{"name": "hitl"})
	ws := mustSucceed(t, st, w, "createWorkspace")["id"].(string)
	st, b := s.call("POST", "/v1/admin/bots", tok, ws, map[string]any{"name": "hitl"})
	botID := mustSucceed(t, st, b, "createBot")["bot"].(map[string]any)["id"].(string)
	st, pub := s.call("GET", "/v1/admin/hub/integrations/hitl/latest", tok, "", nil)
	intID := mustSucceed(t, st, pub, "getPublicIntegration")["integration"].(map[string]any)["id"].(string)
	st, u := s.call("PUT", "/v1/admin/bots/"+botID, tok, ws, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true, "configuration": map[string]any{}}}})
	mustSucceed(t, st, u, "updateBot")
	bh := map[string]string{"x-bot-id": botID}
	action := func(url, typ string, input map[string]any) map[string]any {
		t.Helper()
		st, out := try(url, "POST", "/v1/chat/actions", tok, bh, map[string]any{"type": typ, "input": input})
		return mustSucceed(t, st, out, typ)["output"].(map[string]any)
	}
	uid := action(s.url, "hitl:createUser", map[string]any{"name": "Eve"})["userId"].(string)
	conv := action(s.url, "hitl:startHitl", map[string]any{"userId": uid, "title": "Crash", "messageHistory": []any{}})["conversationId"].(string)
	st, m := try(s.url, "POST", "/v1/chat/messages", tok, bh, map[string]any{"conversationId": conv, "userId": botID, "type": "text",
		"payload": map[string]any{"text": "from the user", "userId": uid}, "tags": map[string]string{}})
	mustSucceed(t, st, m, "createMessage")
	sp := fmt.Sprintf("/v1/admin/workspaces/%s/hitl/sessions/%s/%s", ws, botID, conv)
	st, a := try(s.url, "POST", sp+"/assign", tok, nil, map[string]any{})
	mustSucceed(t, st, a, "assign")
	st, r := try(s.url, "POST", sp+"/messages", tok, nil, map[string]any{"type": "text", "payload": map[string]any{"text": "from the agent"}})
	mustSucceed(t, st, r, "reply")
	st, n := try(s.url, "POST", sp+"/notes", tok, nil, map[string]any{"text": "noted before the crash"})
	mustSucceed(t, st, n, "note")
	s.stop(syscall.SIGKILL) // right after the acknowledgement

	s2 := start(t, bin, dir)
	st, got := try(s2.url, "GET", sp, tok, nil, nil)
	got = mustSucceed(t, st, got, "getHitlSession after kill -9")
	sess := got["session"].(map[string]any)
	if sess["status"] != "assigned" || sess["title"] != "Crash" || !strings.Contains(fmt.Sprint(sess["notes"]), "noted before the crash") {
		t.Fatalf("the session after kill -9: %v", sess)
	}
	tr := fmt.Sprint(got["transcript"])
	if !strings.Contains(tr, "from the user") || !strings.Contains(tr, "from the agent") {
		t.Fatalf("the transcript after kill -9: %s", tr)
	}
	if again := action(s2.url, "hitl:startHitl", map[string]any{"userId": uid, "messageHistory": []any{}})["conversationId"]; again != conv {
		t.Fatalf("a start after kill -9 gave %v, not the open %s", again, conv)
	}
}
