package dynamo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

func sKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
}

// TestMessageCountOverCounterItem: a new message counts on its
// conversation's counter item (CONV#N), a deleted one off the record, and
// messageCount is their sum; a conversation from before counter items (its
// counter item removed here) still counts its messages exactly, on its
// record; a conversation being deleted takes no message, whichever way it
// counts.
func TestMessageCountOverCounterItem(t *testing.T) {
	env := apitest.New(t)
	s, ctx, table := env.Platform.Store, context.Background(), env.Platform.Env.Table
	bot := platform.NewID(platform.PrefixBot)
	now := platform.FormatTime(time.Now())
	conv := func() string {
		c := platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: now, UpdatedAt: now, Channel: "c", Tags: map[string]string{}}
		if err := s.CreateConversation(ctx, bot, c); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	send := func(convID string) (string, error) {
		m := platform.Message{ID: platform.NewID(platform.PrefixMessage), CreatedAt: now, UpdatedAt: now, Type: "text", Payload: []byte(`{"text":"x"}`),
			Direction: "outgoing", UserID: bot, ConversationID: convID, Tags: map[string]string{}}
		return m.ID, s.ImportMessage(ctx, bot, m)
	}
	count := func(convID string) int64 {
		c, err := s.GetConversation(ctx, bot, convID)
		if err != nil {
			t.Fatal(err)
		}
		return c.MessageCount
	}
	counter := func(convID string) map[string]types.AttributeValue {
		out, err := s.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: sKey("CONV#"+bot+"#"+convID, "CONV#N"), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}

	fresh := conv()
	var ids []string
	for range 3 {
		id, err := send(fresh)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := s.DeleteMessage(ctx, bot, ids[0]); err != nil {
		t.Fatal(err)
	}
	if n := count(fresh); n != 2 {
		t.Errorf("a conversation with 3 messages, 1 deleted: messageCount %d, want 2", n)
	}
	if counter(fresh) == nil {
		t.Error("a new conversation has no counter item")
	}

	old := conv()
	if _, err := s.Client().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: sKey("CONV#"+bot+"#"+old, "CONV#N")}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := send(old); err != nil {
			t.Fatalf("a message to a conversation without a counter item: %v", err)
		}
	}
	// getOrCreateMessage counts as createMessage: on the counter item,
	// or on the record of a conversation from before them.
	getOrCreate := func(convID string) {
		t.Helper()
		m := platform.Message{ID: platform.NewID(platform.PrefixMessage), CreatedAt: now, UpdatedAt: now, Type: "text", Payload: []byte(`{"text":"x"}`),
			Direction: "outgoing", UserID: bot, ConversationID: convID, Tags: map[string]string{"k": convID}}
		if _, created, err := s.GetOrCreateMessage(ctx, dynamo.MessageLookup{BotID: bot, Tags: m.Tags, Keys: []string{"k"}, New: m}); err != nil || !created {
			t.Fatalf("getOrCreateMessage: created %v, %v", created, err)
		}
	}
	getOrCreate(fresh)
	getOrCreate(old)
	if n := count(fresh); n != 3 {
		t.Errorf("a conversation with 3 messages, 1 deleted, 1 got or created: messageCount %d, want 3", n)
	}
	if n := count(old); n != 5 {
		t.Errorf("a conversation from before counter items, 5 messages: messageCount %d, want 5", n)
	}
	if counter(old) != nil {
		t.Error("a counter item appeared")
	}
	convs, _, err := s.ListConversations(ctx, dynamo.ConversationFilter{BotID: bot}, dynamo.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		if want := map[string]int64{fresh: 3, old: 5}[c.ID]; c.MessageCount != want {
			t.Errorf("listConversations: %s has messageCount %d, want %d", c.ID, c.MessageCount, want)
		}
	}

	for _, c := range []string{fresh, old} {
		if err := s.DeleteConversation(ctx, bot, c); err != nil {
			t.Fatal(err)
		}
		if _, err := send(c); platform.TypeOf(err) != platform.ErrResourceNotFound {
			t.Errorf("a message to a deleted conversation: %v, want not found", err)
		}
	}
}

// TestEventsListOverShards: a bot's events go to 16 keys of its list, and
// listEvents merges them with the unsharded key (where events from before
// the shards are): every event once, newest first, page after page.
func TestEventsListOverShards(t *testing.T) {
	env := apitest.New(t)
	s, ctx, table := env.Platform.Store, context.Background(), env.Platform.Env.Table
	bot := platform.NewID(platform.PrefixBot)
	start := time.Now().UTC().Truncate(time.Millisecond)
	var want []string
	for i := range 40 {
		e := platform.Event{ID: platform.NewID(platform.PrefixEvent), CreatedAt: platform.FormatTime(start.Add(time.Duration(i) * time.Millisecond)), Type: "t", Status: platform.EventPending}
		if err := s.CreateEvent(ctx, bot, e); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 { // as written before the shards
			if _, err := s.Client().UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: sKey("EVT#"+bot+"#"+e.ID, "EVT"),
				UpdateExpression:          aws.String("SET gsi1pk = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "BOT#" + bot + "#EVTS"}}}); err != nil {
				t.Fatal(err)
			}
		}
		want = append([]string{e.ID}, want...)
	}
	var got []string
	page := dynamo.Page{Limit: 7}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages of 7 for 40 events")
		}
		evs, next, err := s.ListEvents(ctx, dynamo.EventFilter{BotID: bot}, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			got = append(got, e.ID)
		}
		if next == nil {
			break
		}
		page.Start = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listEvents over the shards:\n got %v\nwant %v", got, want)
	}
}
