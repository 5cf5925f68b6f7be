package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// The outbox: what the runtime must deliver, written in the same
// transaction as what it delivers (a message, an event), so that nothing
// acknowledged is lost and nothing undone is delivered.
//
// It is sharded so that no partition key takes the writes of more than one
// conversation (docs/data-model.md, "Heat"): a conversation has one lane
// per receiver, OUTBOX#<bot>#<conversation> for what goes to the bot and
// OUTBOX#<bot>#<conversation>#out for what goes to its integration (the
// bot's messages, which so never wait for the bot's handler of the event
// that wrote them), each ordered by delivery id (a ULID: creation order),
// which is the order it goes out in; an entry of no conversation (a bot's
// own event, a periodic register()) is a partition of its own,
// OUTBOX#<bot>#<delivery id>. The dispatcher (shared/dispatch)
// reads a shard's head, leases entries, and removes them once delivered or
// given up. On AWS the table's stream names the shard of each new entry;
// a periodic sweep finds the rest (retries, scheduled entries come due,
// entries of a dispatcher that died) through the sparse index below.
//
// The sweep index: every outbox entry is also in gsi1 under
// OUTBOX#DUE#<bucket>, sorted by due time, bucket a hash of its shard into
// SweepBuckets: the index's partitions are spread like the shards (no
// partition takes every entry), and a sweep reads the due part of each.
// Over the local platform's embedded store the index is sparse
// (SparseSweep): an entry due at once is not in it until the dispatcher
// leaves it waiting (a retry's backoff); the commit names its shard to the
// dispatcher, and a dispatcher that starts lists every shard.
const (
	pkOutboxPrefix = "OUTBOX#"
	attrLease      = "lease"    // epoch ms until which a dispatcher holds the entry
	attrDueAt      = "dueAt"    // epoch ms before which it must not go out
	attrAttempts   = "attempts" // failed attempts so far
	attrPrepaid    = "prepaid"  // the delivery's invocation is counted already (platform.Delivery.Prepaid)
	// SweepBuckets is how many partitions the sweep index spreads over.
	SweepBuckets = 64
	sweepPrefix  = "OUTBOX#DUE#"
)

// Shard is the outbox partition of delivery d: the one it was read from,
// else where it is written (lane).
func Shard(d platform.Delivery) string {
	if d.Shard != "" {
		return d.Shard
	}
	return lane(d)
}

// lane is where a new entry d is written: its receiver's lane of its
// conversation, or a shard of its own (an entry of no conversation).
func lane(d platform.Delivery) string {
	switch {
	case d.ConversationID == "":
		return pkOutboxPrefix + d.BotID + "#" + d.ID
	case d.Kind == platform.DeliverOutgoing:
		return outShard(d.BotID, d.ConversationID)
	}
	return convShard(d.BotID, d.ConversationID)
}

// convShard is a conversation's bot lane: what goes to the bot (its
// users' messages' message_created, its events), the key the outbox has
// always had.
func convShard(bot, conv string) string { return pkOutboxPrefix + bot + "#" + conv }

// outLane ends a conversation's integration lane, outShard: what goes to
// the conversation's integration (the bot's messages), in order among
// itself and never behind what the bot is still handling. Not digits (the
// capacity model's patterns read a trailing #<n> as a sweep bucket), and
// no id: a conversation's two lanes share its bot and conversation ids.
const outLane = "#out"

func outShard(bot, conv string) string { return convShard(bot, conv) + outLane }

// convShards are a conversation's lanes.
func convShards(bot, conv string) []string {
	return []string{convShard(bot, conv), outShard(bot, conv)}
}

// IsShard tells whether pk is an outbox shard (a stream record's key).
func IsShard(pk string) bool {
	return strings.HasPrefix(pk, pkOutboxPrefix) && !strings.HasPrefix(pk, sweepPrefix) && pk != oldPKLater
}

// sweepBucket is the sweep index partition of a shard's entries.
func sweepBucket(shard string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(shard))
	return sweepPrefix + strconv.Itoa(int(h.Sum32()%SweepBuckets))
}

func sweepSK(due int64, id string) string { return fmt.Sprintf("%013d#%s", due, id) }

// botDeliveryLists is how many gsi2 lists hold a bot's entries of no
// conversation (a conversation's are found with it, its shard): a deleted
// bot's are removed through them. Spread over several keys, so that a
// bot's events do not all write one index partition.
const botDeliveryLists = 16

