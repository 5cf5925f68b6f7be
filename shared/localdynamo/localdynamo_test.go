package localdynamo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// state is everything tests compare across a reopen.
type state struct {
	Items  []string
	GSI    []string
	TTL    string
	Tables []string
	Desc   string
}

func snapshot(t testing.TB, db *dynamodb.Client, table string) state {
	t.Helper()
	ttl, err := db.DescribeTimeToLive(ctx(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("DescribeTimeToLive: %v", err)
	}
	tables, err := db.ListTables(ctx(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	desc, err := db.DescribeTable(ctx(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	d := desc.Table
	return state{
		Items:  scanAll(t, db, table),
		GSI:    queryGSI(t, db, table, "g"),
		TTL:    fmt.Sprintf("%s/%s", ttl.TimeToLiveDescription.TimeToLiveStatus, aws.ToString(ttl.TimeToLiveDescription.AttributeName)),
		Tables: tables.TableNames,
		Desc: fmt.Sprintf("%s %s items=%d keys=%d attrs=%d gsis=%d", aws.ToString(d.TableName), d.TableStatus,
			aws.ToInt64(d.ItemCount), len(d.KeySchema), len(d.AttributeDefinitions), len(d.GlobalSecondaryIndexes)),
	}
}

// Test 1: state written through every kind of write survives Close and
// Open; failed conditional writes are neither applied nor replayed.
func TestReopenPreservesState(t *testing.T) {
	e := openEnv(t, t.TempDir())
	db := e.db
	createTable(t, db, "main")
	createTable(t, db, "other")

	desc, err := db.DescribeTable(ctx(), &dynamodb.DescribeTableInput{TableName: aws.String("main")})
	if err != nil || desc.Table.TableStatus != types.TableStatusActive {
		t.Fatalf("DescribeTable: status %v, err %v", desc, err)
	}
	if _, err := db.UpdateTimeToLive(ctx(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("main"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)},
	}); err != nil {
		t.Fatalf("UpdateTimeToLive: %v", err)
	}

	for i := range 6 {
		_, err := db.PutItem(ctx(), &dynamodb.PutItemInput{
			TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{
				"pk": s("p"), "sk": s(fmt.Sprintf("s%d", i)),
				"gpk": s("g"), "gsk": s(fmt.Sprintf("%d", 9-i)),
				"v": n(i), "tags": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
			},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		if err != nil {
			t.Fatalf("PutItem %d: %v", i, err)
		}
	}
	// PutItem returns the old item only when asked to.
	out, err := db.PutItem(ctx(), &dynamodb.PutItemInput{
		TableName:    aws.String("main"),
		Item:         map[string]types.AttributeValue{"pk": s("p"), "sk": s("s0"), "gpk": s("g"), "gsk": s("9"), "v": n(100)},
		ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil || out.Attributes["v"].(*types.AttributeValueMemberN).Value != "0" {
		t.Fatalf("PutItem ALL_OLD: %v, %v", out, err)
	}
	if out, err := db.PutItem(ctx(), &dynamodb.PutItemInput{
		TableName: aws.String("main"), Item: map[string]types.AttributeValue{"pk": s("q"), "sk": s("x")},
	}); err != nil || len(out.Attributes) != 0 {
		t.Fatalf("PutItem: attributes %v, err %v", out.Attributes, err)
	}

	// UpdateItem: ADD counter, SET attributes, move an item within the GSI.
	for range 3 {
		if _, err := db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String("main"),
			Key:                       keyOf("p", "s1"),
			UpdateExpression:          aws.String("ADD #c :one SET note = :note"),
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			ExpressionAttributeNames:  map[string]string{"#c": "count"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1), ":note": s("updated")},
		}); err != nil {
			t.Fatalf("UpdateItem: %v", err)
		}
	}
	if _, err := db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
		TableName: aws.String("main"), Key: keyOf("p", "s2"),
		UpdateExpression:          aws.String("SET gsk = :k"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": s("0")},
	}); err != nil {
		t.Fatalf("UpdateItem gsk: %v", err)
	}
	if _, err := db.DeleteItem(ctx(), &dynamodb.DeleteItemInput{TableName: aws.String("main"), Key: keyOf("p", "s3")}); err != nil {
		t.Fatalf("DeleteItem: %v", err)
	}

	// Transactions, one committed and one cancelled.
	if _, err := db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("main"), Item: map[string]types.AttributeValue{"pk": s("tbl"), "sk": s("1"), "gpk": s("g"), "gsk": s("5")},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Update: &types.Update{TableName: aws.String("main"), Key: keyOf("p", "s4"), UpdateExpression: aws.String("SET v = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(44)}}},
		{Delete: &types.Delete{TableName: aws.String("main"), Key: keyOf("p", "s5")}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("main"), Key: keyOf("p", "s1"),
			ConditionExpression: aws.String("attribute_exists(pk)")}},
	}}); err != nil {
		t.Fatalf("TransactWriteItems: %v", err)
	}

	// BatchWriteItem over two tables.
	if _, err := db.BatchWriteItem(ctx(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"main": {
			{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": s("b"), "sk": s("1"), "gpk": s("g"), "gsk": s("1")}}},
			{DeleteRequest: &types.DeleteRequest{Key: keyOf("q", "x")}},
		},
		"other": {{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": s("o"), "sk": s("1")}}}},
	}}); err != nil {
		t.Fatalf("BatchWriteItem: %v", err)
	}

	itemsBefore := scanAll(t, db, "main")

	// Failed writes: none may change anything, now or after replay.
	_, err = db.PutItem(ctx(), &dynamodb.PutItemInput{
		TableName:           aws.String("main"),
		Item:                map[string]types.AttributeValue{"pk": s("p"), "sk": s("s1"), "v": n(-1)},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if !isErr[*types.ConditionalCheckFailedException](err) {
		t.Fatalf("conditional PutItem: got %v, want ConditionalCheckFailedException", err)
	}
	_, err = db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
		TableName: aws.String("main"), Key: keyOf("p", "s1"),
		UpdateExpression:          aws.String("SET v = :v"),
		ConditionExpression:       aws.String("v = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(-1), ":old": n(12345)},
	})
	if !isErr[*types.ConditionalCheckFailedException](err) {
		t.Fatalf("conditional UpdateItem: got %v, want ConditionalCheckFailedException", err)
	}
	_, err = db.DeleteItem(ctx(), &dynamodb.DeleteItemInput{
		TableName: aws.String("main"), Key: keyOf("p", "s1"), ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if !isErr[*types.ConditionalCheckFailedException](err) {
		t.Fatalf("conditional DeleteItem: got %v, want ConditionalCheckFailedException", err)
	}
	_, err = db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("main"), Item: map[string]types.AttributeValue{"pk": s("never"), "sk": s("1")}}},
		{Put: &types.Put{TableName: aws.String("main"), Item: map[string]types.AttributeValue{"pk": s("p"), "sk": s("s1")},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}})
	if !isErr[*types.TransactionCanceledException](err) {
		t.Fatalf("cancelled transaction: got %v, want TransactionCanceledException", err)
	}
	_, err = db.BatchWriteItem(ctx(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"main": {
			{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": s("dup"), "sk": s("1")}}},
			{DeleteRequest: &types.DeleteRequest{Key: keyOf("dup", "1")}},
		},
	}})
	if !isValidation(err) {
		t.Fatalf("BatchWriteItem with duplicate keys: got %v, want ValidationException", err)
	}
	_, err = db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("missing"), Item: keyOf("a", "b")})
	if !isErr[*types.ResourceNotFoundException](err) {
		t.Fatalf("PutItem to a missing table: got %v, want ResourceNotFoundException", err)
	}
	if got := scanAll(t, db, "main"); !reflect.DeepEqual(got, itemsBefore) {
		t.Fatalf("failed writes changed the table:\n%v\nwant\n%v", got, itemsBefore)
	}

	before := snapshot(t, db, "main")
	if before.TTL != "ENABLED/ttl" || !reflect.DeepEqual(before.Tables, []string{"main", "other"}) ||
		!reflect.DeepEqual(before.GSI, []string{"p/s2", "b/1", "p/s4", "tbl/1", "p/s1", "p/s0"}) {
		t.Fatalf("unexpected state before reopen: %+v", before)
	}
	if got := getItem(t, db, "main", "p", "s1"); got["count"].(*types.AttributeValueMemberN).Value != "3" ||
		got["v"].(*types.AttributeValueMemberN).Value != "1" {
		t.Fatalf("p/s1 = %v", got)
	}
	otherBefore := scanAll(t, db, "other")

	e = e.reopen()
	after := snapshot(t, e.db, "main")
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed across reopen:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := scanAll(t, e.db, "other"); !reflect.DeepEqual(got, otherBefore) {
		t.Fatalf("table other changed across reopen: %v, want %v", got, otherBefore)
	}
	if got := getItem(t, e.db, "main", "never", "1"); got != nil {
		t.Fatalf("item of a cancelled transaction exists after reopen: %v", got)
	}

	// The reopened server keeps working and journaling.
	if _, err := e.db.DeleteTable(ctx(), &dynamodb.DeleteTableInput{TableName: aws.String("other")}); err != nil {
		t.Fatalf("DeleteTable: %v", err)
	}
	e = e.reopen()
	tables, err := e.db.ListTables(ctx(), &dynamodb.ListTablesInput{})
	if err != nil || !reflect.DeepEqual(tables.TableNames, []string{"main"}) {
		t.Fatalf("ListTables after DeleteTable and reopen: %v, %v", tables, err)
	}
}

func isValidation(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException"
}

// Test 4: concurrent conditional puts and atomic counter updates; after a
// reopen the counter equals the number of acknowledged increments and every
// acknowledged put is there with its writer.
func TestConcurrentWriters(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
		Item: map[string]types.AttributeValue{"pk": s("counter"), "sk": s("c"), "n": n(0)}}); err != nil {
		t.Fatal(err)
	}

	const workers, perWorker, keys = 16, 50, 300
	var (
		increments atomic.Int64
		mu         sync.Mutex
		owners     = map[string]int{} // key -> worker whose put was acknowledged
		wg         sync.WaitGroup
		failures   = make(chan error, workers)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for i := range perWorker {
				k := fmt.Sprintf("k%03d", r.Intn(keys))
				_, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{
					TableName:           aws.String("main"),
					Item:                map[string]types.AttributeValue{"pk": s(k), "sk": s("x"), "owner": n(w), "gpk": s("g"), "gsk": s(k)},
					ConditionExpression: aws.String("attribute_not_exists(pk)"),
				})
				switch {
				case err == nil:
					mu.Lock()
					if prev, dup := owners[k]; dup {
						failures <- fmt.Errorf("key %s acknowledged to workers %d and %d", k, prev, w)
					}
					owners[k] = w
					mu.Unlock()
				case !isErr[*types.ConditionalCheckFailedException](err):
					failures <- fmt.Errorf("PutItem: %w", err)
					return
				}
				_, err = e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
					TableName: aws.String("main"), Key: keyOf("counter", "c"),
					UpdateExpression:          aws.String("ADD n :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)},
				})
				if err != nil {
					failures <- fmt.Errorf("UpdateItem: %w", err)
					return
				}
				increments.Add(1)
				if i%10 == 0 { // concurrent reads too
					getItem(t, e.db, "main", "counter", "c")
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	t.Logf("%d increments, %d keys claimed", increments.Load(), len(owners))

	e = e.reopen()
	got := getItem(t, e.db, "main", "counter", "c")["n"].(*types.AttributeValueMemberN).Value
	if want := fmt.Sprint(increments.Load()); got != want {
		t.Fatalf("counter = %s after reopen, want %s acknowledged increments", got, want)
	}
	items := scanAll(t, e.db, "main")
	if len(items) != len(owners)+1 {
		t.Fatalf("%d items after reopen, want %d", len(items), len(owners)+1)
	}
	for k, w := range owners {
		it := getItem(t, e.db, "main", k, "x")
		if it == nil || it["owner"].(*types.AttributeValueMemberN).Value != fmt.Sprint(w) {
			t.Fatalf("item %s = %v, want owner %d", k, it, w)
		}
	}
}

// Test 5: a directory is used by one Server at a time.
func TestLockedDir(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := Open(dir); !errors.Is(err, ErrLocked) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	} else if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the directory", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	third.Close()
}

