package dynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// The outbox: what the runtime must deliver, written in the same
// transaction as what it delivers (a message, an event), so that nothing
// acknowledged is lost and nothing undone is delivered. One partition,
// ordered by delivery id (a ULID: creation order). The dispatcher
// (shared/dispatch) reads its head, leases entries, and removes them once
// delivered or given up; on AWS the table's stream wakes it on each new
// entry.
const (
	pkOutbox     = "OUTBOX"
	attrLease    = "lease"    // epoch ms until which a dispatcher holds the entry
	attrDueAt    = "dueAt"    // epoch ms before which it must not go out
	attrAttempts = "attempts" // failed attempts so far
)

// listDeliveries is the gsi1 list of a bot's outbox entries.
const listDeliveries = "DLVS"

// convDeliveries is the gsi2 partition of a conversation's outbox entries.
func convDeliveries(bot, conv string) string { return "BOT#" + bot + "#CONV#" + conv + "#DLVS" }

// PrefixDelivery starts delivery ids.
const PrefixDelivery = "dlv_"

// outboxPut is the transaction item writing delivery d. One due later
// than a few seconds from now (a scheduled event, a state's expiry) waits
// in the OUTBOX#LATER partition, ordered by due time, so that the head of
// the outbox holds only what is due (PromoteDue moves it when its time
// comes).
func outboxPut(d platform.Delivery) (types.TransactWriteItem, error) {
	it, err := outboxItem(d)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	due, _ := time.Parse(platform.TimeFormat, d.DueAt)
	if due.After(platform.Clock().Add(laterThan)) {
		it[attrPK], it[attrSK] = str(pkLater), str(laterSK(due, d.ID))
	}
	return types.TransactWriteItem{Put: &types.Put{Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")}}, nil
}

// laterThan is how far in the future a delivery must be due to wait in
// OUTBOX#LATER.
const laterThan = 5 * time.Second

const pkLater = "OUTBOX#LATER"

func laterSK(due time.Time, id string) string { return fmt.Sprintf("%013d#%s", due.UnixMilli(), id) }

// outboxItem is the item of delivery d at the head of the outbox.
func outboxItem(d platform.Delivery) (item, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	due, _ := time.Parse(platform.TimeFormat, d.DueAt)
	it := item{attrPK: str(pkOutbox), attrSK: str(d.ID), attrDoc: str(string(b)),
		attrDueAt: num(due.UnixMilli()), attrAttempts: num(int64(d.Attempts)),
		// Listed per bot, so a deleted bot's entries can be removed.
		attrGSI1PK: str(botList(d.BotID, listDeliveries)), attrGSI1SK: str(d.ID)}
	if d.ConversationID != "" {
		// and per conversation, for a deleted conversation's.
		it[attrGSI2PK], it[attrGSI2SK] = str(convDeliveries(d.BotID, d.ConversationID)), str(d.ID)
	}
	return it, nil
}

// PromoteDue moves up to limit deliveries of OUTBOX#LATER that are due by
// now to the head of the outbox (each in one transaction, so none is lost
// or doubled) and returns how many it moved.
func (s *Store) PromoteDue(ctx context.Context, now time.Time, limit int) (int, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk AND sk <= :now"),
		ExpressionAttributeValues: item{":pk": str(pkLater), ":now": str(fmt.Sprintf("%013d$", now.UnixMilli()))},
		Limit:                     aws.Int32(int32(limit)),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, it := range out.Items {
		var d platform.Delivery
		if err := decodeDoc(it, &d); err != nil {
			return moved, err
		}
		head, err := outboxItem(d)
		if err != nil {
			return moved, err
		}
		err = s.txWrite(ctx, []types.TransactWriteItem{
			{Delete: &types.Delete{Key: key(pkLater, getS(it, attrSK)), ConditionExpression: aws.String("attribute_exists(pk)")}},
			{Put: &types.Put{Item: head, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		})
		if failedAt(err) >= 0 {
			continue // moved by another dispatcher
		}
		if err != nil {
			return moved, err
		}
		moved++
	}
	return moved, nil
}

// newDelivery is a delivery due now (or at due, when later).
func newDelivery(kind, bot, conv string, due string) platform.Delivery {
	now := platform.FormatTime(platform.Clock())
	if due == "" || due < now {
		due = now
	}
	return platform.Delivery{ID: platform.NewID(PrefixDelivery), Kind: kind, BotID: bot, ConversationID: conv, CreatedAt: now, DueAt: due}
}

// PendingDeliveries returns the head of the outbox in creation order, at
// most limit entries, each with its lease (epoch ms, 0 for none).
func (s *Store) PendingDeliveries(ctx context.Context, limit int) ([]platform.Delivery, []int64, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(pkOutbox)},
		Limit:                     aws.Int32(int32(limit)),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, nil, err
	}
	ds := make([]platform.Delivery, 0, len(out.Items))
	leases := make([]int64, 0, len(out.Items))
	for _, it := range out.Items {
		var d platform.Delivery
		if err := decodeDoc(it, &d); err != nil {
			return nil, nil, err
		}
		d.Attempts = int(getN(it, attrAttempts))
		d.DueAt = platform.FormatTime(time.UnixMilli(getN(it, attrDueAt)))
		ds = append(ds, d)
		leases = append(leases, getN(it, attrLease))
	}
	return ds, leases, nil
}

// LeaseDelivery takes d for until: false when another dispatcher holds it
// or it is gone.
func (s *Store) LeaseDelivery(ctx context.Context, d platform.Delivery, now, until time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(pkOutbox, d.ID),
		UpdateExpression:          aws.String("SET #l = :until"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(#l) OR #l < :now)"),
		ExpressionAttributeNames:  map[string]string{"#l": attrLease},
		ExpressionAttributeValues: item{":until": num(until.UnixMilli()), ":now": num(now.UnixMilli())},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// RetryDelivery puts d back with one more failed attempt, due at due.
func (s *Store) RetryDelivery(ctx context.Context, d platform.Delivery, due time.Time, why string) error {
	d.LastError = why
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(pkOutbox, d.ID),
		UpdateExpression:          aws.String("SET #due = :due, #doc = :doc REMOVE #l ADD #a :one"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#due": attrDueAt, "#doc": attrDoc, "#l": attrLease, "#a": attrAttempts},
		ExpressionAttributeValues: item{":due": num(due.UnixMilli()), ":doc": str(string(b)), ":one": num(1)},
	})
	if isConditionFailed(err) {
		return nil // removed meanwhile (its bot deleted)
	}
	return err
}

// FinishAndQueue removes d from the outbox and queues next, in one
// transaction (a periodic delivery's next run); when d is gone meanwhile
// (its bot deleted), nothing is queued.
func (s *Store) FinishAndQueue(ctx context.Context, d, next platform.Delivery) error {
	put, err := outboxPut(next)
	if err != nil {
		return err
	}
	err = s.txWrite(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{Key: key(pkOutbox, d.ID), ConditionExpression: aws.String("attribute_exists(pk)")}},
		put,
	})
	if failedAt(err) == 0 {
		return nil
	}
	return err
}

// FinishDelivery removes d from the outbox.
func (s *Store) FinishDelivery(ctx context.Context, d platform.Delivery) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(pkOutbox, d.ID)})
	return err
}

