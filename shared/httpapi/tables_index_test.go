package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tablemigrate"
	"github.com/botforge/platform/shared/tables"
)

// indexItems reads every column index entry of a table straight from
// DynamoDB ("<column>|<sort key>").
func (f *tablesFixture) indexItems(rec dynamo.TableRecord) map[string]bool {
	f.T.Helper()
	db, table := f.Platform.Store.Client(), f.Platform.Env.Table
	out := map[string]bool{}
	for n := 1; n <= rec.State.NextColumn; n++ {
		col := fmt.Sprintf("c%d", n)
		in := &dynamodb.QueryInput{
			TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "TIDX#" + rec.ID + "#" + col}},
		}
		for {
			res, err := db.Query(context.Background(), in)
			if err != nil {
				f.T.Fatal(err)
			}
			for _, it := range res.Items {
				out[col+"|"+it["sk"].(*types.AttributeValueMemberS).Value] = true
			}
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	return out
}

// tableRecord reads a table of the fixture's bot from the store.
func (f *tablesFixture) tableRecord(name string) dynamo.TableRecord {
	f.T.Helper()
	rec, err := f.Platform.Store.GetTable(context.Background(), f.bot, name)
	if err != nil {
		f.T.Fatal(err)
	}
	return rec
}

// checkIndex fails unless a table's column index holds exactly the
// entries of its rows: none missing (a find would miss the row), none
// left over.
func (f *tablesFixture) checkIndex(name string) {
	f.T.Helper()
	rec := f.tableRecord(name)
	schema, err := tables.Load(rec.Schema, rec.State)
	if err != nil {
		f.T.Fatal(err)
	}
	want := map[string]bool{}
	err = f.Platform.Store.QueryRows(context.Background(), rec.RowSet(), dynamo.RowScan{}, func(r *platform.TableRow) (bool, error) {
		for _, k := range schema.IndexKeys(r) {
			want[fmt.Sprintf("%s|%s\x00%010d", k.Col, k.Key, r.ID)] = true
		}
		return true, nil
	})
	if err != nil {
		f.T.Fatal(err)
	}
	got := f.indexItems(rec)
	var missing, extra []string
	for k := range want {
		if !got[k] {
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	for k := range got {
		if !want[k] {
			extra = append(extra, fmt.Sprintf("%q", k))
		}
	}
	if len(missing)+len(extra) > 0 {
		f.T.Fatalf("index of %s: %d entries missing %v, %d extra %v", name, len(missing), missing[:min(5, len(missing))], len(extra), extra[:min(5, len(extra))])
	}
}

// toPreviousLayout makes a table what the platform wrote before the
// column index and row shards existed: no index entries, no index state,
// its rows in one partition TROWS#<tableId>.
func (f *tablesFixture) toPreviousLayout(name string) {
	f.T.Helper()
	ctx := context.Background()
	rec := f.tableRecord(name)
	db, table := f.Platform.Store.Client(), f.Platform.Env.Table
	for shard := 0; shard < rec.State.RowShards; shard++ {
		in := &dynamodb.QueryInput{
			TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("TROWS#%s#%d", rec.ID, shard)}},
		}
		for {
			res, err := db.Query(ctx, in)
			if err != nil {
				f.T.Fatal(err)
			}
			for _, it := range res.Items {
				k := map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}
				it["pk"] = &types.AttributeValueMemberS{Value: "TROWS#" + rec.ID}
				if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
					f.T.Fatal(err)
				}
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: k}); err != nil {
					f.T.Fatal(err)
				}
			}
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	st := rec.State
	st.Index, st.IndexSince, st.RowShards = platform.TableIndexNone, "", 0
	if err := f.Platform.Store.SaveTable(ctx, rec, rec.Table, st, false); err != nil {
		f.T.Fatal(err)
	}
	for k := range f.indexItems(rec) {
		col, sk, _ := strings.Cut(k, "|")
		_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "TIDX#" + rec.ID + "#" + col}, "sk": &types.AttributeValueMemberS{Value: sk},
		}})
		if err != nil {
			f.T.Fatal(err)
		}
	}
	if n := len(f.indexItems(f.tableRecord(name))); n != 0 {
		f.T.Fatalf("%d index entries left", n)
	}
}

// rowsRead is what a find read besides authorization (its GetItems).
func rowsRead(u *dynamo.Usage) int { return u.ItemsRead - u.Calls("GetItem") }

