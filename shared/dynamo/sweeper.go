package dynamo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Deletions that outlive their request. Deleting a conversation, a user or
// a bot first writes a durable deletion marker, in the transaction that
// makes the record unreadable (the conversation's or user's `del` mark, the
// bot's delete), under one well-known partition. The request then deletes
// what the record owns and drops the marker; a crash in between leaves the
// marker, and the Sweeper finds it with one Query of that partition (no
// Scan) and finishes the deletion. Every step is idempotent, so a deletion
// resumed twice (or by the request and the sweeper at once) is harmless.

// deletionsPK is the partition of pending deletion markers.
const deletionsPK = "DELETIONS"

// deletionKind is what a marker deletes.
type deletionKind string

const (
	deletionConversation deletionKind = "CONV"
	deletionUser         deletionKind = "USER"
	deletionBot          deletionKind = "BOT"
)

// errGone: the record to mark for deletion does not exist.
var errGone = errors.New("record gone")

func deletionSK(kind deletionKind, bot, id string) string {
	return string(kind) + "#" + bot + "#" + id
}

// owner describes a conversation or user: its name in errors, its id
// prefix, its record's key and the twins of its children.
func (k deletionKind) owner(bot, id string) (name, prefix, pk, sk string, twin func(sk, object string) item) {
	if k == deletionUser {
		return "user", platform.PrefixUser, userPK(bot, id), skUser, userTwin(bot, id)
	}
	return "conversation", platform.PrefixConversation, convPK(bot, id), skConv, convTwin(bot, id)
}

// deletionMarker is the put of a pending deletion's marker (extra holds what
// the sweeper needs that the deleted record no longer tells).
func deletionMarker(kind deletionKind, bot, id string, extra item) types.TransactWriteItem {
	it := key(deletionsPK, deletionSK(kind, bot, id))
	it["kind"], it["botId"], it["id"] = str(string(kind)), str(bot), str(id)
	it["at"] = str(platform.Now())
	for k, v := range extra {
		it[k] = v
	}
	return types.TransactWriteItem{Put: &types.Put{Item: it}}
}

func (s *Store) dropMarker(ctx context.Context, kind deletionKind, bot, id string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(deletionsPK, deletionSK(kind, bot, id))})
	return err
}

// attrRev counts, on a bot's deletion marker, the writes that committed
// after the bot was deleted (RecheckBot): the sweeper drops the marker only
// if it is unchanged since it began its pass.
const attrRev = "rev"

// RecheckBot is called after a write on a bot's behalf has committed. A
// write that read its bot before deleteBot and committed after it may have
// stored what the deletion's sweep has already gone past; so when the bot
// is gone, its deletion marker is bumped (rev+1, put back if the sweeper
// had dropped it), and a sweep deletes that data too: the sweeper drops a
// marker only while its rev is the one it read before purging. A check on
// the bot in every write's transaction would do it too, but would make the
// bot's item part of every concurrent transaction of the bot (DynamoDB
// cancels transactions that touch one item at once): this costs one
// GetItem per write instead. It answers whether the bot is gone.
func (s *Store) RecheckBot(ctx context.Context, bot string) (gone bool, err error) {
	if _, err := s.GetBot(ctx, bot); platform.TypeOf(err) != platform.ErrResourceNotFound {
		return false, err
	}
	s.forgetBot(bot) // authz_cache.go
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(deletionsPK, deletionSK(deletionBot, bot, bot)),
		UpdateExpression:          aws.String("SET #kind = :k, #botId = :b, #id = :b, #at = if_not_exists(#at, :now) ADD #rev :one"),
		ExpressionAttributeNames:  map[string]string{"#kind": "kind", "#botId": "botId", "#id": "id", "#at": "at", "#rev": attrRev},
		ExpressionAttributeValues: item{":k": str(string(deletionBot)), ":b": str(bot), ":now": str(platform.Now()), ":one": num(1)},
	})
	return true, err
}

// dropBotMarker drops a bot's deletion marker if its rev is still rev;
// false when a late write bumped it meanwhile (then it stays).
func (s *Store) dropBotMarker(ctx context.Context, bot string, rev int64) (bool, error) {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       key(deletionsPK, deletionSK(deletionBot, bot, bot)),
		ConditionExpression:       aws.String("attribute_not_exists(#rev) OR #rev = :rev"),
		ExpressionAttributeNames:  map[string]string{"#rev": attrRev},
		ExpressionAttributeValues: item{":rev": num(rev)},
	})
	if condFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// ObjectDeleter deletes stored file contents (platform.FileStorage has it).
