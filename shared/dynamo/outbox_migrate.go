package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The previous outbox layout: every entry due now under one partition key,
// OUTBOX, and those due later under OUTBOX#LATER (sort key <due>#<id>),
// listed per bot and per conversation in gsi1 and gsi2.
const (
	oldPKOutbox = "OUTBOX"
	oldPKLater  = "OUTBOX#LATER"
)

// MigrateOutbox moves the entries of the previous layout into their shards
// and returns how many it moved. Each entry moves in one transaction (the
// old item deleted on condition it exists, the new one put on condition it
// does not), so a crash in between moves it whole or not at all and a
// second run moves only what is left: it is idempotent, and cheap once
// done (two Queries of empty partitions). Attempts, due time and lease
// travel with the entry.
func (s *Store) MigrateOutbox(ctx context.Context) (int, error) {
	moved := 0
	for _, pk := range []string{oldPKOutbox, oldPKLater} {
		err := s.eachPage(ctx, &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: item{":pk": str(pk)},
			ConsistentRead:            aws.Bool(true),
		}, func(items []item) error {
			for _, it := range items {
				d, err := entryDelivery(it)
				if err != nil {
					return err
				}
				nw, err := outboxItem(d)
				if err != nil {
					return err
				}
				if lease := getN(it, attrLease); lease > 0 {
					nw[attrLease] = num(lease)
				}
				err = s.txWrite(ctx, []types.TransactWriteItem{
					{Delete: &types.Delete{Key: key(pk, getS(it, attrSK)), ConditionExpression: aws.String("attribute_exists(pk)")}},
					{Put: &types.Put{Item: nw, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
				})
				if failedAt(err) >= 0 {
					continue // moved meanwhile by another process
				}
				if err != nil {
					return err
				}
				moved++
			}
			return nil
		})
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}