// findCost is what one findTableRows read, measured three ways: items
// read (besides authorization), read units as DynamoDB answered the
// store's calls (ConsumedCapacity, summed by dynamo.Usage), and read units
// the embedded DynamoDB counted on the table's own partition keys (its
// rows and column index entries: localdynamo Usage).
type findCost struct {
	answer  apitest.Response
	items   int
	units   float64 // answered
	counted float64 // counted by the embedded DynamoDB
	usage   *dynamo.Usage
}

// findCost runs a find on a table and measures it.
func (f *tablesFixture) findCost(rec *tableUsage, table string, body map[string]any) findCost {
	f.T.Helper()
	id := f.tableRecord(table).ID
	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	defer ddb.CountUnits(false)
	r := f.find(table, body)
	var counted float64
	for p, u := range ddb.Usage().Partitions {
		if strings.Contains(p.Key, "#"+id) {
			counted += u.Read
		}
	}
	u := rec.of("findTableRows")
	return findCost{answer: r, items: rowsRead(u), units: u.ReadUnits, counted: counted, usage: u}
}

// TestTableIndexedFilterCost is the index's promise: a selective filter
// (equality, $in, number and string ranges; by id, ordered by a column,
// grouped, and a delete by filter) reads the same items and read units
// (as answered and as the embedded DynamoDB counted them on the table's
// partition keys) on a table of 300 rows and on one of 3,000, where
// reading the table would read ten times more
// (TestTableFilterCostGrowsWithoutIndex shows these checks fail then).
func TestTableIndexedFilterCost(t *testing.T) {
	f := newTablesFixture(t)
	f.fillBench("smallTable", 300)
	f.fillBench("largeTable", 3000)
	rec := watchTableUsage(f.Env)
	for _, tc := range []struct {
		name string
		body map[string]any
		n    int // rows answered
		read int // items the find may read (default 2n+12: entries, rows, a batch)
	}{
		{name: "eq", body: map[string]any{"filter": map[string]any{"n": 31}}, n: 1},
		{name: "eq desc", body: map[string]any{"filter": map[string]any{"n": 31}, "orderDirection": "desc"}, n: 1},
		{name: "in", body: map[string]any{"filter": map[string]any{"n": map[string]any{"$in": []any{5, 17, 250}}}}, n: 3},
		{name: "range", body: map[string]any{"filter": map[string]any{"n": map[string]any{"$gte": 100, "$lt": 110}}}, n: 10},
		{name: "upper bound", body: map[string]any{"filter": map[string]any{"n": map[string]any{"$lt": 5}}}, n: 5},
		{name: "string range", body: map[string]any{"filter": map[string]any{"s": map[string]any{"$gte": "customer 12 ", "$lt": "customer 12!"}}}, n: 1},
		{name: "and a non-indexed condition", body: map[string]any{"filter": map[string]any{"n": map[string]any{"$in": []any{5, 17, 250}}, "s": map[string]any{"$regex": "figs|pears"}}}, n: 2},
		{name: "ordered by a column", body: map[string]any{"filter": map[string]any{"n": map[string]any{"$in": []any{5, 17, 250}}}, "orderBy": "city", "orderDirection": "desc"}, n: 3},
		{name: "grouped", body: map[string]any{"filter": map[string]any{"n": map[string]any{"$lt": 50}}, "group": map[string]any{"city": "key", "n": "count"}}, n: 50},
		{name: "paged", body: map[string]any{"filter": map[string]any{"n": map[string]any{"$gte": 200, "$lte": 260}}, "limit": 10, "offset": 20}, n: 10, read: 61 + 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answers [2]string
			var read [2]int
			var units, counted [2]float64
			for i, table := range []string{"smallTable", "largeTable"} {
				c := f.findCost(rec, table, tc.body)
				if got := len(c.answer.List("rows")); got != tc.n {
					t.Fatalf("%s: %d rows, want %d: %s", table, got, tc.n, c.answer.Raw)
				}
				answers[i] = tjson(stripTimes(c.answer.List("rows")))
				read[i], units[i], counted[i] = c.items, c.units, c.counted
				if tc.read == 0 {
					tc.read = 2*tc.n + 12
				}
				if read[i] == 0 || read[i] > tc.read {
					t.Fatalf("%s: %d items read for %d rows: %s", table, read[i], tc.n, c.usage)
				}
				// Both measures must see the reads (a store answering no
				// ConsumedCapacity would make the comparison below empty).
				if units[i] == 0 || counted[i] == 0 || counted[i] > units[i] {
					t.Fatalf("%s: %.1f read units answered, %.1f counted on the table's keys", table, units[i], counted[i])
				}
			}
			if answers[0] != answers[1] {
				t.Fatalf("answers differ:\n%s\n%s", answers[0], answers[1])
			}
			if read[0] != read[1] || units[0] != units[1] || counted[0] != counted[1] {
				t.Fatalf("items read %v, read units answered %v, counted on the table's keys %v: they grow with the table's size", read, units, counted)
			}
			t.Logf("%d rows: %d items read, %.1f read units (%.1f on the table's keys), on 300 and 3,000 rows", tc.n, read[1], units[1], counted[1])
		})
	}
	// An upsert by a column that is not the key column finds its rows
	// through the column index too.
	var read [2]int
	for i, table := range []string{"smallTable", "largeTable"} {
		r := f.ok("upsertTableRows", "POST", "/v1/tables/"+table+"/rows/upsert", map[string]any{"keyColumn": "n", "rows": []any{
			map[string]any{"n": 31, "city": "moved"}, map[string]any{"n": -1, "city": "new"},
		}})
		if len(r.List("updated")) != 1 || len(r.List("inserted")) != 1 || len(r.List("warnings")) != 0 {
			t.Fatalf("upsert by n: %s", r.Raw)
		}
		read[i] = rowsRead(rec.of("upsertTableRows"))
	}
	if read[0] != read[1] || read[0] > 6 {
		t.Fatalf("upsert by a column: items read %v", read)
	}
	for i, table := range []string{"smallTable", "largeTable"} {
		r := f.ok("deleteTableRows", "POST", "/v1/tables/"+table+"/rows/delete", map[string]any{"filter": map[string]any{"n": map[string]any{"$in": []any{7, 8}}}})
		if r.Body["deletedRows"] != 2.0 {
			t.Fatalf("delete by filter: %s", r.Raw)
		}
		read[i] = rowsRead(rec.of("deleteTableRows"))
	}
	if read[0] != read[1] {
		t.Fatalf("delete by filter: items read %v grow with the table's size", read)
	}
	f.checkIndex("smallTable")
}

