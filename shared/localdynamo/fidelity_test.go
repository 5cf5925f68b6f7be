package localdynamo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/big"
	"math/rand"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The DynamoDB behaviour the platform relies on, checked through the SDK.

// numTable has a numeric sort key and a GSI with a numeric sort key.
func createNumTable(t testing.TB, db *dynamodb.Client, table string) {
	t.Helper()
	_, err := db.CreateTable(ctx(), &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("n"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("n"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("byg"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("n"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func numOf(it map[string]types.AttributeValue, name string) string {
	return it[name].(*types.AttributeValueMemberN).Value
}

// queryAll pages through a query with the given page size.
func queryAll(t testing.TB, db *dynamodb.Client, in *dynamodb.QueryInput, pageSize int32) ([]map[string]types.AttributeValue, int) {
	t.Helper()
	in.Limit = aws.Int32(pageSize)
	p := dynamodb.NewQueryPaginator(db, in)
	var out []map[string]types.AttributeValue
	pages := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx())
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		pages++
		out = append(out, page.Items...)
	}
	return out, pages
}

func TestNumericSortKeyOrderAndConditions(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createNumTable(t, e.db, "nums")
	nums := []string{"-1000", "-10.5", "-10", "-1", "-0.001", "0", "0.001", "0.5", "1", "1.5", "2", "9", "10", "10.25", "99", "100", "1e3", "12345678901234567890"}
	rand.New(rand.NewSource(1)).Shuffle(len(nums), func(i, j int) { nums[i], nums[j] = nums[j], nums[i] })
	for _, v := range nums {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("nums"),
			Item: map[string]types.AttributeValue{"pk": s("p"), "n": &types.AttributeValueMemberN{Value: v}, "g": s("G")}}); err != nil {
			t.Fatal(err)
		}
	}
	sorted := slices.Clone(nums)
	slices.SortFunc(sorted, func(a, b string) int {
		x, _, _ := big.ParseFloat(a, 10, 200, big.ToNearestEven)
		y, _, _ := big.ParseFloat(b, 10, 200, big.ToNearestEven)
		return x.Cmp(y)
	})
	norm := func(v string) string {
		f, _, _ := big.ParseFloat(v, 10, 200, big.ToNearestEven)
		return f.Text('g', 30)
	}
	num := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	cases := []struct {
		name  string
		cond  string
		vals  map[string]types.AttributeValue
		index string
		want  func(string) bool
	}{
		{"all", "pk = :p", nil, "", func(string) bool { return true }},
		{"eq", "pk = :p AND n = :a", map[string]types.AttributeValue{":a": num("10")}, "", func(v string) bool { return norm(v) == norm("10") }},
		{"lt", "pk = :p AND n < :a", map[string]types.AttributeValue{":a": num("1")}, "", func(v string) bool { return cmpNum(v, "1") < 0 }},
		{"le", "pk = :p AND n <= :a", map[string]types.AttributeValue{":a": num("1")}, "", func(v string) bool { return cmpNum(v, "1") <= 0 }},
		{"gt", "pk = :p AND n > :a", map[string]types.AttributeValue{":a": num("-10")}, "", func(v string) bool { return cmpNum(v, "-10") > 0 }},
		{"ge", "pk = :p AND n >= :a", map[string]types.AttributeValue{":a": num("-10")}, "", func(v string) bool { return cmpNum(v, "-10") >= 0 }},
		{"between", "pk = :p AND n BETWEEN :a AND :b", map[string]types.AttributeValue{":a": num("-1"), ":b": num("10.25")}, "",
			func(v string) bool { return cmpNum(v, "-1") >= 0 && cmpNum(v, "10.25") <= 0 }},
		{"gsi", "g = :p AND n > :a", map[string]types.AttributeValue{":a": num("0")}, "byg", func(v string) bool { return cmpNum(v, "0") > 0 }},
	}
	for _, c := range cases {
		for _, forward := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/forward=%v", c.name, forward), func(t *testing.T) {
				vals := map[string]types.AttributeValue{":p": s("p")}
				if c.index != "" {
					vals[":p"] = s("G")
				}
				for k, v := range c.vals {
					vals[k] = v
				}
				in := &dynamodb.QueryInput{TableName: aws.String("nums"), KeyConditionExpression: aws.String(c.cond),
					ExpressionAttributeValues: vals, ScanIndexForward: aws.Bool(forward)}
				if c.index != "" {
					in.IndexName = aws.String(c.index)
				}
				items, _ := queryAll(t, e.db, in, 3)
				var got, want []string
				for _, it := range items {
					got = append(got, norm(numOf(it, "n")))
					if c.index != "" && len(it) != 3 {
						t.Fatalf("KEYS_ONLY index returned %v", it)
					}
				}
				for _, v := range sorted {
					if c.want(v) {
						want = append(want, norm(v))
					}
				}
				if !forward {
					slices.Reverse(want)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %v\nwant %v", got, want)
				}
			})
		}
	}
}

