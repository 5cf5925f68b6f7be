package awslocal_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/botforge/platform/shared/authcache"
)

// TestRevokedKeyStopsOnEveryFunction: on the AWS build (the Lambda
// binaries as processes, each with its own token cache), a bot API key
// used on every API function (admin, chat, tables, files) is refused by
// each of them within authcache.TTL of its deletion (docs/security.md).
func TestRevokedKeyStopsOnEveryFunction(t *testing.T) {
	s := startStack(t, "")
	ws := s.call(t, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "revoke"}, 200)["id"].(string)
	wsh := map[string]string{"x-workspace-id": ws}
	bot := s.call(t, "POST", "/v1/admin/bots", wsh, map[string]any{"name": "revoke"}, 200)["bot"].(map[string]any)["id"].(string)
	k := s.call(t, "POST", "/v1/admin/bots/baks", wsh, map[string]any{"botId": bot}, 200)
	key, keyID := k["value"].(string), k["id"].(string)

	paths := map[string]string{
		"admin":  "/v1/admin/bots/" + bot,
		"chat":   "/v1/chat/conversations",
		"tables": "/v1/tables",
		"files":  "/v1/files",
	}
	status := func(path string) int {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("x-bot-id", bot)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	// Each function reads the key and keeps it.
	for area, p := range paths {
		for i := 0; i < 3; i++ {
			if c := status(p); c != 200 {
				t.Fatalf("%s before the deletion: %d", area, c)
			}
		}
	}
	s.call(t, "DELETE", "/v1/admin/bots/baks/"+keyID, wsh, nil, 200)
	deleted := time.Now()
	for area, p := range paths {
		var lastAccepted time.Duration = -1
		for {
			sent := time.Since(deleted)
			c := status(p)
			if c == 401 {
				break
			}
			if c != 200 {
				t.Fatalf("%s: %d", area, c)
			}
			lastAccepted = sent
			if sent > 10*authcache.TTL {
				t.Fatalf("%s: the deleted key still works after %s", area, sent)
			}
			time.Sleep(20 * time.Millisecond) // polling the state asserted
		}
		if lastAccepted > authcache.TTL {
			t.Fatalf("%s accepted the deleted key in a call sent %s after its deletion (bound %s)", area, lastAccepted, authcache.TTL)
		}
		t.Logf("%s: last accepted %s after the deletion", area, lastAccepted)
	}
}
