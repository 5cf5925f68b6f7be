package chatrelay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// StreamFilter is the event source mapping's filter (template.yaml and
// infra/ alike): only inserted signals invoke the fan-out.
const StreamFilter = `{"eventName":["INSERT"],"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"` + SignalPrefix + `"}]}}}}`

// Fanout is the fan-out function: the table's stream hands it the keys of
// inserted signals, and it puts each in the inbox of every holder of the
// signal's topic.
type Fanout struct {
	DB    DB
	Table string
	Now   func() time.Time
}

func (f *Fanout) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Handle fans out a batch of the stream. An error fails the batch, which
// the mapping retries: an inbox item written twice has the same key (the
// holder's poll delivers it once).
func (f *Fanout) Handle(ctx context.Context, ev events.DynamoDBEvent) error {
	var errs []error
	for _, rec := range ev.Records {
		if rec.EventName != "INSERT" {
			continue
		}
		pk, sk := rec.Change.Keys["pk"].String(), rec.Change.Keys["sk"].String()
		if !strings.HasPrefix(pk, SignalPrefix) {
			continue
		}
		if err := f.signal(ctx, pk, sk); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (f *Fanout) signal(ctx context.Context, pk, sk string) error {
	got, err := f.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk)}})
	if err != nil {
		return fmt.Errorf("signal %s %s: %w", pk, sk, err)
	}
	if got.Item == nil {
		return nil // collected already
	}
	topic := strings.TrimPrefix(pk, SignalPrefix)
	now := f.now()
	var start map[string]types.AttributeValue
	for {
		out, err := f.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(f.Table),
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(ListenPrefix + topic)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return fmt.Errorf("listeners of %s: %w", topic, err)
		}
		for _, l := range out.Items {
			holder := attrS(l["sk"])
			ttl, _ := strconv.ParseInt(attrN(l["ttl"]), 10, 64)
			if ttl <= now.Unix() {
				// Its invocation ended without removing it (it died): the
				// table's TTL would take up to days, so remove it now,
				// unless it was registered again meanwhile.
				_, err := f.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.Table),
					Key:                       map[string]types.AttributeValue{"pk": l["pk"], "sk": l["sk"]},
					ConditionExpression:       aws.String("#t = :t"),
					ExpressionAttributeNames:  map[string]string{"#t": "ttl"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":t": l["ttl"]},
				})
				var cond *types.ConditionalCheckFailedException
				if err != nil && !errors.As(err, &cond) {
					return fmt.Errorf("stale listener %s of %s: %w", holder, topic, err)
				}
				continue
			}
			item := map[string]types.AttributeValue{
				"pk": str(InboxPrefix + holder), "sk": str(sk + "#" + topic),
				"topic": str(topic), "ttl": num(now.Add(SignalTTL).Unix()),
			}
			for _, a := range []string{"frame", "close"} {
				if v, ok := got.Item[a]; ok {
					item[a] = v
				}
			}
			if _, err := f.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.Table), Item: item}); err != nil {
				return fmt.Errorf("inbox of %s: %w", holder, err)
			}
		}
		if start = out.LastEvaluatedKey; start == nil {
			return nil
		}
	}
}

func attrN(v types.AttributeValue) string {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}
