package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// SweepBucketOf is the sweep index partition of a shard's entries.
func SweepBucketOf(shard string) string { return sweepBucket(shard) }

// PutOutboxEntries writes deliveries straight to the table, item for item
// as a transaction queues them, each leased until lease (epoch ms; 0:
// none), with BatchWriteItem (the sweep's tests need hundreds).
func (s *Store) PutOutboxEntries(ctx context.Context, ds []platform.Delivery, lease int64) error {
	for len(ds) > 0 {
		n := min(len(ds), 25)
		reqs := make([]types.WriteRequest, 0, n)
		for _, d := range ds[:n] {
			it, err := outboxItem(d)
			if err != nil {
				return err
			}
			if lease > 0 {
				it[attrLease] = num(lease)
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		ds = ds[n:]
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

// MarkConversationDeleting sets a conversation's deletion mark, as
// deleteConversation's first step does, without its sweep.
func (s *Store) MarkConversationDeleting(ctx context.Context, bot, id string) error {
	_, _, pk, sk, _ := deletionConversation.owner(bot, id)
	return s.markDeleting(ctx, deletionConversation, bot, id, pk, sk)
}

// NoteQueued and NotifyOutbox run what a committed write does after its
// commit: note the shards its items queued to, then tell OnOutbox.
func (s *Store) NoteQueued(items []types.TransactWriteItem) { s.noteQueued(items) }
func (s *Store) NotifyOutbox()                              { s.notifyOutbox() }
