package localdynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// TestCapacityUnits: the units counted per partition key and per operation
// are DynamoDB's (sizes rounded up to 1 KB for writes and 4 KB for reads,
// eventual reads half, transactions twice, index writes per index entry
// put, moved or removed), and every request asking for its
// ConsumedCapacity (INDEXES) is answered the same units, by table and by
// index.
func TestCapacityUnits(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "tbl")
	var answered capacityAnswers
	e.db = answered.client(e.db, types.ReturnConsumedCapacityIndexes)
	// padded is an item of about size bytes (names and values counted).
	padded := func(pk, sk string, size int, gpk string) map[string]types.AttributeValue {
		it := keyOf(pk, sk)
		if gpk != "" {
			it["gpk"], it["gsk"] = s(gpk), s(sk)
		}
		it["d"] = s(strings.Repeat("x", max(1, size-len(pk)-len(sk)-8)))
		return it
	}
	put := func(it map[string]types.AttributeValue) func() error {
		return func() error {
			_, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: it})
			return err
		}
	}
	mustPut := func(it map[string]types.AttributeValue) {
		if err := put(it)(); err != nil {
			t.Fatal(err)
		}
	}
	base := func(k string) Partition { return Partition{Table: "tbl", Key: k} }
	gsi := func(k string) Partition { return Partition{Table: "tbl", Index: "gsi1", Key: k} }
	for _, tc := range []struct {
		name   string
		before func()
		run    func() error
		want   map[Partition]Units
		wantFn func() map[Partition]Units // want, computed when the case runs
		op     string
		failed bool // the call fails: nothing is answered, units are counted
	}{
		{name: "small put", run: put(padded("A", "1", 100, "")), op: "PutItem",
			want: map[Partition]Units{base("A"): {Write: 1}}},
		{name: "1.5 KB put", run: put(padded("A", "2", 1500, "")), op: "PutItem",
			want: map[Partition]Units{base("A"): {Write: 2}}},
		{name: "put replacing a larger item costs the larger",
			before: func() { mustPut(padded("A", "3", 3000, "")) },
			run:    put(padded("A", "3", 100, "")), op: "PutItem",
			want: map[Partition]Units{base("A"): {Write: 3}}},
		{name: "indexed put writes the index", run: put(padded("B", "1", 100, "G")), op: "PutItem",
			want: map[Partition]Units{base("B"): {Write: 1}, gsi("G"): {Write: 1}}},
		{name: "moving an index key deletes and puts",
			before: func() { mustPut(padded("B", "2", 100, "G")) },
			run:    put(padded("B", "2", 100, "H")), op: "PutItem",
			want: map[Partition]Units{base("B"): {Write: 1}, gsi("G"): {Write: 1}, gsi("H"): {Write: 1}}},
		{name: "unchanged item leaves the index alone",
			before: func() { mustPut(padded("B", "3", 100, "G")) },
			run:    put(padded("B", "3", 100, "G")), op: "PutItem",
			want: map[Partition]Units{base("B"): {Write: 1}}},
		{name: "delete costs the deleted item",
			before: func() { mustPut(padded("C", "1", 2500, "G")) },
			run: func() error {
				_, err := e.db.DeleteItem(ctx(), &dynamodb.DeleteItemInput{TableName: aws.String("tbl"), Key: keyOf("C", "1")})
				return err
			}, op: "DeleteItem",
			want: map[Partition]Units{base("C"): {Write: 3}, gsi("G"): {Write: 3}}},
		{name: "failed condition still costs", op: "PutItem", failed: true,
			run: func() error {
				_, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: padded("D", "1", 100, "G"),
					ConditionExpression: aws.String("attribute_exists(pk)")})
				if err == nil {
					return fmt.Errorf("condition held")
				}
				return nil
			},
			want: map[Partition]Units{base("D"): {Write: 1}}},
		{name: "update", op: "UpdateItem",
			run: func() error {
				_, err := e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("tbl"), Key: keyOf("E", "1"),
					UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)}})
				return err
			},
			want: map[Partition]Units{base("E"): {Write: 1}}},
		{name: "transaction doubles the base table", op: "TransactWriteItems",
			run: func() error {
				_, err := e.db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{TableName: aws.String("tbl"), Item: padded("F", "1", 100, "G")}},
					{Put: &types.Put{TableName: aws.String("tbl"), Item: padded("F2", "1", 1500, "")}},
					{ConditionCheck: &types.ConditionCheck{TableName: aws.String("tbl"), Key: keyOf("F3", "1"), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
				}})
				return err
			},
			want: map[Partition]Units{base("F"): {Write: 2}, gsi("G"): {Write: 1}, base("F2"): {Write: 4}, base("F3"): {Write: 2}}},
		{name: "eventual get of a small item", op: "GetItem",
			before: func() { mustPut(padded("R", "1", 100, "")) },
			run: func() error {
				_, err := e.db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("R", "1")})
				return err
			},
			want: map[Partition]Units{base("R"): {Read: 0.5}}},
		{name: "consistent get of a 9 KB item", op: "GetItem",
			before: func() { mustPut(padded("R", "2", 9000, "")) },
			run: func() error {
				_, err := e.db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("R", "2"), ConsistentRead: aws.Bool(true)})
				return err
			},
			want: map[Partition]Units{base("R"): {Read: 3}}},
		{name: "transactional get doubles", op: "TransactGetItems",
			run: func() error {
				_, err := e.db.TransactGetItems(ctx(), &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
					{Get: &types.Get{TableName: aws.String("tbl"), Key: keyOf("R", "1")}}}})
				return err
			},
			want: map[Partition]Units{base("R"): {Read: 2}}},
		{name: "query rounds the page up once", op: "Query",
			before: func() {
				for i := range 3 {
					mustPut(padded("Q", fmt.Sprint(i), 2000, "GQ"))
				}
			},
			run: func() error {
				_, err := e.db.Query(ctx(), &dynamodb.QueryInput{TableName: aws.String("tbl"), KeyConditionExpression: aws.String("pk = :p"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("Q")}, ConsistentRead: aws.Bool(true)})
				return err
			},
			want: map[Partition]Units{base("Q"): {Read: 2}}},
		{name: "eventual query of an index", op: "Query",
			run: func() error {
				_, err := e.db.Query(ctx(), &dynamodb.QueryInput{TableName: aws.String("tbl"), IndexName: aws.String("gsi1"), KeyConditionExpression: aws.String("gpk = :p"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("GQ")}})
				return err
			},
			want: map[Partition]Units{gsi("GQ"): {Read: 1}}},
		{name: "scan reads the table's pages", op: "Scan",
			run: func() error {
				_, err := e.db.Scan(ctx(), &dynamodb.ScanInput{TableName: aws.String("tbl"), FilterExpression: aws.String("pk = :p"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("Q")}})
				return err
			},
			wantFn: func() map[Partition]Units {
				return map[Partition]Units{{Table: "tbl", Key: "(scan)"}: {Read: scanUnits(e, "tbl", false)}}
			}},
		{name: "batch get: each item apart", op: "BatchGetItem",
			run: func() error {
				_, err := e.db.BatchGetItem(ctx(), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
					"tbl": {Keys: []map[string]types.AttributeValue{keyOf("R", "1"), keyOf("R", "2"), keyOf("R", "none")}, ConsistentRead: aws.Bool(true)}}})
				return err
			},
			want: map[Partition]Units{base("R"): {Read: 1 + 3 + 1}}},
		{name: "batch write: puts and deletes", op: "BatchWriteItem",
			run: func() error {
				_, err := e.db.BatchWriteItem(ctx(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
					"tbl": {{PutRequest: &types.PutRequest{Item: padded("W", "1", 1500, "GW")}},
						{DeleteRequest: &types.DeleteRequest{Key: keyOf("R", "2")}}}}})
				return err
			},
			want: map[Partition]Units{base("W"): {Write: 2}, gsi("GW"): {Write: 2}, base("R"): {Write: 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			if tc.wantFn != nil {
				tc.want = tc.wantFn()
			}
			e.srv.CountUnits(true)
			defer e.srv.CountUnits(false)
			answered.reset()
			err := tc.run()
			if err != nil {
				t.Fatal(err)
			}
			u := e.srv.Usage()
			want := byIndex(tc.want)
			if tc.failed {
				want = map[string]Units{}
			}
			if got := answered.byIndex(); !maps.Equal(got, want) {
				t.Errorf("ConsumedCapacity answered %v, want %v", got, want)
			}
			if !maps.Equal(u.Partitions, tc.want) {
				t.Errorf("units by partition: %v, want %v", u.Partitions, tc.want)
			}
			var sum Units
			for _, v := range tc.want {
				sum.add(v)
			}
			if ops := slices.Collect(maps.Keys(u.Operations)); len(ops) != 1 || ops[0] != tc.op || u.Operations[tc.op] != sum {
				t.Errorf("units by operation: %v, want %s: %v", u.Operations, tc.op, sum)
			}
		})
	}
}