type ObjectDeleter interface {
	Delete(ctx context.Context, key string) error
}

// Sweeper finishes the deletions whose request did not (a crash, a bot's
// data deleted in the background). Run it at start and after each bot
// deletion (the local platform does), or on a schedule.
type Sweeper struct {
	Store *Store
	// Objects deletes the contents of a deleted bot's files, each before
	// its record (nil: they stay in the bucket, only their records go).
	Objects ObjectDeleter
	Log     *slog.Logger

	once sync.Once
	kick chan struct{}
}

func (w *Sweeper) init() { w.once.Do(func() { w.kick = make(chan struct{}, 1) }) }

// Kick asks a running Loop for a sweep now (a deletion was left to it).
func (w *Sweeper) Kick() {
	w.init()
	select {
	case w.kick <- struct{}{}:
	default: // one is already asked for
	}
}

// Loop sweeps at once (resuming what a crash left), then on each Kick and
// every interval (retrying what failed), until ctx is done.
func (w *Sweeper) Loop(ctx context.Context, every time.Duration) {
	w.init()
	for first := true; ; first = false {
		done, err := w.Run(ctx)
		if first && done == 0 && err == nil && w.Log != nil {
			w.Log.Info("deletion sweep", "finished", 0, "pending", 0) // nothing was left pending
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// Run finishes every pending deletion, oldest marker first in each kind,
// and answers how many it finished. A deletion that fails is logged and
// left for the next run.
func (w *Sweeper) Run(ctx context.Context) (int, error) { return w.run(ctx, "") }

// RunBot finishes the deletion of one deleted bot's data (what deleteBot
// waits for where nothing runs in the background).
func (w *Sweeper) RunBot(ctx context.Context, botID string) (int, error) {
	return w.run(ctx, deletionSK(deletionBot, botID, botID))
}

// run finishes the pending deletions whose marker's sort key begins with
// prefix.
func (w *Sweeper) run(ctx context.Context, prefix string) (int, error) {
	s := w.Store
	q := &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(deletionsPK)},
		ConsistentRead:            aws.Bool(true),
	}
	if prefix != "" { // DynamoDB refuses an empty string in a key condition
		q.KeyConditionExpression = aws.String("pk = :pk AND begins_with(sk, :p)")
		q.ExpressionAttributeValues[":p"] = str(prefix)
	}
	markers, err := queryAllItems(ctx, s, q)
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, m := range markers {
		if ctx.Err() != nil {
			return done, ctx.Err()
		}
		kind, bot, id := deletionKind(getS(m, "kind")), getS(m, "botId"), getS(m, "id")
		var err error
		switch kind {
		case deletionConversation, deletionUser:
			err = s.finishOwner(ctx, kind, bot, id)
		case deletionBot:
			var owners []string
			if l, ok := m[attrStateOwners].(*types.AttributeValueMemberL); ok {
				for _, v := range l.Value {
					if sv, ok := v.(*types.AttributeValueMemberS); ok {
						owners = append(owners, sv.Value)
					}
				}
			}
			err = s.finishBot(ctx, bot, owners, getN(m, attrRev), w.Objects, w.Log)
		default:
			err = fmt.Errorf("unknown deletion marker %q", getS(m, attrSK))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", kind, id, err))
			if w.Log != nil {
				w.Log.Error("deletion sweep", "kind", string(kind), "bot", bot, "id", id, "err", err)
			}
			continue
		}
		done++
	}
	if w.Log != nil && len(markers) > 0 {
		w.Log.Info("deletion sweep", "finished", done, "pending", len(markers)-done)
	}
	return done, errors.Join(errs...)
}

// finishBot purges a deleted bot's data and drops its marker, again while
// a late write (RecheckBot) bumped the marker during the purge.
func (s *Store) finishBot(ctx context.Context, bot string, owners []string, rev int64, objects ObjectDeleter, log *slog.Logger) error {
	for attempt := 0; ; attempt++ {
		if err := s.purgeBot(ctx, bot, owners, objects, log); err != nil {
			return err
		}
		dropped, err := s.dropBotMarker(ctx, bot, rev)
		if err != nil || dropped {
			return err
		}
		if attempt >= 5 {
			return fmt.Errorf("bot %s was written to during its deletion's sweep, %d times: left for the next sweep", bot, attempt+1)
		}
		m, err := s.get(ctx, deletionsPK, deletionSK(deletionBot, bot, bot))
		if err != nil {
			return err
		}
		rev = getN(m, attrRev)
	}
}

// PendingDeletions counts the deletion markers left (tests, monitoring).
func (s *Store) PendingDeletions(ctx context.Context) (int, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(deletionsPK)},
		ProjectionExpression:      aws.String("pk, sk"),
		ConsistentRead:            aws.Bool(true),
	})
	return len(items), err
}