// TestTableFilterCostGrowsWithoutIndex: the checks of
// TestTableIndexedFilterCost can fail. With the column index switched off
// (both tables in the layout before it), a selective filter reads the
// table, and items read, read units answered and read units counted on the
// table's keys all grow with it (more than threefold from 100 to 1,000
// rows; the reads of authorization stay the same).
func TestTableFilterCostGrowsWithoutIndex(t *testing.T) {
	f := newTablesFixture(t)
	f.fillBench("smallTable", 100) // the same tenfold as 300 and 3,000, moved faster
	f.fillBench("largeTable", 1000)
	f.toPreviousLayout("smallTable")
	f.toPreviousLayout("largeTable")
	rec := watchTableUsage(f.Env)
	for _, body := range []map[string]any{
		{"filter": map[string]any{"n": 31}},
		{"filter": map[string]any{"n": map[string]any{"$gte": 50, "$lt": 60}}},
	} {
		small, large := f.findCost(rec, "smallTable", body), f.findCost(rec, "largeTable", body)
		if len(small.answer.List("rows")) == 0 || tjson(stripTimes(small.answer.List("rows"))) != tjson(stripTimes(large.answer.List("rows"))) {
			t.Fatalf("answers differ: %s %s", small.answer.Raw, large.answer.Raw)
		}
		for _, m := range []struct {
			name         string
			small, large float64
		}{
			{"items read", float64(small.items), float64(large.items)},
			{"read units answered", small.units, large.units},
			{"read units counted on the table's keys", small.counted, large.counted},
		} {
			if m.small == 0 || m.large < 3*m.small {
				t.Errorf("%v without an index: %s %.1f on 100 rows, %.1f on 1,000: the check would not see the table's size", body, m.name, m.small, m.large)
			}
		}
		t.Logf("without an index: %.0f/%.0f items, %.1f/%.1f read units answered, %.1f/%.1f counted, on 100/1,000 rows",
			float64(small.items), float64(large.items), small.units, large.units, small.counted, large.counted)
	}
}

// stripTimes drops the system times of rows (two tables' rows were
// written at different times).
func stripTimes(rows []any) []any {
	out := make([]any, len(rows))
	for i, r := range rows {
		m := map[string]any{}
		for k, v := range r.(map[string]any) {
			if k != "createdAt" && k != "updatedAt" {
				m[k] = v
			}
		}
		out[i] = m
	}
	return out
}

var tIndexSchema = tschema(map[string]any{
	"num":  tcol("number"),
	"str":  tcol("string"),
	"flag": tcol("boolean"),
	"when": tcol("string", "format", "date-time"),
	"tags": tcol("array", "items", tcol("string")),
})

