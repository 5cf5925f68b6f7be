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

// TestDispatcherReadsItsBotFromCache: the dispatcher reads the bot an
// event goes to from the bots' cache (issue 36: one read unit less per
// user message, docs/data-model.md "Items per message"): n messages
// delivered read BOT#<bot> n times (each write's re-read, RecheckBot) and
// at most once per authcache.TTL besides, not 2n. A new url set in this
// process reaches the dispatcher at once (the write forgets the bot).
func TestDispatcherReadsItsBotFromCache(t *testing.T) {
	f := newFixture(t)
	f.Platform.Store.SetAuthzCacheTTL(authcache.TTL) // apitest turns it off
	first, second := newBotServer(t), newBotServer(t)
	bot := f.createBot(f.AdminToken, map[string]any{"url": first.URL})
	chat := func(method, path string, body any, status int, op string) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Body: body, Headers: map[string]string{"x-bot-id": bot}}), status, op)
	}
	user := chat("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201, "createUser").Str("user.id")
	conv := chat("POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201, "createConversation").Str("conversation.id")
	message := func() {
		chat("POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201, "createMessage")
	}

	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	start := time.Now()
	const n = 20
	for i := 0; i < n; i++ {
		message()
	}
	first.waitFor(t, n, 30*time.Second)
	took := time.Since(start)
	u := ddb.Usage()
	ddb.CountUnits(false)
	most := n + math.Ceil(float64(took)/float64(authcache.TTL)) + 1
	if r := u.Partitions[localdynamo.Partition{Table: f.Platform.Env.Table, Key: "BOT#" + bot}].Read; r > most {
		t.Errorf("%d messages delivered in %s read BOT#<bot> for %.1f units, want at most %.0f (the writes' re-reads, and once per %s)", n, took, r, most, authcache.TTL)
	}

	// A new url: the next event goes there, at once.
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/bots/"+bot, map[string]any{"url": second.URL}), 200, "updateBot")
	message()
	second.waitFor(t, 1, 30*time.Second)
	if got := len(first.deliveries()); got != n {
		t.Errorf("the old url got %d deliveries after the bot's url changed, want %d", got, n)
	}
}

// TestCachedDeliveryBotIsBoundedInAnotherProcess: a bot's new url, set
// through one process, reaches another process's dispatcher read
// (CachedBotByID, as on AWS, where the dispatcher is a function of its
// own) within authcache.TTL; so does its deletion.
func TestCachedDeliveryBotIsBoundedInAnotherProcess(t *testing.T) {
	f := newFixture(t)
	old, next := newBotServer(t), newBotServer(t)
	bot := f.createBot(f.AdminToken, map[string]any{"url": old.URL})
	other := otherProcess(f.Env)
	ctx := context.Background()
	if b, err := other.CachedBotByID(ctx, bot); err != nil || b.URL != old.URL {
		t.Fatalf("%+v %v", b, err)
	}
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/bots/"+bot, map[string]any{"url": next.URL}), 200, "updateBot")
	if d := waitRevoked(t, time.Now(), func() bool {
		b, err := other.CachedBotByID(ctx, bot)
		if err != nil {
			t.Fatal(err)
		}
		return b.URL == old.URL
	}); d > authcache.TTL {
		t.Fatalf("another process's dispatcher read the bot's old url %s after it changed (bound %s)", d, authcache.TTL)
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	if d := waitRevoked(t, time.Now(), func() bool { _, err := other.CachedBotByID(ctx, bot); return err == nil }); d > authcache.TTL {
		t.Fatalf("another process's dispatcher read a deleted bot %s after its deletion (bound %s)", d, authcache.TTL)
	}
}