func botDeliveries(bot string, n int) string { return fmt.Sprintf("BOT#%s#DLVS#%02d", bot, n) }

func botDeliveryList(bot, id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return botDeliveries(bot, int(h.Sum32()%botDeliveryLists))
}

// SparseSweep has outbox entries due at once written without their sweep
// index entry (2 index write units fewer per delivery: its put and its
// removal), for a store whose every commit names the shards it queued to
// the one dispatcher there is (OnOutbox; the local platform over its
// embedded DynamoDB, with an Exclusive dispatcher), and which can list its
// outbox shards when that dispatcher starts (partitions: the table's
// partition keys under a prefix, localdynamo.Server.PartitionKeys). Such
// an entry is found by its commit's wake-up while the process lives, and
// by OutboxShards after a crash; an entry the dispatcher leaves waiting is
// put in the index then (RetryDelivery). Not for AWS: there a stream batch
// given up after its retries would leave its entries where no sweep finds
// them (docs/runtime.md, "The sparse sweep index").
func (s *Store) SparseSweep(partitions func(prefix string) ([]string, error)) {
	s.partitions.Store(&partitions)
}

// SparseSweepOnStream has outbox entries due at once (never attempted, not
// leased) written without their sweep index attributes on AWS, where the
// table's stream, through the dispatcher function's event source mapping,
// names each new entry's shard (1 index write unit fewer per delivery: the
// entry's index put; its lease and removal then touch no index either).
// What keeps such an entry from being lost, since no sweep finds it
// (docs/runtime.md, "The sparse sweep index"): the mapping retries a
// failed batch until its records leave the stream (24 hours) and reads
// from TRIM_HORIZON; a stream batch's handler returns success only once
// each shard it names is drained, or its first pending entry indexed
// (IndexEntry); a pass meeting a head another invocation holds indexes the
// first unindexed entry behind it (or the held head, due at its lease's
// end); a pass the sweep started, which no stream retry stands behind,
// indexes each entry it leases and the entry after it before delivering
// (shared/dispatch, "sparse index"). The local platform has its own sparse
// mode (SparseSweep).
func (s *Store) SparseSweepOnStream() { s.streamSparse.Store(true) }

// OutboxShards lists every outbox shard with an entry, in the sweep index
// or not: the table's OUTBOX# partitions under SparseSweep, otherwise the
// sweep index's shards, due or not.
func (s *Store) OutboxShards(ctx context.Context) ([]string, error) {
	f := s.partitions.Load()
	if f == nil {
		return s.DueShards(ctx, time.Now().AddDate(100, 0, 0), 1<<20)
	}
	pks, err := (*f)(pkOutboxPrefix)
	if err != nil {
		return nil, err
	}
	shards := pks[:0]
	for _, pk := range pks {
		if IsShard(pk) {
			shards = append(shards, pk)
		}
	}
	return shards, nil
}

// unindexDue drops the sweep index attributes of the outbox entries items
// put that are due at once (never attempted, not leased, due by now), under
// SparseSweep and once a dispatcher is told of each commit (OnOutbox): the
// commit names their shards, which are worked at once.
func (s *Store) unindexDue(items []types.TransactWriteItem) {
	if !s.streamSparse.Load() && (s.partitions.Load() == nil || s.onOutbox.Load() == nil) {
		return
	}
	now := platform.Clock().UnixMilli()
	for i := range items {
		p := items[i].Put
		if p == nil || !IsShard(getS(p.Item, attrPK)) {
			continue
		}
		if _, ok := p.Item[attrGSI1PK]; !ok {
			continue
		}
		if _, leased := p.Item[attrLease]; leased || getN(p.Item, attrAttempts) != 0 || getN(p.Item, attrDueAt) > now {
			continue
		}
		it := maps.Clone(p.Item)
		delete(it, attrGSI1PK)
		delete(it, attrGSI1SK)
		np := *p // the caller's item stays as it was
		np.Item = it
		items[i].Put = &np
	}
}

// PrefixDelivery starts delivery ids.
const PrefixDelivery = "dlv_"

// outboxPut is the transaction item writing delivery d.
func outboxPut(d platform.Delivery) (types.TransactWriteItem, error) {
	it, err := outboxItem(d)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")}}, nil
}