func TestClosedServerAnswers503(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error {
			_, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf("a", "b")})
			return err
		},
		func() error {
			_, err := e.db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("main"), Key: keyOf("a", "b")})
			return err
		},
	} {
		err := call()
		var re interface{ HTTPStatusCode() int }
		var apiErr smithy.APIError
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusServiceUnavailable ||
			!errors.As(err, &apiErr) || apiErr.ErrorCode() != "ServiceUnavailable" {
			t.Fatalf("request after Close: got %v, want 503 ServiceUnavailable", err)
		}
	}
}

func TestTimeToLive(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	db := e.db
	describe := func() string {
		out, err := db.DescribeTimeToLive(ctx(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("main")})
		if err != nil {
			t.Fatalf("DescribeTimeToLive: %v", err)
		}
		return fmt.Sprintf("%s/%s", out.TimeToLiveDescription.TimeToLiveStatus, aws.ToString(out.TimeToLiveDescription.AttributeName))
	}
	update := func(attr string, enabled bool) (*dynamodb.UpdateTimeToLiveOutput, error) {
		return db.UpdateTimeToLive(ctx(), &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String("main"),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(enabled)},
		})
	}
	if got := describe(); got != "DISABLED/" {
		t.Fatalf("initial TTL %s", got)
	}
	if _, err := update("ttl", false); !isValidation(err) {
		t.Fatalf("disabling disabled TTL: %v", err)
	}
	out, err := update("ttl", true)
	if err != nil || aws.ToString(out.TimeToLiveSpecification.AttributeName) != "ttl" || !aws.ToBool(out.TimeToLiveSpecification.Enabled) {
		t.Fatalf("UpdateTimeToLive: %v, %v", out, err)
	}
	if _, err := update("ttl", true); !isValidation(err) {
		t.Fatalf("enabling enabled TTL: %v", err)
	}
	if _, err := update("other", false); !isValidation(err) {
		t.Fatalf("disabling TTL on another attribute: %v", err)
	}
	if got := describe(); got != "ENABLED/ttl" {
		t.Fatalf("TTL %s", got)
	}
	e = e.reopen()
	db = e.db
	if got := describe(); got != "ENABLED/ttl" {
		t.Fatalf("TTL after reopen %s", got)
	}
	if _, err := update("ttl", false); err != nil {
		t.Fatal(err)
	}
	e = e.reopen()
	db = e.db
	if got := describe(); got != "DISABLED/" {
		t.Fatalf("TTL after disable and reopen %s", got)
	}
	_, err = db.DescribeTimeToLive(ctx(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("nope")})
	if !isErr[*types.ResourceNotFoundException](err) {
		t.Fatalf("DescribeTimeToLive of a missing table: %v", err)
	}
	_, err = db.UpdateTimeToLive(ctx(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("nope"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)},
	})
	if !isErr[*types.ResourceNotFoundException](err) {
		t.Fatalf("UpdateTimeToLive of a missing table: %v", err)
	}
}