// tIndexRows hold values at the edges of the index's encoding: signs,
// zero, fractions, huge numbers, prefixes, non-ASCII, strings longer than
// an index key keeps, NUL, null and missing values.
func tIndexRows() []map[string]any {
	long := strings.Repeat("é", 600) // 1,200 bytes: cut in the index
	vals := []map[string]any{
		{"num": -1e300, "str": "", "flag": true},
		{"num": -5, "str": "a", "flag": false, "when": "2024-05-01T00:00:00Z"},
		{"num": -0.5, "str": "ab", "when": "2024-05-01T02:00:00+02:00"},
		{"num": 0, "str": "abc", "flag": true, "tags": []string{"x"}},
		{"num": 0.5, "str": "b", "flag": nil},
		{"num": 3, "str": "é", "when": "2023-01-01T00:00:00Z"},
		{"num": 3, "str": "a\u0000b"},
		{"num": 1e300, "str": long},
		{"num": 7, "str": long + "z"},
		{"num": nil, "str": long[:len(long)-2] + "y"},
		{"str": "Z"},
		{"num": 12, "str": nil, "flag": false},
	}
	return vals
}

// TestTableIndexAnswersAsReadingTheTable runs filters on a table through
// its index and on the same rows in the previous layout (which reads the
// table): the answers are the same, and the filters the docs say an index
// serves are those the planner serves with one.
func TestTableIndexAnswersAsReadingTheTable(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("indexedTable", tIndexSchema)
	f.createTable("plainTable", tIndexSchema)
	f.rows("indexedTable", tIndexRows()...)
	f.rows("plainTable", tIndexRows()...)
	f.checkIndex("indexedTable")
	f.toPreviousLayout("plainTable")
	long := strings.Repeat("é", 600)
	ixRec := f.tableRecord("indexedTable")
	schema, err := tables.Load(ixRec.Schema, ixRec.State)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		body    map[string]any
		indexed bool
	}{
		{"eq number", map[string]any{"filter": map[string]any{"num": 3}}, true},
		{"eq zero", map[string]any{"filter": map[string]any{"num": 0}}, true},
		{"eq negative", map[string]any{"filter": map[string]any{"num": -5}}, true},
		{"eq string", map[string]any{"filter": map[string]any{"str": "ab"}}, true},
		{"eq empty string", map[string]any{"filter": map[string]any{"str": ""}}, true},
		{"eq long string", map[string]any{"filter": map[string]any{"str": long}}, true},
		{"eq long string cut alike", map[string]any{"filter": map[string]any{"str": long + "z"}}, true},
		{"eq NUL", map[string]any{"filter": map[string]any{"str": "a\u0000b"}}, false},
		{"eq boolean", map[string]any{"filter": map[string]any{"flag": false}}, true},
		{"eq other kind", map[string]any{"filter": map[string]any{"num": "3"}}, true},
		{"eq null", map[string]any{"filter": map[string]any{"num": nil}}, false},
		{"in", map[string]any{"filter": map[string]any{"num": map[string]any{"$in": []any{-5, 3, 99}}}}, true},
		{"in strings", map[string]any{"filter": map[string]any{"str": map[string]any{"$in": []any{"a", "abc", long}}}}, true},
		{"in with null", map[string]any{"filter": map[string]any{"num": map[string]any{"$in": []any{3, nil}}}}, false},
		{"gt", map[string]any{"filter": map[string]any{"num": map[string]any{"$gt": 0}}}, true},
		{"gte", map[string]any{"filter": map[string]any{"num": map[string]any{"$gte": 0}}}, true},
		{"lt negative", map[string]any{"filter": map[string]any{"num": map[string]any{"$lt": -0.5}}}, true},
		{"lte", map[string]any{"filter": map[string]any{"num": map[string]any{"$lte": 3}}}, true},
		{"between", map[string]any{"filter": map[string]any{"num": map[string]any{"$gt": -5, "$lt": 7}}}, true},
		{"empty range", map[string]any{"filter": map[string]any{"num": map[string]any{"$gt": 7, "$lt": -5}}}, true},
		{"string gt prefix", map[string]any{"filter": map[string]any{"str": map[string]any{"$gt": "a"}}}, true},
		{"string gte", map[string]any{"filter": map[string]any{"str": map[string]any{"$gte": "ab"}}}, true},
		{"string lt", map[string]any{"filter": map[string]any{"str": map[string]any{"$lt": "ab"}}}, true},
		{"string lte", map[string]any{"filter": map[string]any{"str": map[string]any{"$lte": "ab"}}}, true},
		{"string range of long values", map[string]any{"filter": map[string]any{"str": map[string]any{"$gt": long, "$lte": long + "z"}}}, true},
		{"range of the other kind", map[string]any{"filter": map[string]any{"num": map[string]any{"$gt": "a"}}}, true},
		{"bounds of two kinds", map[string]any{"filter": map[string]any{"num": map[string]any{"$gt": 0, "$lt": "z"}}}, true},
		{"ne", map[string]any{"filter": map[string]any{"num": map[string]any{"$ne": 3}}}, false},
		{"nin", map[string]any{"filter": map[string]any{"num": map[string]any{"$nin": []any{3}}}}, false},
		{"or", map[string]any{"filter": map[string]any{"$or": []any{map[string]any{"num": 3}, map[string]any{"str": "b"}}}}, false},
		{"date", map[string]any{"filter": map[string]any{"when": "2024-05-01"}}, false},
		{"array", map[string]any{"filter": map[string]any{"tags": "x"}}, false},
		{"regex", map[string]any{"filter": map[string]any{"str": map[string]any{"$regex": "^a"}}}, false},
		{"and picks the equality", map[string]any{"filter": map[string]any{"num": map[string]any{"$gte": -5}, "flag": false}}, true},
		{"desc paged", map[string]any{"filter": map[string]any{"num": map[string]any{"$gte": -1}}, "orderDirection": "desc", "limit": 2, "offset": 1}, true},
		{"ordered by string", map[string]any{"filter": map[string]any{"num": map[string]any{"$gte": -1}}, "orderBy": "str"}, true},
		{"grouped", map[string]any{"filter": map[string]any{"num": map[string]any{"$lte": 3}}, "group": map[string]any{"flag": "key", "num": []any{"count", "sum"}}}, true},
		{"search", map[string]any{"filter": map[string]any{"num": map[string]any{"$in": []any{-5, 0}}}, "search": "abc"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := f.find("plainTable", tc.body)
			ix := f.find("indexedTable", tc.body)
			if a, b := tjson(stripTimes(ix.List("rows"))), tjson(stripTimes(plain.List("rows"))); a != b || ix.Body["hasMore"] != plain.Body["hasMore"] {
				t.Fatalf("through the index:\n%s\nreading the table:\n%s", ix.Raw, plain.Raw)
			}
			filter, err := tables.ParseFilter([]byte(tjson(tc.body["filter"])), schema)
			if err != nil {
				t.Fatal(err)
			}
			if used := filter.Index() != nil; used != tc.indexed {
				t.Fatalf("index used: %v, want %v", used, tc.indexed)
			}
		})
	}
}

