package dynamo

// Storage of the Chat API (conversations, participants, users, messages,
// events, states, tag values). The items, their keys and the access pattern
// of every operation are documented in docs/chat.md; this file holds what
// the chat files share: keys, the encoding of indexed values, transactions
// retried on conflicts, and the reading of one sorted range into pages.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Sort keys and attributes of chat items.
const (
	skConv    = "CONV"
	skUser    = "USER"
	skMsg     = "MSG"
	skEvent   = "EVT"
	skIdx     = "IDX#"   // + index name: a record's entry in a value index
	skPart    = "PART#"  // + user id in a conversation, + conversation id in a user
	skMsgCopy = "MSG#"   // + createdAt#messageId: a message in its conversation
	skState   = "STATE#" // + state name
	skClaim   = "CLAIM#" // + kind#hash: a getOrCreate claim held by the record

	attrMsgs     = "msgs" // a conversation's message counter (atomic ADD)
	attrDeleting = "del"  // set while a conversation or user is being deleted
	attrValue    = "tv"   // the raw value of an index entry (listTagValues)
	attrObject   = "oid"  // the record an index entry, participant or claim points at
	attrConvID   = "cid"  // the conversation of a message
	// attrHasEvent marks a message (its record and its copy in its
	// conversation) whose message_created event lists in the
	// conversation's events through the copy rather than an entry of its
	// own (gsi2; docs/data-model.md, "Items per message"). A number (1):
	// the event has an item of its own, listed in the bot's events list
	// (gsi1). A string, the id of the outbox entry delivering it: the event
	// has no item while the message is there (or one written when its
	// delivery failed or its message changed, listed through the message
	// all the same) and is derived from the message when read
	// (messageEventDoc): the bot's events list merges the bot's messages
	// list (listMergedEvents).
	attrHasEvent = "ev"
)

// Partition keys. Every chat key holds the bot id, so a record of another
// bot is simply absent (404), never readable.
func convPK(bot, id string) string  { return "CONV#" + bot + "#" + id }
func userPK(bot, id string) string  { return "USER#" + bot + "#" + id }
func msgPK(bot, id string) string   { return "MSG#" + bot + "#" + id }
func eventPK(bot, id string) string { return "EVT#" + bot + "#" + id }
func claimPK(bot, kind, hash string) string {
	return "CLAIM#" + bot + "#" + kind + "#" + hash
}

// botList is the GSI partition listing a bot's records of one kind
// (CONVS, USERS, MSGS, EVTS) by creation time (gsi1) or update time (gsi2).
func botList(bot, kind string) string { return "BOT#" + bot + "#" + kind }

// Value indexes: each record has one index entry per indexed value (a tag, a
// conversation's channel and integration, a participant), in the GSI
// partition of that (record type, index name), sorted by value, then time.
func idxGSI(bot string, typ platform.TagType, name string) string {
	return "BOT#" + bot + "#IDX#" + string(typ) + "#" + name
}

const (
	idxChannel     = "CHANNEL"
	idxIntegration = "INTEGRATION"
	idxParticipant = "PART"
)

func idxTag(k string) string { return "TAG#" + encKey(k) }

// encValue encodes an indexed value for a sort key: hex keeps the values'
// byte order and cannot contain the '#' separator; values too long for a
// sort key (1 KiB) are replaced by their hash, which sorts after every hex
// string ('~').
func encValue(v string) string {
	if len(v) <= 256 {
		return hex.EncodeToString([]byte(v))
	}
	h := sha256.Sum256([]byte(v))
	return "~" + hex.EncodeToString(h[:])
}

// encKey bounds a tag name used inside a key.
func encKey(k string) string {
	if len(k) <= 256 {
		return k
	}
	h := sha256.Sum256([]byte(k))
	return "~" + hex.EncodeToString(h[:])
}

// timeKey is the sort key of a record in a time-ordered list.
func timeKey(ts, id string) string { return ts + "#" + id }

