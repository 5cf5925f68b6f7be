// Package dynamo is the platform's storage adapter: one DynamoDB table
// (single-table design, see docs/data-model.md) accessed only through GetItem,
// Query on the table or a GSI, and batches or transactions of those.
package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/authcache"
	"github.com/botforge/platform/shared/platform"
)

// Attribute names of the table. Every key attribute is a string.
const (
	attrPK     = "pk"
	attrSK     = "sk"
	attrGSI1PK = "gsi1pk"
	attrGSI1SK = "gsi1sk"
	attrGSI2PK = "gsi2pk"
	attrGSI2SK = "gsi2sk"
	attrTTL    = "ttl"
	attrDoc    = "doc" // the record's wire JSON
	attrVer    = "ver" // optimistic-concurrency version of doc

	GSI1 = "gsi1"
	GSI2 = "gsi2"
)

// Store is the platform's data access: all reads and writes of every area go
// through it.
type Store struct {
	db    client
	sdk   *dynamodb.Client // db's SDK client
	table string
	// onOutbox is called after a commit that queued a delivery, with the
	// outbox shards written since the last call (the local dispatcher's
	// wake-up; on AWS the table's stream does it).
	onOutbox atomic.Pointer[func(shards []string)]
	queuedMu sync.Mutex
	queued   map[string]bool // shards written, not yet passed to onOutbox
	// partitions, when set, lists the table's partition keys under a
	// prefix, and outbox entries due at once are written without their
	// sweep index attributes (outbox.go, SparseSweep).
	partitions atomic.Pointer[func(prefix string) ([]string, error)]
	// streamSparse: outbox entries due at once are written without their
	// sweep index attributes, the table's stream naming their shards to
	// the dispatcher function (outbox.go, SparseSweepOnStream; AWS).
	streamSparse atomic.Bool
	// limits are the operator's quotas (usage_limits.go).
	limits atomic.Pointer[Limits]
	// spreadCache: a bot's month of spread usage keys, read once while
	// quotas are on (usage_limits.go).
	spreadCache sync.Map
	// limiter counts the limits shared across processes (chat_limits.go).
	limiterOnce sync.Once
	limiter     *Limiter
	// tokens and sessions remember what a token or session hash
	// authenticates for authcache.TTL (accounts.go, signin.go): a busy key
	// is read once per TTL per process, not on every call.
	tokens   *authcache.Cache[platform.Principal]
	sessions *authcache.Cache[Session]
	// bots and members remember the records a call authorizes with, as
	// tokens are (authz_cache.go).
	bots    *authcache.Cache[BotRecord]
	members *authcache.Cache[platform.Member]
}

// OnOutbox sets the function called after each commit that queued a
// delivery, with the shards it (and any commit since the last call) wrote.
func (s *Store) OnOutbox(f func(shards []string)) { s.onOutbox.Store(&f) }

// noteQueued remembers the outbox shards a committed write put entries in,
// for the next notifyOutbox.
func (s *Store) noteQueued(items []types.TransactWriteItem) {
	if s.onOutbox.Load() == nil {
		return
	}
	s.queuedMu.Lock()
	defer s.queuedMu.Unlock()
	for _, w := range items {
		if w.Put == nil {
			continue
		}
		if pk := getS(w.Put.Item, attrPK); IsShard(pk) {
			if s.queued == nil {
				s.queued = map[string]bool{}
			}
			s.queued[pk] = true
		}
	}
}

func (s *Store) notifyOutbox() {
	f := s.onOutbox.Load()
	if f == nil {
		return
	}
	s.queuedMu.Lock()
	shards := make([]string, 0, len(s.queued))
	for pk := range s.queued {
		shards = append(shards, pk)
	}
	s.queued = nil
	s.queuedMu.Unlock()
	if len(shards) == 0 {
		// Every write notes its shards before it notifies, so an empty set
		// means a concurrent notifyOutbox took them and named them already.
		// Calling f with none would ask the dispatcher for a sweep (64
		// Queries over the full index) that finds nothing more.
		return
	}
	(*f)(shards)
}