// TestTableIndexConcurrentWrites: creates, updates (of indexed values and
// not), upserts and deletes of one table from 8 writers at once leave its
// index holding exactly its rows' entries.
func TestTableIndexConcurrentWrites(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("busyTable", tIndexSchema)
	seed := make([]map[string]any, 40)
	for i := range seed {
		seed[i] = map[string]any{"num": i % 5, "str": fmt.Sprintf("s%d", i%7), "flag": i%2 == 0}
	}
	f.rows("busyTable", seed...)
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	call := func(method, path string, body any) {
		if r := f.tb(f.AdminToken, method, path, body); r.Status != 200 && r.Status != 404 {
			errs <- fmt.Sprintf("%s %s: %d %s", method, path, r.Status, r.Raw)
		}
	}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				id := 1 + (w*7+i*3)%40
				switch i % 3 {
				case 0: // the same rows from several writers
					call("PUT", "/v1/tables/busyTable/rows", map[string]any{"rows": []any{
						map[string]any{"id": id, "num": w*10 + i, "str": fmt.Sprintf("w%d-%d", w, i)},
						map[string]any{"id": id%40 + 1, "flag": w%2 == 0},
					}})
				case 1:
					call("POST", "/v1/tables/busyTable/rows", map[string]any{"rows": []any{map[string]any{"num": 100 + w, "str": "new"}, map[string]any{"num": nil, "flag": true}}})
					call("POST", "/v1/tables/busyTable/rows/upsert", map[string]any{"rows": []any{map[string]any{"id": id, "num": -w}}})
				case 2:
					call("POST", "/v1/tables/busyTable/rows/delete", map[string]any{"ids": []int{id, 41 + w}})
					call("POST", "/v1/tables/busyTable/rows/delete", map[string]any{"filter": map[string]any{"str": "new", "num": 100 + (w+1)%8}})
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	f.checkIndex("busyTable")
	// And a find through the index answers as reading the table.
	body := map[string]any{"filter": map[string]any{"num": map[string]any{"$gte": 0, "$lt": 200}}, "limit": 1000}
	ix := f.find("busyTable", body)
	f.toPreviousLayout("busyTable")
	plain := f.find("busyTable", body)
	if ix.Body["rows"] == nil || tjson(ix.Body["rows"]) != tjson(plain.Body["rows"]) {
		t.Fatalf("through the index:\n%s\nreading the table:\n%s", ix.Raw, plain.Raw)
	}
}

// TestTableIndexMigration migrates tables written in the previous layout:
// finds answer the same before (reading the table), during and after; the
// migration stopped in the middle of its fill (as by a crash) and run
// again completes it; rows written while it runs are indexed; run again,
// it changes nothing.
func TestTableIndexMigration(t *testing.T) {
	f := newTablesFixture(t)
	f.fillBench("oldTable", 1200)
	f.createTable("oldEmptyTable", tableBenchSchema)
	f.toPreviousLayout("oldTable")
	f.toPreviousLayout("oldEmptyTable")
	rec := watchTableUsage(f.Env)
	body := map[string]any{"filter": map[string]any{"n": map[string]any{"$in": []any{3, 700, 1100, 1201}}}}
	want := []int{4, 701, 1101}
	check := func(when string, extra ...int) int {
		t.Helper()
		r := f.find("oldTable", body)
		if got := tids(r.List("rows")); tjson(got) != tjson(append(append([]int{}, want...), extra...)) {
			t.Fatalf("%s: rows %v, want %v", when, got, append(want, extra...))
		}
		return rowsRead(rec.of("findTableRows"))
	}
	if read := check("previous layout"); read < 1200 {
		t.Fatalf("previous layout: %d items read, want the table read", read)
	}

	crash := errors.New("killed")
	chunks := 0
	m := &tablemigrate.Migrator{Store: f.Platform.Store, Grace: time.Nanosecond, AfterChunk: func(string, int64) error {
		chunks++
		if chunks == 1 {
			return crash
		}
		return nil
	}}
	ctx := context.Background()
	// First run: row writes maintain the index from now on.
	if pending, err := m.Run(ctx); err != nil || pending != 2 {
		t.Fatalf("first run: pending %d, %v", pending, err)
	}
	if st := f.tableRecord("oldTable").State; st.Index != platform.TableIndexBuilding || st.IndexSince == "" {
		t.Fatalf("state after the first run: %+v", st)
	}
	// A row written now is indexed at once; a row changed now too.
	f.rows("oldTable", map[string]any{"n": 1201, "s": "late", "city": "city 1"})
	f.ok("updateTableRows", "PUT", "/v1/tables/oldTable/rows", map[string]any{"rows": []any{map[string]any{"id": 5, "n": 1100}}})
	want = []int{4, 5, 701, 1101}
	if read := check("building", 1201); read < 1200 {
		t.Fatalf("building: %d items read, want the table read (the index is not complete)", read)
	}
	// Second run: the fill stops after its first chunk of 500 rows.
	if _, err := m.Run(ctx); !errors.Is(err, crash) {
		t.Fatalf("second run: %v", err)
	}
	if st := f.tableRecord("oldTable").State; st.Index != platform.TableIndexBuilding {
		t.Fatalf("state after the interrupted fill: %+v", st)
	}
	check("interrupted", 1201)
	// Third run: the fill starts again and completes; the tables are ready.
	if pending, err := m.Run(ctx); err != nil || pending != 0 {
		t.Fatalf("third run: pending %d, %v", pending, err)
	}
	for _, name := range []string{"oldTable", "oldEmptyTable"} {
		if st := f.tableRecord(name).State; st.Index != platform.TableIndexReady {
			t.Fatalf("%s after the migration: %+v", name, st)
		}
		f.checkIndex(name)
	}
	if read := check("migrated", 1201); read > 12 {
		t.Fatalf("migrated: %d items read for 5 rows", read)
	}
	before := len(f.indexItems(f.tableRecord("oldTable")))
	if pending, err := m.Run(ctx); err != nil || pending != 0 || len(f.indexItems(f.tableRecord("oldTable"))) != before {
		t.Fatalf("run again: pending %d, %v", pending, err)
	}
	if chunks != 4 { // 1 interrupted + 3 (1,201 rows)
		t.Fatalf("%d chunks", chunks)
	}
	// Done: a restarted platform reads this mark instead of looking for
	// tables to migrate.
	if done, err := f.Platform.Store.MigrationDone(ctx, "table-column-index"); err != nil || !done {
		t.Fatalf("migration not marked done: %v", err)
	}
}

// rowsPerPartition counts a table's row items in each of its partitions.
func (f *tablesFixture) rowsPerPartition(rec dynamo.TableRecord) map[string]int {
	f.T.Helper()
	db, table := f.Platform.Store.Client(), f.Platform.Env.Table
	pks := []string{"TROWS#" + rec.ID}
	for shard := 0; shard < platform.TableRowShards; shard++ {
		pks = append(pks, fmt.Sprintf("TROWS#%s#%d", rec.ID, shard))
	}
	out := map[string]int{}
	for _, pk := range pks {
		res, err := db.Query(context.Background(), &dynamodb.QueryInput{
			TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
		})
		if err != nil {
			f.T.Fatal(err)
		}
		if len(res.Items) > 0 {
			out[pk] = len(res.Items)
		}
	}
	return out
}

// TestTableRowsSharded: a table's rows spread evenly over 8 partitions
// (row id mod 8), and listing keeps id order, paging and exact counts, also
// with whole partitions emptied by deletes; a table of the previous layout
// (one partition) answers alike and is duplicated into a sharded copy.
func TestTableRowsSharded(t *testing.T) {
	f := newTablesFixture(t)
	f.fillBench("spreadTable", 400)
	f.fillBench("oneTable", 400)
	f.toPreviousLayout("oneTable")
	if parts := f.rowsPerPartition(f.tableRecord("spreadTable")); len(parts) != platform.TableRowShards {
		t.Fatalf("rows per partition: %v", parts)
	} else {
		for pk, n := range parts {
			if n != 400/platform.TableRowShards {
				t.Fatalf("partition %s holds %d rows of 400: %v", pk, n, parts)
			}
		}
	}
	if parts := f.rowsPerPartition(f.tableRecord("oneTable")); len(parts) != 1 {
		t.Fatalf("previous layout: %v", parts)
	}
	// Delete one partition's rows (ids 3, 11, 19, ...) and a few others.
	var gone []int
	for id := 3; id <= 400; id += 8 {
		gone = append(gone, id)
	}
	gone = append(gone, 1, 2, 100, 398, 400)
	var left []int
	for id := 1; id <= 400; id++ {
		if !containsInt(gone, id) {
			left = append(left, id)
		}
	}
	for _, name := range []string{"spreadTable", "oneTable"} {
		r := f.ok("deleteTableRows", "POST", "/v1/tables/"+name+"/rows/delete", map[string]any{"ids": gone})
		if r.Body["deletedRows"] != float64(len(gone)) {
			t.Fatalf("%s: %s", name, r.Raw)
		}
		if rows := f.ok("getTable", "GET", "/v1/tables/"+name, nil).Body["rows"]; rows != float64(len(left)) {
			t.Fatalf("%s: getTable rows %v, want %d", name, rows, len(left))
		}
		for _, dir := range []string{"asc", "desc"} {
			want := append([]int{}, left...)
			if dir == "desc" {
				for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
					want[i], want[j] = want[j], want[i]
				}
			}
			var got []int
			for offset := 0; ; offset += 37 {
				r := f.find(name, map[string]any{"limit": 37, "offset": offset, "orderDirection": dir})
				got = append(got, tids(r.List("rows"))...)
				if r.Body["hasMore"] != true {
					break
				}
			}
			if tjson(got) != tjson(want) {
				t.Fatalf("%s %s: pages give %v", name, dir, got)
			}
		}
		r = f.find(name, map[string]any{"group": map[string]any{"city": "key", "id": "count"}, "limit": 1000})
		total := 0
		for _, g := range r.List("rows") {
			total += int(g.(map[string]any)["idCount"].(float64))
		}
		if total != len(left) {
			t.Fatalf("%s: groups count %d rows, want %d", name, total, len(left))
		}
	}
	r := f.ok("duplicateTable", "POST", "/v1/tables/oneTable/duplicate", map[string]any{"tableName": "spreadCopy"})
	if r.Str("job.status") != "completed" {
		t.Fatalf("duplicate: %s", r.Raw)
	}
	if parts := f.rowsPerPartition(f.tableRecord("spreadCopy")); len(parts) != platform.TableRowShards-1 {
		t.Fatalf("the copy's rows per partition: %v", parts)
	}
	if got := tids(f.find("spreadCopy", map[string]any{"limit": 1000}).List("rows")); tjson(got) != tjson(left) {
		t.Fatalf("the copy's rows: %v", got)
	}
	f.checkIndex("spreadCopy")
}

