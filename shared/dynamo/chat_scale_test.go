package dynamo_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestChatListScale shows that a page of listConversations or listUsers
// with no filter, or with one tag, channel or integration filter, reads
// about as many items as it answers whatever the size of the bot: items read
// per page at 200 conversations (and users) and at CHAT_SCALE of them differ
// by less than 1.5x. Records are written with the store's own item builders
// in batches (see SeedChat); the lists go through the HTTP API.
//
// CHAT_SCALE defaults to 2,000: the embedded DynamoDB re-sorts its key lists
// on every insert, so seeding costs O(n²) and 20,000 conversations and
// 20,000 users take minutes (run CHAT_SCALE=20000 for the figures of
// docs/chat.md).
func TestChatListScale(t *testing.T) {
	large := 2000
	if v := os.Getenv("CHAT_SCALE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 200 {
			t.Fatalf("CHAT_SCALE=%q: want a number above 200", v)
		}
		large = n
	}
	e := apitest.New(t)
	ws := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "scale"}}), 200, "createWorkspace").Str("id")
	bot := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/bots", Token: e.AdminToken, Body: map[string]any{}, Headers: map[string]string{"x-workspace-id": ws}}), 200, "createBot").Str("bot.id")

	var mu sync.Mutex
	last := map[string]*dynamo.Usage{}
	e.Platform.OnUsage(func(op string, u *dynamo.Usage) {
		mu.Lock()
		last[op] = u
		mu.Unlock()
	})
	lists := []struct{ op, path string }{
		{"listConversations", "/v1/chat/conversations?pageSize=20"},
		{"listConversations", "/v1/chat/conversations?pageSize=20&tags.group=g3"},
		{"listConversations", "/v1/chat/conversations?pageSize=20&channel=ch1"},
		{"listConversations", "/v1/chat/conversations?pageSize=20&integrationName=int2"},
		{"listConversations", "/v1/chat/conversations?pageSize=20&sortField=updatedAt&sortDirection=asc&tags.group=g3"},
		{"listUsers", "/v1/chat/users?pageSize=20"},
		{"listUsers", "/v1/chat/users?pageSize=20&tags.group=g3"},
	}
	measure := func() map[string][2]int {
		out := map[string][2]int{}
		for _, l := range lists {
			r := e.Do(apitest.Req{Method: "GET", Path: l.path, Token: e.AdminToken, Headers: map[string]string{"x-bot-id": bot}})
			e.Check(r, 200, l.op)
			field := "conversations"
			if l.op == "listUsers" {
				field = "users"
			}
			if len(r.List(field)) != 20 {
				t.Fatalf("%s: %d answered: %s", l.path, len(r.List(field)), r.Raw)
			}
			mu.Lock()
			u := last[l.op]
			mu.Unlock()
			out[l.path] = [2]int{u.ItemsRead, u.Calls("")}
		}
		return out
	}
	seeded := 0
	seed := func(total int) {
		start := time.Now()
		base := time.Now().UTC().Add(-time.Duration(total) * time.Second)
		var convs []platform.Conversation
		var users []platform.User
		for i := seeded; i < total; i++ {
			at := platform.FormatTime(base.Add(time.Duration(i) * time.Second))
			tags := map[string]string{"group": fmt.Sprintf("g%d", i%10)}
			convs = append(convs, platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: at, UpdatedAt: at,
				Channel: fmt.Sprintf("ch%d", i%5), Integration: fmt.Sprintf("int%d", i%4), Tags: tags, Properties: map[string]string{}})
			users = append(users, platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: at, UpdatedAt: at, Tags: tags})
		}
		if err := e.Platform.Store.SeedChat(context.Background(), bot, convs, users); err != nil {
			t.Fatal(err)
		}
		seeded = total
		t.Logf("seeded %d conversations and %d users in %s", total, total, time.Since(start).Round(time.Millisecond))
	}
	seed(200)
	small := measure()
	seed(large)
	big := measure()
	for _, l := range lists {
		s, b := small[l.path], big[l.path]
		t.Logf("%-85s items read (calls) per page of 20: %3d (%d) at 200, %3d (%d) at %d", l.path, s[0], s[1], b[0], b[1], large)
		if float64(b[0])/float64(s[0]) >= 1.5 {
			t.Errorf("%s: %d items read at %d records, %d at 200", l.path, b[0], large, s[0])
		}
	}
}