func cmpNum(a, b string) int {
	x, _, _ := big.ParseFloat(a, 10, 200, big.ToNearestEven)
	y, _, _ := big.ParseFloat(b, 10, 200, big.ToNearestEven)
	return x.Cmp(y)
}

// The order-preserving encoding of numbers agrees with numeric order.
func TestNumberKeyEncodingOrder(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	var vals []string
	for range 2000 {
		mant := r.Int63n(1_000_000_000) - 500_000_000
		exp := r.Intn(40) - 20
		vals = append(vals, fmt.Sprintf("%de%d", mant, exp))
	}
	vals = append(vals, "0", "-0", "0.000", "1", "1.0", "10", "9.99", "-9.99", "-10")
	for i := range vals {
		for j := range vals {
			a, errA := parseNumber(vals[i])
			b, errB := parseNumber(vals[j])
			if errA != nil || errB != nil {
				t.Fatalf("parse %s / %s: %v %v", vals[i], vals[j], errA, errB)
			}
			got := strings.Compare(string(a.key()), string(b.key()))
			if want := cmpNum(vals[i], vals[j]); got != want {
				t.Fatalf("order of %s and %s: encoding says %d, value %d", vals[i], vals[j], got, want)
			}
			if j > i+20 {
				break
			}
		}
	}
	for _, bad := range []string{"", "abc", "1e", "--1", "1.2.3", "123456789012345678901234567890123456789", "1e200", "1e-200"} {
		if _, err := parseNumber(bad); err == nil {
			t.Errorf("parseNumber(%q) accepted", bad)
		}
	}
}