// TestUnitsNotCountedByDefault: a server counts nothing until asked (a
// long-running one would otherwise keep an entry per partition key).
func TestUnitsNotCountedByDefault(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "tbl")
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: keyOf("A", "1")}); err != nil {
		t.Fatal(err)
	}
	if u := e.srv.Usage(); len(u.Partitions) != 0 || len(u.Operations) != 0 {
		t.Fatalf("counted without CountUnits: %v", u)
	}
}

// scanUnits is what a Scan of a whole table costs as DynamoDB documents
// it: the size of every item read, rounded up to 4 KB once (halved when
// eventually consistent). The items are read as the wire gives them.
func scanUnits(e *env, table string, consistent bool) float64 {
	req, _ := http.NewRequest("POST", e.hs.URL, strings.NewReader(`{"TableName":"`+table+`"}`))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.Scan")
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	var page struct {
		Items            []json.RawMessage
		LastEvaluatedKey json.RawMessage
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil || len(page.LastEvaluatedKey) > 0 {
		panic(fmt.Sprintf("scan of %s: %v (more than a page?)", table, err))
	}
	size := 0
	for _, raw := range page.Items {
		it, err := decodeItem(wireItem{raw: raw})
		if err != nil {
			panic(err)
		}
		size += itemSize(it)
	}
	u := unitsOf(size, readUnitBytes)
	if !consistent {
		u /= 2
	}
	return u
}

// byIndex sums units by table and index ("tbl" or "tbl/gsi1").
func byIndex(parts map[Partition]Units) map[string]Units {
	out := map[string]Units{}
	for p, u := range parts {
		k := p.Table
		if p.Index != "" {
			k += "/" + p.Index
		}
		v := out[k]
		v.add(u)
		out[k] = v
	}
	return out
}

// capacityAnswers records the ConsumedCapacity a client's calls are
// answered.
type capacityAnswers struct {
	mu  sync.Mutex
	got []types.ConsumedCapacity
	n   int // calls answered (with or without ConsumedCapacity)
}

func (a *capacityAnswers) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got, a.n = nil, 0
}

