package dynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Items of the Tables API (docs/tables.md):
//
//	table       BOTTABLES#<botId>   TABLE#<name>   doc, ver, tableId, nextId, rowCount, staleCount
//	table id    TABLE#<tableId>     TABLE          botId, name
//	row         TROWS#<tableId>#<id mod shards> <id, 10 digits> doc, ver
//	            (TROWS#<tableId> for a table of the previous layout)
//	key index   TKEY#<tableId>#<ix> <key JSON>     row
//	job         TJOBS#<tableId>     <jobId>        doc, ver, ttl
func botTablesPK(bot string) string       { return "BOTTABLES#" + bot }
func tableNameSK(name string) string      { return "TABLE#" + name }
func tableIDPK(id string) string          { return "TABLE#" + id }
func tableRowsPK(table string) string     { return "TROWS#" + table }
func tableKeysPK(table, ix string) string { return "TKEY#" + table + "#" + ix }
func tableJobsPK(table string) string     { return "TJOBS#" + table }

// RowSet is where a table's rows are: the table's id and the number of
// partitions its rows spread over (TableState.RowShards; 0 or 1: the one
// partition of the previous layout).
type RowSet struct {
	Table  string
	Shards int
}

// RowSet returns where the table's rows are.
func (r TableRecord) RowSet() RowSet { return RowSet{Table: r.ID, Shards: r.State.RowShards} }

// pk is the partition of row id.
func (rs RowSet) pk(id int64) string {
	if rs.Shards <= 1 {
		return tableRowsPK(rs.Table)
	}
	return tableRowsPK(rs.Table) + "#" + strconv.FormatInt(id%int64(rs.Shards), 10)
}

// partitions are all the partitions of the rows.
func (rs RowSet) partitions() []string {
	if rs.Shards <= 1 {
		return []string{tableRowsPK(rs.Table)}
	}
	out := make([]string, rs.Shards)
	for i := range out {
		out[i] = tableRowsPK(rs.Table) + "#" + strconv.Itoa(i)
	}
	return out
}

// rowSK is a row's sort key: its id zero-padded to 10 digits (row ids
// are at most 2^31-1), so that string order is id order.
func rowSK(id int64) string { return fmt.Sprintf("%010d", id) }

const (
	skTableID      = "TABLE"
	attrTableID    = "tableId"
	attrNextID     = "nextId"
	attrRowCount   = "rowCount"
	attrStaleCount = "staleCount"
	attrKeyRow     = "row"
	attrKeyAt      = "at"
)

// ErrVersionConflict reports that a record changed since it was read: the
// caller re-reads it and tries again.
var ErrVersionConflict = errors.New("the record changed since it was read")

// tableDoc is how a table is stored: its wire shape and its state.
type tableDoc struct {
	platform.Table
	State platform.TableState `json:"_state"`
}

// TableRecord is a table as read: wire shape, state, counters, version.
type TableRecord struct {
	platform.Table
	State  platform.TableState
	BotID  string
	NextID int64 // the last row id given out
	Rows   int64
	Stale  int64
	ver    int64
}

