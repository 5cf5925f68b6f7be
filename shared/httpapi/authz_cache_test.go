package httpapi_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/authcache"
	"github.com/botforge/platform/shared/localdynamo"
)

// TestBotAndMemberReadsAreCached: the Chat calls of a busy bot read its
// item (BOT#<bot>) and the caller's membership (WS#<ws>) at most once per
// authcache.TTL in a process, besides the strongly consistent re-read that
// follows each write (RecheckBot); deleting the bot, or removing or
// demoting the member, takes effect at once in the process that did it.
// (Another process's cache keeps them at most authcache.TTL, as tokens:
// TestCachedBotIsBoundedInAnotherProcess.)
func TestBotAndMemberReadsAreCached(t *testing.T) {
	f := newFixture(t)
	f.Platform.Store.SetAuthzCacheTTL(authcache.TTL) // apitest turns it off
	tok, _ := f.invite("dev@example.com", "developer")
	bot := f.createBot(f.AdminToken, nil)
	chat := func(method, path string, body any) apitest.Response {
		return f.Do(apitest.Req{Method: method, Path: path, Token: tok, Body: body, Headers: map[string]string{"x-bot-id": bot}})
	}
	user := f.Check(chat("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}), 201, "createUser").Str("user.id")

	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	start := time.Now()
	const calls = 60
	for i := 0; i < calls; i++ {
		f.Check(chat("GET", "/v1/chat/users/"+user, nil), 200, "getUser")
	}
	took := time.Since(start)
	u := ddb.Usage()
	ddb.CountUnits(false)
	table := f.Platform.Env.Table
	most := math.Ceil(float64(took)/float64(authcache.TTL)) + 1
	for _, k := range []string{"BOT#" + bot, "WS#" + f.ws} {
		if r := u.Partitions[localdynamo.Partition{Table: table, Key: k}].Read; r > most {
			t.Errorf("%d getUser calls in %s read %s for %.1f units, want at most %.0f (once per %s)", calls, took, k, r, most, authcache.TTL)
		}
	}

	// Demoted to viewer in this process: refused at once.
	members := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers")
	var memberID string
	for _, m := range members.Body["members"].([]any) {
		if m := m.(map[string]any); m["email"] == "dev@example.com" {
			memberID = m["id"].(string)
		}
	}
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/workspace-members/"+memberID, map[string]any{"role": "viewer"}), 200, "updateWorkspaceMember")
	if r := chat("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}); r.Status != 403 {
		t.Fatalf("createUser by a member demoted to viewer: %d %s", r.Status, r.Raw)
	}
	f.Check(chat("GET", "/v1/chat/users/"+user, nil), 200, "getUser")
	// Promoted again: granted at once (a cached role that refuses is read again).
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/workspace-members/"+memberID, map[string]any{"role": "developer"}), 200, "updateWorkspaceMember")
	f.Check(chat("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}), 201, "createUser")

	// The bot deleted: its Chat calls answer 404 at once.
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	if r := chat("GET", "/v1/chat/users/"+user, nil); r.Status != 404 {
		t.Fatalf("getUser of a deleted bot: %d %s", r.Status, r.Raw)
	}

	// Removed: refused at once.
	bot2 := f.createBot(f.AdminToken, nil)
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/users", Token: tok, Headers: map[string]string{"x-bot-id": bot2}}), 200, "listUsers")
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/workspace-members/"+memberID, nil), 200, "deleteWorkspaceMember")
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/users", Token: tok, Headers: map[string]string{"x-bot-id": bot2}}); r.Status != 404 {
		t.Fatalf("listUsers by a removed member: %d %s", r.Status, r.Raw)
	}
}

// TestCachedBotIsBoundedInAnotherProcess: a bot deleted through one
// process stops authorizing calls in another process's cache within
// authcache.TTL.
func TestCachedBotIsBoundedInAnotherProcess(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	other := otherProcess(f.Env)
	ctx := context.Background()
	if _, err := other.CachedBot(ctx, bot); err != nil {
		t.Fatal(err)
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	deleted := time.Now()
	if d := waitRevoked(t, deleted, func() bool { _, err := other.CachedBot(ctx, bot); return err == nil }); d > authcache.TTL {
		t.Fatalf("a deleted bot authorized calls %s later in another process (bound %s)", d, authcache.TTL)
	}
}

// TestInitializeIncomingMessageReadsCachedBot: initializeIncomingMessage is
// authorized as the getOrCreate calls it is made of (cachedBotOps): with
// the bot this process read in the last authcache.TTL, not a read of
// BOT#<bot> per call.
func TestInitializeIncomingMessageReadsCachedBot(t *testing.T) {
	f := newFixture(t)
	f.Platform.Store.SetAuthzCacheTTL(authcache.TTL) // apitest turns it off
	bot := f.createBot(f.AdminToken, nil)
	chat := func(method, path string, body any) apitest.Response {
		return f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Body: body, Headers: map[string]string{"x-bot-id": bot}})
	}
	user := f.Check(chat("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}), 201, "createUser").Str("user.id")
	conv := f.Check(chat("POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": map[string]string{}}), 201, "createConversation").Str("conversation.id")

	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	start := time.Now()
	const calls = 30
	for i := 0; i < calls; i++ {
		f.Check(chat("POST", "/v1/chat/initialize-incoming-message", map[string]any{"userId": user, "conversationId": conv}), 200, "initializeIncomingMessage")
	}
	took := time.Since(start)
	u := ddb.Usage()
	ddb.CountUnits(false)
	most := math.Ceil(float64(took)/float64(authcache.TTL)) + 1
	if r := u.Partitions[localdynamo.Partition{Table: f.Platform.Env.Table, Key: "BOT#" + bot}].Read; r > most {
		t.Errorf("%d initializeIncomingMessage calls in %s read BOT#%s for %.1f units, want at most %.0f (once per %s)", calls, took, bot, r, most, authcache.TTL)
	}
}