// client returns a client of the same server whose every call asks for
// its ConsumedCapacity (ask) and records the answer.
func (a *capacityAnswers) client(db *dynamodb.Client, ask types.ReturnConsumedCapacity) *dynamodb.Client {
	return dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("AskCapacity",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					askFor(in.Parameters, ask)
					out, md, err := next.HandleInitialize(ctx, in)
					if err == nil {
						a.mu.Lock()
						a.got = append(a.got, answeredCapacity(out.Result)...)
						a.n++
						a.mu.Unlock()
					}
					return out, md, err
				}), middleware.After)
		})
	})
}

// byIndex sums the answers by table and index, as the function of the
// same name sums counted units (an index's units are reads or writes as
// the answer says).
func (a *capacityAnswers) byIndex() map[string]Units {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]Units{}
	add := func(k string, p *types.Capacity) {
		if p == nil {
			return
		}
		u := Units{Read: aws.ToFloat64(p.ReadCapacityUnits), Write: aws.ToFloat64(p.WriteCapacityUnits)}
		if u.Read+u.Write != aws.ToFloat64(p.CapacityUnits) {
			panic(fmt.Sprintf("%s: CapacityUnits %v is not the sum of reads and writes %v", k, aws.ToFloat64(p.CapacityUnits), u))
		}
		if u == (Units{}) {
			return
		}
		v := out[k]
		v.add(u)
		out[k] = v
	}
	for _, c := range a.got {
		add(aws.ToString(c.TableName), c.Table)
		for ix, p := range c.GlobalSecondaryIndexes {
			add(aws.ToString(c.TableName)+"/"+ix, &p)
		}
		for ix, p := range c.LocalSecondaryIndexes {
			add(aws.ToString(c.TableName)+"/"+ix, &p)
		}
	}
	return out
}

