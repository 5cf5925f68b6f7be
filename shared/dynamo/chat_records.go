package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// What conversations, users and messages have in common: how a record is
// read, rewritten, deleted with what it owns, listed through index entries
// and checked by a getOrCreate claim.

// getLive reads the record of a kind by id, with one GetItem: an id without
// the kind's prefix, a missing record or one being deleted is a 404.
func getLive[T any](ctx context.Context, s *Store, kind, prefix, id, pk, sk string, decode func(item) (T, bool, error)) (T, error) {
	var zero T
	if !platform.HasPrefix(id, prefix) {
		return zero, platform.NotFound(kind, id)
	}
	it, err := s.get(ctx, pk, sk)
	if err != nil {
		return zero, err
	}
	if it == nil {
		return zero, platform.NotFound(kind, id)
	}
	v, live, err := decode(it)
	if err == nil && !live {
		err = platform.NotFound(kind, id)
	}
	return v, err
}

// versionedUpdate rewrites the doc of a conversation or user record read at
// version ver, conditional on that version and on no deletion being under
// way; its update-time key (gsi2) moves to updatedAt.
func versionedUpdate(pk, sk, id string, ver int64, doc any, updatedAt string) (types.TransactWriteItem, error) {
	d, err := marshalDoc(doc)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{
		Key:                      key(pk, sk),
		UpdateExpression:         aws.String("SET #doc = :doc, #ver = :next, #g2 = :g2"),
		ConditionExpression:      aws.String("#ver = :ver AND attribute_not_exists(#del)"),
		ExpressionAttributeNames: map[string]string{"#doc": attrDoc, "#ver": attrVer, "#g2": attrGSI2SK, "#del": attrDeleting},
		ExpressionAttributeValues: item{
			":doc": str(d), ":next": num(ver + 1), ":ver": num(ver),
			":g2": str(timeKey(updatedAt, id)),
		},
	}}, nil
}

// reindexWrites are the writes of a record's index entries (in partition
// pk) after its tags changed from oldTags to newTags: entries are put, or
// rewritten where they existed (fixed names the sort keys of the entries
// every record has), and the entries of removed tags deleted.
func reindexWrites(pk string, entries []item, fixed []string, oldTags, newTags map[string]string) []types.TransactWriteItem {
	had := make(map[string]bool, len(fixed)+len(oldTags))
	for _, sk := range fixed {
		had[sk] = true
	}
	for k := range oldTags {
		had[skIdx+idxTag(k)] = true
	}
	w := entryWrites(entries, had)
	for k := range oldTags {
		if _, ok := newTags[k]; !ok {
			w = append(w, del(pk, skIdx+idxTag(k)))
		}
	}
	return w
}

// deleteOwner deletes a conversation or user and everything in its
// partition: it is first marked as being deleted (reads answer 404 from then
// on, and every write that attaches something to it is conditional on the
// mark's absence), with a durable deletion marker in the same transaction,
// so the strongly consistent read of its partition that follows sees every
// child there will ever be, and a crash leaves the marker for the Sweeper.
// A child may have a twin elsewhere (deletionKind.twin), deleted with it;
// claims held are released. The record goes last, then the marker, so an
// interrupted deletion resumes when called again.
func (s *Store) deleteOwner(ctx context.Context, kind deletionKind, bot, id string) error {
	name, prefix, pk, sk, _ := kind.owner(bot, id)
	if !platform.HasPrefix(id, prefix) {
		return platform.NotFound(name, id)
	}
	if err := s.markDeleting(ctx, kind, bot, id, pk, sk); err != nil {
		if err == errGone {
			return platform.NotFound(name, id)
		}
		return err
	}
	return s.finishOwner(ctx, kind, bot, id)
}

// finishOwner deletes what a marked conversation or user owns, then the
// record and its deletion marker (idempotent: what is gone is skipped).
func (s *Store) finishOwner(ctx context.Context, kind deletionKind, bot, id string) error {
	_, _, pk, sk, twin := kind.owner(bot, id)
	children, err := s.partition(ctx, pk, attrObject, attrHasEvent)
	if err != nil {
		return err
	}
	var keys, claims []item
	for _, it := range children {
		csk := getS(it, attrSK)
		switch {
		case csk == sk:
			continue // last
		case hasPrefix(csk, skClaim):
			claims = append(claims, it)
		default:
			if _, ev := it[attrHasEvent]; ev && hasPrefix(csk, skMsgCopy) {
				// Its message_created event, listed through the copy
				// (no entry in the conversation's events list).
				keys = append(keys, key(eventPK(bot, messageEventID(getS(it, attrObject))), skEvent))
			}
			if k := twin(csk, getS(it, attrObject)); k != nil {
				keys = append(keys, k)
			}
		}
		keys = append(keys, key(pk, csk))
	}
	if err := s.deleteKeys(ctx, keys); err != nil {
		return err
	}
	if err := s.releaseClaims(ctx, bot, claims); err != nil {
		return err
	}
	if kind == deletionConversation {
		// Its events (message_created ones, those createEvent linked to it).
		if err := s.purgeIndex(ctx, GSI2, convEvents(bot, id)); err != nil {
			return err
		}
		// and its outbox lanes.
		for _, shard := range convShards(bot, id) {
			if err := s.purgeOutboxShard(ctx, shard); err != nil {
				return err
			}
		}
	}
	if _, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(pk, sk)}); err != nil {
		return err
	}
	return s.dropMarker(ctx, kind, bot, id)
}

// viaEntries turns a loader of records into a loader of index entries: the
// records the entries name (attrObject; recordKey gives their keys) are read
// in one BatchGetItem, and those deleted since they were indexed skipped.
func viaEntries[T any](ctx context.Context, s *Store, recordKey func(id string) item, load func([]item) ([]*T, error)) func([]item) ([]*T, error) {
	return func(entries []item) ([]*T, error) {
		if len(entries) == 0 {
			return load(entries)
		}
		keys := make([]item, len(entries))
		for i, e := range entries {
			keys[i] = recordKey(getS(e, attrObject))
		}
		got, err := s.getMany(ctx, keys)
		if err != nil {
			return nil, err
		}
		records := make([]item, len(entries))
		for i, k := range keys {
			records[i] = got[keyID(getS(k, attrPK), getS(k, attrSK))] // nil: deleted
		}
		return load(records)
	}
}

// claimCheck is the check of claimed for a getOrCreate: the record the claim
// names is read with get (gone: the claim is stale), kept in *out, and must
// still match.
func claimCheck[T any](get func(id string) (T, error), matches func(T) bool, out *T) func(id string) (bool, error) {
	return func(id string) (bool, error) {
		v, err := get(id)
		if err != nil {
			if platform.TypeOf(err) == platform.ErrResourceNotFound {
				return false, nil
			}
			return false, err
		}
		*out = v
		return matches(v), nil
	}
}