// SetEventStatus records how an event's delivery ended (processed, or
// failed with the reason).
func (s *Store) SetEventStatus(ctx context.Context, bot, id, status string, failureReason *string) error {
	return s.updateEvent(ctx, bot, id, func(e *platform.Event) error {
		e.Status, e.FailureReason = status, failureReason
		return nil
	})
}

// purgeIndex deletes every item of an index partition (a deleted bot's
// outbox entries, a deleted conversation's events).
func (s *Store) purgeIndex(ctx context.Context, index, pk string) error {
	pkName, _ := span{index: index}.keyNames()
	return s.eachPage(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#k = :pk"),
		ExpressionAttributeNames:  map[string]string{"#k": pkName},
		ExpressionAttributeValues: item{":pk": str(pk)},
		ProjectionExpression:      aws.String("pk, sk"),
	}, func(items []item) error {
		keys := make([]item, len(items))
		for i, it := range items {
			keys[i] = key(getS(it, attrPK), getS(it, attrSK))
		}
		return s.batchDelete(ctx, keys)
	})
}

// ReleaseLeases removes every lease of the outbox's head: for a dispatcher
// that knows it is the only one (the local platform, whose data directory
// one process holds), leases found at start are those of a process that
// died mid-delivery.
func (s *Store) ReleaseLeases(ctx context.Context) (int, error) {
	n := 0
	err := s.eachPage(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		FilterExpression:          aws.String("attribute_exists(#l)"),
		ExpressionAttributeNames:  map[string]string{"#l": attrLease},
		ExpressionAttributeValues: item{":pk": str(pkOutbox)},
		ProjectionExpression:      aws.String("pk, sk"),
		ConsistentRead:            aws.Bool(true),
	}, func(items []item) error {
		for _, it := range items {
			_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: &s.table, Key: key(pkOutbox, getS(it, attrSK)),
				UpdateExpression:         aws.String("REMOVE #l"),
				ConditionExpression:      aws.String("attribute_exists(pk)"),
				ExpressionAttributeNames: map[string]string{"#l": attrLease},
			})
			if err != nil && !isConditionFailed(err) {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