// New returns a Store over table.
// Its quotas are those of the environment (LimitsFromEnv; an invalid value
// is refused by the processes that serve the API, at their start).
func New(db *dynamodb.Client, table string) *Store {
	s := &Store{db: db, sdk: db, table: table, tokens: authcache.New[platform.Principal](), sessions: authcache.New[Session](),
		bots: authcache.New[BotRecord](), members: authcache.New[platform.Member]()}
	if l, err := LimitsFromEnv(); err == nil {
		s.SetLimits(l)
	}
	return s
}

// Client returns the DynamoDB client (for tests and tools).
func (s *Store) Client() *dynamodb.Client { return s.sdk }

// EnsureTable creates the table, its indexes and its TTL attribute when
// missing, and waits until it is active. Safe to call concurrently and
// repeatedly.
func EnsureTable(ctx context.Context, db *dynamodb.Client, table string) error {
	_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err == nil {
		return nil
	}
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		return fmt.Errorf("describe table %s: %w", table, err)
	}
	str := types.ScalarAttributeTypeS
	gsi := func(name, pk, sk string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName: aws.String(name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}
	}
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: str},
			{AttributeName: aws.String(attrSK), AttributeType: str},
			{AttributeName: aws.String(attrGSI1PK), AttributeType: str},
			{AttributeName: aws.String(attrGSI1SK), AttributeType: str},
			{AttributeName: aws.String(attrGSI2PK), AttributeType: str},
			{AttributeName: aws.String(attrGSI2SK), AttributeType: str},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(GSI1, attrGSI1PK, attrGSI1SK),
			gsi(GSI2, attrGSI2PK, attrGSI2SK),
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	for i := 0; i < 120; i++ {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
		if err == nil && out.Table.TableStatus == types.TableStatusActive {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true),
		},
	})
	if err != nil && !strings.Contains(err.Error(), "already enabled") {
		// "already enabled" is a concurrent EnsureTable having done it.
		return fmt.Errorf("enable TTL on %s: %w", table, err)
	}
	return nil
}

// item is a record as written: attribute name to value.
type item = map[string]types.AttributeValue

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func key(pk, sk string) item { return item{attrPK: str(pk), attrSK: str(sk)} }

// docItem is the item of a record: its keys, its wire JSON and version 1.
func docItem(pk, sk string, doc any) (item, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	it := key(pk, sk)
	it[attrDoc] = str(string(b))
	it[attrVer] = num(1)
	return it, nil
}

func getS(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(it item, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func decodeDoc(it item, out any) error {
	if err := json.Unmarshal([]byte(getS(it, attrDoc)), out); err != nil {
		return fmt.Errorf("decode %s/%s: %w", getS(it, attrPK), getS(it, attrSK), err)
	}
	return nil
}

// get reads one item with a strongly consistent GetItem; nil when missing.
func (s *Store) get(ctx context.Context, pk, sk string) (item, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(pk, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// getRecord reads the record (pk, sk) of an id of a kind (one GetItem): an
// id without the kind's prefix, or no record, is the kind's not found.
func (s *Store) getRecord(ctx context.Context, kind, prefix, id, pk, sk string) (item, error) {
	if !platform.HasPrefix(id, prefix) {
		return nil, platform.NotFound(kind, id)
	}
	it, err := s.get(ctx, pk, sk)
	if err == nil && it == nil {
		err = platform.NotFound(kind, id)
	}
	return it, err
}

// transact runs a write transaction. When it is cancelled because a condition
// failed, onConflict maps the index of the failed item to the caller's error;
// the SDK reports one reason per item, in order.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem, onConflict func(i int) error) error {
	for i := range items {
		setTable(&items[i], &s.table)
	}
	s.unindexDue(items)
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		s.noteQueued(items)
		return nil
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) && onConflict != nil {
		for i, r := range tc.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return onConflict(i)
			}
		}
		// Reasons missing: report the first item's conflict.
		return onConflict(-1)
	}
	return err
}

func setTable(t *types.TransactWriteItem, table *string) {
	switch {
	case t.Put != nil:
		t.Put.TableName = table
	case t.Update != nil:
		t.Update.TableName = table
	case t.Delete != nil:
		t.Delete.TableName = table
	case t.ConditionCheck != nil:
		t.ConditionCheck.TableName = table
	}
}

func putNew(it item) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
}

func mustExist(pk, sk string) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		Key: key(pk, sk), ConditionExpression: aws.String("attribute_exists(pk)"),
	}}
}