// encodeDoc renders a document without HTML escaping: row documents are
// searched for canonical values as substrings (tables.Filter.Needles),
// which must be encoded the same way.
func encodeDoc(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

func tableFrom(it item, botID string) (TableRecord, error) {
	var d tableDoc
	if err := decodeDoc(it, &d); err != nil {
		return TableRecord{}, err
	}
	return TableRecord{
		Table: d.Table, State: d.State, BotID: botID,
		NextID: getN(it, attrNextID), Rows: max(getN(it, attrRowCount), 0), Stale: max(getN(it, attrStaleCount), 0),
		ver: getN(it, attrVer),
	}, nil
}

// CreateTable stores a new table of bot: its item under its name (unique
// per bot) and the item resolving its id, in one transaction. nextID is
// the last row id already given out (a duplicate continues its source's
// ids); rows and stale preset the counters.
func (s *Store) CreateTable(ctx context.Context, botID string, t platform.Table, st platform.TableState, nextID, rows, stale int64) error {
	doc, err := encodeDoc(tableDoc{Table: t, State: st})
	if err != nil {
		return err
	}
	named := key(botTablesPK(botID), tableNameSK(t.Name))
	named[attrDoc], named[attrVer] = str(doc), num(1)
	named[attrTableID] = str(t.ID)
	named[attrNextID], named[attrRowCount], named[attrStaleCount] = num(nextID), num(rows), num(stale)
	byID := key(tableIDPK(t.ID), skTableID)
	byID["botId"], byID["name"] = str(botID), str(t.Name)
	return s.transact(ctx, []types.TransactWriteItem{putNew(named), putNew(byID)}, func(int) error {
		return platform.Errorf(platform.ErrAlreadyExists, "table %q already exists", t.Name)
	})
}

// GetTable reads a table of bot by name or by id: one GetItem by name,
// two by id (the id item names the table).
func (s *Store) GetTable(ctx context.Context, botID, ref string) (TableRecord, error) {
	name := ref
	if platform.HasPrefix(ref, platform.PrefixTable) {
		it, err := s.get(ctx, tableIDPK(ref), skTableID)
		if err != nil {
			return TableRecord{}, err
		}
		if it == nil || getS(it, "botId") != botID {
			return TableRecord{}, platform.NotFound("table", ref)
		}
		name = getS(it, "name")
	}
	if name == "" || len(name) > 200 {
		return TableRecord{}, platform.NotFound("table", ref)
	}
	it, err := s.get(ctx, botTablesPK(botID), tableNameSK(name))
	if err != nil {
		return TableRecord{}, err
	}
	if it == nil || (name != ref && getS(it, attrTableID) != ref) {
		return TableRecord{}, platform.NotFound("table", ref)
	}
	return tableFrom(it, botID)
}

// ListTables lists a bot's tables by name (one Query a page of 1 MB).
func (s *Store) ListTables(ctx context.Context, botID string) ([]TableRecord, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(botTablesPK(botID)), ":p": str("TABLE#")},
		ConsistentRead:            aws.Bool(true),
	}
	out := []TableRecord{}
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			t, err := tableFrom(it, botID)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// SaveTable writes a changed table over rec, as read: conditional on its
// version, so a concurrent change makes it fail with ErrVersionConflict.
// A renamed table moves to its new name item in a transaction that also
// checks that no row count or id changed meanwhile (they move with it).
// staleAll sets the stale count to the row count (every row became stale).
func (s *Store) SaveTable(ctx context.Context, rec TableRecord, t platform.Table, st platform.TableState, staleAll bool) error {
	doc, err := encodeDoc(tableDoc{Table: t, State: st})
	if err != nil {
		return err
	}
	if t.Name == rec.Name {
		expr := "SET #doc = :doc, #ver = :next"
		names := map[string]string{"#doc": attrDoc, "#ver": attrVer, "#tid": attrTableID}
		if staleAll {
			expr += ", #stale = #rows"
			names["#stale"], names["#rows"] = attrStaleCount, attrRowCount
		}
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &s.table,
			Key:                       key(botTablesPK(rec.BotID), tableNameSK(rec.Name)),
			UpdateExpression:          aws.String(expr),
			ConditionExpression:       aws.String("#ver = :ver AND #tid = :tid"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: item{":doc": str(doc), ":next": num(rec.ver + 1), ":ver": num(rec.ver), ":tid": str(rec.ID)},
		})
		if condFailed(err) {
			return ErrVersionConflict
		}
		return err
	}
	stale := rec.Stale
	if staleAll {
		stale = rec.Rows
	}
	named := key(botTablesPK(rec.BotID), tableNameSK(t.Name))
	named[attrDoc], named[attrVer] = str(doc), num(rec.ver+1)
	named[attrTableID] = str(t.ID)
	named[attrNextID], named[attrRowCount], named[attrStaleCount] = num(rec.NextID), num(rec.Rows), num(stale)
	return s.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			Key:                 key(botTablesPK(rec.BotID), tableNameSK(rec.Name)),
			ConditionExpression: aws.String("#ver = :ver AND #tid = :tid AND #n = :n AND #r = :r AND #s = :s"),
			ExpressionAttributeNames: map[string]string{
				"#ver": attrVer, "#tid": attrTableID, "#n": attrNextID, "#r": attrRowCount, "#s": attrStaleCount,
			},
			ExpressionAttributeValues: item{
				":ver": num(rec.ver), ":tid": str(rec.ID), ":n": num(rec.NextID), ":r": num(rec.Rows), ":s": num(rec.Stale),
			},
		}},
		putNew(named),
		{Update: &types.Update{
			Key:                       key(tableIDPK(rec.ID), skTableID),
			UpdateExpression:          aws.String("SET #name = :name"),
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			ExpressionAttributeNames:  map[string]string{"#name": "name"},
			ExpressionAttributeValues: item{":name": str(t.Name)},
		}},
	}, func(i int) error {
		if i == 1 {
			return platform.Errorf(platform.ErrAlreadyExists, "table %q already exists", t.Name)
		}
		return ErrVersionConflict
	})
}

// FinishFill writes a table filled by a duplicate job with its final row
// and stale counts (the job counted them; nothing else wrote the table
// while it was being filled), conditional on its version.
func (s *Store) FinishFill(ctx context.Context, rec TableRecord, t platform.Table, st platform.TableState, rows, stale int64) error {
	doc, err := encodeDoc(tableDoc{Table: t, State: st})
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 key(botTablesPK(rec.BotID), tableNameSK(rec.Name)),
		UpdateExpression:    aws.String("SET #doc = :doc, #ver = :next, #rows = :rows, #stale = :stale"),
		ConditionExpression: aws.String("#ver = :ver AND #tid = :tid"),
		ExpressionAttributeNames: map[string]string{
			"#doc": attrDoc, "#ver": attrVer, "#tid": attrTableID, "#stale": attrStaleCount, "#rows": attrRowCount,
		},
		ExpressionAttributeValues: item{
			":doc": str(doc), ":next": num(rec.ver + 1), ":ver": num(rec.ver), ":tid": str(rec.ID),
			":rows": num(rows), ":stale": num(stale),
		},
	})
	if condFailed(err) {
		return ErrVersionConflict
	}
	return err
}

// DeleteTable deletes a table: its name and id items at once (it is gone
// for every caller), then its rows, key index and jobs.
func (s *Store) DeleteTable(ctx context.Context, rec TableRecord) error {
	err := s.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			Key:                       key(botTablesPK(rec.BotID), tableNameSK(rec.Name)),
			ConditionExpression:       aws.String("#tid = :tid"),
			ExpressionAttributeNames:  map[string]string{"#tid": attrTableID},
			ExpressionAttributeValues: item{":tid": str(rec.ID)},
		}},
		{Delete: &types.Delete{Key: key(tableIDPK(rec.ID), skTableID)}},
	}, func(int) error { return platform.NotFound("table", rec.Name) })
	if err != nil {
		return err
	}
	for _, pk := range append(rec.RowSet().partitions(), tableJobsPK(rec.ID)) {
		if err := s.purge(ctx, pk); err != nil {
			return err
		}
	}
	// Column ids are c1..c<NextColumn>: every index partition the table
	// ever had, also of columns removed since.
	for n := 1; n <= rec.State.NextColumn; n++ {
		if err := s.purge(ctx, tableIndexPK(rec.ID, "c"+strconv.Itoa(n))); err != nil {
			return err
		}
	}
	if rec.State.KeyIndex != "" {
		return s.purge(ctx, tableKeysPK(rec.ID, rec.State.KeyIndex))
	}
	return nil
}

