package dynamo

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// A bot's analytics (trackAnalytics, getBotAnalytics): one counter item per
// bot, UTC day and name,
//
//	BOTSTATS#<botId>   DAY#<yyyy-mm-dd>#<name>   count
//
// raised with an atomic ADD; a day's counters are one range of the bot's
// partition, which purgeBot deletes with the bot.

func botStatsPK(bot string) string { return "BOTSTATS#" + bot }

const skDay = "DAY#"

// TrackAnalytics adds count to the bot's counter name for day (yyyy-mm-dd),
// in one transaction with a check that the bot still exists (so a deleted
// bot's purge is not outrun).
func (s *Store) TrackAnalytics(ctx context.Context, botID, day, name string, count int64) error {
	return s.transact(ctx, []types.TransactWriteItem{
		mustExist(botPK(botID), skBot),
		{Update: &types.Update{
			Key:                       key(botStatsPK(botID), skDay+day+"#"+name),
			UpdateExpression:          aws.String("ADD #c :n SET #name = :name"),
			ExpressionAttributeNames:  map[string]string{"#c": "count", "#name": "name"},
			ExpressionAttributeValues: item{":n": num(count), ":name": str(name)},
		}},
	}, func(int) error { return platform.NotFound("bot", botID) })
}

// BotAnalytics reads the bot's counters of the days from..to (inclusive,
// yyyy-mm-dd): one Query over that range, day -> name -> count.
func (s *Store) BotAnalytics(ctx context.Context, botID, from, to string) (map[string]map[string]int64, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :a AND :b"),
		ExpressionAttributeValues: item{":pk": str(botStatsPK(botID)), ":a": str(skDay + from + "#"), ":b": str(skDay + to + "#\uffff")},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int64{}
	for _, it := range items {
		day, _, _ := strings.Cut(strings.TrimPrefix(getS(it, attrSK), skDay), "#")
		if out[day] == nil {
			out[day] = map[string]int64{}
		}
		out[day][getS(it, "name")] += getN(it, "count")
	}
	return out, nil
}
