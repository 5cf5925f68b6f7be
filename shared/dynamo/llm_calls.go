package dynamo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// A bot's LLM call records (docs/llm-calls.md): a ring of
// platform.MaxLLMCallsPerBot slots under BOT#<bot>#LLMCALLS, the slot
// chosen by an atomic counter (so the records never exceed the bound,
// whatever the rate), each slot in gsi1 BOT#<bot>#LLMCALLT by time, so a
// listing is a Query newest first; an overwritten slot leaves the index
// with its old time. Every item carries a TTL of platform.LLMCallRetention.
const (
	attrLLMConv = "conv"
	skLLMCount  = "N"
)

func llmCallsPK(bot string) string  { return "BOT#" + bot + "#LLMCALLS" }
func llmCallsGSI(bot string) string { return "BOT#" + bot + "#LLMCALLT" }

// RecordLLMCall stores a call in the bot's ring (UpdateItem ADD on the
// counter, then PutItem of the slot).
func (s *Store) RecordLLMCall(ctx context.Context, botID string, c platform.LLMCall) error {
	ttl := num(platform.Clock().Add(platform.LLMCallRetention).Unix())
	res, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(llmCallsPK(botID), skLLMCount),
		UpdateExpression:          aws.String("ADD n :one SET #ttl = :ttl"),
		ExpressionAttributeNames:  map[string]string{"#ttl": attrTTL},
		ExpressionAttributeValues: item{":one": num(1), ":ttl": ttl},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return err
	}
	n, _ := strconv.ParseInt(getNum(res.Attributes, "n"), 10, 64)
	slot := (n - 1) % platform.MaxLLMCallsPerBot
	it, err := docItem(llmCallsPK(botID), fmt.Sprintf("S#%04d", slot), c)
	if err != nil {
		return err
	}
	it[attrGSI1PK] = str(llmCallsGSI(botID))
	it[attrGSI1SK] = str(c.CreatedAt + "#" + c.ID)
	it[attrTTL] = ttl
	if c.ConversationID != "" {
		it[attrLLMConv] = str(c.ConversationID)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it})
	return err
}

func getNum(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return "0"
}

// ListLLMCalls pages a bot's LLM calls newest first (Query on gsi1),
// those after since (a time, "" for all) and of conversation (""
// for all: filtered in the Query, at most 10 reads a page).
func (s *Store) ListLLMCalls(ctx context.Context, botID, since, conversation string, p Page) ([]platform.LLMCall, map[string]string, error) {
	in := &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(llmCallsGSI(botID))},
		ScanIndexForward:          aws.Bool(false),
	}
	if since != "" {
		in.KeyConditionExpression = aws.String("gsi1pk = :pk AND gsi1sk > :since")
		in.ExpressionAttributeValues[":since"] = str(since)
	}
	if conversation != "" {
		in.FilterExpression = aws.String("conv = :conv")
		in.ExpressionAttributeValues[":conv"] = str(conversation)
	}
	items, next, err := s.queryPage(ctx, in, p)
	if err != nil {
		return nil, nil, err
	}
	now := platform.Clock().Unix()
	out := make([]platform.LLMCall, 0, len(items))
	for _, it := range items {
		if t := getN(it, attrTTL); t != 0 && t < now {
			continue // expired, not yet removed by DynamoDB
		}
		var c platform.LLMCall
		if err := decodeDoc(it, &c); err != nil {
			return nil, nil, err
		}
		out = append(out, c)
	}
	return out, next, nil
}
