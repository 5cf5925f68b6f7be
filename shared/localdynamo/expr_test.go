package localdynamo

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An expression's text is parsed once: requests that send it again share
// its tree, each with its own names and values, also at once; a text that
// does not parse is refused every time and not kept.
func TestExpressionsParsedOnce(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	run := time.Now().UnixNano() // texts of this run alone (-count)
	cond := fmt.Sprintf("attribute_not_exists(#gone) AND attribute_not_exists(r%d) AND #n < :max", run)
	upd := fmt.Sprintf("SET #n = #n + :one, #w = :who REMOVE r%d", run)
	parsedBefore := parsedTrees.n.Load()

	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := fmt.Sprintf("w%d", w)
			for i := 0; i < each; i++ {
				_, err := e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
					TableName:                 aws.String("main"),
					Key:                       keyOf(pk, "x"),
					ConditionExpression:       aws.String(cond),
					UpdateExpression:          aws.String(upd),
					ExpressionAttributeNames:  map[string]string{"#gone": "gone", "#n": fmt.Sprintf("n%d", w%2), "#w": "who"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":max": n(each + w), ":one": n(1), ":who": s(pk)},
				})
				if err != nil && i == 0 {
					// The first update finds no counter: #n + :one fails.
					_, err = e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: map[string]types.AttributeValue{
						"pk": s(pk), "sk": s("x"), fmt.Sprintf("n%d", w%2): n(1), "who": s(pk),
					}})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := 0; w < writers; w++ {
		pk := fmt.Sprintf("w%d", w)
		it := getItem(t, e.db, "main", pk, "x")
		if got := numOf(it, fmt.Sprintf("n%d", w%2)); got != fmt.Sprint(each) {
			t.Errorf("%s: n%d = %s, want %d (each writer's own names and values)", pk, w%2, got, each)
		}
		if s, _ := it["who"].(*types.AttributeValueMemberS); s == nil || s.Value != pk {
			t.Errorf("%s: who = %v, want %s", pk, it["who"], pk)
		}
	}
	// Once more, past each writer's bound: the condition holds for none.
	_, err := e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
		TableName: aws.String("main"), Key: keyOf("w0", "x"),
		ConditionExpression: aws.String(cond), UpdateExpression: aws.String(upd),
		ExpressionAttributeNames:  map[string]string{"#gone": "gone", "#n": "n0", "#w": "who"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":max": n(each), ":one": n(1), ":who": s("w0")},
	})
	if err == nil || !strings.Contains(err.Error(), "ConditionalCheckFailed") {
		t.Fatalf("update past the bound: %v, want ConditionalCheckFailedException", err)
	}
	if got := parsedTrees.n.Load() - parsedBefore; got != 2 {
		t.Errorf("%d expressions parsed and kept, want 2 (the condition and the update, once each)", got)
	}
	c1, _ := compileCondition("ConditionExpression", cond, exprInput{})
	c2, _ := compileCondition("ConditionExpression", cond, exprInput{})
	if c1 == nil || c1.ast != c2.ast {
		t.Error("the same text gave two trees")
	}

	// A syntax error is answered each time and not kept.
	for i := 0; i < 2; i++ {
		_, err := e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
			TableName: aws.String("main"), Key: keyOf("w0", "x"),
			UpdateExpression: aws.String("SET n0 = = 1"),
		})
		if err == nil || !strings.Contains(err.Error(), "Syntax error") {
			t.Fatalf("bad update %d: %v, want a syntax error", i, err)
		}
	}
	if _, ok := parsedTrees.m.Load(parseKey{'u', "SET n0 = = 1"}); ok {
		t.Error("a text that did not parse was kept")
	}
}

// Past maxParsedTrees texts, new ones are parsed each time, not kept.
func TestParsedExpressionsBounded(t *testing.T) {
	var filled []parseKey
	t.Cleanup(func() { // as it was, for the tests that follow
		for _, k := range filled {
			parsedTrees.m.Delete(k)
		}
		parsedTrees.n.Add(-int64(len(filled)))
	})
	for i := 0; parsedTrees.n.Load() < maxParsedTrees; i++ {
		k := parseKey{'c', fmt.Sprintf("bounded%d = :v", i)}
		parse(k.kind, k.text)
		filled = append(filled, k)
	}
	n := parsedTrees.n.Load()
	for i := 0; i < 100; i++ {
		text := fmt.Sprintf("past%d = :v", i)
		if t1 := parse('c', text); t1.errs != nil || t1.cond == nil {
			t.Fatalf("%s: %v", text, t1.errs)
		}
	}
	if got := parsedTrees.n.Load(); got != n {
		t.Fatalf("%d trees kept after the bound, want %d", got, n)
	}
	if _, ok := parsedTrees.m.Load(parseKey{'c', "past0 = :v"}); ok {
		t.Fatal("a text past the bound was kept")
	}
}
