package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/platform"
)

// ImportFiles writes new files in bulk (BatchWriteItem, no transaction per
// file), then adds their tags to the tag counts: for seeding and
// migrations, where the caller guarantees the ids and keys are new and
// nothing else writes these bots' files meanwhile.
func (s *Store) ImportFiles(ctx context.Context, recs []platform.FileRecord) error {
	items := make([]item, 0, 3*len(recs))
	type counter struct{ pk, sk, name string }
	counts := map[counter]int64{}
	for _, r := range recs {
		rec, keyEntry, err := fileItems(r, 1)
		if err != nil {
			return err
		}
		items = append(items, rec, keyEntry)
		items = append(items, tagIndexItems(r)...)
		for k, v := range r.Tags {
			counts[counter{fileTagNamesPK(r.BotID), fileSortKey(k), k}]++
			counts[counter{fileTagValuesPK(r.BotID, k), fileSortKey(v), v}]++
		}
	}
	if err := s.batchPut(ctx, items); err != nil {
		return err
	}
	for c, n := range counts {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &s.table,
			Key:                       key(c.pk, c.sk),
			UpdateExpression:          aws.String("ADD #n :d SET #name = :name"),
			ExpressionAttributeNames:  map[string]string{"#n": attrFCount, "#name": attrFName},
			ExpressionAttributeValues: item{":d": num(n), ":name": str(c.name)},
		})
		if err != nil {
			return err
		}
	}
	return nil
}
