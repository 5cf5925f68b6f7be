package dynamo_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestEventsCarryTheirTTL: an event item holds the table's ttl attribute
// at the end of its retention (from its scheduled time when later), so
// that DynamoDB deletes it in AWS.
func TestEventsCarryTheirTTL(t *testing.T) {
	env := apitest.New(t)
	s := env.Platform.Store
	ctx := context.Background()
	bot := platform.NewID(platform.PrefixBot)
	now := time.Now().UTC().Truncate(time.Millisecond)
	later := now.Add(40 * 24 * time.Hour)
	for _, e := range []platform.Event{
		{ID: platform.NewID(platform.PrefixEvent), CreatedAt: platform.FormatTime(now), Type: "t", Status: platform.EventPending},
		{ID: platform.NewID(platform.PrefixEvent), CreatedAt: platform.FormatTime(now), Type: "t", Status: platform.EventScheduled, ScheduledFor: platform.FormatTime(later)},
	} {
		if err := s.CreateEvent(ctx, bot, e); err != nil {
			t.Fatal(err)
		}
		out, err := s.Client().GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &env.Platform.Env.Table,
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "EVT#" + bot + "#" + e.ID},
				"sk": &types.AttributeValueMemberS{Value: "EVT"},
			},
		})
		if err != nil || out.Item == nil {
			t.Fatalf("event item: %v %v", out, err)
		}
		ttl, ok := out.Item["ttl"].(*types.AttributeValueMemberN)
		if !ok {
			t.Fatalf("no ttl attribute: %v", out.Item)
		}
		want := e.ExpiresAt().Unix()
		if got, _ := strconv.ParseInt(ttl.Value, 10, 64); got != want || want < now.Add(platform.EventRetention).Unix() {
			t.Fatalf("ttl %s, want %d", ttl.Value, want)
		}
	}
}

// TestDerivedEventRetention: a user's message_created event, derived from
// its message (no item), stops being returned and listed at the same age
// as an event stored with an item: EventRetention after its creation,
// however long its message is kept.
func TestDerivedEventRetention(t *testing.T) {
	env := apitest.New(t)
	s := env.Platform.Store
	ctx := context.Background()
	bot := platform.NewID(platform.PrefixBot)
	now := time.Now().UTC().Truncate(time.Millisecond)
	c := platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: platform.FormatTime(now), UpdatedAt: platform.FormatTime(now), Channel: "c", Tags: map[string]string{}}
	if err := s.CreateConversation(ctx, bot, c); err != nil {
		t.Fatal(err)
	}
	u := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: c.CreatedAt, UpdatedAt: c.CreatedAt, Tags: map[string]string{}}
	if err := s.CreateUser(ctx, bot, u); err != nil {
		t.Fatal(err)
	}
	listed := func() map[string]bool {
		evs, _, err := s.ListEvents(ctx, dynamo.EventFilter{BotID: bot}, dynamo.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, e := range evs {
			out[e.ID] = true
		}
		return out
	}
	for _, age := range []time.Duration{platform.EventRetention - time.Hour, platform.EventRetention + time.Hour} {
		at := platform.FormatTime(now.Add(-age))
		m := platform.Message{ID: platform.NewID(platform.PrefixMessage), CreatedAt: at, UpdatedAt: at, Type: "text", Payload: []byte(`{"text":"x"}`),
			Direction: "incoming", UserID: u.ID, ConversationID: c.ID, Tags: map[string]string{}}
		if err := s.CreateMessage(ctx, bot, m); err != nil {
			t.Fatal(err)
		}
		derived := platform.PrefixEvent + strings.TrimPrefix(m.ID, platform.PrefixMessage)
		stored := platform.Event{ID: platform.NewID(platform.PrefixEvent), CreatedAt: at, Type: "t", Status: platform.EventPending}
		if err := s.CreateEvent(ctx, bot, stored); err != nil {
			t.Fatal(err)
		}
		_, errD := s.ReadEvent(ctx, bot, derived)
		_, errS := s.ReadEvent(ctx, bot, stored.ID)
		expired := age > platform.EventRetention
		if (errD != nil) != expired || (errS != nil) != expired {
			t.Errorf("age %v: getEvent of the derived event: %v, of the stored one: %v; want both found: %v", age, errD, errS, !expired)
		}
		l := listed()
		if l[derived] == expired || l[stored.ID] == expired {
			t.Errorf("age %v: listed: derived %v, stored %v; want both %v", age, l[derived], l[stored.ID], !expired)
		}
		if _, err := s.MessageRecord(ctx, bot, m.ID); err != nil {
			t.Errorf("age %v: the message: %v", age, err)
		}
	}
}
