package dynamo

import (
	"context"
	"errors"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Column index of a table (docs/tables.md, "Indexed filters"):
//
//	entry   TIDX#<tableId>#<columnId>   <key>\x00<row id, 10 digits>   (no attribute)
//
// One partition per column: a row write touches its row and one entry per
// indexed column it holds, in the same transaction. The key (tables.
// IndexKeys) sorts as the value, so an equality is a begins_with Query and
// a range a BETWEEN Query, both reading only the entries they match.
func tableIndexPK(table, col string) string { return "TIDX#" + table + "#" + col }

func indexSK(k platform.TableIndexKey, id int64) string { return k.Key + "\x00" + rowSK(id) }

// indexWrites are the puts of a row's new entries and the deletes of its
// old ones that are not also new (an unchanged value is not rewritten).
func indexWrites(table string, id int64, old, new []platform.TableIndexKey) []types.TransactWriteItem {
	keep := make(map[platform.TableIndexKey]bool, len(old))
	for _, k := range old {
		keep[k] = true
	}
	var w []types.TransactWriteItem
	added := make(map[platform.TableIndexKey]bool, len(new))
	for _, k := range new {
		added[k] = true
		if !keep[k] {
			w = append(w, types.TransactWriteItem{Put: &types.Put{Item: key(tableIndexPK(table, k.Col), indexSK(k, id))}})
		}
	}
	for _, k := range old {
		if !added[k] {
			w = append(w, types.TransactWriteItem{Delete: &types.Delete{Key: key(tableIndexPK(table, k.Col), indexSK(k, id))}})
		}
	}
	return w
}

// ErrTooManyCandidates reports that an index lookup matched more entries
// than the caller's bound: reading the table is cheaper.
var ErrTooManyCandidates = errors.New("the index lookup matches too many rows")

// IndexRowIDs reads the row ids a column index lookup names, in key order
// (for one prefix: id order, descending if asked), calling fn for each
// until it returns false. The first Query reads at most 128 entries and
// each next one twice as many (up to DynamoDB's 1 MB page), so a caller
// stopping early reads little more than it used.
func (s *Store) IndexRowIDs(ctx context.Context, table string, lk platform.TableIndexLookup, desc bool, fn func(id int64) (bool, error)) error {
	run := func(cond string, vals item) (bool, error) {
		vals[":pk"] = str(tableIndexPK(table, lk.Col))
		in := &dynamodb.QueryInput{
			TableName:                 &s.table,
			KeyConditionExpression:    aws.String("pk = :pk AND " + cond),
			ExpressionAttributeValues: vals,
			ScanIndexForward:          aws.Bool(!desc),
			ConsistentRead:            aws.Bool(true),
			Limit:                     aws.Int32(128),
		}
		for {
			out, err := s.db.Query(ctx, in)
			if err != nil {
				return false, err
			}
			for _, it := range out.Items {
				sk := getS(it, attrSK)
				if len(sk) < 11 {
					continue
				}
				id, err := strconv.ParseInt(sk[len(sk)-10:], 10, 64)
				if err != nil {
					continue
				}
				more, err := fn(id)
				if err != nil || !more {
					return false, err
				}
			}
			if len(out.LastEvaluatedKey) == 0 {
				return true, nil
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
			in.Limit = aws.Int32(min(*in.Limit*2, 8192))
		}
	}
	if len(lk.Prefixes) == 0 {
		if lk.Lo > lk.Hi {
			return nil // an empty range (DynamoDB refuses BETWEEN bounds in this order)
		}
		_, err := run("sk BETWEEN :lo AND :hi", item{":lo": str(lk.Lo), ":hi": str(lk.Hi)})
		return err
	}
	for _, p := range lk.Prefixes {
		more, err := run("begins_with(sk, :p)", item{":p": str(p)})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// PutIndexEntries writes index entries of rows, conditional on each row
// still being at the version read (a ConditionCheck in the transaction):
// the migration's fill of a table written before the index existed. Rows
// that changed or went meanwhile are returned (their writers maintained the
// index since; the caller reads them again).
func (s *Store) PutIndexEntries(ctx context.Context, rs RowSet, rows []RowRecord, keys [][]platform.TableIndexKey) ([]int64, error) {
	table := rs.Table
	sizes := make([]int, len(rows))
	counts := make([]int, len(rows))
	for i := range rows {
		counts[i] = 1 + len(keys[i])
		sizes[i] = 64 * counts[i]
	}
	var changed []int64
	for _, c := range txChunks(sizes, counts, 100) {
		var w []types.TransactWriteItem
		for i := c[0]; i < c[1]; i++ {
			w = append(w, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName:                 &s.table,
				Key:                       key(rs.pk(rows[i].ID), rowSK(rows[i].ID)),
				ConditionExpression:       aws.String("#ver = :ver"),
				ExpressionAttributeNames:  map[string]string{"#ver": attrVer},
				ExpressionAttributeValues: item{":ver": num(rows[i].Ver)},
			}})
			w = append(w, indexWrites(table, rows[i].ID, nil, keys[i])...)
		}
		err := s.txRetry(ctx, w, func(int) error { return ErrVersionConflict })
		if errors.Is(err, ErrVersionConflict) {
			for i := c[0]; i < c[1]; i++ {
				changed = append(changed, rows[i].ID)
			}
			continue
		}
		if err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// txChunks splits writes of sizes[i] bytes and counts[i] items into
// transactions of at most maxItems items (DynamoDB allows 100) and
// rowTxMaxBytes. A write larger than a transaction cannot be: callers
// bound a row's entries (20 columns at most) and its size.
func txChunks(sizes, counts []int, maxItems int) [][2]int {
	var out [][2]int
	start, bytes, items := 0, 0, 0
	for i := range sizes {
		if i > start && (items+counts[i] > maxItems || bytes+sizes[i] > rowTxMaxBytes) {
			out = append(out, [2]int{start, i})
			start, bytes, items = i, 0, 0
		}
		bytes += sizes[i]
		items += counts[i]
	}
	if start < len(sizes) {
		out = append(out, [2]int{start, len(sizes)})
	}
	return out
}

// RowRecords reads up to limit rows of a table after row id after, in id
// order, with their versions.
func (s *Store) RowRecords(ctx context.Context, rs RowSet, after int64, limit int) ([]RowRecord, error) {
	var rows []RowRecord
	err := s.queryRowItems(ctx, rs, RowScan{After: after, Limit: limit}, func(it item) (bool, error) {
		r, err := rowFrom(it)
		rows = append(rows, r)
		return err == nil, err
	})
	return rows, err
}

// TablesToIndex lists the tables whose column index is not complete
// (written before the index existed, or being filled): a Scan of the
// platform's table, which only the migration makes (tablemigrate), never a
// request.
func (s *Store) TablesToIndex(ctx context.Context) ([]TableRecord, error) {
	in := &dynamodb.ScanInput{
		TableName:                 &s.table,
		FilterExpression:          aws.String("begins_with(pk, :p) AND begins_with(sk, :s)"),
		ExpressionAttributeValues: item{":p": str("BOTTABLES#"), ":s": str("TABLE#")},
		ConsistentRead:            aws.Bool(true),
	}
	var out []TableRecord
	for {
		res, err := s.db.Scan(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			rec, err := tableFrom(it, getS(it, attrPK)[len("BOTTABLES#"):])
			if err != nil {
				return nil, err
			}
			if rec.State.Index != platform.TableIndexReady {
				out = append(out, rec)
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// migrationsPK holds one item per data migration completed over the whole
// table (its name as sort key), so that a process starting again does not
// look for work a migration already finished.
const migrationsPK = "MIGRATIONS"

// MigrationDone reports whether migration name was completed.
func (s *Store) MigrationDone(ctx context.Context, name string) (bool, error) {
	it, err := s.get(ctx, migrationsPK, name)
	return it != nil, err
}

// MarkMigrationDone records that migration name was completed.
func (s *Store) MarkMigrationDone(ctx context.Context, name string) error {
	it := key(migrationsPK, name)
	it["at"] = str(platform.Now())
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it})
	return err
}
