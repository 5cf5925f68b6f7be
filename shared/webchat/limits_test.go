package webchat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/chatapi"
)

// TestWebchatForgedForwardedFor: the webchat's user creation (GET
// /initialize with no key) counts against the address's limit of the
// Chat API it is served by: a new address claimed in X-Forwarded-For each
// time (no trusted proxy) is limited as one address, and the 429 says so.
func TestWebchatForgedForwardedFor(t *testing.T) {
	was := chatapi.MaxUsersPerAddress
	chatapi.MaxUsersPerAddress = 3
	t.Cleanup(func() { chatapi.MaxUsersPerAddress = was })
	s := newSite(t, map[string]any{})
	for i := 0; i < 4; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", s.webhookURL+"/initialize", nil)
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.0.%d", i+1))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Message string }
		if res.StatusCode != 200 {
			_ = json.NewDecoder(res.Body).Decode(&e)
		}
		cancel()
		res.Body.Close()
		want := 200
		if i == 3 {
			want = 429
		}
		if res.StatusCode != want || (want == 429 && !strings.Contains(e.Message, "(127.0.0.1) (the limit per address)")) {
			t.Fatalf("initialize %d claiming 198.18.0.%d: %d %q, want %d (limited as 127.0.0.1)", i+1, i+1, res.StatusCode, e.Message, want)
		}
	}
}