// outboxItem is the item of delivery d in its shard.
func outboxItem(d platform.Delivery) (item, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	due, _ := time.Parse(platform.TimeFormat, d.DueAt)
	shard := lane(d) // not the shard it was read from: a migrated entry, a periodic one's next run
	it := item{attrPK: str(shard), attrSK: str(d.ID), attrDoc: str(string(b)),
		attrDueAt: num(due.UnixMilli()), attrAttempts: num(int64(d.Attempts)),
		attrGSI1PK: str(sweepBucket(shard)), attrGSI1SK: str(sweepSK(due.UnixMilli(), d.ID))}
	if d.ConversationID == "" {
		it[attrGSI2PK], it[attrGSI2SK] = str(botDeliveryList(d.BotID, d.ID)), str(d.ID)
	}
	if d.Prepaid {
		it[attrPrepaid] = prepaidMark(d.PrepaidIn)
	}
	return it, nil
}

// newDelivery is a delivery due now (or at due, when later).
func newDelivery(kind, bot, conv string, due string) platform.Delivery {
	now := platform.FormatTime(platform.Clock())
	if due == "" || due < now {
		due = now
	}
	return platform.Delivery{ID: platform.NewID(PrefixDelivery), Kind: kind, BotID: bot, ConversationID: conv, CreatedAt: now, DueAt: due}
}

// PendingDeliveries returns the head of one outbox shard in creation order,
// from after the entry after ("" from the start), at most limit entries,
// each with its lease (epoch ms, 0 for none).
func (s *Store) PendingDeliveries(ctx context.Context, shard, after string, limit int) ([]platform.Delivery, []int64, error) {
	ds, leases, _, err := s.PendingIndexed(ctx, shard, after, limit)
	return ds, leases, err
}

// UndecodableDelivery is the kind a shard's reading gives an entry whose
// document does not decode (written by hand, or by a bug): the dispatcher
// refuses it for good and removes it (an unknown kind), so that it holds
// back neither its conversation nor, on AWS, the stream batch that names
// its shard (retried until its records leave the stream: one entry would
// stop every conversation of that lane for a day). Its attributes are
// logged first, so what it held is kept where an operator can read it.
const UndecodableDelivery = "undecodable"

// undecodable is the delivery standing for an entry that did not decode:
// its keys (its shard names its bot and conversation; entryDelivery adds
// what its attributes hold).
func undecodable(it item, err error) platform.Delivery {
	pk, sk := getS(it, attrPK), getS(it, attrSK)
	bot, conv, _ := strings.Cut(strings.TrimPrefix(pk, pkOutboxPrefix), "#")
	conv = strings.TrimSuffix(conv, outLane)
	if conv == sk {
		conv = "" // an entry of no conversation: its own shard
	}
	return platform.Delivery{ID: sk, Kind: UndecodableDelivery, BotID: bot, ConversationID: conv, LastError: err.Error()}
}

// entryDelivery decodes an outbox entry (the attempts and due time its
// attributes hold win over its document's).
func entryDelivery(it item) (platform.Delivery, error) {
	var d platform.Delivery
	err := decodeDoc(it, &d)
	if err != nil {
		d = undecodable(it, err)
	}
	d.Attempts = int(getN(it, attrAttempts))
	if v, ok := it[attrPrepaid]; ok {
		d.Prepaid = true
		if p, ok := v.(*types.AttributeValueMemberS); ok {
			d.PrepaidIn = p.Value
		}
	}
	d.DueAt = platform.FormatTime(time.UnixMilli(getN(it, attrDueAt)))
	d.Shard = getS(it, attrPK)
	return d, err
}

// DueShards returns the shards with an entry due by now and not held by a
// live lease, as the sweep index lists them (eventually consistent on
// DynamoDB: a shard named may have nothing left, the dispatcher finds out
// by reading it). It reads at most perBucket index entries of each bucket.
func (s *Store) DueShards(ctx context.Context, now time.Time, perBucket int) ([]string, error) {
	var (
		mu     sync.Mutex
		seen   = map[string]bool{}
		shards []string
		errs   []error
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 8) // buckets read at once
	)
	for b := range SweepBuckets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.dueInBucket(ctx, b, now, perBucket, func(pk string) {
				mu.Lock()
				defer mu.Unlock()
				if !seen[pk] {
					seen[pk] = true
					shards = append(shards, pk)
				}
			}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Strings(shards)
	return shards, errors.Join(errs...)
}

