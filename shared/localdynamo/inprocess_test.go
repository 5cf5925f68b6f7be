package localdynamo

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TestInProcessMatchesHTTP runs the same requests, in the same order, on
// two servers with the same history: one through the in-process path,
// one over HTTP (JSON), and requires the same typed outputs (but for the
// response metadata) and the same errors: the same message, the same
// typed error (ConditionalCheckFailedException with its item,
// TransactionCanceledException with its reasons and items), the same
// API error code and message. It also requires that the in-process
// client took the in-process path, but for the requests that path leaves
// to HTTP (a legacy parameter), and that the HTTP client never did.
func TestInProcessMatchesHTTP(t *testing.T) {
	inSrv, err := Open(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	httpSrv, err := Open(filepath.Join(t.TempDir(), "http"))
	if err != nil {
		t.Fatal(err)
	}
	inHS, httpHS := httptest.NewServer(inSrv), httptest.NewServer(httpSrv)
	t.Cleanup(func() { inHS.Close(); httpHS.Close(); _ = inSrv.Close(); _ = httpSrv.Close() })
	inDB := newClient(inHS.URL, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, inSrv.InProcess) })
	httpDB := newClient(httpHS.URL)
	createTable(t, inDB, "tbl")
	createTable(t, httpDB, "tbl")

	str := aws.String
	item := func(pk, sk string, more ...any) map[string]types.AttributeValue {
		it := keyOf(pk, sk)
		for i := 0; i+1 < len(more); i += 2 {
			it[more[i].(string)] = more[i+1].(types.AttributeValue)
		}
		return it
	}
	every := map[string]types.AttributeValue{
		"s": s("x"), "n": n(7), "b": &types.AttributeValueMemberB{Value: []byte{0, 1, 2}},
		"t": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs":  &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
		"l":   &types.AttributeValueMemberL{Value: []types.AttributeValue{s("a"), n(1), &types.AttributeValueMemberL{Value: []types.AttributeValue{}}}},
		"m":   &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("v"), "e": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}},
		"uni": s("é <&> \u2028 \"q\""),
	}
	full := item("p", "all")
	for k, v := range every {
		full[k] = v
	}

	type step struct {
		name   string
		call   func(db *dynamodb.Client) (any, error)
		viaHTP bool // the in-process path leaves it to HTTP
	}
	ctx := context.Background()
	put := func(in *dynamodb.PutItemInput) func(db *dynamodb.Client) (any, error) {
		return func(db *dynamodb.Client) (any, error) { return db.PutItem(ctx, in) }
	}
	var steps []step
	for i := range 12 {
		sk := string(rune('a' + i))
		steps = append(steps, step{name: "put " + sk, call: put(&dynamodb.PutItemInput{TableName: str("tbl"),
			Item: item("q", sk, "gpk", s("g"), "gsk", s(sk), "v", n(i), "pad", s(strings.Repeat("x", 300*i)))})})
	}
	steps = append(steps, []step{
		{name: "put every type, consumed capacity INDEXES", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: full, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})},
		// An empty binary: stored and read back whole (minidyn's
		// expressions refuse to evaluate one, on either path).
		{name: "put empty binary", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("p", "eb", "eb", &types.AttributeValueMemberB{Value: []byte{}})})},
		// Nil collections and a nil binary, as the SDK's JSON sends them.
		{name: "put nil list and map", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("p", "nil",
			"l", &types.AttributeValueMemberL{}, "m", &types.AttributeValueMemberM{})})},
		{name: "put nil string set", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("p", "x", "ss", &types.AttributeValueMemberSS{})})},
		{name: "put nil binary", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("p", "x", "b", &types.AttributeValueMemberB{})})},
		{name: "put invalid UTF-8 (HTTP)", viaHTP: true, call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("p", "utf", "s", s("a\xffb"))})},
		{name: "get invalid UTF-8 put", call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: keyOf("p", "utf")})
		}},
		{name: "get nil list and map", call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: keyOf("p", "nil")})
		}},
		{name: "put ALL_OLD", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "a", "v", n(100), "gpk", s("g"), "gsk", s("a")), ReturnValues: types.ReturnValueAllOld, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})},
		{name: "put condition fails, ALL_OLD", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "b"), ConditionExpression: str("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})},
		{name: "put condition fails", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "b"), ConditionExpression: str("#v = :v"),
			ExpressionAttributeNames: map[string]string{"#v": "v"}, ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(-1)}})},
		{name: "put unknown table", call: put(&dynamodb.PutItemInput{TableName: str("nope"), Item: item("q", "b")})},
		{name: "put empty string set", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x", "ss", &types.AttributeValueMemberSS{Value: []string{}})})},
		{name: "put bad number", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x", "n", &types.AttributeValueMemberN{Value: "1e"})})},
		{name: "put NULL false", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x", "z", &types.AttributeValueMemberNULL{Value: false})})},
		{name: "put too large", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x", "big", s(strings.Repeat("y", 410*1024)))})},
		{name: "put unused placeholder", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x"), ConditionExpression: str("attribute_exists(pk)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": n(1)}})},
		{name: "put syntax error", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x"), ConditionExpression: str("attribute_exists(")})},
		{name: "put bad ReturnConsumedCapacity", call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x"), ReturnConsumedCapacity: "SOME"})},
		{name: "put legacy Expected (HTTP)", viaHTP: true, call: put(&dynamodb.PutItemInput{TableName: str("tbl"), Item: item("q", "x"),
			Expected: map[string]types.ExpectedAttributeValue{"pk": {Exists: aws.Bool(false)}}})},
		{name: "get every type", call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: keyOf("p", "all"), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		}},
		{name: "get empty binary", call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: keyOf("p", "eb")})
		}},
		{name: "delete empty binary", call: func(db *dynamodb.Client) (any, error) {
			return db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: str("tbl"), Key: keyOf("p", "eb"), ReturnValues: types.ReturnValueAllOld})
		}},
		{name: "get missing", call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: keyOf("p", "none"), ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		}},
		{name: "get projection", call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: keyOf("p", "all"), ProjectionExpression: str("#m.k, l[1], s"),
				ExpressionAttributeNames: map[string]string{"#m": "m"}})
		}},
		{name: "get key missing its sort key", call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: map[string]types.AttributeValue{"pk": s("p")}})
		}},
		{name: "get legacy AttributesToGet (HTTP)", viaHTP: true, call: func(db *dynamodb.Client) (any, error) {
			return db.GetItem(ctx, &dynamodb.GetItemInput{TableName: str("tbl"), Key: keyOf("p", "all"), AttributesToGet: []string{"s"}})
		}},
		{name: "update ALL_NEW", call: func(db *dynamodb.Client) (any, error) {
			return db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: str("tbl"), Key: keyOf("q", "c"), UpdateExpression: str("SET v = v + :one, w = :w REMOVE #pad"),
				ExpressionAttributeNames: map[string]string{"#pad": "pad"}, ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1), ":w": s("w")}, ReturnValues: types.ReturnValueAllNew, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		}},
		{name: "update UPDATED_OLD", call: func(db *dynamodb.Client) (any, error) {
			return db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: str("tbl"), Key: keyOf("q", "c"), UpdateExpression: str("SET v = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(50)}, ReturnValues: types.ReturnValueUpdatedOld})
		}},
		{name: "update creates", call: func(db *dynamodb.Client) (any, error) {
			return db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: str("tbl"), Key: keyOf("q", "new"), UpdateExpression: str("ADD c :one"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)}, ReturnValues: types.ReturnValueUpdatedNew})
		}},
		{name: "update condition fails, ALL_OLD", call: func(db *dynamodb.Client) (any, error) {
			return db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: str("tbl"), Key: keyOf("q", "c"), UpdateExpression: str("SET v = :v"), ConditionExpression: str("v < :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(0)}, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		}},
		{name: "update a key", call: func(db *dynamodb.Client) (any, error) {
			return db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: str("tbl"), Key: keyOf("q", "c"), UpdateExpression: str("SET sk = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("z")}})
		}},
		{name: "update bad ReturnValues", call: func(db *dynamodb.Client) (any, error) {
			return db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: str("tbl"), Key: keyOf("q", "c"), UpdateExpression: str("SET v = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("z")}, ReturnValues: "SOME"})
		}},
		{name: "delete ALL_OLD", call: func(db *dynamodb.Client) (any, error) {
			return db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: str("tbl"), Key: keyOf("q", "d"), ReturnValues: types.ReturnValueAllOld, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		}},
		{name: "delete missing", call: func(db *dynamodb.Client) (any, error) {
			return db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: str("tbl"), Key: keyOf("q", "d"), ReturnValues: types.ReturnValueAllOld})
		}},
		{name: "delete condition fails", call: func(db *dynamodb.Client) (any, error) {
			return db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: str("tbl"), Key: keyOf("q", "e"), ConditionExpression: str("attribute_not_exists(pk)"),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		}},
	}...)
	query := func(in *dynamodb.QueryInput) func(db *dynamodb.Client) (any, error) {
		return func(db *dynamodb.Client) (any, error) { return db.Query(ctx, in) }
	}
	keyCond := map[string]types.AttributeValue{":p": s("q")}
	steps = append(steps, []step{
		{name: "query page 1 (LastEvaluatedKey)", call: query(&dynamodb.QueryInput{TableName: str("tbl"), KeyConditionExpression: str("pk = :p"), ExpressionAttributeValues: keyCond, Limit: aws.Int32(4), ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})},
		{name: "query page 2 (ExclusiveStartKey)", call: query(&dynamodb.QueryInput{TableName: str("tbl"), KeyConditionExpression: str("pk = :p"), ExpressionAttributeValues: keyCond, Limit: aws.Int32(4), ExclusiveStartKey: keyOf("q", "e")})},
		{name: "query backwards, sort key condition", call: query(&dynamodb.QueryInput{TableName: str("tbl"), KeyConditionExpression: str("pk = :p AND sk BETWEEN :a AND :z"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("q"), ":a": s("b"), ":z": s("j")}, ScanIndexForward: aws.Bool(false), ConsistentRead: aws.Bool(true)})},
		{name: "query filter and projection", call: query(&dynamodb.QueryInput{TableName: str("tbl"), KeyConditionExpression: str("pk = :p"), FilterExpression: str("v > :v"),
			ProjectionExpression: str("sk, v"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("q"), ":v": n(5)}})},
		{name: "query count", call: query(&dynamodb.QueryInput{TableName: str("tbl"), KeyConditionExpression: str("pk = :p"), ExpressionAttributeValues: keyCond, Select: types.SelectCount})},
		{name: "query nothing", call: query(&dynamodb.QueryInput{TableName: str("tbl"), KeyConditionExpression: str("pk = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("none")}})},
		{name: "query index, page", call: query(&dynamodb.QueryInput{TableName: str("tbl"), IndexName: str("gsi1"), KeyConditionExpression: str("gpk = :g"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("g")}, Limit: aws.Int32(3), ScanIndexForward: aws.Bool(false), ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})},
		{name: "query unknown index", call: query(&dynamodb.QueryInput{TableName: str("tbl"), IndexName: str("nope"), KeyConditionExpression: str("gpk = :g"), ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("g")}})},
		{name: "query bad key condition", call: query(&dynamodb.QueryInput{TableName: str("tbl"), KeyConditionExpression: str("v = :p"), ExpressionAttributeValues: keyCond})},
		{name: "query legacy KeyConditions (HTTP)", viaHTP: true, call: query(&dynamodb.QueryInput{TableName: str("tbl"),
			KeyConditions: map[string]types.Condition{"pk": {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []types.AttributeValue{s("q")}}}})},
		{name: "scan page", call: func(db *dynamodb.Client) (any, error) {
			return db.Scan(ctx, &dynamodb.ScanInput{TableName: str("tbl"), Limit: aws.Int32(5), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		}},
		{name: "scan segment", call: func(db *dynamodb.Client) (any, error) {
			return db.Scan(ctx, &dynamodb.ScanInput{TableName: str("tbl"), Segment: aws.Int32(1), TotalSegments: aws.Int32(3), FilterExpression: str("attribute_exists(v)")})
		}},
		{name: "batch get", call: func(db *dynamodb.Client) (any, error) {
			return db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				"tbl": {Keys: []map[string]types.AttributeValue{keyOf("q", "a"), keyOf("q", "none"), keyOf("p", "all")}, ProjectionExpression: str("pk, sk, #v"), ExpressionAttributeNames: map[string]string{"#v": "v"}},
			}, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		}},
		{name: "batch get duplicates", call: func(db *dynamodb.Client) (any, error) {
			return db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"tbl": {Keys: []map[string]types.AttributeValue{keyOf("q", "a"), keyOf("q", "a")}}}})
		}},
		{name: "batch write", call: func(db *dynamodb.Client) (any, error) {
			return db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"tbl": {
				{PutRequest: &types.PutRequest{Item: item("r", "1", "v", n(1))}}, {PutRequest: &types.PutRequest{Item: item("r", "2")}},
				{DeleteRequest: &types.DeleteRequest{Key: keyOf("q", "f")}},
			}}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		}},
		{name: "batch write both kinds in one", call: func(db *dynamodb.Client) (any, error) {
			return db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"tbl": {
				{PutRequest: &types.PutRequest{Item: item("r", "3")}, DeleteRequest: &types.DeleteRequest{Key: keyOf("r", "3")}}}}})
		}},
		{name: "transact write", call: func(db *dynamodb.Client) (any, error) {
			return db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: str("tbl"), Item: item("r", "4", "v", n(4)), ConditionExpression: str("attribute_not_exists(pk)")}},
				{Update: &types.Update{TableName: str("tbl"), Key: keyOf("r", "1"), UpdateExpression: str("SET v = v + :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)}}},
				{Delete: &types.Delete{TableName: str("tbl"), Key: keyOf("r", "2")}},
				{ConditionCheck: &types.ConditionCheck{TableName: str("tbl"), Key: keyOf("q", "a"), ConditionExpression: str("attribute_exists(pk)")}},
			}, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		}},
		{name: "transact write canceled, reasons and items", call: func(db *dynamodb.Client) (any, error) {
			return db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: str("tbl"), Item: item("r", "5")}},
				{Put: &types.Put{TableName: str("tbl"), Item: item("r", "4"), ConditionExpression: str("attribute_not_exists(pk)"), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
				{ConditionCheck: &types.ConditionCheck{TableName: str("tbl"), Key: keyOf("r", "1"), ConditionExpression: str("v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(0)}}},
				{Update: &types.Update{TableName: str("tbl"), Key: keyOf("r", "9"), UpdateExpression: str("SET v = :v"), ConditionExpression: str("attribute_exists(pk)"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(0)}, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			}})
		}},
		{name: "transact write one item twice", call: func(db *dynamodb.Client) (any, error) {
			return db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: str("tbl"), Item: item("r", "6")}}, {Delete: &types.Delete{TableName: str("tbl"), Key: keyOf("r", "6")}}}})
		}},
		{name: "transact get", call: func(db *dynamodb.Client) (any, error) {
			return db.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: str("tbl"), Key: keyOf("r", "1")}}, {Get: &types.Get{TableName: str("tbl"), Key: keyOf("r", "none")}},
				{Get: &types.Get{TableName: str("tbl"), Key: keyOf("p", "all"), ProjectionExpression: str("#b"), ExpressionAttributeNames: map[string]string{"#b": "bs"}}},
			}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		}},
		{name: "scan all, after the writes", call: func(db *dynamodb.Client) (any, error) {
			return db.Scan(ctx, &dynamodb.ScanInput{TableName: str("tbl"), ConsistentRead: aws.Bool(true)})
		}},
	}...)

	// The steps that fail (on both paths); every other one must succeed.
	fails := map[string]bool{}
	for _, name := range []string{"put condition fails, ALL_OLD", "put condition fails", "put unknown table", "put empty string set", "put nil string set", "put nil binary", "put bad number",
		"put NULL false", "put too large", "put unused placeholder", "put syntax error", "put bad ReturnConsumedCapacity", "put legacy Expected (HTTP)",
		"get key missing its sort key", "get legacy AttributesToGet (HTTP)", "update condition fails, ALL_OLD", "update a key", "update bad ReturnValues",
		"delete condition fails", "query unknown index", "query bad key condition", "query legacy KeyConditions (HTTP)", "batch get duplicates",
		"batch write both kinds in one", "transact write canceled, reasons and items", "transact write one item twice"} {
		fails[name] = true
	}
	for _, st := range steps {
		beforeIn, beforeHTTP := inSrv.InProcessCalls(), httpSrv.InProcessCalls()
		gotIn, errIn := st.call(inDB)
		gotHTTP, errHTTP := st.call(httpDB)
		if d := httpSrv.InProcessCalls() - beforeHTTP; d != 0 {
			t.Errorf("%s: the HTTP client took the in-process path %d times", st.name, d)
		}
		if d, want := inSrv.InProcessCalls()-beforeIn, int64(1); st.viaHTP && d != 0 || !st.viaHTP && d != want {
			t.Errorf("%s: %d in-process calls, want %d", st.name, d, map[bool]int64{true: 0, false: 1}[st.viaHTP])
		}
		if (errHTTP != nil) != fails[st.name] {
			t.Errorf("%s: error %v, want one: %v", st.name, errHTTP, fails[st.name])
		}
		if (errIn == nil) != (errHTTP == nil) {
			t.Errorf("%s: in-process error %v, HTTP error %v", st.name, errIn, errHTTP)
			continue
		}
		if errIn != nil {
			compareErrors(t, st.name, errIn, errHTTP)
			continue
		}
		if a, b := withoutMetadata(gotIn), withoutMetadata(gotHTTP); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: outputs differ\nin-process: %.3000s\nHTTP:       %.3000s", st.name, dump(a), dump(b))
		}
	}
}