func TestListTablesPagination(t *testing.T) {
	e := openEnv(t, t.TempDir())
	want := []string{"ta1", "ta2", "tb1", "tc1", "tc2"}
	for _, name := range []string{"tc2", "ta1", "tb1", "tc1", "ta2"} {
		createTable(t, e.db, name)
	}
	var got []string
	p := dynamodb.NewListTablesPaginator(e.db, &dynamodb.ListTablesInput{Limit: aws.Int32(2)})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, out.TableNames...)
	}
	if !reflect.DeepEqual(got, want) || pages != 3 {
		t.Fatalf("ListTables: %v in %d pages, want %v in 3", got, pages, want)
	}
	if _, err := e.db.ListTables(ctx(), &dynamodb.ListTablesInput{Limit: aws.Int32(101)}); !isValidation(err) {
		t.Fatalf("ListTables Limit 101: %v", err)
	}
}

// raw posts a request with the given target and body to the server.
func raw(t *testing.T, srv http.Handler, target string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", target)
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func TestProtocolErrors(t *testing.T) {
	e := openEnv(t, t.TempDir())
	status, body := raw(t, e.srv, "DynamoDB_20120810.RestoreTableFromBackup", []byte(`{}`))
	if status != http.StatusBadRequest || !strings.Contains(body, `"__type":"com.amazonaws.dynamodb.v20120810#UnknownOperationException"`) {
		t.Fatalf("unknown op: %d %s", status, body)
	}
	status, body = raw(t, e.srv, "", []byte(`{}`))
	if status != http.StatusBadRequest || !strings.Contains(body, "UnknownOperationException") {
		t.Fatalf("missing target: %d %s", status, body)
	}
	status, body = raw(t, e.srv, "DynamoDB_20120810.PutItem", []byte(`{"TableName":`))
	if status != http.StatusBadRequest || !strings.Contains(body, "SerializationException") {
		t.Fatalf("bad JSON: %d %s", status, body)
	}
	big := append([]byte(`{"TableName":"main","Item":{"pk":{"S":"`), bytes.Repeat([]byte("x"), maxBodyBytes)...)
	big = append(big, `"}}}`...)
	status, body = raw(t, e.srv, "DynamoDB_20120810.PutItem", big)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "__type") {
		t.Fatalf("oversized body: %d %s", status, body)
	}
	// Over HTTP the SDK sees the same error shape.
	_, err := e.db.DescribeTable(ctx(), &dynamodb.DescribeTableInput{TableName: aws.String("nope")})
	if !isErr[*types.ResourceNotFoundException](err) {
		t.Fatalf("DescribeTable of a missing table: %v", err)
	}
	resp, err := http.Get(e.hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(b), "__type") {
		t.Fatalf("GET: %d %s", resp.StatusCode, b)
	}
}

// A Query on an index that does not exist is refused as DynamoDB refuses
// it, and the server keeps working.
func TestQueryOnMissingIndex(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	_, err := e.db.Query(ctx(), &dynamodb.QueryInput{
		TableName: aws.String("main"), IndexName: aws.String("nope"),
		KeyConditionExpression:    aws.String("gpk = :g"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("g")},
	})
	if !isValidation(err) || !strings.Contains(err.Error(), "does not have the specified index") {
		t.Fatalf("Query on a missing index: got %v, want ValidationException", err)
	}
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf("a", "1")}); err != nil {
		t.Fatalf("PutItem after the refused Query: %v", err)
	}
	e = e.reopen()
	if got := getItem(t, e.db, "main", "a", "1"); got == nil {
		t.Fatal("item lost")
	}
}