func TestStringSortKeyConditions(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	sks := []string{"a", "a\x00", "a\x00b", "ab", "abc", "abd", "b", "ba", "é", "z"}
	slices.Sort(sks) // DynamoDB orders strings by their UTF-8 bytes, as Go does
	for _, sk := range sks {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s("p"), "sk": s(sk), "gpk": s("g"), "gsk": s(sk)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		cond string
		a, b string
		want func(string) bool
	}{
		{"begins_with(sk, :a)", "ab", "", func(v string) bool { return strings.HasPrefix(v, "ab") }},
		{"begins_with(sk, :a)", "a\x00", "", func(v string) bool { return strings.HasPrefix(v, "a\x00") }},
		{"sk BETWEEN :a AND :b", "ab", "b", func(v string) bool { return v >= "ab" && v <= "b" }},
		{"sk > :a", "abc", "", func(v string) bool { return v > "abc" }},
		{"sk <= :a", "ab", "", func(v string) bool { return v <= "ab" }},
	} {
		for _, idx := range []string{"", "gsi1"} {
			vals := map[string]types.AttributeValue{":p": s("p"), ":a": s(c.a)}
			if c.b != "" {
				vals[":b"] = s(c.b)
			}
			cond := "pk = :p AND " + c.cond
			in := &dynamodb.QueryInput{TableName: aws.String("main"), ExpressionAttributeValues: vals}
			if idx != "" {
				cond = strings.ReplaceAll(strings.ReplaceAll(cond, "pk", "gpk"), "sk", "gsk")
				vals[":p"] = s("g")
				in.IndexName = aws.String(idx)
			}
			in.KeyConditionExpression = aws.String(cond)
			items, _ := queryAll(t, e.db, in, 2)
			var got, want []string
			for _, it := range items {
				got = append(got, it["sk"].(*types.AttributeValueMemberS).Value)
			}
			for _, v := range sks {
				if c.want(v) {
					want = append(want, v)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (%q,%q) index %q: got %q want %q", cond, c.a, c.b, idx, got, want)
			}
		}
	}
}

func TestLimits(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	item := func(pk string, size int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": s(pk), "sk": s("x"), "data": s(strings.Repeat("d", size))}
	}

	// 400 KB per item.
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: item("big", 400*1024)}); !isValidation(err) ||
		!strings.Contains(err.Error(), "Item size has exceeded") {
		t.Fatalf("PutItem of more than 400 KB: %v", err)
	}
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: item("ok", 399*1024)}); err != nil {
		t.Fatalf("PutItem of 399 KB: %v", err)
	}
	if _, err := e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("main"), Key: keyOf("ok", "x"),
		UpdateExpression: aws.String("SET more = :m"), ExpressionAttributeValues: map[string]types.AttributeValue{":m": s(strings.Repeat("m", 2048))}}); !isValidation(err) {
		t.Fatalf("UpdateItem growing past 400 KB: %v", err)
	}

	// 25 writes per BatchWriteItem.
	var reqs []types.WriteRequest
	for i := range 26 {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item(fmt.Sprint("b", i), 10)}})
	}
	if _, err := e.db.BatchWriteItem(ctx(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"main": reqs}}); !isValidation(err) {
		t.Fatalf("BatchWriteItem of 26: %v", err)
	}
	if _, err := e.db.BatchWriteItem(ctx(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"main": reqs[:25]}}); err != nil {
		t.Fatalf("BatchWriteItem of 25: %v", err)
	}
	// 100 keys per BatchGetItem.
	var keys []map[string]types.AttributeValue
	for i := range 101 {
		keys = append(keys, keyOf(fmt.Sprint("b", i), "x"))
	}
	if _, err := e.db.BatchGetItem(ctx(), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"main": {Keys: keys}}}); !isValidation(err) {
		t.Fatalf("BatchGetItem of 101: %v", err)
	}
	out, err := e.db.BatchGetItem(ctx(), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"main": {Keys: keys[:100]}}})
	if err != nil || len(out.Responses["main"]) != 25 {
		t.Fatalf("BatchGetItem of 100: %v, %d items", err, len(out.Responses["main"]))
	}

	// 100 items per transaction.
	var tx []types.TransactWriteItem
	for i := range 101 {
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String("main"), Item: item(fmt.Sprint("t", i), 10)}})
	}
	if _, err := e.db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: tx}); !isValidation(err) {
		t.Fatalf("TransactWriteItems of 101: %v", err)
	}
	if _, err := e.db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: tx[:100]}); err != nil {
		t.Fatalf("TransactWriteItems of 100: %v", err)
	}

	// 1 MB per Query page: 30 items of 100 KB come in pages of at most 11.
	for i := range 30 {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s("page"), "sk": s(fmt.Sprintf("%03d", i)), "data": s(strings.Repeat("d", 100*1024))}}); err != nil {
			t.Fatal(err)
		}
	}
	p := dynamodb.NewQueryPaginator(e.db, &dynamodb.QueryInput{TableName: aws.String("main"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("page")}})
	total, pages := 0, 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		total += len(page.Items)
		if len(page.Items) > 11 {
			t.Fatalf("a page of %d items of 100 KB: more than 1 MB", len(page.Items))
		}
	}
	if total != 30 || pages < 3 {
		t.Fatalf("%d items in %d pages", total, pages)
	}
}