// purge deletes every item of a partition, a page of keys at a time.
func (s *Store) purge(ctx context.Context, pk string) error {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(pk)},
		ProjectionExpression:      aws.String("pk, sk"),
	}
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return err
		}
		if err := s.batchDelete(ctx, out.Items); err != nil {
			return err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// ReserveRowIDs gives out n new row ids of a table with one atomic ADD on
// its item: the ids are (last-n, last]. It does not count rows: rows are
// counted by the transactions that write them (InsertRows), so a crash in
// between loses ids, never count accuracy. It is conditional on the
// table's version, so rows are only created against the schema they were
// validated with: a schema change meanwhile gives ErrVersionConflict.
func (s *Store) ReserveRowIDs(ctx context.Context, rec TableRecord, n int64) (int64, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 key(botTablesPK(rec.BotID), tableNameSK(rec.Name)),
		UpdateExpression:    aws.String("ADD #n :n"),
		ConditionExpression: aws.String("#ver = :ver AND #tid = :tid AND #n <= :max"),
		ExpressionAttributeNames: map[string]string{
			"#n": attrNextID, "#ver": attrVer, "#tid": attrTableID,
		},
		ExpressionAttributeValues: item{
			":n": num(n), ":ver": num(rec.ver), ":tid": str(rec.ID),
			":max": num(platform.MaxTableRowID - n),
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	if condFailed(err) {
		return 0, ErrVersionConflict
	}
	if err != nil {
		return 0, err
	}
	return getN(out.Attributes, attrNextID), nil
}

// countRows is the write moving a table's row and stale counts, made in the
// transaction that writes or deletes the rows counted (so the counts are
// exact after any crash); conditional on the table still being this one.
func countRows(rec TableRecord, rows, stale int64) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(botTablesPK(rec.BotID), tableNameSK(rec.Name)),
		UpdateExpression:          aws.String("ADD #r :r, #s :s"),
		ConditionExpression:       aws.String("#tid = :tid"),
		ExpressionAttributeNames:  map[string]string{"#r": attrRowCount, "#s": attrStaleCount, "#tid": attrTableID},
		ExpressionAttributeValues: item{":r": num(rows), ":s": num(stale), ":tid": str(rec.ID)},
	}}
}

// Row writes go 99 rows (plus the count) to a transaction, under 3.5 MB
// (DynamoDB allows 100 items and 4 MB).
const (
	rowsPerTx     = 99
	rowTxMaxBytes = 3500 << 10
)

// txRetry runs a transaction, again while it is cancelled only by other
// transactions on the same items (the table's count item is shared by every
// concurrent row write of the table).
func (s *Store) txRetry(ctx context.Context, items []types.TransactWriteItem, onConflict func(i int) error) error {
	for attempt := 0; ; attempt++ {
		err := s.transact(ctx, items, onConflict)
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) || attempt >= 8 || !onlyTxConflicts(tc) {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

func onlyTxConflicts(tc *types.TransactionCanceledException) bool {
	seen := false
	for _, r := range tc.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "TransactionConflict":
			seen = true
		case "", "None":
		default:
			return false
		}
	}
	return seen
}