// idxKey is the sort key of an index entry: value, then time.
func idxKey(v, ts, id string) string { return encValue(v) + "#" + timeKey(ts, id) }

// valueSpan is the range of a value's entries in an index (all of them, or
// those within [from, to] of the index's time).
func valueSpan(v, from, to string) (string, string) {
	p := encValue(v) + "#"
	if to == "" {
		return p + from, p + "~"
	}
	return p + from, p + to + "#~"
}

// timeSpan bounds a time-ordered list to [from, to] (each may be empty).
func timeSpan(from, to string) (string, string) {
	if to != "" {
		to += "#~"
	}
	return from, to
}

// maxDocBytes keeps every record within DynamoDB's 400 KB item limit (the
// rest of an item is small), so an oversized payload is a clear 413 rather
// than a failed write.
const maxDocBytes = 350_000

// replaceVersioned rewrites a chat record's doc if its version is still
// ver (a concurrent writer makes the transaction fail on it: retry), with
// marshalDoc's size check.
func replaceVersioned(pk, sk string, doc any, ver int64) (types.TransactWriteItem, error) {
	d, err := marshalDoc(doc)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(pk, sk),
		UpdateExpression:          aws.String("SET #doc = :doc, #ver = :next"),
		ConditionExpression:       aws.String("#ver = :ver"),
		ExpressionAttributeNames:  map[string]string{"#doc": attrDoc, "#ver": attrVer},
		ExpressionAttributeValues: item{":doc": str(d), ":next": num(ver + 1), ":ver": num(ver)},
	}}, nil
}

func marshalDoc(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if len(b) > maxDocBytes {
		return "", platform.Errorf(platform.ErrPayloadTooLarge, "the record is %d bytes; at most %d are allowed", len(b), maxDocBytes)
	}
	return string(b), nil
}

// chatItem is a record item: keys, doc and version 1.
func chatItem(pk, sk string, doc any) (item, error) {
	d, err := marshalDoc(doc)
	if err != nil {
		return nil, err
	}
	it := key(pk, sk)
	it[attrDoc] = str(d)
	it[attrVer] = num(1)
	return it, nil
}

// conditionFailed reports which item of a transaction failed its condition.
type conditionFailed struct{ index int }

func (c *conditionFailed) Error() string { return "transaction condition failed" }

// failedAt returns the index of the transaction item whose condition failed,
// or -1 when err is not a failed condition.
func failedAt(err error) int {
	var c *conditionFailed
	if errors.As(err, &c) {
		return c.index
	}
	return -1
}

// txWrite runs a write transaction. A failed condition comes back as a
// *conditionFailed naming the item; a transaction cancelled by a concurrent
// one touching the same items (TransactionConflict: a conversation's counter
// under parallel messages, say) or by throttling is retried after a short,
// random pause, since nothing of it was applied.
func (s *Store) txWrite(ctx context.Context, items []types.TransactWriteItem) error {
	for i := range items {
		setTable(&items[i], &s.table)
	}
	stampTrace(ctx, items)
	s.unindexDue(items)
	for attempt := 0; ; attempt++ {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			s.noteQueued(items)
			return nil
		}
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) {
			return err
		}
		retry := false
		for i, r := range tc.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				return &conditionFailed{index: i}
			case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				retry = true
			}
		}
		if !retry || attempt >= 20 {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

func put(it item) types.TransactWriteItem { return types.TransactWriteItem{Put: &types.Put{Item: it}} }

// rewrite writes it over the existing item of its key by setting each of its
// attributes. An index entry whose GSI keys move is rewritten this way rather
// than put: the embedded DynamoDB (minidyn) does not reindex an item that a
// PutItem overwrites with other GSI key values, while UpdateItem does.
func rewrite(it item) types.TransactWriteItem {
	names := map[string]string{}
	vals := item{}
	expr := ""
	i := 0
	for _, name := range sortedAttrs(it) {
		if name == attrPK || name == attrSK {
			continue
		}
		n, v := fmt.Sprintf("#a%d", i), fmt.Sprintf(":v%d", i)
		names[n], vals[v] = name, it[name]
		if expr != "" {
			expr += ", "
		}
		expr += n + " = " + v
		i++
	}
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(getS(it, attrPK), getS(it, attrSK)),
		UpdateExpression:          aws.String("SET " + expr),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}}
}