// addCounter atomically adds delta to a numeric attribute of an existing item.
// With floor > 0 the update only applies while the current value is at least
// floor (so a counter of owners cannot drop to zero).
func addCounter(pk, sk, attr string, delta int64, floor int64) types.TransactWriteItem {
	u := &types.Update{
		Key:                      key(pk, sk),
		UpdateExpression:         aws.String("ADD #c :d"),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames: map[string]string{"#c": attr},
		ExpressionAttributeValues: item{
			":d": num(delta),
		},
	}
	if floor > 0 {
		u.ConditionExpression = aws.String("attribute_exists(pk) AND #c >= :f")
		u.ExpressionAttributeValues[":f"] = num(floor)
	}
	return types.TransactWriteItem{Update: u}
}

// replaceDoc rewrites a record's doc if its version is still ver (optimistic
// concurrency: a concurrent writer makes this fail instead of being lost).
func replaceDoc(pk, sk string, doc any, ver int64, extra map[string]types.AttributeValue) (types.TransactWriteItem, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	expr := "SET #doc = :doc, #ver = :next"
	names := map[string]string{"#doc": attrDoc, "#ver": attrVer}
	vals := item{":doc": str(string(b)), ":next": num(ver + 1), ":ver": num(ver)}
	i := 0
	for k, v := range extra {
		n, p := fmt.Sprintf("#x%d", i), fmt.Sprintf(":x%d", i)
		expr += ", " + n + " = " + p
		names[n], vals[p] = k, v
		i++
	}
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(pk, sk),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#ver = :ver"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}}, nil
}