func containsInt(l []int, v int) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// TestTableIndexManyColumns: rows of 20 indexed columns holding long
// strings (21 items a row, each entry near the sort key's limit) are
// created, updated in every column and deleted within DynamoDB's limits
// of 100 items and 4 MB a transaction, and their index stays exact.
func TestTableIndexManyColumns(t *testing.T) {
	f := newTablesFixture(t)
	cols := map[string]any{}
	for i := 0; i < 20; i++ {
		cols[fmt.Sprintf("c%02d", i)] = tcol("string")
	}
	f.createTable("wideTable", tschema(cols), "factor", 10)
	row := func(n int, tag string) map[string]any {
		r := map[string]any{}
		for i := 0; i < 20; i++ {
			r[fmt.Sprintf("c%02d", i)] = fmt.Sprintf("%s %d %d ", tag, n, i) + strings.Repeat("x", 1000)
		}
		return r
	}
	var rows []map[string]any
	for n := 0; n < 60; n++ {
		rows = append(rows, row(n, "a"))
	}
	if got := len(f.rows("wideTable", rows...).List("rows")); got != 60 {
		t.Fatalf("%d rows created", got)
	}
	var updates []any
	for n := 1; n <= 30; n++ {
		u := row(n, "b")
		u["id"] = n
		updates = append(updates, u)
	}
	f.ok("updateTableRows", "PUT", "/v1/tables/wideTable/rows", map[string]any{"rows": updates})
	f.checkIndex("wideTable")
	r := f.find("wideTable", map[string]any{"filter": map[string]any{"c19": map[string]any{"$gte": "b 7 ", "$lt": "b 7!"}}})
	if got := tids(r.List("rows")); tjson(got) != "[7]" {
		t.Fatalf("find by the 20th column: %v", got)
	}
	d := f.ok("deleteTableRows", "POST", "/v1/tables/wideTable/rows/delete", map[string]any{"filter": map[string]any{"c00": map[string]any{"$lt": "b"}}})
	if d.Body["deletedRows"] != 30.0 {
		t.Fatalf("delete: %s", d.Raw)
	}
	f.checkIndex("wideTable")
	if n := len(f.indexItems(f.tableRecord("wideTable"))); n != 30*20 {
		t.Fatalf("%d index entries for 30 rows of 20 columns", n)
	}
}