func sortedAttrs(it item) []string {
	out := make([]string, 0, len(it))
	for k := range it {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// entryWrites writes a record's index entries after a change: a new entry
// is put, an existing one (its sort key in had) rewritten.
func entryWrites(entries []item, had map[string]bool) []types.TransactWriteItem {
	w := make([]types.TransactWriteItem, 0, len(entries))
	for _, e := range entries {
		if had[getS(e, attrSK)] {
			w = append(w, rewrite(e))
		} else {
			w = append(w, put(e))
		}
	}
	return w
}

func del(pk, sk string) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{Key: key(pk, sk)}}
}

// liveCheck requires a conversation or user to exist and not be under
// deletion.
func liveCheck(pk, sk string) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		Key:                      key(pk, sk),
		ConditionExpression:      aws.String("attribute_exists(pk) AND attribute_not_exists(#del)"),
		ExpressionAttributeNames: map[string]string{"#del": attrDeleting},
	}}
}

// span is one sorted range of the table or of a GSI: the items of partition
// pk whose sort key is within [lo, hi] ("" leaves a bound open), in
// ascending or descending order.
type span struct {
	index  string // "" (the table, strongly consistent), GSI1 or GSI2
	pk     string
	lo, hi string
	desc   bool
	// shards are more partition keys of the same list (a list written
	// over several keys, listKeys): read with pk and merged in order.
	shards []string
}

// Lists of a bot written over several keys (docs/data-model.md, "Heat"):
// a bot's messages and events are each a list every message adds to, so
// one key would cap a bot at what one partition key takes (1,000 write
// units a second). Each entry goes to one of listShards keys by a hash of
// its id; a page reads every key after the same position and merges them
// (readMerged). The unsharded key, which entries written before the
// shards are in, is read with them.
var listShards = map[string]int{listMsgs: 8, listEvents: 16}

