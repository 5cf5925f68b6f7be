package main_test

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestBothLanesAcrossKill: a conversation's two outbox lanes (docs/runtime.md,
// "In order per conversation") are both under way when the real binary is
// killed with SIGKILL: the bot holds a user's message, and the integration,
// at the same time, holds the bot's message (before the lanes it waited
// for the bot's answer). After the restart each is delivered once, each
// lane in order: the integration's lane, never attempted to completion, is
// found by the dispatcher that starts (it lists every outbox shard).
func TestBothLanesAcrossKill(t *testing.T) {
	bot, integ := newKillBot(t), newKillBot(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	hdr, conv, user := integrationConversation(t, s, tok, bot.URL, integ.URL)
	userMsg := sendText(t, s, tok, hdr, conv, user, "hi")
	bot.waitAttempt(t)
	reply := sendText(t, s, tok, hdr, conv, hdr["x-bot-id"], "let me check") // the bot's message
	integ.waitAttempt(t)                                                     // while the bot still holds the user's message
	s.stop(syscall.SIGKILL)
	if got := messageIDs(integ.seen(false)); !slices.Equal(got, []string{reply}) {
		t.Fatalf("the integration's attempts before the kill: %v, want the bot's message's", got)
	}

	bot.up.Store(true)
	integ.up.Store(true)
	s = start(t, bin, dir)
	defer s.stop(syscall.SIGINT)
	// A second message of the bot's, after the restart: once it is
	// delivered, so is everything before it in its lane.
	after := sendText(t, s, tok, hdr, conv, hdr["x-bot-id"], "done")
	want := []string{reply, after}
	for deadline := time.Now().Add(60 * time.Second); ; {
		got := messageIDs(integ.seen(true))
		if len(got) >= 2 {
			if !slices.Equal(got, want) {
				t.Fatalf("the integration was sent after the restart: %v, want %v (in order, once each)", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the integration was sent %v 60 s after the restart, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		if got := messageIDs(bot.seen(true)); len(got) > 0 {
			if !slices.Equal(got, []string{userMsg}) {
				t.Fatalf("the bot was sent after the restart: %v, want %v once", got, userMsg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the user's message did not reach the bot 60 s after the restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// integrationConversation is botConversation with a dev integration at
// integURL installed on the bot (alias chan): the conversation is the
// integration's (created with its alias), so the bot's messages go to it.
func integrationConversation(t *testing.T, s *server, tok, botURL, integURL string) (hdr map[string]string, conv, user string) {
	t.Helper()
	st, w := s.call("POST", "/v1/admin/workspaces", tok, "", map[string]any{"name": "lanes"})
	ws := mustSucceed(t, st, w, "createWorkspace")["id"].(string)
	st, in := s.call("POST", "/v1/admin/integrations", tok, ws, map[string]any{"name": "chan", "version": "1.0.0", "dev": true, "url": integURL,
		"channels": map[string]any{"channel": map[string]any{"messages": map[string]any{"text": map[string]any{"schema": map[string]any{}}}}}})
	intID := mustSucceed(t, st, in, "createIntegration")["integration"].(map[string]any)["id"].(string)
	st, b := s.call("POST", "/v1/admin/bots", tok, ws, map[string]any{"name": "lanes", "dev": true, "url": botURL})
	botID := mustSucceed(t, st, b, "createBot")["bot"].(map[string]any)["id"].(string)
	st, u := s.call("PUT", "/v1/admin/bots/"+botID, tok, ws, map[string]any{"integrations": map[string]any{"chan": map[string]any{"integrationId": intID, "enabled": true}}})
	mustSucceed(t, st, u, "updateBot")
	hdr = map[string]string{"x-bot-id": botID}
	as := map[string]string{"x-bot-id": botID, "x-integration-alias": "chan"}
	st, c := try(s.url, "POST", "/v1/chat/conversations", tok, as, map[string]any{"channel": "channel", "tags": map[string]string{}})
	conv = mustSucceed(t, st, c, "createConversation")["conversation"].(map[string]any)["id"].(string)
	st, us := try(s.url, "POST", "/v1/chat/users", tok, as, map[string]any{"tags": map[string]string{}})
	return hdr, conv, mustSucceed(t, st, us, "createUser")["user"].(map[string]any)["id"].(string)
}

// mustSucceed fails the test unless a call answered 200 or 201; it returns
// the call's body.
func mustSucceed(t *testing.T, st int, out map[string]any, what string) map[string]any {
	t.Helper()
	if st != 200 && st != 201 {
		t.Fatalf("%s: %d %v", what, st, out)
	}
	return out
}