// dueInBucket calls found with the shard of each entry of bucket b that is
// due by now and not leased, until limit shards are found. Leased entries
// are read past (a further page of the index, as long as the due range
// goes on): they are not counted against limit, so entries leased by
// invocations under way (or dead, until their leases run out) never hide
// due ones behind them in the index's order; nor do several due entries
// of one shard (a backlog behind a retry or a lease). At most
// sweepMaxPages pages of limit entries are read per bucket per sweep.
func (s *Store) dueInBucket(ctx context.Context, b int, now time.Time, limit int, found func(pk string)) error {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :b AND gsi1sk <= :now"),
		ExpressionAttributeValues: item{":b": str(sweepPrefix + strconv.Itoa(b)), ":now": str(fmt.Sprintf("%013d$", now.UnixMilli()))},
		ProjectionExpression:      aws.String("pk, #l"),
		ExpressionAttributeNames:  map[string]string{"#l": attrLease},
		Limit:                     aws.Int32(int32(limit)),
	}
	shards := map[string]bool{}
	for range sweepMaxPages {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range out.Items {
			if pk := getS(it, attrPK); getN(it, attrLease) <= now.UnixMilli() && !shards[pk] {
				shards[pk] = true
				found(pk)
			}
		}
		if len(shards) >= limit || len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return nil
}

// sweepMaxPages bounds the index pages one sweep reads of a bucket.
const sweepMaxPages = 10

// LeaseDelivery takes d for until: false when another dispatcher holds it
// or it is gone.
func (s *Store) LeaseDelivery(ctx context.Context, d platform.Delivery, now, until time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(Shard(d), d.ID),
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

// PendingIndexed is PendingDeliveries with, for each entry, whether it is
// in the sweep index (SparseSweepOnStream: the dispatcher indexes the
// first entry a pass must leave that may be in none).
func (s *Store) PendingIndexed(ctx context.Context, shard, after string, limit int) ([]platform.Delivery, []int64, []bool, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(shard)},
		Limit:                     aws.Int32(int32(limit)),
		ConsistentRead:            aws.Bool(true),
	}
	if after != "" {
		in.ExclusiveStartKey = key(shard, after)
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, nil, nil, err
	}
	ds := make([]platform.Delivery, 0, len(out.Items))
	leases := make([]int64, 0, len(out.Items))
	indexed := make([]bool, 0, len(out.Items))
	for _, it := range out.Items {
		d, err := entryDelivery(it)
		if err != nil {
			slog.Default().Error("dynamo: an outbox entry does not decode; it will be removed unsent", "pk", getS(it, attrPK), "sk", getS(it, attrSK),
				"err", err, "doc", getS(it, attrDoc), "attempts", getN(it, attrAttempts), "dueAt", getN(it, attrDueAt))
		}
		_, in := it[attrGSI1PK]
		ds = append(ds, d)
		leases = append(leases, getN(it, attrLease))
		indexed = append(indexed, in)
	}
	return ds, leases, indexed, nil
}