// compareErrors requires the same error from both paths.
func compareErrors(t *testing.T, name string, a, b error) {
	t.Helper()
	if a.Error() != b.Error() {
		t.Errorf("%s: error\nin-process: %v\nHTTP:       %v", name, a, b)
	}
	var ea, eb smithy.APIError
	if errors.As(a, &ea) != errors.As(b, &eb) || ea != nil && (ea.ErrorCode() != eb.ErrorCode() || ea.ErrorMessage() != eb.ErrorMessage() || ea.ErrorFault() != eb.ErrorFault()) {
		t.Errorf("%s: API error %#v, HTTP %#v", name, ea, eb)
	}
	if ea != nil && reflect.TypeOf(ea) != reflect.TypeOf(eb) {
		t.Errorf("%s: error type %T, HTTP %T", name, ea, eb)
	}
	var ca, cb *types.ConditionalCheckFailedException
	if errors.As(a, &ca) != errors.As(b, &cb) || ca != nil && !reflect.DeepEqual(ca, cb) {
		t.Errorf("%s: ConditionalCheckFailedException %s, HTTP %s", name, dump(ca), dump(cb))
	}
	var ta, tb *types.TransactionCanceledException
	if errors.As(a, &ta) != errors.As(b, &tb) || ta != nil && !reflect.DeepEqual(ta, tb) {
		t.Errorf("%s: TransactionCanceledException %s, HTTP %s", name, dump(ta), dump(tb))
	}
}