// InsertRows writes new rows (fresh ids from ReserveRowIDs) and counts
// them, stale[i] telling whether rows[i] is stale. keys[i], when keys is
// not nil, are rows[i]'s column index entries.
//
// The entries are written first, by BatchWriteItem (25 a call, several
// calls at once, a write unit each), then the rows with the table's count
// update in transactions of up to 99 rows (rowsPerTx), as before the
// index existed. An entry is only a pointer: a find reads the row it names
// and evaluates it against the whole filter, skipping an id whose row is
// not there. So every row that lands has its entries (the index misses no
// row, even after a crash between the two steps), and an entry written for
// a row that never landed (a crash, a failed transaction: its id is never
// given again) costs a read, never a wrong answer. The counts stay exact:
// they move in the rows' transactions. Entries of a table deleted or
// replaced meanwhile (a 404) are deleted again.
func (s *Store) InsertRows(ctx context.Context, rec TableRecord, rows []platform.TableRow, stale []bool, keys [][]platform.TableIndexKey) error {
	items := make([]item, len(rows))
	sizes := make([]int, len(rows))
	counts := make([]int, len(rows))
	for i, r := range rows {
		it, err := rowItem(rec.RowSet(), r, 1)
		if err != nil {
			return err
		}
		items[i], sizes[i], counts[i] = it, len(getS(it, attrDoc))+64, 1
	}
	chunks := txChunks(sizes, counts, rowsPerTx)
	// The entries of each chunk's rows, written ahead of them: the writers
	// go through the chunks in order, so chunk k's rows are written while
	// later chunks' entries are.
	var entries [][]item
	if keys != nil {
		entries = make([][]item, len(chunks))
		for k, c := range chunks {
			for i := c[0]; i < c[1]; i++ {
				for _, ik := range keys[i] {
					entries[k] = append(entries[k], key(tableIndexPK(rec.ID, ik.Col), indexSK(ik, rows[i].ID)))
				}
			}
		}
	}
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := s.writeAhead(ectx, entries)
	written := 0 // chunks whose entries' outcome was taken
	for k, c := range chunks {
		if entries != nil {
			if err := <-ready[k]; err != nil {
				return err
			}
			written = k + 1
		}
		w := make([]types.TransactWriteItem, 0, c[1]-c[0]+1)
		nStale := int64(0)
		for i := c[0]; i < c[1]; i++ {
			w = append(w, putNew(items[i]))
			if stale[i] {
				nStale++
			}
		}
		w = append(w, countRows(rec, int64(c[1]-c[0]), nStale))
		last := len(w) - 1
		err := s.txRetry(ctx, w, func(i int) error {
			if i == last || i < 0 {
				return platform.NotFound("table", rec.Name)
			}
			return fmt.Errorf("row %d already exists", rows[c[0]+i].ID)
		})
		if platform.TypeOf(err) == platform.ErrResourceNotFound && entries != nil {
			// The table went: nothing reads its entries again, and those
			// written after its purge would stay. Remove what was written
			// (best effort), once the writers have stopped.
			cancel()
			for j := written; j < len(ready); j++ {
				<-ready[j]
			}
			var all []item
			for _, e := range entries {
				all = append(all, e...)
			}
			_ = s.batchDeleteParallel(context.WithoutCancel(ctx), all)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeAhead writes groups of independent items (each group by
// BatchWriteItem, 25 items a call, entryWriters calls at once, the groups
// in order) and returns a channel per group that gives its outcome once.
func (s *Store) writeAhead(ctx context.Context, groups [][]item) []chan error {
	ready := make([]chan error, len(groups))
	type call struct {
		group int
		reqs  []types.WriteRequest
	}
	var calls []call
	left := make([]int, len(groups))
	for g, items := range groups {
		ready[g] = make(chan error, 1)
		if len(items) == 0 {
			ready[g] <- nil
			continue
		}
		for len(items) > 0 {
			n := min(len(items), 25)
			reqs := make([]types.WriteRequest, n)
			for i := range n {
				reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: items[i]}}
			}
			calls, items = append(calls, call{g, reqs}), items[n:]
			left[g]++
		}
	}
	if len(calls) == 0 {
		return ready
	}
	var mu sync.Mutex
	errs := make([]error, len(groups))
	next := make(chan call)
	for range min(entryWriters, len(calls)) {
		go func() {
			for c := range next {
				err := s.batchWrite(ctx, c.reqs)
				mu.Lock()
				errs[c.group] = errors.Join(errs[c.group], err)
				left[c.group]--
				if left[c.group] == 0 {
					ready[c.group] <- errs[c.group]
				}
				mu.Unlock()
			}
		}()
	}
	go func() {
		defer close(next)
		for _, c := range calls {
			select {
			case next <- c:
			case <-ctx.Done():
				// The calls not started fail their groups.
				mu.Lock()
				errs[c.group] = errors.Join(errs[c.group], ctx.Err())
				left[c.group]--
				if left[c.group] == 0 {
					ready[c.group] <- errs[c.group]
				}
				mu.Unlock()
			}
		}
	}()
	return ready
}

// entryWriters is how many BatchWriteItem calls of index entries run at
// once (the entries are independent items: concurrent calls share the
// embedded DynamoDB's fsyncs, and DynamoDB's partitions).
const entryWriters = 16

func (s *Store) batchDeleteParallel(ctx context.Context, keys []item) error {
	reqs := make([]types.WriteRequest, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
	}
	return s.batchWriteParallel(ctx, reqs)
}

func (s *Store) batchWriteParallel(ctx context.Context, reqs []types.WriteRequest) error {
	var groups [][]types.WriteRequest
	for len(reqs) > 0 {
		n := min(len(reqs), 25)
		groups, reqs = append(groups, reqs[:n]), reqs[n:]
	}
	if len(groups) <= 1 {
		for _, g := range groups {
			return s.batchWrite(ctx, g)
		}
		return nil
	}
	errs := make([]error, len(groups))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(entryWriters, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range next {
				errs[g] = s.batchWrite(ctx, groups[g])
			}
		}()
	}
	for g := range groups {
		next <- g
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// DeleteRows deletes rows read at their versions (rows[i].Ver), and
// uncounts them, stale[i] telling whether rows[i] is stale, in
// transactions of up to 99 rows with the table's count update. When a row
// changed or went since it was read, the chunk is read again and what is
// still there deleted at its new version; the rows deleted are returned (a
// concurrent delete of a row counts it once).
//
// keysOf, when not nil, gives a row's column index entries (at most
// maxKeys), deleted with it.
func (s *Store) DeleteRows(ctx context.Context, rec TableRecord, rows []RowRecord, isStale func(platform.TableRow) bool, keysOf func(*platform.TableRow) []platform.TableIndexKey, maxKeys int) ([]RowRecord, error) {
	var deleted []RowRecord
	perTx := rowsPerTx
	if keysOf != nil {
		// A chunk read again after a conflict may hold more entries than
		// first seen: size it by the most a row can have.
		perTx = max(rowsPerTx/(1+maxKeys), 1)
	}
	for len(rows) > 0 {
		n := min(len(rows), perTx)
		chunk := append([]RowRecord(nil), rows[:n]...)
		rows = rows[n:]
		for attempt := 0; len(chunk) > 0; attempt++ {
			if attempt > 8 {
				return deleted, platform.Errorf(platform.ErrResourceLocked, "rows of table %q keep changing concurrently; try again", rec.Name)
			}
			w := make([]types.TransactWriteItem, 0, len(chunk)+1)
			nStale := int64(0)
			for _, r := range chunk {
				w = append(w, types.TransactWriteItem{Delete: &types.Delete{
					Key:                       key(rec.RowSet().pk(r.ID), rowSK(r.ID)),
					ConditionExpression:       aws.String("#ver = :ver"),
					ExpressionAttributeNames:  map[string]string{"#ver": attrVer},
					ExpressionAttributeValues: item{":ver": num(r.Ver)},
				}})
				if keysOf != nil {
					w = append(w, indexWrites(rec.ID, r.ID, keysOf(&r.TableRow), nil)...)
				}
				nStale += b2n(isStale(r.TableRow))
			}
			w = append(w, countRows(rec, -int64(len(chunk)), -nStale))
			last := len(w) - 1
			err := s.txRetry(ctx, w, func(i int) error {
				if i >= 0 && i < last {
					return ErrVersionConflict
				}
				return platform.NotFound("table", rec.Name)
			})
			if errors.Is(err, ErrVersionConflict) {
				// A row changed or went (concurrent writers usually touch
				// many): read the chunk again and retry with what is left.
				ids := make([]int64, len(chunk))
				for i, r := range chunk {
					ids[i] = r.ID
				}
				cur, gerr := s.GetRows(ctx, rec.RowSet(), ids)
				if gerr != nil {
					return deleted, gerr
				}
				left := chunk[:0]
				for _, r := range chunk {
					if c, ok := cur[r.ID]; ok {
						left = append(left, c)
					}
				}
				chunk = left
				continue
			}
			if err != nil {
				return deleted, err
			}
			deleted = append(deleted, chunk...)
			break
		}
	}
	return deleted, nil
}

func b2n(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func condFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}

// RowRecord is a stored row and its version.
type RowRecord struct {
	platform.TableRow
	Ver int64
}

func rowItem(rs RowSet, r platform.TableRow, ver int64) (item, error) {
	doc, err := encodeDoc(r)
	if err != nil {
		return nil, err
	}
	it := key(rs.pk(r.ID), rowSK(r.ID))
	it[attrDoc], it[attrVer] = str(doc), num(ver)
	return it, nil
}

func rowFrom(it item) (RowRecord, error) {
	doc := []byte(getS(it, attrDoc))
	r, ok := decodeRowDoc(doc)
	if !ok {
		r = platform.TableRow{}
		if err := json.Unmarshal(doc, &r); err != nil {
			return RowRecord{}, fmt.Errorf("decode row %s/%s: %w", getS(it, attrPK), getS(it, attrSK), err)
		}
	}
	return RowRecord{TableRow: r, Ver: getN(it, attrVer)}, nil
}

// decodeRowDoc decodes a row document as encodeDoc writes it, several
// times faster than encoding/json (a find decodes every row of a table):
// values stay slices of the document, unvalidated (they were canonical JSON
// when written). Anything unexpected returns false, and the caller falls
// back to encoding/json.
func decodeRowDoc(doc []byte) (platform.TableRow, bool) {
	var r platform.TableRow
	p := 0
	next := func(c byte) bool {
		if p < len(doc) && doc[p] == c {
			p++
			return true
		}
		return false
	}
	if !next('{') {
		return r, false
	}
	for !next('}') {
		if p > 1 && !next(',') {
			return r, false
		}
		k, ok := plainString(doc, &p)
		if !ok || !next(':') {
			return r, false
		}
		start := p
		if !skipJSON(doc, &p) {
			return r, false
		}
		v := doc[start:p]
		switch k {
		case "id":
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return r, false
			}
			r.ID = n
		case "createdAt", "updatedAt":
			q := 0
			str, ok := plainString(v, &q)
			if !ok || q != len(v) {
				return r, false
			}
			if k == "createdAt" {
				r.CreatedAt = str
			} else {
				r.UpdatedAt = str
			}
		case "v":
			vals, ok := rawMembers(v)
			if !ok {
				return r, false
			}
			r.Values = vals
		default:
			if err := json.Unmarshal(v, &r.Computed); k != "cp" || err != nil {
				return r, false
			}
		}
	}
	return r, p == len(doc)
}

// plainString reads a JSON string without escapes at doc[*p].
func plainString(doc []byte, p *int) (string, bool) {
	if *p >= len(doc) || doc[*p] != '"' {
		return "", false
	}
	end := bytes.IndexByte(doc[*p+1:], '"')
	if end < 0 {
		return "", false
	}
	s := doc[*p+1 : *p+1+end]
	if bytes.IndexByte(s, '\\') >= 0 {
		return "", false
	}
	*p += end + 2
	return string(s), true
}

// rawMembers splits a JSON object of plain keys into its members.
func rawMembers(obj []byte) (map[string]json.RawMessage, bool) {
	out := map[string]json.RawMessage{}
	p := 0
	if len(obj) < 2 || obj[0] != '{' {
		return nil, false
	}
	p = 1
	for p < len(obj) && obj[p] != '}' {
		if p > 1 {
			if obj[p] != ',' {
				return nil, false
			}
			p++
		}
		k, ok := plainString(obj, &p)
		if !ok || p >= len(obj) || obj[p] != ':' {
			return nil, false
		}
		p++
		start := p
		if !skipJSON(obj, &p) {
			return nil, false
		}
		out[k] = json.RawMessage(obj[start:p])
	}
	return out, p == len(obj)-1
}

// skipJSON moves *p past the JSON value at doc[*p] (compact JSON).
func skipJSON(doc []byte, p *int) bool {
	depth := 0
	for *p < len(doc) {
		switch c := doc[*p]; c {
		case '"':
			*p++
			for {
				if *p >= len(doc) {
					return false
				}
				if doc[*p] == '\\' {
					*p += 2
					continue
				}
				if doc[*p] == '"' {
					*p++
					break
				}
				*p++
			}
		case '{', '[':
			depth++
			*p++
			continue
		case '}', ']':
			if depth == 0 {
				return false
			}
			depth--
			*p++
		case ',', ':':
			if depth == 0 {
				return false
			}
			*p++
			continue
		default:
			start := *p
			for *p < len(doc) && !strings.ContainsRune(",:}]\"{[ \t\r\n", rune(doc[*p])) {
				*p++
			}
			if *p == start {
				return false // not compact JSON
			}
		}
		if depth == 0 {
			return true
		}
	}
	return false
}

// PutRows writes rows of a table with BatchWriteItem, 25 items a call,
// and, when keysOf is not nil, their column index entries. The rows have
// ids no other row has (a copy's own ids, while nothing else may write the
// copy), so no condition is needed, and writing them again writes the
// same items (a duplicate job redoes a chunk that died).
func (s *Store) PutRows(ctx context.Context, rs RowSet, rows []platform.TableRow, keysOf func(*platform.TableRow) []platform.TableIndexKey) error {
	table := rs.Table
	items := make([]item, 0, len(rows))
	for i := range rows {
		it, err := rowItem(rs, rows[i], 1)
		if err != nil {
			return err
		}
		items = append(items, it)
		if keysOf != nil {
			for _, k := range keysOf(&rows[i]) {
				items = append(items, key(tableIndexPK(table, k.Col), indexSK(k, rows[i].ID)))
			}
		}
	}
	return s.batchPut(ctx, items)
}

// GetRow reads one row (one GetItem).
func (s *Store) GetRow(ctx context.Context, rs RowSet, id int64) (RowRecord, bool, error) {
	if id < 1 || id > platform.MaxTableRowID {
		return RowRecord{}, false, nil
	}
	it, err := s.get(ctx, rs.pk(id), rowSK(id))
	if err != nil || it == nil {
		return RowRecord{}, false, err
	}
	r, err := rowFrom(it)
	return r, err == nil, err
}

// GetRows reads rows by id (BatchGetItem, 100 a call); missing rows are
// absent from the result.
func (s *Store) GetRows(ctx context.Context, rs RowSet, ids []int64) (map[int64]RowRecord, error) {
	keys := make([]item, 0, len(ids))
	seen := map[int64]bool{}
	for _, id := range ids {
		if id < 1 || id > platform.MaxTableRowID || seen[id] {
			continue
		}
		seen[id] = true
		keys = append(keys, key(rs.pk(id), rowSK(id)))
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]RowRecord, len(items))
	for _, it := range items {
		r, err := rowFrom(it)
		if err != nil {
			return nil, err
		}
		out[r.ID] = r
	}
	return out, nil
}

// ReplaceRow writes a changed row over the version read (conditional
// PutItem): a concurrent change makes it fail with ErrVersionConflict, and
// the caller re-reads the row and applies its change again. When the row
// becomes stale or fresh (staleDelta ±1), the table's stale count moves in
// the same transaction, and so do the changes of its column index entries
// (from oldKeys, the version read, to newKeys).
func (s *Store) ReplaceRow(ctx context.Context, rec TableRecord, r platform.TableRow, ver, staleDelta int64, oldKeys, newKeys []platform.TableIndexKey) error {
	it, err := rowItem(rec.RowSet(), r, ver+1)
	if err != nil {
		return err
	}
	ix := indexWrites(rec.ID, r.ID, oldKeys, newKeys)
	if staleDelta != 0 || len(ix) > 0 {
		w := []types.TransactWriteItem{{Put: &types.Put{
			Item:                      it,
			ConditionExpression:       aws.String("#ver = :ver"),
			ExpressionAttributeNames:  map[string]string{"#ver": attrVer},
			ExpressionAttributeValues: item{":ver": num(ver)},
		}}}
		w = append(w, ix...)
		if staleDelta != 0 {
			w = append(w, countRows(rec, 0, staleDelta))
		}
		err := s.txRetry(ctx, w, func(i int) error {
			if staleDelta != 0 && i == len(w)-1 {
				return platform.NotFound("table", rec.Name)
			}
			return ErrVersionConflict
		})
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &s.table,
		Item:                      it,
		ConditionExpression:       aws.String("#ver = :ver"),
		ExpressionAttributeNames:  map[string]string{"#ver": attrVer},
		ExpressionAttributeValues: item{":ver": num(ver)},
	})
	if condFailed(err) {
		return ErrVersionConflict
	}
	return err
}