// listShard is the key of the bot's list kind that the entry of id goes
// to (the one key of an unsharded list).
func listShard(bot, kind, id string) string {
	n := listShards[kind]
	if n == 0 {
		return botList(bot, kind)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return fmt.Sprintf("%s#%02d", botList(bot, kind), h.Sum32()%uint32(n))
}

// listKeys are every key of the bot's list kind: the unsharded one first.
func listKeys(bot, kind string) []string {
	out := []string{botList(bot, kind)}
	for i := range listShards[kind] {
		out = append(out, fmt.Sprintf("%s#%02d", botList(bot, kind), i))
	}
	return out
}

// listSpan is a span over every key of the bot's list kind.
func listSpan(index, bot, kind string, desc bool) span {
	keys := listKeys(bot, kind)
	return span{index: index, pk: keys[0], shards: keys[1:], desc: desc}
}

func (sp span) keyNames() (string, string) {
	switch sp.index {
	case GSI1:
		return attrGSI1PK, attrGSI1SK
	case GSI2:
		return attrGSI2PK, attrGSI2SK
	}
	return attrPK, attrSK
}

// sortKey is an item's sort key in the span's index.
func (sp span) sortKey(it item) string {
	_, sk := sp.keyNames()
	return getS(it, sk)
}

// read returns up to limit items of the span after position after (a sort
// key; exclusive, "" for the start), and whether more may follow. Pages
// resume from a sort key rather than from DynamoDB's LastEvaluatedKey: the
// position stays valid when the item at it is deleted in between, and it
// combines with the span's bounds in one key condition.
func (s *Store) read(ctx context.Context, sp span, after string, limit int) ([]item, bool, error) {
	if len(sp.shards) > 0 {
		return s.readMerged(ctx, sp, after, limit)
	}
	lo, hi := sp.lo, sp.hi
	if after != "" {
		if sp.desc && (hi == "" || after < hi) {
			hi = after
		}
		if !sp.desc && after > lo {
			lo = after
		}
		limit++ // bounds are inclusive: the item at after may come back first
	}
	if lo != "" && hi != "" && lo > hi {
		return nil, false, nil
	}
	pkName, skName := sp.keyNames()
	cond := "#pk = :pk"
	names := map[string]string{"#pk": pkName}
	vals := item{":pk": str(sp.pk)}
	switch {
	case lo != "" && hi != "":
		cond += " AND #sk BETWEEN :lo AND :hi"
		vals[":lo"], vals[":hi"] = str(lo), str(hi)
	case lo != "":
		cond += " AND #sk >= :lo"
		vals[":lo"] = str(lo)
	case hi != "":
		cond += " AND #sk <= :hi"
		vals[":hi"] = str(hi)
	}
	if len(vals) > 1 {
		names["#sk"] = skName
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ScanIndexForward:          aws.Bool(!sp.desc),
		Limit:                     aws.Int32(int32(limit)),
	}
	if sp.index == "" {
		in.ConsistentRead = aws.Bool(true)
	} else {
		in.IndexName = aws.String(sp.index)
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, false, err
	}
	items := out.Items
	if after != "" && len(items) > 0 && getS(items[0], skName) == after {
		items = items[1:]
	}
	return items, len(out.LastEvaluatedKey) > 0, nil
}

// readMerged is read over the keys of a sharded list (span.shards): each
// key is read after the same position (at once, limit/keys+2 items each),
// and the items merged in the list's order up to the first position where
// a key with more stopped (past it, that key's next items could come
// first; they are read by the next call, from the position reached). The
// sort keys of a list are unique (time#id), so one position serves every
// key. Cost: one Query per key per call.
func (s *Store) readMerged(ctx context.Context, sp span, after string, limit int) ([]item, bool, error) {
	keys := append([]string{sp.pk}, sp.shards...)
	per := limit/len(keys) + 2
	type result struct {
		items []item
		more  bool
		err   error
	}
	results := make([]result, len(keys))
	var wg sync.WaitGroup
	for i, pk := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := sp
			one.pk, one.shards = pk, nil
			items, more, err := s.read(ctx, one, after, per)
			results[i] = result{items, more, err}
		}()
	}
	wg.Wait()
	first := func(a, b string) bool { // a comes before b in the list's order
		if sp.desc {
			return a > b
		}
		return a < b
	}
	var (
		all           []item
		bound         string
		bounded, more bool
	)
	for _, r := range results {
		if r.err != nil {
			return nil, false, r.err
		}
		all = append(all, r.items...)
		if r.more && len(r.items) > 0 {
			more = true
			if last := sp.sortKey(r.items[len(r.items)-1]); !bounded || first(last, bound) {
				bound, bounded = last, true
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return first(sp.sortKey(all[i]), sp.sortKey(all[j])) })
	if bounded {
		n := 0
		for n < len(all) && !first(bound, sp.sortKey(all[n])) {
			n++
		}
		all = all[:n]
	}
	if len(all) > limit {
		all, more = all[:limit], true
	}
	return all, more, nil
}

// Reading limits of one page: a filter the index does not serve makes a page
// read more items than it answers; past maxPageReads the page is answered
// short, with a nextToken to continue from where it stopped.
const (
	maxPageReads = 1000
	maxBatch     = 100
)