// IndexEntry puts outbox entry d into the sweep index, due at due, if it
// is in none yet: with lease > 0 only while d still holds that lease (a
// head another invocation holds: if the condition fails, its holder
// finished or re-leased it), otherwise while d exists. false: the
// condition failed (nothing written).
func (s *Store) IndexEntry(ctx context.Context, d platform.Delivery, due time.Time, lease int64) (bool, error) {
	cond := "attribute_exists(pk) AND attribute_not_exists(#gpk)"
	vals := item{":gpk": str(sweepBucket(Shard(d))), ":gsk": str(sweepSK(due.UnixMilli(), d.ID))}
	names := map[string]string{"#gpk": attrGSI1PK, "#gsk": attrGSI1SK}
	if lease > 0 {
		cond += " AND #l = :lease"
		vals[":lease"] = num(lease)
		names["#l"] = attrLease
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(Shard(d), d.ID),
		UpdateExpression:          aws.String("SET #gpk = :gpk, #gsk = :gsk"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	if isConditionFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// LeaseIndexed is LeaseDelivery putting d into the sweep index, due at
// until, if it is in none (its index entry, if any, is kept): the lease
// of a pass no stream batch's retry stands behind (a sweep's), so that
// the sweep finds d again if the pass dies holding it.
func (s *Store) LeaseIndexed(ctx context.Context, d platform.Delivery, now, until time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(Shard(d), d.ID),
		UpdateExpression:          aws.String("SET #l = :until, #gpk = if_not_exists(#gpk, :gpk), #gsk = if_not_exists(#gsk, :gsk)"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(#l) OR #l < :now)"),
		ExpressionAttributeNames:  map[string]string{"#l": attrLease, "#gpk": attrGSI1PK, "#gsk": attrGSI1SK},
		ExpressionAttributeValues: item{":until": num(until.UnixMilli()), ":now": num(now.UnixMilli()), ":gpk": str(sweepBucket(Shard(d))), ":gsk": str(sweepSK(until.UnixMilli(), d.ID))},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// RetryDelivery puts d back with one more failed attempt, due at due (the
// sweep index follows, both its attributes set: an entry written without
// them (SparseSweep) is in the index from now on, found when it comes due).
func (s *Store) RetryDelivery(ctx context.Context, d platform.Delivery, due time.Time, why string) error {
	d.LastError = why
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(Shard(d), d.ID),
		UpdateExpression:          aws.String("SET #due = :due, #doc = :doc, #gpk = :gpk, #gsk = :gsk REMOVE #l ADD #a :one"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#due": attrDueAt, "#doc": attrDoc, "#l": attrLease, "#a": attrAttempts, "#gpk": attrGSI1PK, "#gsk": attrGSI1SK},
		ExpressionAttributeValues: item{":due": num(due.UnixMilli()), ":doc": str(string(b)), ":one": num(1), ":gpk": str(sweepBucket(Shard(d))), ":gsk": str(sweepSK(due.UnixMilli(), d.ID))},
	}
	if !d.Prepaid {
		// The attempt used the pre-paid invocation (or there was none):
		// the next ones are counted by the dispatcher, as they go out.
		in.UpdateExpression = aws.String("SET #due = :due, #doc = :doc, #gpk = :gpk, #gsk = :gsk REMOVE #l, #pp ADD #a :one")
		in.ExpressionAttributeNames["#pp"] = attrPrepaid
	}
	_, err = s.db.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return nil // removed meanwhile (its conversation deleted)
	}
	return err
}

// FinishAndQueue removes d from the outbox and queues next, in one
// transaction (a periodic delivery's next run); when d is gone meanwhile,
// nothing is queued.
func (s *Store) FinishAndQueue(ctx context.Context, d, next platform.Delivery) error {
	put, err := outboxPut(next)
	if err != nil {
		return err
	}
	err = s.txWrite(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{Key: key(Shard(d), d.ID), ConditionExpression: aws.String("attribute_exists(pk)")}},
		put,
	})
	if failedAt(err) == 0 {
		return nil
	}
	return err
}

// FinishDelivery removes d from the outbox. A delivery still Prepaid (no
// attempt reached the bot: ignored, failed unsent, its message gone) gives
// its pre-paid invocation back in the same transaction as the removal,
// conditional on the entry being there: the refund is made once, by
// whoever removes the entry, however often a crash has it delivered again
// (the rare path: one transaction instead of a DeleteItem).
func (s *Store) FinishDelivery(ctx context.Context, d platform.Delivery) error {
	if d.Prepaid {
		return s.removeRefunding(ctx, d)
	}
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(Shard(d), d.ID)})
	return err
}

// removeRefunding removes pre-paid entry d and gives its invocation back,
// in one transaction; nothing when d is gone already (removed, and
// refunded if it had to be, by whoever removed it).
func (s *Store) removeRefunding(ctx context.Context, d platform.Delivery) error {
	err := s.txWrite(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{Key: key(Shard(d), d.ID), ConditionExpression: aws.String("attribute_exists(pk) AND attribute_exists(#pp)"),
			ExpressionAttributeNames: map[string]string{"#pp": attrPrepaid}}},
		invocationRefund(d),
	})
	if failedAt(err) == 0 {
		// Gone, or its pre-paid invocation used meanwhile (not by this
		// process: a lease ran out): remove it as it is.
		_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(Shard(d), d.ID)})
	}
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