// RowScan asks QueryRows for a table's rows in id order.
type RowScan struct {
	Descending bool
	// Limit > 0 reads at most that many rows, with Query's Limit (what is
	// read is what is returned). 0 reads DynamoDB's pages (1 MB each).
	Limit int
	// Needles: with Limit 0, rows whose document lacks one are filtered
	// out by DynamoDB (contains(doc, ...)) before they are returned.
	Needles []string
	// After/Before bound the ids read (exclusive; 0 for none).
	After, Before int64
}

// QueryRows reads a table's rows in id order with a Query per row
// partition (never Scan), merged by id, calling fn for each until it
// returns false.
func (s *Store) QueryRows(ctx context.Context, rs RowSet, sc RowScan, fn func(r *platform.TableRow) (bool, error)) error {
	return s.queryRowItems(ctx, rs, sc, func(it item) (bool, error) {
		r, err := rowFrom(it)
		if err != nil {
			return false, err
		}
		return fn(&r.TableRow)
	})
}

// rowStream is the rows of one partition, in order, read a page at a time
// when the merge needs them.
type rowStream struct {
	in   *dynamodb.QueryInput
	buf  []item
	done bool
}

func (st *rowStream) head(ctx context.Context, db client) (item, error) {
	for len(st.buf) == 0 && !st.done {
		out, err := db.Query(ctx, st.in)
		if err != nil {
			return nil, err
		}
		st.buf = out.Items
		if len(out.LastEvaluatedKey) == 0 {
			st.done = true
		} else {
			st.in.ExclusiveStartKey = out.LastEvaluatedKey
			if st.in.Limit != nil {
				st.in.Limit = aws.Int32(min(*st.in.Limit*2, 10000))
			}
		}
	}
	if len(st.buf) == 0 {
		return nil, nil
	}
	return st.buf[0], nil
}