func TestTransactionCancellationReasons(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	put := func(pk string, v int) {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s(pk), "sk": s("x"), "v": n(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 1)
	put("b", 2)
	_, err := e.db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String("main"), Key: keyOf("a", "x"), UpdateExpression: aws.String("SET v = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(100)}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("main"), Key: keyOf("b", "x"), ConditionExpression: aws.String("v = :two"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":two": n(2)}}},
		{Put: &types.Put{TableName: aws.String("main"), Item: map[string]types.AttributeValue{"pk": s("c"), "sk": s("x")}}},
		{Delete: &types.Delete{TableName: aws.String("main"), Key: keyOf("b", "y"), ConditionExpression: aws.String("attribute_exists(pk)")}},
		{Put: &types.Put{TableName: aws.String("main"), Item: map[string]types.AttributeValue{"pk": s("a"), "sk": s("y")},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Update: &types.Update{TableName: aws.String("main"), Key: keyOf("b", "z"), UpdateExpression: aws.String("SET v = :v"),
			ConditionExpression: aws.String("attribute_exists(pk)"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(1)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
	}})
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		t.Fatalf("got %v, want TransactionCanceledException", err)
	}
	var codes []string
	for _, r := range tc.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	if want := []string{"None", "None", "None", "ConditionalCheckFailed", "None", "ConditionalCheckFailed"}; !slices.Equal(codes, want) {
		t.Fatalf("reasons %v, want %v", codes, want)
	}
	// Nothing of the transaction was applied.
	if v := numOf(getItem(t, e.db, "main", "a", "x"), "v"); v != "1" {
		t.Fatalf("a.v = %s after a cancelled transaction", v)
	}
	if getItem(t, e.db, "main", "c", "x") != nil {
		t.Fatal("c was written by a cancelled transaction")
	}
	// ALL_OLD on a failed single-item condition returns the item.
	_, err = e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: map[string]types.AttributeValue{"pk": s("a"), "sk": s("x")},
		ConditionExpression: aws.String("attribute_not_exists(pk)"), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var cf *types.ConditionalCheckFailedException
	if !errors.As(err, &cf) || cf.Item == nil || numOf(cf.Item, "v") != "1" {
		t.Fatalf("ConditionalCheckFailed with ALL_OLD: %v %v", err, cf)
	}
	// Two operations on one item are refused.
	_, err = e.db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("main"), Item: keyOf("d", "x")}},
		{Delete: &types.Delete{TableName: aws.String("main"), Key: keyOf("d", "x")}},
	}})
	if !isValidation(err) {
		t.Fatalf("two operations on one item: %v", err)
	}
}

