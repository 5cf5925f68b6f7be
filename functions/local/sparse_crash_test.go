package main_test

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestQueuedDeliveryAcrossKill: the window the sparse sweep index opens
// (docs/runtime.md, "The sparse sweep index"). A conversation's first
// message is at its bot (which does not answer); its second is
// acknowledged and waits behind it in the conversation's outbox shard,
// never attempted, its entry in no sweep index. The real binary is killed
// with SIGKILL. After the restart both go out, in order, each delivered
// once after it: the dispatcher that starts lists the store's outbox
// shards, not the sweep index.
func TestQueuedDeliveryAcrossKill(t *testing.T) {
	bot := newKillBot(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	hdr, conv, user := botConversation(t, s, tok, bot.URL)
	send := func(text string) string { return sendText(t, s, tok, hdr, conv, user, text) }
	first := send("one")
	// The first is at the bot: the second waits behind it.
	bot.waitAttempt(t)
	second := send("two")
	s.stop(syscall.SIGKILL)
	if got := messageIDs(bot.seen(false)); !slices.Equal(got, []string{first}) {
		t.Fatalf("attempts before the kill: %v, want the first message's only", got)
	}

	bot.up.Store(true)
	s = start(t, bin, dir)
	defer s.stop(syscall.SIGINT)
	want := []string{first, second}
	for deadline := time.Now().Add(60 * time.Second); ; {
		got := messageIDs(bot.seen(true))
		if len(got) >= 2 {
			if !slices.Equal(got, want) {
				t.Fatalf("delivered after the restart: %v, want %v (in order, once each)", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered 60 s after the restart: %v, want %v (the second, queued, is lost)", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Each ends processed (the entries removed once delivered).
	for _, e := range bot.seen(true) {
		id := e.ID
		for deadline := time.Now().Add(30 * time.Second); ; {
			_, e := try(s.url, "GET", "/v1/chat/events/"+id, tok, hdr, nil)
			ev, _ := e["event"].(map[string]any)
			if ev != nil && ev["status"] == "processed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("event %s: %v 30 s after its delivery, want processed", id, ev)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// messageIDs are the events' message ids, in order.
func messageIDs(evs []sentEvent) []string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.MessageID
	}
	return ids
}