// queryRowItems merges the row partitions' Queries by id. With a Limit,
// each partition's first Query reads its share of it plus one (the ids
// of a table are spread evenly: id mod shards), and a partition needing
// more reads twice as many next: a page reads little more than it returns.
func (s *Store) queryRowItems(ctx context.Context, rs RowSet, sc RowScan, fn func(it item) (bool, error)) error {
	lo, hi := rowSK(max(sc.After+1, 0)), rowSK(platform.MaxTableRowID)
	if sc.Before > 0 {
		hi = rowSK(sc.Before - 1)
	}
	if lo > hi {
		return nil
	}
	parts := rs.partitions()
	streams := make([]*rowStream, len(parts))
	for i, pk := range parts {
		in := &dynamodb.QueryInput{
			TableName:                 &s.table,
			KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
			ExpressionAttributeValues: item{":pk": str(pk), ":lo": str(lo), ":hi": str(hi)},
			ScanIndexForward:          aws.Bool(!sc.Descending),
			ConsistentRead:            aws.Bool(true),
		}
		if sc.Limit > 0 {
			share := sc.Limit
			if len(parts) > 1 {
				share = (sc.Limit+len(parts)-1)/len(parts) + 1
			}
			in.Limit = aws.Int32(int32(min(share, 10000)))
		} else if len(sc.Needles) > 0 {
			// Only without Limit: with both, DynamoDB's Limit counts the rows
			// read, not those passing the filter.
			in.ExpressionAttributeNames = map[string]string{"#d": attrDoc}
			expr := ""
			for i, n := range sc.Needles {
				p := ":n" + strconv.Itoa(i)
				if expr != "" {
					expr += " AND "
				}
				expr += "contains(#d, " + p + ")"
				in.ExpressionAttributeValues[p] = str(n)
			}
			in.FilterExpression = aws.String(expr)
		}
		streams[i] = &rowStream{in: in}
	}
	for n := 0; sc.Limit <= 0 || n < sc.Limit; n++ {
		best, bestSK := -1, ""
		for i, st := range streams {
			it, err := st.head(ctx, s.db)
			if err != nil {
				return err
			}
			if it == nil {
				continue
			}
			if sk := getS(it, attrSK); best < 0 || (sk < bestSK) != sc.Descending {
				best, bestSK = i, sk
			}
		}
		if best < 0 {
			return nil
		}
		it := streams[best].buf[0]
		streams[best].buf = streams[best].buf[1:]
		if more, err := fn(it); err != nil || !more {
			return err
		}
	}
	return nil
}