// withoutMetadata is an output with its ResultMetadata zeroed (the
// HTTP path's holds the response's details).
func withoutMetadata(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return v
	}
	c := reflect.New(rv.Elem().Type())
	c.Elem().Set(rv.Elem())
	if f := c.Elem().FieldByName("ResultMetadata"); f.IsValid() {
		f.Set(reflect.Zero(f.Type()))
	}
	return c.Interface()
}

// dump prints a value with its pointers followed (for failure messages).
func dump(v any) string {
	var b strings.Builder
	dumpValue(&b, reflect.ValueOf(v))
	return b.String()
}

func dumpValue(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("<nil>")
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if v.Kind() == reflect.Interface {
			b.WriteString(v.Elem().Type().String())
		}
		dumpValue(b, v.Elem())
	case reflect.Struct:
		b.WriteString("{")
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			fmt.Fprintf(b, "%s:", v.Type().Field(i).Name)
			dumpValue(b, v.Field(i))
			b.WriteString(" ")
		}
		b.WriteString("}")
	case reflect.Map:
		if v.IsNil() {
			b.WriteString("map(nil)")
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		b.WriteString("map[")
		for _, k := range keys {
			fmt.Fprintf(b, "%v:", k)
			dumpValue(b, v.MapIndex(k))
			b.WriteString(" ")
		}
		b.WriteString("]")
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("[](nil)")
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			fmt.Fprintf(b, "%q", v.Bytes())
			return
		}
		b.WriteString("[")
		for i := range v.Len() {
			dumpValue(b, v.Index(i))
			b.WriteString(" ")
		}
		b.WriteString("]")
	default:
		fmt.Fprintf(b, "%#v", v.Interface())
	}
}