// askFor sets ReturnConsumedCapacity on the input of any operation that
// takes it.
func askFor(p any, ask types.ReturnConsumedCapacity) {
	switch in := p.(type) {
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.ScanInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.BatchGetItemInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.BatchWriteItemInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.TransactGetItemsInput:
		in.ReturnConsumedCapacity = ask
	case *dynamodb.TransactWriteItemsInput:
		in.ReturnConsumedCapacity = ask
	}
}

// answeredCapacity is the ConsumedCapacity of an operation's output.
func answeredCapacity(r any) []types.ConsumedCapacity {
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	switch out := r.(type) {
	case *dynamodb.GetItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		return out.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		return out.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		return out.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		return out.ConsumedCapacity
	}
	return nil
}

// TestConsumedCapacityAnswer: the shape of ConsumedCapacity as DynamoDB
// answers it: nothing unless asked (NONE or absent), with TOTAL the
// table's total and its read or write units, with INDEXES also the table
// and each index apart (a Query of an index: the table 0), one entry per
// table in batches and transactions; answered whether or not the server
// counts units, and an unknown value refused.
func TestConsumedCapacityAnswer(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "tbl")
	createTable(t, e.db, "other")
	item := keyOf("A", "1")
	item["gpk"], item["gsk"] = s("G"), s("1")
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: item}); err != nil {
		t.Fatal(err)
	}
	f := aws.Float64
	moves := 0
	queried := keyOf("Q", "1") // stays in gsi1's partition G
	queried["gpk"], queried["gsk"] = s("G"), s("1")
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: queried}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ask  types.ReturnConsumedCapacity
		run  func(db *dynamodb.Client) ([]types.ConsumedCapacity, error)
		want []types.ConsumedCapacity
	}{
		{name: "not asked", ask: "", run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			r, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("A", "1")})
			return answeredCapacity(r), err
		}},
		{name: "NONE", ask: types.ReturnConsumedCapacityNone, run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			r, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("A", "1")})
			return answeredCapacity(r), err
		}},
		{name: "TOTAL read", ask: types.ReturnConsumedCapacityTotal, run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			r, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("A", "1")})
			return answeredCapacity(r), err
		}, want: []types.ConsumedCapacity{{TableName: aws.String("tbl"), CapacityUnits: f(0.5), ReadCapacityUnits: f(0.5)}}},
		{name: "TOTAL write", ask: types.ReturnConsumedCapacityTotal, run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			r, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: item})
			return answeredCapacity(r), err
		}, want: []types.ConsumedCapacity{{TableName: aws.String("tbl"), CapacityUnits: f(1), WriteCapacityUnits: f(1)}}},
		{name: "INDEXES write of an indexed item", ask: types.ReturnConsumedCapacityIndexes, run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			moves++ // a new index key each run: a delete and a put in the index
			r, err := db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("tbl"), Key: keyOf("A", "1"),
				UpdateExpression: aws.String("SET gpk = :h"), ExpressionAttributeValues: map[string]types.AttributeValue{":h": s(fmt.Sprint("H", moves))}})
			return answeredCapacity(r), err
		}, want: []types.ConsumedCapacity{{TableName: aws.String("tbl"), CapacityUnits: f(3), WriteCapacityUnits: f(3),
			Table:                  &types.Capacity{CapacityUnits: f(1), WriteCapacityUnits: f(1)},
			GlobalSecondaryIndexes: map[string]types.Capacity{"gsi1": {CapacityUnits: f(2), WriteCapacityUnits: f(2)}}}}},
		{name: "INDEXES query of an index", ask: types.ReturnConsumedCapacityIndexes, run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			r, err := db.Query(ctx(), &dynamodb.QueryInput{TableName: aws.String("tbl"), IndexName: aws.String("gsi1"), KeyConditionExpression: aws.String("gpk = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("G")}})
			return answeredCapacity(r), err
		}, want: []types.ConsumedCapacity{{TableName: aws.String("tbl"), CapacityUnits: f(0.5), ReadCapacityUnits: f(0.5),
			Table:                  &types.Capacity{CapacityUnits: f(0), ReadCapacityUnits: f(0)},
			GlobalSecondaryIndexes: map[string]types.Capacity{"gsi1": {CapacityUnits: f(0.5), ReadCapacityUnits: f(0.5)}}}}},
		{name: "TOTAL batch over two tables", ask: types.ReturnConsumedCapacityTotal, run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			r, err := db.BatchWriteItem(ctx(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
				"tbl":   {{PutRequest: &types.PutRequest{Item: keyOf("B", "1")}}, {PutRequest: &types.PutRequest{Item: keyOf("B", "2")}}},
				"other": {{PutRequest: &types.PutRequest{Item: keyOf("B", "1")}}}}})
			return answeredCapacity(r), err
		}, want: []types.ConsumedCapacity{
			{TableName: aws.String("other"), CapacityUnits: f(1), WriteCapacityUnits: f(1)},
			{TableName: aws.String("tbl"), CapacityUnits: f(2), WriteCapacityUnits: f(2)}}},
		{name: "TOTAL transaction", ask: types.ReturnConsumedCapacityTotal, run: func(db *dynamodb.Client) ([]types.ConsumedCapacity, error) {
			r, err := db.TransactGetItems(ctx(), &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String("tbl"), Key: keyOf("B", "1")}}, {Get: &types.Get{TableName: aws.String("other"), Key: keyOf("B", "1")}}}})
			return answeredCapacity(r), err
		}, want: []types.ConsumedCapacity{
			{TableName: aws.String("other"), CapacityUnits: f(2), ReadCapacityUnits: f(2)},
			{TableName: aws.String("tbl"), CapacityUnits: f(2), ReadCapacityUnits: f(2)}}},
	} {
		for _, counting := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/counting=%v", tc.name, counting), func(t *testing.T) {
				e.srv.CountUnits(counting)
				defer e.srv.CountUnits(false)
				var a capacityAnswers
				got, err := tc.run(a.client(e.db, tc.ask))
				if err != nil {
					t.Fatal(err)
				}
				if g, w := capacityJSON(got), capacityJSON(tc.want); g != w {
					t.Errorf("ConsumedCapacity\n got %s\nwant %s", g, w)
				}
			})
		}
	}
	t.Run("unknown value", func(t *testing.T) {
		var a capacityAnswers
		_, err := a.client(e.db, "ALL").GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("A", "1")})
		if err == nil || !strings.Contains(err.Error(), "ValidationException") || !strings.Contains(err.Error(), "returnConsumedCapacity") {
			t.Fatalf("ReturnConsumedCapacity ALL: %v", err)
		}
		_, err = a.client(e.db, "ALL").PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: keyOf("Z", "1")})
		if err == nil || !strings.Contains(err.Error(), "ValidationException") {
			t.Fatalf("ReturnConsumedCapacity ALL: %v", err)
		}
		r, err := e.db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("Z", "1")})
		if err != nil || r.Item != nil {
			t.Fatalf("a refused put wrote: %v %v", r.Item, err)
		}
	})
}

func capacityJSON(cc []types.ConsumedCapacity) string {
	b, _ := json.Marshal(cc)
	return string(b)
}