// --- Unique index of a table's key column ---

// ClaimKey makes row the owner of value in a key index, unless another
// row owns it: one conditional PutItem. It returns the owner (row when
// claimed; another row's id on conflict). A claim records when it was
// made: a writer interrupted between its claim and its row write leaves a
// claim that TakeKey may take over once it is old enough.
func (s *Store) ClaimKey(ctx context.Context, table, ix, value string, row int64) (int64, error) {
	it := key(tableKeysPK(table, ix), value)
	it[attrKeyRow] = num(row)
	it[attrKeyAt] = num(time.Now().UnixMilli())
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &s.table,
		Item:                      it,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR #row = :row"),
		ExpressionAttributeNames:  map[string]string{"#row": attrKeyRow},
		ExpressionAttributeValues: item{":row": num(row)},
	})
	if err == nil {
		return row, nil
	}
	if !condFailed(err) {
		return 0, err
	}
	cur, err := s.get(ctx, tableKeysPK(table, ix), value)
	if err != nil {
		return 0, err
	}
	if cur == nil { // released meanwhile: try again
		return s.ClaimKey(ctx, table, ix, value, row)
	}
	return getN(cur, attrKeyRow), nil
}

// TakeKey moves value from row from (which does not hold it: a stale
// claim left by an interrupted write) to row, if from's claim is older
// than grace (a younger one may belong to a write still in progress);
// false when it cannot.
func (s *Store) TakeKey(ctx context.Context, table, ix, value string, from, row int64, grace time.Duration) (bool, error) {
	now := time.Now()
	it := key(tableKeysPK(table, ix), value)
	it[attrKeyRow] = num(row)
	it[attrKeyAt] = num(now.UnixMilli())
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &s.table,
		Item:                      it,
		ConditionExpression:       aws.String("#row = :from AND (attribute_not_exists(#at) OR #at < :cutoff)"),
		ExpressionAttributeNames:  map[string]string{"#row": attrKeyRow, "#at": attrKeyAt},
		ExpressionAttributeValues: item{":from": num(from), ":cutoff": num(now.Add(-grace).UnixMilli())},
	})
	if condFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// ReleaseKey frees value if row owns it.
