package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// SeedChat writes conversations and users of a bot straight to the table,
// item for item as CreateConversation and CreateUser write them, with
// BatchWriteItem: the scale tests need tens of thousands of records, which
// the embedded DynamoDB could not take one transaction at a time.
func (s *Store) SeedChat(ctx context.Context, bot string, convs []platform.Conversation, users []platform.User) error {
	var puts []item
	for _, c := range convs {
		w, err := convWrites(bot, c)
		if err != nil {
			return err
		}
		for _, x := range w {
			puts = append(puts, x.Put.Item)
		}
	}
	for _, u := range users {
		w, err := userWrites(bot, u)
		if err != nil {
			return err
		}
		for _, x := range w {
			if x.Put != nil { // not the usage counter's ADD
				puts = append(puts, x.Put.Item)
			}
		}
	}
	for len(puts) > 0 {
		n := min(len(puts), 25)
		reqs := make([]types.WriteRequest, 0, n)
		for _, it := range puts[:n] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		puts = puts[n:]
		req := map[string][]types.WriteRequest{s.table: reqs}
		for len(req) > 0 {
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
			if err != nil {
				return err
			}
			req = out.UnprocessedItems
		}
	}
	return nil
}
