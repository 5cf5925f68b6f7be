package dynamo_test

import (
	"context"
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

// With ReadDirect, the store's reads run on the embedded DynamoDB without
// the SDK client's stack, and count exactly as through it: the same reads
// (a user, a conversation, a list of messages: GetItem, Query) cost the
// same calls, units and items as on a store without it. A read the direct
// path cannot answer (a table that does not exist) goes through the SDK
// client and fails with its error, as without it.
func TestStoreReadsRunDirect(t *testing.T) {
	stores, env := embeddedStores(t)
	d := env.Platform.Dynamo
	plain := stores("direct")
	direct := dynamo.New(plain.Client(), "direct")
	direct.ReadDirect(d)
	bot := "bot_1"
	user, conv := newChatUser(t, plain, bot), newChatConversation(t, plain, bot)
	if err := plain.CreateMessage(context.Background(), bot, userText(user, conv)); err != nil {
		t.Fatal(err)
	}
	reads := func(s *dynamo.Store) (*dynamo.Usage, int64) {
		t.Helper()
		before := d.DirectCalls()
		ctx, u := dynamo.WithUsage(context.Background())
		if _, err := s.GetUser(ctx, bot, user); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetConversation(ctx, bot, conv); err != nil {
			t.Fatal(err)
		}
		if ms, _, err := s.ListMessages(ctx, dynamo.MessageFilter{BotID: bot, ConversationID: conv}, dynamo.Page{Limit: 20}); err != nil || len(ms) != 1 {
			t.Fatalf("%d messages, %v", len(ms), err)
		}
		return u, d.DirectCalls() - before
	}
	pu, pn := reads(plain)
	du, dn := reads(direct)
	if pn != 0 || dn == 0 || dn != int64(du.Calls("")) {
		t.Errorf("direct reads: %d without ReadDirect, %d with it, of %d calls; want 0 and all", pn, dn, du.Calls(""))
	}
	if pu.String() != du.String() || pu.ReadUnits != du.ReadUnits || pu.ItemsRead != du.ItemsRead || pu.Calls("") == 0 {
		t.Errorf("usage through the SDK: %s, %.1f units, %d items; direct: %s, %.1f units, %d items",
			pu, pu.ReadUnits, pu.ItemsRead, du, du.ReadUnits, du.ItemsRead)
	}

	missing := dynamo.New(plain.Client(), "no-such-table")
	_, want := missing.GetUser(context.Background(), bot, user)
	missing.ReadDirect(d)
	before := d.DirectCalls()
	_, got := missing.GetUser(context.Background(), bot, user)
	if want == nil || got == nil || got.Error() != want.Error() || d.DirectCalls() != before {
		t.Errorf("a read of a missing table: %v with ReadDirect, %v without (direct calls +%d)", got, want, d.DirectCalls()-before)
	}
}

// BenchmarkStoreReadDirect: a store's reads through the SDK client's
// stack ("sdk") and with ReadDirect ("direct"), on the embedded DynamoDB:
// a user (GetItem) and a page of 20 messages (Query). Allocations per read
// do not depend on the machine's load.
func BenchmarkStoreReadDirect(b *testing.B) {
	env := apitest.New(b)
	plain := dynamo.New(env.Platform.Store.Client(), "bench")
	if err := dynamo.EnsureTable(context.Background(), plain.Client(), "bench"); err != nil {
		b.Fatal(err)
	}
	direct := dynamo.New(plain.Client(), "bench")
	direct.ReadDirect(env.Platform.Dynamo)
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