// TestTableIndexEntryWithoutRow: new rows' index entries are written
// ahead of the rows (docs/tables.md, "Rows"), so a crash or a failed
// transaction in between leaves entries naming a row that never landed.
// Such an entry (written here for the ids after the table's last, which
// are never given again) changes no answer, through an equality, a $in
// or a range, and no count.
func TestTableIndexEntryWithoutRow(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("orphanTable", tableBenchSchema)
	f.rows("orphanTable", tableBenchRows(0, 5)...)
	rec := f.tableRecord("orphanTable")
	schema, err := tables.Load(rec.Schema, rec.State)
	if err != nil {
		t.Fatal(err)
	}
	db, table := f.Platform.Store.Client(), f.Platform.Env.Table
	for id := int64(100); id < 103; id++ {
		orphan := platform.TableRow{ID: id, Values: map[string]json.RawMessage{"n": json.RawMessage("2"), "city": json.RawMessage(`"city 2"`)}}
		for _, k := range schema.IndexKeys(&orphan) {
			_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "TIDX#" + rec.ID + "#" + k.Col},
				"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s\x00%010d", k.Key, id)},
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, filter := range []map[string]any{
		{"n": 2},
		{"city": "city 2"},
		{"n": map[string]any{"$in": []any{1, 2}}},
		{"n": map[string]any{"$gte": 2, "$lt": 4}},
	} {
		r := f.find("orphanTable", map[string]any{"filter": filter})
		for _, row := range r.List("rows") {
			if id := row.(map[string]any)["id"].(float64); id >= 100 {
				t.Fatalf("filter %v answered the row of an orphan entry: %s", filter, r.Raw)
			}
		}
		want := map[string]int{"n": 1, "city": 1}
		if n, ok := filter["n"].(map[string]any); ok && n["$in"] != nil {
			want["n"] = 2
		} else if ok {
			want["n"] = 2
		}
		if k := map[bool]string{true: "city", false: "n"}[filter["city"] != nil]; len(r.List("rows")) != want[k] {
			t.Fatalf("filter %v: %d rows: %s", filter, len(r.List("rows")), r.Raw)
		}
	}
	if got := f.tableRecord("orphanTable").Rows; got != 5 {
		t.Fatalf("rows counted %d, want 5", got)
	}
}
