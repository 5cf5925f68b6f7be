package dynamo_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
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