// collect fills a page of up to size records from a span, starting after
// position after. load turns a batch of the span's items into records,
// nil for an item the filters reject (it may read more, e.g. the records an
// index points at). collect reads size+1 kept records to know whether a
// next page exists; next is the position to resume from ("" at the end).
// budget bounds the items read (0: maxPageReads).
func collect[T any](ctx context.Context, s *Store, sp span, after string, size, budget int, load func([]item) ([]*T, error)) ([]T, string, error) {
	if budget == 0 {
		budget = maxPageReads
	}
	out := make([]T, 0, size)
	var pos []string
	cursor, batch, read := after, size+1, 0
	for {
		items, more, err := s.read(ctx, sp, cursor, min(batch, maxBatch))
		if err != nil {
			return nil, "", err
		}
		read += len(items)
		vals, err := load(items)
		if err != nil {
			return nil, "", err
		}
		for i, it := range items {
			cursor = sp.sortKey(it)
			if vals[i] == nil {
				continue
			}
			out, pos = append(out, *vals[i]), append(pos, cursor)
			if len(out) > size {
				return out[:size], pos[size-1], nil
			}
		}
		if !more {
			return out, "", nil
		}
		if read >= budget {
			return out, cursor, nil
		}
		// A filter is skipping items: read larger batches.
		batch = max(size+1-len(out), 2*batch)
	}
}

// keep returns a loader that decodes the span's own items with decode and
// keeps those ok accepts (nil: all).
func keep[T any](decode func(item) (T, bool, error), ok func(T) bool) func([]item) ([]*T, error) {
	return func(items []item) ([]*T, error) {
		out := make([]*T, len(items))
		for i, it := range items {
			if it == nil {
				continue // a record deleted since indexed (see viaEntries)
			}
			v, live, err := decode(it)
			if err != nil {
				return nil, err
			}
			if live && (ok == nil || ok(v)) {
				out[i] = &v
			}
		}
		return out, nil
	}
}

// getMany reads items by key in one BatchGetItem (per 100 keys) and returns
// them by pk+"\x00"+sk.
func (s *Store) getMany(ctx context.Context, keys []item) (map[string]item, error) {
	out := make(map[string]item, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	seen := make(map[string]bool, len(keys))
	uniq := keys[:0:0]
	for _, k := range keys {
		id := getS(k, attrPK) + "\x00" + getS(k, attrSK)
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, k)
		}
	}
	got, err := s.batchGet(ctx, uniq)
	if err != nil {
		return nil, err
	}
	for _, it := range got {
		out[getS(it, attrPK)+"\x00"+getS(it, attrSK)] = it
	}
	return out, nil
}

func keyID(pk, sk string) string { return pk + "\x00" + sk }

// deleteKeys deletes items by key in batches (children of a record being
// deleted, independent of each other).
func (s *Store) deleteKeys(ctx context.Context, keys []item) error {
	seen := make(map[string]bool, len(keys))
	uniq := keys[:0:0]
	for _, k := range keys {
		id := keyID(getS(k, attrPK), getS(k, attrSK))
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, k)
		}
	}
	return s.batchDelete(ctx, uniq)
}

// partition reads every item of a partition (strongly consistent), page by
// page, projecting the attributes named.
func (s *Store) partition(ctx context.Context, pk string, attrs ...string) ([]item, error) {
	names := map[string]string{"#pk": attrPK, "#sk": attrSK}
	proj := "#pk, #sk"
	for i, a := range attrs {
		n := "#a" + string(rune('0'+i))
		names[n] = a
		proj += ", " + n
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: item{":pk": str(pk)},
		ProjectionExpression:      aws.String(proj),
		ConsistentRead:            aws.Bool(true),
	}
	return queryAllItems(ctx, s, in)
}

// claimHash identifies what a getOrCreate call looks for: its scope (e.g.
// integration and channel) and its discriminating tags.
func claimHash(parts []string, tags map[string]string, keys []string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{1})
		h.Write([]byte(tags[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// positionOf and startOf convert where a chat list resumes (the sort key
// after which the next page starts) to and from the portable form the HTTP
// layer signs into the nextToken (Page.Start).
func positionOf(p Page) string {
	if p.Start == nil {
		return ""
	}
	return p.Start["after"]
}

func startOf(next string) map[string]string {
	if next == "" {
		return nil
	}
	return map[string]string{"after": next}
}