func (s *Store) ReleaseKey(ctx context.Context, table, ix, value string, row int64) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       key(tableKeysPK(table, ix), value),
		ConditionExpression:       aws.String("#row = :row"),
		ExpressionAttributeNames:  map[string]string{"#row": attrKeyRow},
		ExpressionAttributeValues: item{":row": num(row)},
	})
	if condFailed(err) {
		return nil
	}
	return err
}

// LookupKeys returns the owners of values in a key index (BatchGetItem).
func (s *Store) LookupKeys(ctx context.Context, table, ix string, values []string) (map[string]int64, error) {
	keys := make([]item, 0, len(values))
	seen := map[string]bool{}
	for _, v := range values {
		if !seen[v] {
			seen[v] = true
			keys = append(keys, key(tableKeysPK(table, ix), v))
		}
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(items))
	for _, it := range items {
		out[getS(it, attrSK)] = getN(it, attrKeyRow)
	}
	return out, nil
}

// CopyKeyIndex copies a key index (a duplicate's): BatchWriteItem of what
// one Query page after another reads.
func (s *Store) CopyKeyIndex(ctx context.Context, fromTable, fromIx, toTable, toIx string) error {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(tableKeysPK(fromTable, fromIx))},
	}
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return err
		}
		reqs := make([]types.WriteRequest, 0, len(out.Items))
		for _, it := range out.Items {
			c := key(tableKeysPK(toTable, toIx), getS(it, attrSK))
			c[attrKeyRow] = it[attrKeyRow]
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: c}})
		}
		if err := s.batchWrite(ctx, reqs); err != nil {
			return err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// DropKeyIndex deletes a key index.
func (s *Store) DropKeyIndex(ctx context.Context, table, ix string) error {
	return s.purge(ctx, tableKeysPK(table, ix))
}

// --- Jobs ---

// JobState is what a job keeps beside its wire shape: a duplicate's
// source and progress, and the lease of the worker advancing it.
type JobState struct {
	SourceID   string `json:"sourceId,omitempty"`
	Cursor     int64  `json:"cursor,omitempty"` // the last row id copied
	MaxID      int64  `json:"maxId,omitempty"`  // rows above were created after the copy began
	Total      int64  `json:"total,omitempty"`
	Copied     int64  `json:"copied,omitempty"`
	Stale      int64  `json:"stale,omitempty"` // stale rows among those copied
	LeaseUntil string `json:"leaseUntil,omitempty"`
}

type jobDoc struct {
	platform.TableJob
	State JobState `json:"_state"`
}

// JobRecord is a job as read.
type JobRecord struct {
	platform.TableJob
	State JobState
	ver   int64
}

// jobTTL is how long a job is kept after its last change.
const jobTTL = 14 * 24 * time.Hour

// SaveJob writes a job: a new one (rec nil-version), or over the version
// read (ErrVersionConflict when it changed).
func (s *Store) SaveJob(ctx context.Context, rec JobRecord) (JobRecord, error) {
	doc, err := encodeDoc(jobDoc{TableJob: rec.TableJob, State: rec.State})
	if err != nil {
		return rec, err
	}
	it := key(tableJobsPK(rec.TableID), rec.ID)
	it[attrDoc], it[attrVer] = str(doc), num(rec.ver+1)
	it[attrTTL] = num(time.Now().Add(jobTTL).Unix())
	in := &dynamodb.PutItemInput{TableName: &s.table, Item: it}
	if rec.ver == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = aws.String("#ver = :ver")
		in.ExpressionAttributeNames = map[string]string{"#ver": attrVer}
		in.ExpressionAttributeValues = item{":ver": num(rec.ver)}
	}
	if _, err := s.db.PutItem(ctx, in); err != nil {
		if condFailed(err) {
			return rec, ErrVersionConflict
		}
		return rec, err
	}
	rec.ver++
	return rec, nil
}

func jobFrom(it item) (JobRecord, error) {
	var d jobDoc
	if err := decodeDoc(it, &d); err != nil {
		return JobRecord{}, err
	}
	return JobRecord{TableJob: d.TableJob, State: d.State, ver: getN(it, attrVer)}, nil
}

// GetJob reads a job of a table.
func (s *Store) GetJob(ctx context.Context, table, id string) (JobRecord, bool, error) {
	it, err := s.get(ctx, tableJobsPK(table), id)
	if err != nil || it == nil {
		return JobRecord{}, false, err
	}
	j, err := jobFrom(it)
	return j, err == nil, err
}

// ListJobs lists a table's most recent jobs, newest first (one Query).
func (s *Store) ListJobs(ctx context.Context, table string, limit int) ([]JobRecord, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(tableJobsPK(table))},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit)),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	jobs := make([]JobRecord, 0, len(out.Items))
	for _, it := range out.Items {
		j, err := jobFrom(it)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// DeleteBotTables deletes every table of a bot with its rows (for
// deleteBot): one Query, then DeleteTable per table.
func (s *Store) DeleteBotTables(ctx context.Context, botID string) error {
	recs, err := s.ListTables(ctx, botID)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := s.DeleteTable(ctx, rec); err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
			return err
		}
	}
	return nil
}