// Concurrent transactions moving value between items never lose or create
// any: the sum stays constant.
func TestConcurrentTransactionsAreAtomic(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	const accounts, start = 5, 1000
	for i := range accounts {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s(fmt.Sprint("acct", i)), "sk": s("x"), "v": n(start)}}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for range 40 {
				a, b := r.Intn(accounts), r.Intn(accounts)
				if a == b {
					continue
				}
				_, err := e.db.TransactWriteItems(ctx(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Update: &types.Update{TableName: aws.String("main"), Key: keyOf(fmt.Sprint("acct", a), "x"),
						UpdateExpression: aws.String("SET v = v - :one"), ConditionExpression: aws.String("v >= :one"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)}}},
					{Update: &types.Update{TableName: aws.String("main"), Key: keyOf(fmt.Sprint("acct", b), "x"),
						UpdateExpression: aws.String("SET v = v + :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)}}},
				}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sum := 0
	for i := range accounts {
		var v int
		fmt.Sscan(numOf(getItem(t, e.db, "main", fmt.Sprint("acct", i), "x"), "v"), &v)
		sum += v
	}
	if sum != accounts*start || done == 0 {
		t.Fatalf("sum %d after %d transfers, want %d", sum, done, accounts*start)
	}
}

func TestUpdateItemSemantics(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	// An update of a missing item creates it.
	out, err := e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("main"), Key: keyOf("u", "x"),
		UpdateExpression: aws.String("SET a = :a, b = :b ADD c :one"), ReturnValues: types.ReturnValueAllNew,
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("A"), ":b": s("B"), ":one": n(1)}})
	if err != nil || len(out.Attributes) != 5 {
		t.Fatalf("create by update: %v %v", err, out)
	}
	out, err = e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("main"), Key: keyOf("u", "x"),
		UpdateExpression: aws.String("REMOVE a SET #c = #c + :one"), ReturnValues: types.ReturnValueUpdatedNew,
		ExpressionAttributeNames:  map[string]string{"#c": "c"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)}})
	if err != nil || len(out.Attributes) != 1 || numOf(out.Attributes, "c") != "2" {
		t.Fatalf("UPDATED_NEW: %v %v", err, out.Attributes)
	}
	got := getItem(t, e.db, "main", "u", "x")
	if _, ok := got["a"]; ok || got["b"] == nil {
		t.Fatalf("REMOVE a: %v", got)
	}
	// Key attributes cannot be updated.
	_, err = e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("main"), Key: keyOf("u", "x"),
		UpdateExpression: aws.String("SET sk = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("y")}})
	if !isValidation(err) {
		t.Fatalf("update of a key attribute: %v", err)
	}
	// Unused and undefined placeholders are refused, as DynamoDB does.
	_, err = e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("main"), Key: keyOf("u", "x"),
		UpdateExpression: aws.String("SET b = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("y"), ":unused": s("z")}})
	if !isValidation(err) || !strings.Contains(err.Error(), "unused") {
		t.Fatalf("unused value: %v", err)
	}
	_, err = e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{TableName: aws.String("main"), Key: keyOf("u", "x"),
		UpdateExpression: aws.String("SET b = :nope")})
	if !isValidation(err) {
		t.Fatalf("undefined value: %v", err)
	}
	// A GSI key of the wrong type is refused and nothing is written.
	_, err = e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
		Item: map[string]types.AttributeValue{"pk": s("w"), "sk": s("x"), "gpk": n(1), "gsk": s("a")}})
	if !isValidation(err) || getItem(t, e.db, "main", "w", "x") != nil {
		t.Fatalf("GSI key of the wrong type: %v", err)
	}
	// Empty maps and lists survive.
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
		Item: map[string]types.AttributeValue{"pk": s("e"), "sk": s("x"), "m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
			"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{}}, "es": s("")}}); err != nil {
		t.Fatal(err)
	}
	got = getItem(t, e.db, "main", "e", "x")
	if _, ok := got["m"].(*types.AttributeValueMemberM); !ok {
		t.Fatalf("empty map read back as %T", got["m"])
	}
	if _, ok := got["l"].(*types.AttributeValueMemberL); !ok {
		t.Fatalf("empty list read back as %T", got["l"])
	}
}

func TestTTLDeletesExpiredItems(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	now := time.Now().Unix()
	put := func(pk string, ttl int64) {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s(pk), "sk": s("x"), "gpk": s("g"), "gsk": s(pk), "ttl": n(int(ttl))}}); err != nil {
			t.Fatal(err)
		}
	}
	put("before", now-100) // written before TTL is enabled: backfilled
	if _, err := e.db.UpdateTimeToLive(ctx(), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("main"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	put("expired", now-10)
	put("future", now+3600)
	put("renewed", now-10)
	put("renewed", now+3600) // moved to the future: stays
	put("ancient", now-6*365*24*3600)
	if n := e.srv.expireItems(time.Now()); n != 2 {
		t.Fatalf("expired %d items, want 2", n)
	}
	var left []string
	for _, it := range scanAll(t, e.db, "main") {
		left = append(left, it)
	}
	if len(left) != 3 || getItem(t, e.db, "main", "future", "x") == nil || getItem(t, e.db, "main", "renewed", "x") == nil ||
		getItem(t, e.db, "main", "ancient", "x") == nil {
		t.Fatalf("left after expiry: %v", left)
	}
	if got := queryGSI(t, e.db, "main", "g"); len(got) != 3 {
		t.Fatalf("index after expiry: %v", got)
	}
}

// Whoever created the data directory, it ends up 0700 and every file 0600.
func TestPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dynamodb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stray"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := openEnv(t, dir)
	createTable(t, e.db, "main")
	for i := range 200 {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf(fmt.Sprint("k", i), "x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.srv.db.Flush(); err != nil { // an SSTable too
		t.Fatal(err)
	}
	files := 0
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if os.IsNotExist(err) {
			return nil // removed by a background compaction meanwhile
		}
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if info.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil || files < 5 {
		t.Fatalf("walk: %v, %d files", err, files)
	}
}

// A full disk refuses writes with a clear error, keeps reads working, and
// writes resume by themselves once space is back.
func TestDiskFull(t *testing.T) {
	var mu sync.Mutex
	free := uint64(1 << 40)
	srv, err := OpenWith(t.TempDir(), Options{freeSpace: func() (uint64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }})
	if err != nil {
		t.Fatal(err)
	}
	e := serveEnv(t, srv)
	createTable(t, e.db, "main")
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf("a", "x")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	free = 1 << 20
	mu.Unlock()
	_, err = e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf("b", "x")})
	if err == nil || !strings.Contains(err.Error(), "InsufficientStorageException") || !strings.Contains(err.Error(), "disk") {
		t.Fatalf("write on a full disk: %v", err)
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		t.Fatalf("write on a full disk answered %d", re.HTTPStatusCode())
	}
	if getItem(t, e.db, "main", "a", "x") == nil {
		t.Fatal("read of acknowledged data failed on a full disk")
	}
	mu.Lock()
	free = 1 << 40
	mu.Unlock()
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf("b", "x")}); err != nil {
		t.Fatalf("write after space returned: %v", err)
	}
}

