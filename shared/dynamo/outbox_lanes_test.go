package dynamo_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// lanes are a conversation's two outbox shards: the bot's (what goes to
// the bot) and the integration's (the bot's messages).
func lanes(bot, conv string) (toBot, toIntegration string) {
	return dynamo.Shard(platform.Delivery{BotID: bot, ConversationID: conv, Kind: platform.DeliverEvent}),
		dynamo.Shard(platform.Delivery{BotID: bot, ConversationID: conv, Kind: platform.DeliverOutgoing})
}

// TestConversationDeletionRemovesBothLanes: a user's message queues its
// delivery in the conversation's bot lane (so does an event of the
// conversation), the bot's message in a lane of its own (the
// integration's); deleting the conversation removes both (but the bot
// lane's head, pre-paid, which is the dispatcher's to remove: outbox.go,
// purgeOutboxShard).
func TestConversationDeletionRemovesBothLanes(t *testing.T) {
	stores, _ := embeddedStores(t)
	s := stores("lanes")
	ctx := context.Background()
	bot := platform.NewID(platform.PrefixBot)
	c := newChatConversation(t, s, bot)
	if err := s.CreateMessage(ctx, bot, userText(newChatUser(t, s, bot), c)); err != nil {
		t.Fatal(err)
	}
	now := platform.Now()
	if err := s.EmitEvent(ctx, bot, platform.Event{ID: platform.NewID(platform.PrefixEvent), CreatedAt: now, Type: "custom",
		ConversationID: c, Payload: []byte(`{}`), Status: platform.EventPending}); err != nil {
		t.Fatal(err)
	}
	reply := userText(bot, c)
	reply.Direction = "outgoing"
	if err := s.CreateMessage(ctx, bot, reply); err != nil {
		t.Fatal(err)
	}
	toBot, toIntegration := lanes(bot, c)
	if toBot == toIntegration || !dynamo.IsShard(toIntegration) {
		t.Fatalf("the conversation's lanes: %q and %q, want two outbox shards", toBot, toIntegration)
	}
	pending := func(shard string) []platform.Delivery {
		t.Helper()
		ds, _, err := s.PendingDeliveries(ctx, shard, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	b, i := pending(toBot), pending(toIntegration)
	if len(b) != 2 || b[0].Kind != platform.DeliverEvent || b[1].Kind != platform.DeliverEvent || len(i) != 1 || i[0].MessageID != reply.ID {
		t.Fatalf("the bot's lane: %d entries, the integration's: %d, want 2 events (the user's message's, the custom one), 1 message (the bot's)", len(b), len(i))
	}
	if err := s.DeleteConversation(ctx, bot, c); err != nil {
		t.Fatal(err)
	}
	if left := pending(toBot); len(left) != 1 || left[0].ID != b[0].ID {
		t.Fatalf("the bot's lane after the conversation's deletion: %+v, want its pre-paid head only", left)
	}
	if left := pending(toIntegration); len(left) != 0 {
		t.Fatalf("the integration's lane after the conversation's deletion: %+v, want nothing", left)
	}
}

// TestEntryQueuedBeforeTheLanes: an outgoing entry queued before the
// outbox had a lane per receiver is in its conversation's one shard (the
// bot lane's key); read there, it is leased, retried and removed there
// (not in the integration lane its kind would now go to).
func TestEntryQueuedBeforeTheLanes(t *testing.T) {
	stores, env := embeddedStores(t)
	s := stores("lanesupgrade")
	ctx := context.Background()
	bot, conv := platform.NewID(platform.PrefixBot), platform.NewID(platform.PrefixConversation)
	toBot, _ := lanes(bot, conv)
	now := time.Now()
	d := platform.Delivery{ID: platform.NewID(dynamo.PrefixDelivery), Kind: platform.DeliverOutgoing, BotID: bot, ConversationID: conv,
		MessageID: platform.NewID(platform.PrefixMessage), CreatedAt: platform.FormatTime(now), DueAt: platform.FormatTime(now)}
	doc, _ := json.Marshal(d)
	_, err := env.Platform.Store.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("lanesupgrade"), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: toBot}, "sk": &types.AttributeValueMemberS{Value: d.ID},
		"doc": &types.AttributeValueMemberS{Value: string(doc)}, "dueAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
		"attempts": &types.AttributeValueMemberN{Value: "0"}}})
	if err != nil {
		t.Fatal(err)
	}
	head := func() []platform.Delivery {
		t.Helper()
		ds, _, err := s.PendingDeliveries(ctx, toBot, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds := head()
	if len(ds) != 1 || dynamo.Shard(ds[0]) != toBot {
		t.Fatalf("the old entry: %+v, want it read from %s", ds, toBot)
	}
	if ok, err := s.LeaseDelivery(ctx, ds[0], now, now.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("lease: %v %v", ok, err)
	}
	if err := s.RetryDelivery(ctx, ds[0], now, "503"); err != nil {
		t.Fatal(err)
	}
	if ds = head(); len(ds) != 1 || ds[0].Attempts != 1 {
		t.Fatalf("after the retry: %+v, want the entry with 1 attempt", ds)
	}
	if err := s.FinishDelivery(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	if ds = head(); len(ds) != 0 {
		t.Fatalf("after its removal: %+v", ds)
	}
}