// eachPage runs a Query page by page (at most 1 MB each), calling fn with
// each page's items: for collections too large to hold at once.
func (s *Store) eachPage(ctx context.Context, in *dynamodb.QueryInput, fn func([]item) error) error {
	in.TableName = &s.table
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return err
		}
		if err := fn(res.Items); err != nil {
			return err
		}
		if len(res.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// eachInList calls fn with the pk of every item of a bot's gsi1 list
// (conversations, users, messages, events), a page at a time.
func (s *Store) eachInList(ctx context.Context, gsi1pk string, fn func(pks []string) error) error {
	return s.eachPage(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(gsi1pk)},
		ProjectionExpression:      aws.String("pk, sk"),
	}, func(items []item) error {
		pks := make([]string, len(items))
		for i, it := range items {
			pks[i] = getS(it, attrPK)
		}
		return fn(pks)
	})
}

// purgeBot deletes what a deleted bot stored: conversations (with their
// messages, participants, states and claims), users (with theirs), any
// message left, events, the bot's and its integrations' states (owners
// names the integration ids and aliases installed when it was deleted),
// files (records, passages, tag counts and, with objects, contents),
// tables and issues. The bot record is already gone, so no request adds to
// what this deletes.
func (s *Store) purgeBot(ctx context.Context, bot string, owners []string, objects ObjectDeleter, log *slog.Logger) error {
	ctx = purgingBot(ctx) // its outbox goes whole: nothing given back (outbox.go)
	for _, kind := range []deletionKind{deletionConversation, deletionUser} {
		prefix, list := "CONV#"+bot+"#", botList(bot, listConvs)
		if kind == deletionUser {
			prefix, list = "USER#"+bot+"#", botList(bot, listUsers)
		}
		err := s.eachInList(ctx, list, func(pks []string) error {
			for _, pk := range pks {
				id := strings.TrimPrefix(pk, prefix)
				if kind == deletionConversation {
					// Marked first, as deleteConversation does: a message
					// racing the bot's deletion (written without re-reading
					// its bot: guardedByConversation) commits before the
					// mark, and the listing below finds all it wrote, or
					// is refused by it.
					if err := s.markDeleting(ctx, kind, bot, id, pk, skConv); err != nil && !errors.Is(err, errGone) {
						return err
					}
				}
				if err := s.finishOwner(ctx, kind, bot, id); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// A message whose conversation was already purged: a createMessage
	// that read the conversation live before the pass above deleted its
	// record, and committed after the pass listed the conversation's
	// partition. Its copy and tag entries live in that partition, which no
	// list names any more; only the message record (listMsgs) still does,
	// so its conversation's partition is purged again before the record.
	purged := map[string]bool{}
	for _, list := range listKeys(bot, listMsgs) {
		err := s.eachPage(ctx, &dynamodb.QueryInput{
			IndexName:                 aws.String(GSI1),
			KeyConditionExpression:    aws.String("gsi1pk = :pk"),
			ExpressionAttributeValues: item{":pk": str(list)},
			ProjectionExpression:      aws.String("#c"),
			ExpressionAttributeNames:  map[string]string{"#c": attrConvID},
		}, func(items []item) error {
			for _, it := range items {
				if conv := getS(it, attrConvID); conv != "" && !purged[conv] {
					purged[conv] = true
					if err := s.finishOwner(ctx, deletionConversation, bot, conv); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	type list struct{ gsi, sk string }
	var lists []list
	for _, l := range listKeys(bot, listMsgs) {
		lists = append(lists, list{l, skMsg})
	}
	for _, l := range listKeys(bot, listEvents) {
		lists = append(lists, list{l, skEvent})
	}
	for _, list := range lists {
		err := s.eachInList(ctx, list.gsi, func(pks []string) error {
			keys := make([]item, len(pks))
			for i, pk := range pks {
				keys[i] = key(pk, list.sk)
			}
			return s.batchDelete(ctx, keys)
		})
		if err != nil {
			return err
		}
	}
	// Its outbox entries of no conversation (its conversations' went with
	// their shards).
	if err := s.purgeBotDeliveries(ctx, bot); err != nil {
		return err
	}
	statePKs := []string{statePK(platform.StateKey{BotID: bot, Type: platform.StateBot})}
	for _, o := range owners {
		statePKs = append(statePKs, statePK(platform.StateKey{BotID: bot, Type: platform.StateIntegration, OwnerID: o}))
	}
	for _, pk := range statePKs {
		if err := s.purge(ctx, pk); err != nil {
			return err
		}
	}
	if err := s.purgeBotTasks(ctx, bot); err != nil { // chat_tasks.go
		return err
	}
	if err := s.purgeBotKBs(ctx, bot); err != nil { // files_kb.go
		return err
	}
	if err := s.DeleteBotTables(ctx, bot); err != nil {
		return err
	}
	if err := s.DeleteBotIssues(ctx, bot); err != nil {
		return err
	}
	if err := s.purge(ctx, botStatsPK(bot)); err != nil { // analytics.go
		return err
	}
	if err := s.purgeBotExtras(ctx, bot); err != nil { // bot_extras.go
		return err
	}
	// Files last: their contents live in the bucket, which may refuse a
	// delete for a while; the rest of the bot is gone by then.
	if err := s.purgeBotFiles(ctx, bot, objects, log); err != nil {
		return err
	}
	// After the files: deleting one decrements the bot's storage usage.
	if err := s.purgeBotUsage(ctx, bot); err != nil { // usage_limits.go
		return err
	}
	// The lists are GSIs, read eventually consistently: a record written
	// just before the bot was deleted may have been missed. The marker is
	// kept (and the purge run again by the next sweep) until they are empty.
	var lists2 []string
	for _, kind := range []string{listConvs, listUsers, listMsgs, listEvents} {
		lists2 = append(lists2, listKeys(bot, kind)...)
	}
	for _, kind := range lists2 {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &s.table, IndexName: aws.String(GSI1),
			KeyConditionExpression:    aws.String("gsi1pk = :pk"),
			ExpressionAttributeValues: item{":pk": str(kind)},
			ProjectionExpression:      aws.String("pk"),
			Limit:                     aws.Int32(1),
		})
		if err != nil {
			return err
		}
		if len(res.Items) > 0 {
			return fmt.Errorf("bot %s still lists %s (written during its deletion): swept again later", bot, kind)
		}
	}
	return nil
}

// purgeBotFiles deletes a deleted bot's files one by one (as deleteFile
// does, contents included: the contents first), then its tag counts.
func (s *Store) purgeBotFiles(ctx context.Context, bot string, objects ObjectDeleter, log *slog.Logger) error {
	err := s.eachPage(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(fileKeysPK(bot))},
		ProjectionExpression:      aws.String("pk, sk, #f"),
		ExpressionAttributeNames:  map[string]string{"#f": attrFFileID},
		ConsistentRead:            aws.Bool(true),
	}, func(items []item) error {
		for _, it := range items {
			// The contents go first, the record after: a record is the
			// only thing that names its contents, so contents that cannot
			// be deleted now (S3 unavailable, a function without the
			// permission) keep their record, and the marker, for the
			// next sweep rather than stay in the bucket for good.
			deleteContents := func(r platform.FileRecord) error {
				if objects == nil {
					return nil
				}
				if err := objects.Delete(ctx, r.ObjectKey()); err != nil {
					if log != nil {
						log.Warn("deletion sweep: file contents not deleted (kept for the next sweep)", "bot", bot, "key", r.ObjectKey(), "err", err)
					}
					return fmt.Errorf("file %s contents: %w", r.ID, err)
				}
				return nil
			}
			_, err := s.DeleteFile(ctx, getS(it, attrFFileID), deleteContents)
			if platform.TypeOf(err) == platform.ErrResourceNotFound {
				// A key entry without its record: drop the entry.
				_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(getS(it, attrPK), getS(it, attrSK))})
				if err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	names, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(fileTagNamesPK(bot))},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := s.purge(ctx, fileTagValuesPK(bot, getS(n, attrFName))); err != nil {
			return err
		}
	}
	return s.purge(ctx, fileTagNamesPK(bot))
}