// A directory written by the journal-based version is migrated on Open.
func TestMigratesOldJournal(t *testing.T) {
	dir := t.TempDir()
	var buf []byte
	buf = append(buf, journalMagic...)
	add := func(op, body string) {
		p := append([]byte{0, byte(len(op))}, op...)
		p = append(p, body...)
		var hdr [8]byte
		putUint32(hdr[:4], uint32(len(p)))
		putUint32(hdr[4:], crc32c(p))
		buf = append(append(buf, hdr[:]...), p...)
	}
	add("CreateTable", `{"TableName":"main","BillingMode":"PAY_PER_REQUEST","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"},{"AttributeName":"gpk","AttributeType":"S"},{"AttributeName":"gsk","AttributeType":"S"}],"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],"GlobalSecondaryIndexes":[{"IndexName":"gsi1","KeySchema":[{"AttributeName":"gpk","KeyType":"HASH"},{"AttributeName":"gsk","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}]}`)
	add("PutItem", `{"TableName":"main","Item":{"pk":{"S":"a"},"sk":{"S":"x"},"gpk":{"S":"g"},"gsk":{"S":"1"}}}`)
	add("PutItem", `{"TableName":"main","Item":{"pk":{"S":"b"},"sk":{"S":"x"},"gpk":{"S":"g"},"gsk":{"S":"2"}}}`)
	add("UpdateItem", `{"TableName":"main","Key":{"pk":{"S":"a"},"sk":{"S":"x"}},"UpdateExpression":"SET v = :v","ExpressionAttributeValues":{":v":{"N":"7"}}}`)
	add("DeleteItem", `{"TableName":"main","Key":{"pk":{"S":"b"},"sk":{"S":"x"}}}`)
	add("UpdateTimeToLive", `{"TableName":"main","TimeToLiveSpecification":{"AttributeName":"ttl","Enabled":true}}`)
	if err := os.WriteFile(filepath.Join(dir, journalName), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	e := openEnv(t, dir)
	if got := scanAll(t, e.db, "main"); len(got) != 1 || numOf(getItem(t, e.db, "main", "a", "x"), "v") != "7" {
		t.Fatalf("after migration: %v", got)
	}
	if got := queryGSI(t, e.db, "main", "g"); !slices.Equal(got, []string{"a/x"}) {
		t.Fatalf("index after migration: %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, journalName)); !os.IsNotExist(err) {
		t.Fatalf("journal still there after migration: %v", err)
	}
	e = e.reopen()
	if getItem(t, e.db, "main", "a", "x") == nil {
		t.Fatal("migrated item lost on reopen")
	}
}

func putUint32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func crc32c(p []byte) uint32       { return crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) }

// serveEnv serves an opened Server over loopback.
func serveEnv(t testing.TB, srv *Server) *env {
	hs := httptest.NewServer(srv)
	e := &env{t: t, dir: srv.dir, srv: srv, hs: hs, db: clientFor(srv, hs.URL)}
	t.Cleanup(e.close)
	return e
}
