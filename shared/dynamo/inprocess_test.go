package dynamo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// The store's calls to the local platform's embedded DynamoDB take the
// in-process path (shared/localdynamo/inprocess.go): every item call of
// a conversation and a user created, none over HTTP. (The other tests of
// this package use the same client, so they run over that path too.)
func TestStoreCallsRunInProcess(t *testing.T) {
	stores, env := embeddedStores(t)
	s := stores("inprocess")
	d := env.Platform.Dynamo
	if d == nil {
		t.Fatal("no embedded DynamoDB")
	}
	items := func() int64 {
		n := int64(0)
		for op, c := range d.Calls() {
			switch op {
			case "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem", "TransactGetItems", "TransactWriteItems":
				n += c
			}
		}
		return n
	}
	in0, all0 := d.InProcessCalls(), items()
	newChatConversation(t, s, "bot_1")
	newChatUser(t, s, "bot_1")
	in, all := d.InProcessCalls()-in0, items()-all0
	if all == 0 || in != all {
		t.Errorf("%d item calls in-process of %d, want all", in, all)
	}
}

// With RunDirect, the store's item calls run on the embedded DynamoDB
// without the SDK client's stack, and count exactly as through it: the same
// calls (writes: a user, a conversation, a message; reads: those back and
// the conversation's messages; a failure: the user created again) cost the
// same calls, units and items on a store with it as on one without it; the
// failure is the same error (a canceled transaction's reasons included:
// CreateUser reads them to say "already exists") and runs once (the store
// counts as many calls either way); every call that succeeded was direct.
// A call the direct path cannot answer (a table that does not exist) fails
// with the SDK path's error.
func TestStoreCallsRunDirect(t *testing.T) {
	stores, env := embeddedStores(t)
	d := env.Platform.Dynamo
	plain := stores("direct")
	direct := dynamo.New(plain.Client(), "direct")
	direct.RunDirect(d)
	bot := "bot_1"
	engineCalls := func() int64 {
		n := int64(0)
		for _, c := range d.Calls() {
			n += c
		}
		return n
	}
	type result struct {
		u              *dynamo.Usage
		direct, engine int64
		failure        string
	}
	calls := func(s *dynamo.Store) result {
		t.Helper()
		direct0, engine0 := d.DirectCalls(), engineCalls()
		ctx, u := dynamo.WithUsage(context.Background())
		now := platform.Now()
		user := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now, Tags: map[string]string{}}
		conv := platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: now, UpdatedAt: now, Channel: "c", Tags: map[string]string{}}
		if err := s.CreateUser(ctx, bot, user); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateConversation(ctx, bot, conv); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateMessage(ctx, bot, userText(user.ID, conv.ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetUser(ctx, bot, user.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetConversation(ctx, bot, conv.ID); err != nil {
			t.Fatal(err)
		}
		if ms, _, err := s.ListMessages(ctx, dynamo.MessageFilter{BotID: bot, ConversationID: conv.ID}, dynamo.Page{Limit: 20}); err != nil || len(ms) != 1 {
			t.Fatalf("%d messages, %v", len(ms), err)
		}
		err := s.CreateUser(ctx, bot, user)
		if platform.TypeOf(err) != platform.ErrAlreadyExists {
			t.Fatalf("the user created again: %v, want AlreadyExists", err)
		}
		return result{u, d.DirectCalls() - direct0, engineCalls() - engine0, strings.ReplaceAll(err.Error(), user.ID, "<id>")}
	}
	p, r := calls(plain), calls(direct)
	if p.direct != 0 || r.direct != int64(r.u.Calls(""))-1 {
		t.Errorf("direct calls: %d without RunDirect, %d with it, of %d calls (one failing); want 0 and all that succeeded", p.direct, r.direct, r.u.Calls(""))
	}
	if p.u.String() != r.u.String() || p.u.ReadUnits != r.u.ReadUnits || p.u.WriteUnits != r.u.WriteUnits || p.u.ItemsRead != r.u.ItemsRead || p.u.Calls("") == 0 {
		t.Errorf("usage through the SDK: %s, %.1f read and %.1f write units, %d items; direct: %s, %.1f, %.1f, %d",
			p.u, p.u.ReadUnits, p.u.WriteUnits, p.u.ItemsRead, r.u, r.u.ReadUnits, r.u.WriteUnits, r.u.ItemsRead)
	}
	if p.engine != r.engine || p.failure != r.failure {
		t.Errorf("the store ran %d calls through the SDK, %d direct (a failure run twice?); the failure: %q and %q", p.engine, r.engine, p.failure, r.failure)
	}

	missing := dynamo.New(plain.Client(), "no-such-table")
	_, want := missing.GetUser(context.Background(), bot, "user_x")
	missing.RunDirect(d)
	before := d.DirectCalls()
	_, got := missing.GetUser(context.Background(), bot, "user_x")
	if want == nil || got == nil || got.Error() != want.Error() || d.DirectCalls() != before {
		t.Errorf("a read of a missing table: %v with RunDirect, %v without (direct calls +%d)", got, want, d.DirectCalls()-before)
	}
}

// BenchmarkStoreDirect: a store's calls through the SDK client's stack
// ("sdk") and with RunDirect ("direct"), on the embedded DynamoDB: a user
// read (GetItem), a page of 20 messages (Query), a user created (a
// TransactWriteItems of 2 items, with its fsync). Allocations per call do
// not depend on the machine's load.
func BenchmarkStoreDirect(b *testing.B) {
	env := apitest.New(b)
	plain := dynamo.New(env.Platform.Store.Client(), "bench")
	if err := dynamo.EnsureTable(context.Background(), plain.Client(), "bench"); err != nil {
		b.Fatal(err)
	}
	direct := dynamo.New(plain.Client(), "bench")
	direct.RunDirect(env.Platform.Dynamo)
	ctx, bot := context.Background(), "bot_1"
	now := platform.Now()
	u := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now, Tags: map[string]string{}}
	c := platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: now, UpdatedAt: now, Channel: "c", Tags: map[string]string{}}
	if err := plain.CreateUser(ctx, bot, u); err != nil {
		b.Fatal(err)
	}
	if err := plain.CreateConversation(ctx, bot, c); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := plain.CreateMessage(ctx, bot, userText(u.ID, c.ID)); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range []struct {
		name  string
		store *dynamo.Store
	}{{"sdk", plain}, {"direct", direct}} {
		b.Run("GetItem/"+s.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := s.store.GetUser(ctx, bot, u.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("TransactWrite/"+s.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				u := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now, Tags: map[string]string{}}
				if err := s.store.CreateUser(ctx, bot, u); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Query20/"+s.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if ms, _, err := s.store.ListMessages(ctx, dynamo.MessageFilter{BotID: bot, ConversationID: c.ID}, dynamo.Page{Limit: 20}); err != nil || len(ms) != 20 {
					b.Fatal(len(ms), err)
				}
			}
		})
	}
}
