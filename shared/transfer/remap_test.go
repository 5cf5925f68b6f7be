package transfer_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/botforge/platform/shared/transfer"
)

// TestRemapBesideOriginal: --remap imports a copy of a workspace's bot
// into the very platform it came from: new ids everywhere (references
// follow: messages in the copy's conversations, by the copy's users),
// the same contents and counts, the original untouched. Without --remap
// the same import into the same workspace changes nothing.
func TestRemapBesideOriginal(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "none")
	a := newSide(t)
	sc := scale{rows: 1200, messages: 120, files: 3}
	bot := seed(t, a, sc)
	file := filepath.Join(t.TempDir(), "a.bfa")
	export(t, a, file, "")
	same := importInto(t, a, file, "", false)
	if same.Created != 0 || same.Conflicts != 0 || same.Failed != 0 {
		t.Fatalf("importing a workspace into itself changed something: %+v", same)
	}
	rep, err := transfer.Import{Client: &transfer.Client{URL: a.URL, Token: a.AdminToken}, Workspace: a.ws, In: file, Remap: true}.Run(context.Background())
	if err != nil || rep.Conflicts != 0 || rep.Failed != 0 {
		t.Fatalf("remapped import: %v %+v", err, rep)
	}
	bots := a.call("GET", "/v1/admin/bots", "", nil, 200).List("bots")
	if len(bots) != 2 {
		t.Fatalf("%d bots after a remapped import, want 2", len(bots))
	}
	cp := bots[0].(map[string]any)["id"].(string)
	if cp == bot {
		cp = bots[1].(map[string]any)["id"].(string)
	}
	waitIndexed(t, a, cp, sc.files)
	convs := a.call("GET", "/v1/chat/conversations", cp, nil, 200).List("conversations")
	orig := map[string]bool{}
	for _, c := range a.call("GET", "/v1/chat/conversations", bot, nil, 200).List("conversations") {
		orig[c.(map[string]any)["id"].(string)] = true
	}
	msgs := 0
	for _, c := range convs {
		id := c.(map[string]any)["id"].(string)
		if orig[id] {
			t.Fatalf("conversation %s kept its id", id)
		}
		for _, m := range a.call("GET", "/v1/chat/messages?conversationId="+id, cp, nil, 200).List("messages") {
			if m.(map[string]any)["conversationId"] != id {
				t.Fatalf("a message of the copy names another conversation: %v", m)
			}
			msgs++
		}
	}
	if len(convs) != 10 || msgs != sc.messages {
		t.Fatalf("copy: %d conversations, %d messages; want 10, %d", len(convs), msgs, sc.messages)
	}
	if n := a.call("GET", "/v1/tables/itemsTable", cp, nil, 200).Body["rows"].(float64); int(n) != sc.rows-1 {
		t.Fatalf("copy: %v rows, want %d", n, sc.rows-1)
	}
	if n := len(a.call("GET", "/v1/files", cp, nil, 200).List("files")); n != sc.files {
		t.Fatalf("copy: %d files, want %d", n, sc.files)
	}
}