// pause waits a random time growing with attempt (at most ~50 ms), so that
// writers competing for one item spread out.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(1+min(attempt, 6)*8) * time.Millisecond
	t := time.NewTimer(time.Duration(rand.Int64N(int64(d))) + time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// optimistic runs fn, a read-modify-write conditional on the version read,
// until it does not report errRetry: concurrent writers of one record each
// get their turn instead of one overwriting another. The bound is high
// because many parallel patches of one state all compete for it.
func optimistic(ctx context.Context, what string, fn func() error) error {
	for attempt := 0; attempt < 200; attempt++ {
		err := fn()
		if !errors.Is(err, errRetry) {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
	return platform.Errorf(platform.ErrResourceLocked, "%s is being changed concurrently, retry", what)
}

// Page asks for one page of a list: at most Limit items after Start (the
// last key of the previous page, nil for the first).
type Page struct {
	Limit int32
	Start map[string]string
}

// lastKey turns a LastEvaluatedKey (all our keys are strings) into the
// portable form the HTTP layer signs into a nextToken.
func lastKey(k item) map[string]string {
	if len(k) == 0 {
		return nil
	}
	out := make(map[string]string, len(k))
	for n := range k {
		out[n] = getS(k, n)
	}
	return out
}

func startKey(k map[string]string) item {
	if len(k) == 0 {
		return nil
	}
	out := make(item, len(k))
	for n, v := range k {
		out[n] = str(v)
	}
	return out
}

// queryPage runs one Query and returns its items and the key to continue from.
// With a filter, DynamoDB may return fewer than Limit items though more match:
// queryPage keeps reading (up to maxReads pages of Limit items) to fill the
// page, so a filtered page costs reads proportional to what it skips.
func (s *Store) queryPage(ctx context.Context, in *dynamodb.QueryInput, p Page) ([]item, map[string]string, error) {
	in.TableName = &s.table
	in.Limit = aws.Int32(p.Limit)
	in.ExclusiveStartKey = startKey(p.Start)
	var items []item
	const maxReads = 10
	for reads := 0; ; reads++ {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			if isValidation(err) && p.Start != nil {
				return nil, nil, platform.Invalid("invalid nextToken")
			}
			return nil, nil, err
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil, nil
		}
		if in.FilterExpression == nil || len(items) >= int(p.Limit) || reads+1 >= maxReads {
			if len(items) > int(p.Limit) {
				items = items[:p.Limit]
			}
			return items, lastKeyOf(in, items, out.LastEvaluatedKey), nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
		in.Limit = aws.Int32(p.Limit - int32(len(items)))
	}
}

// lastKeyOf is the key to resume after the last returned item.
func lastKeyOf(in *dynamodb.QueryInput, items []item, fallback item) map[string]string {
	if len(items) == 0 {
		return lastKey(fallback)
	}
	last := items[len(items)-1]
	k := map[string]string{attrPK: getS(last, attrPK), attrSK: getS(last, attrSK)}
	if in.IndexName != nil {
		switch *in.IndexName {
		case GSI1:
			k[attrGSI1PK], k[attrGSI1SK] = getS(last, attrGSI1PK), getS(last, attrGSI1SK)
		case GSI2:
			k[attrGSI2PK], k[attrGSI2SK] = getS(last, attrGSI2PK), getS(last, attrGSI2SK)
		}
	}
	return k
}

func isValidation(err error) bool {
	var apiErr interface{ ErrorCode() string }
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException"
}

// batchGet reads many items by key (strongly consistent), 100 keys a call,
// retrying unprocessed keys. Missing items are absent from the result.
func (s *Store) batchGet(ctx context.Context, keys []item) ([]item, error) {
	var out []item
	for len(keys) > 0 {
		n := min(len(keys), 100)
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys[:n], ConsistentRead: aws.Bool(true)}}
		keys = keys[n:]
		for tries := 0; len(req) > 0; tries++ {
			if tries > 8 {
				return nil, errors.New("batch get: unprocessed keys after retries")
			}
			if tries > 0 {
				time.Sleep(time.Duration(tries*tries) * 20 * time.Millisecond)
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, err
			}
			out = append(out, res.Responses[s.table]...)
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// batchGetByID reads the records of distinct ids (BatchGetItem, strongly
// consistent), keyed by id; missing ones are absent from the result.
func batchGetByID[T any](ctx context.Context, s *Store, ids []string, keyOf func(string) item, decode func(item) (string, T, error)) (map[string]T, error) {
	out := map[string]T{}
	seen := map[string]bool{}
	var keys []item
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			keys = append(keys, keyOf(id))
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		id, v, err := decode(it)
		if err != nil {
			return nil, err
		}
		out[id] = v
	}
	return out, nil
}

// batchDelete deletes many items by key (BatchWriteItem, 25 a call).
func (s *Store) batchDelete(ctx context.Context, keys []item) error {
	reqs := make([]types.WriteRequest, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
	}
	return s.batchWrite(ctx, reqs)
}

// batchPut writes independent items that need no transaction
// (BatchWriteItem, 25 a call).
func (s *Store) batchPut(ctx context.Context, items []item) error {
	reqs := make([]types.WriteRequest, 0, len(items))
	for _, it := range items {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
	}
	return s.batchWrite(ctx, reqs)
}

// batchWrite runs write requests 25 a call, retrying unprocessed ones.
func (s *Store) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	for len(reqs) > 0 {
		n := min(len(reqs), 25)
		req := map[string][]types.WriteRequest{s.table: reqs[:n]}
		reqs = reqs[n:]
		for tries := 0; len(req) > 0; tries++ {
			if tries > 8 {
				return errors.New("batch write: unprocessed items after retries")
			}
			if tries > 0 {
				time.Sleep(time.Duration(tries*tries) * 20 * time.Millisecond)
			}
			res, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
			if err != nil {
				return err
			}
			req = res.UnprocessedItems
		}
	}
	return nil
}

// queryAllDocs runs a Query to its end and decodes every item's doc: for
// small, bounded collections (a bot's keys, an account's tokens).
func queryAllDocs[T any](ctx context.Context, s *Store, in *dynamodb.QueryInput) ([]T, error) {
	items, err := queryAllItems(ctx, s, in)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		var v T
		if err := decodeDoc(it, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// queryAllItems runs a Query to its end (bounded collections only).
func queryAllItems(ctx context.Context, s *Store, in *dynamodb.QueryInput) ([]item, error) {
	in.TableName = &s.table
	var out []item
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Items...)
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// queryAllKeys returns the keys of every item under pk whose sk begins with
// prefix (a bounded child collection, e.g. a workspace's members).
func (s *Store) queryAllKeys(ctx context.Context, pk, prefix string) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(pk), ":p": str(prefix)},
		ProjectionExpression:      aws.String("pk, sk"),
		ConsistentRead:            aws.Bool(true),
	}
	return queryAllItems(ctx, s, in)
}
