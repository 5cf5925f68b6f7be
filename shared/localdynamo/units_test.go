package localdynamo

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestCapacityUnits: the units counted per partition key and per operation
// are DynamoDB's (sizes rounded up to 1 KB for writes and 4 KB for reads,
// eventual reads half, transactions twice, index writes per index entry
// put, moved or removed).
func TestCapacityUnits(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "tbl")
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
		op     string
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
		{name: "failed condition still costs", op: "PutItem",
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			e.srv.CountUnits(true)
			defer e.srv.CountUnits(false)
			if err := tc.run(); err != nil {
				t.Fatal(err)
			}
			u := e.srv.Usage()
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