// TestInProcessRetriesAsHTTP: an error the SDK's retryer retries (a
// closed server's 503 ServiceUnavailable) is retried as often through the
// in-process path as over HTTP, each attempt running the operation again,
// and ends in the same error.
func TestInProcessRetriesAsHTTP(t *testing.T) {
	srv, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	retrying := func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	}
	get := &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: keyOf("a", "b")}
	_, httpErr := newClient(hs.URL, retrying).GetItem(ctx(), get)
	httpCalls := srv.Calls()["GetItem"]
	_, inErr := newClient(hs.URL, retrying, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, srv.InProcess) }).GetItem(ctx(), get)
	if httpErr == nil || inErr == nil || inErr.Error() != httpErr.Error() {
		t.Fatalf("errors: in-process %v, HTTP %v", inErr, httpErr)
	}
	if n := srv.InProcessCalls(); n != 3 || httpCalls != 3 || srv.Calls()["GetItem"] != 6 {
		t.Errorf("attempts: in-process %d, HTTP %d (want 3 each; total %d)", n, httpCalls, srv.Calls()["GetItem"])
	}
	// RunDirect's attempt is the SDK call's first: its failure answered
	// there, not run again, and retried as ever (3 attempts in all).
	inProc := newClient(hs.URL, retrying, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, srv.InProcess) })
	out, sdkCtx, ok := srv.RunDirect(ctx(), get)
	if ok || out != nil {
		t.Fatalf("RunDirect on a closed store: %v, %v", out, ok)
	}
	_, directErr := inProc.GetItem(sdkCtx, get)
	if directErr == nil || directErr.Error() != httpErr.Error() {
		t.Fatalf("errors: direct then SDK %v, HTTP %v", directErr, httpErr)
	}
	if n := srv.Calls()["GetItem"]; n != 9 {
		t.Errorf("attempts: direct then SDK %d, want 3", n-6)
	}
}