// purgeOutboxShard deletes an outbox shard's entries (a deleted
// conversation's), giving back the invocations of those still pre-paid
// (their messages never reached the bot), each in a transaction with its
// entry's removal (removeRefunding): given back once, by whoever removes
// the entry, the dispatcher or this. A pre-paid head of the shard is left
// to the dispatcher: it may be at the bot now (a shard goes out in order,
// so no other entry can be), and only the dispatcher knows whether that
// attempt used its invocation; it removes the entry when the attempt ends,
// or, were none under way, fails it at once (its conversation is gone) and
// gives the invocation back then (found by the next pass or sweep).
//
// Within a deleted bot's purge (purgingBot) the shard goes whole, as
// before: the bot's usage goes with it, nothing is given back.
func (s *Store) purgeOutboxShard(ctx context.Context, shard string) error {
	if ctx.Value(botPurgeKey{}) != nil {
		return s.purge(ctx, shard)
	}
	head := true
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(shard)},
	}
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return err
		}
		var keys []item
		for _, it := range out.Items {
			first := head
			head = false
			if _, pre := it[attrPrepaid]; pre {
				if first {
					continue
				}
				d, _ := entryDelivery(it) // its keys and mark, even if its document does not decode
				if err := s.removeRefunding(ctx, d); err != nil {
					return err
				}
				continue
			}
			keys = append(keys, key(getS(it, attrPK), getS(it, attrSK)))
		}
		if err := s.batchDelete(ctx, keys); err != nil {
			return err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

type botPurgeKey struct{}

// purgingBot marks ctx as a deleted bot's purge (purgeBot).
func purgingBot(ctx context.Context) context.Context {
	return context.WithValue(ctx, botPurgeKey{}, true)
}

// purgeBotDeliveries deletes a deleted bot's outbox entries of no
// conversation (those of its conversations go with them).
func (s *Store) purgeBotDeliveries(ctx context.Context, bot string) error {
	for n := range botDeliveryLists {
		if err := s.purgeIndex(ctx, GSI2, botDeliveries(bot, n)); err != nil {
			return err
		}
	}
	return nil
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

// ReleaseLeases removes every lease in the outbox: for a dispatcher that
// knows it is the only one (the local platform, whose data directory one
// process holds), leases found at start are those of a process that died
// mid-delivery. It finds them through the sweep index (a lease is set on
// an entry already due).
func (s *Store) ReleaseLeases(ctx context.Context) (int, error) {
	n := 0
	for b := range SweepBuckets {
		err := s.eachPage(ctx, &dynamodb.QueryInput{
			IndexName:                 aws.String(GSI1),
			KeyConditionExpression:    aws.String("gsi1pk = :b"),
			FilterExpression:          aws.String("attribute_exists(#l)"),
			ExpressionAttributeNames:  map[string]string{"#l": attrLease},
			ExpressionAttributeValues: item{":b": str(sweepPrefix + strconv.Itoa(b))},
			ProjectionExpression:      aws.String("pk, sk"),
		}, func(items []item) error {
			for _, it := range items {
				_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: &s.table, Key: key(getS(it, attrPK), getS(it, attrSK)),
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
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// OutboxEntriesExist tells which of the outbox entries named by keys (a
// shard and a delivery id each, as a stream record's keys name them) are
// still in the table: one BatchGetItem per 100 keys (and one more for any
// it leaves unprocessed), strongly consistent, keys only. The dispatcher
// function checks so the old records of a batch (a mapping re-reading the
// stream from TRIM_HORIZON) before it works their shards.
func (s *Store) OutboxEntriesExist(ctx context.Context, keys [][2]string) (map[[2]string]bool, error) {
	found := map[[2]string]bool{}
	seen := map[[2]string]bool{}
	var todo []map[string]types.AttributeValue
	for _, k := range keys {
		if !seen[k] { // BatchGetItem refuses a key twice
			seen[k] = true
			todo = append(todo, key(k[0], k[1]))
		}
	}
	for len(todo) > 0 {
		n := min(len(todo), 100)
		chunk := todo[:n]
		todo = todo[n:]
		for attempt := 0; len(chunk) > 0; attempt++ {
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(10<<min(attempt, 6)) * time.Millisecond):
				}
			}
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.table: {Keys: chunk, ProjectionExpression: aws.String("pk, sk"), ConsistentRead: aws.Bool(true)}}})
			if err != nil {
				return nil, err
			}
			for _, it := range out.Responses[s.table] {
				found[[2]string{getS(it, attrPK), getS(it, attrSK)}] = true
			}
			chunk = out.UnprocessedKeys[s.table].Keys
		}
	}
	return found, nil
}
