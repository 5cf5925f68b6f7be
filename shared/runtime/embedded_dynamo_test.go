package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/tracing"
)

// headerLog records the headers of every request a handler is given.
type headerLog struct {
	mu   sync.Mutex
	seen []http.Header
	next http.Handler
}

func (h *headerLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

// signedConfig is an environment with AWS credentials, as a developer's
// shell may have: the embedded client must ignore them.
var signedConfig = aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")}

func embeddedStore(t testing.TB) *localdynamo.Server {
	d, err := localdynamo.Open(filepath.Join(t.TempDir(), "dynamodb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// The in-process store's client sends neither a signature nor what only a
// remote DynamoDB reads (payload hash, user agent, invocation id), and
// still works: a table made, an item written and read back, usage counted.
func TestEmbeddedDynamoClientSignsNothing(t *testing.T) {
	ctx := context.Background()
	log := &headerLog{next: embeddedStore(t)}
	db := runtime.DynamoClient(signedConfig, runtime.Env{}, log)
	if err := dynamo.EnsureTable(ctx, db, "platform"); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "A"}, "sk": &types.AttributeValueMemberS{Value: "B"}}
	item := map[string]types.AttributeValue{"pk": key["pk"], "sk": key["sk"], "v": &types.AttributeValueMemberS{Value: "x"}}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("platform"), Item: item}); err != nil {
		t.Fatal(err)
	}
	uctx, u := dynamo.WithUsage(ctx)
	out, err := db.GetItem(uctx, &dynamodb.GetItemInput{TableName: aws.String("platform"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := out.Item["v"].(*types.AttributeValueMemberS); !ok || v.Value != "x" {
		t.Fatalf("read back %v", out.Item)
	}
	if u.ReadUnits <= 0 {
		t.Errorf("usage not counted through the embedded client: %v read units", u.ReadUnits)
	}
	if len(log.seen) < 3 {
		t.Fatalf("%d requests seen", len(log.seen))
	}
	for i, h := range log.seen {
		for _, name := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256", "Amz-Sdk-Invocation-Id", "X-Amz-User-Agent"} {
			if v := h.Get(name); v != "" {
				t.Errorf("request %d (%s): %s: %q, want none to the in-process store", i, h.Get("X-Amz-Target"), name, v)
			}
		}
		if ua := h.Get("User-Agent"); strings.Contains(ua, "aws-sdk-go") {
			t.Errorf("request %d: User-Agent %q built by the SDK", i, ua)
		}
	}
}

// A DynamoDB at DYNAMODB_ENDPOINT (DynamoDB Local, moto, AWS itself) gets
// the full, signed client.
func TestRemoteDynamoClientSigns(t *testing.T) {
	log := &headerLog{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte("{}"))
	})}
	srv := httptest.NewServer(log)
	defer srv.Close()
	db := runtime.DynamoClient(signedConfig, runtime.Env{DynamoEndpoint: srv.URL}, nil)
	_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("platform"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "A"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(log.seen) != 1 {
		t.Fatalf("%d requests", len(log.seen))
	}
	h := log.seen[0]
	if a := h.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") {
		t.Errorf("Authorization %q, want SigV4 with the configured key", a)
	}
	if h.Get("Amz-Sdk-Invocation-Id") == "" || !strings.Contains(h.Get("User-Agent"), "aws-sdk-go") {
		t.Errorf("headers %v: want the SDK's invocation id and user agent", h)
	}
}

// BenchmarkEmbeddedDynamoClient: CPU of one GetItem and one PutItem through
// the SDK to the in-process store, with the client as it was (signed, the
// SDK's whole stack) and as it is (embedded).
//
//	go test -run '^$' -bench BenchmarkEmbeddedDynamoClient ./shared/runtime
func BenchmarkEmbeddedDynamoClient(b *testing.B) {
	store := embeddedStore(b)
	signed := dynamodb.NewFromConfig(signedConfig, dynamo.CountUsage, dynamo.MapStorageFull, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, tracing.AWSCalls)
		o.BaseEndpoint = aws.String("http://dynamodb.local")
		o.HTTPClient = &http.Client{Transport: runtime.InProcess(store)}
		o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		o.Region = "us-east-1"
	})
	embedded := runtime.DynamoClient(signedConfig, runtime.Env{}, store)
	ctx := context.Background()
	if err := dynamo.EnsureTable(ctx, embedded, "platform"); err != nil {
		b.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "A"}, "sk": &types.AttributeValueMemberS{Value: "B"}}
	item := map[string]types.AttributeValue{"pk": key["pk"], "sk": key["sk"], "v": &types.AttributeValueMemberS{Value: strings.Repeat("x", 500)}}
	if _, err := embedded.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("platform"), Item: item}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		db   *dynamodb.Client
	}{{"signed", signed}, {"embedded", embedded}} {
		b.Run("GetItem/"+c.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("platform"), Key: key}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
		b.Run("PutItem/"+c.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("platform"), Item: item}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The platform's client for its embedded store runs the item operations
// in-process (no JSON, no HTTP), table operations over HTTP; with
// PLATFORM_LOCAL_DYNAMO_HTTP set, everything goes over HTTP.
func TestEmbeddedDynamoClientInProcess(t *testing.T) {
	ctx := context.Background()
	store := embeddedStore(t)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "A"}, "sk": &types.AttributeValueMemberS{Value: "B"}}
	item := map[string]types.AttributeValue{"pk": key["pk"], "sk": key["sk"], "v": &types.AttributeValueMemberS{Value: "x"}}
	calls := func() int64 {
		n := int64(0)
		for _, c := range store.Calls() {
			n += c
		}
		return n
	}
	for _, c := range []struct {
		name   string
		env    string
		inProc int64 // of the 3 item calls
	}{{"in-process", "", 3}, {"forced HTTP", "1", 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(runtime.EnvLocalDynamoHTTP, c.env)
			db := runtime.DynamoClient(signedConfig, runtime.Env{}, store)
			if err := dynamo.EnsureTable(ctx, db, "platform"); err != nil { // DescribeTable: HTTP
				t.Fatal(err)
			}
			in0, all0 := store.InProcessCalls(), calls()
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("platform"), Item: item}); err != nil {
				t.Fatal(err)
			}
			uctx, u := dynamo.WithUsage(ctx)
			out, err := db.GetItem(uctx, &dynamodb.GetItemInput{TableName: aws.String("platform"), Key: key})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := out.Item["v"].(*types.AttributeValueMemberS); !ok || v.Value != "x" {
				t.Fatalf("read back %v", out.Item)
			}
			if u.ReadUnits <= 0 {
				t.Errorf("usage not counted: %v read units", u.ReadUnits)
			}
			_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("platform"), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")})
			var cf *types.ConditionalCheckFailedException
			if !errors.As(err, &cf) {
				t.Fatalf("conditional put: %v, want ConditionalCheckFailedException", err)
			}
			if in, all := store.InProcessCalls()-in0, calls()-all0; in != c.inProc || all != 3 {
				t.Errorf("%d calls in-process of %d, want %d of 3", in, all, c.inProc)
			}
		})
	}
}

// BenchmarkInProcessDynamo: one call of each common operation through the
// platform's client to its embedded store, over the in-process path and
// over HTTP (PLATFORM_LOCAL_DYNAMO_HTTP), alternated with -count:
//
//	go test -run '^$' -bench BenchmarkInProcessDynamo -benchmem -count 3 ./shared/runtime
func BenchmarkInProcessDynamo(b *testing.B) {
	store := embeddedStore(b)
	ctx := context.Background()
	inProc := runtime.DynamoClient(aws.Config{}, runtime.Env{}, store)
	b.Setenv(runtime.EnvLocalDynamoHTTP, "1")
	overHTTP := runtime.DynamoClient(aws.Config{}, runtime.Env{}, store)
	if err := dynamo.EnsureTable(ctx, inProc, "platform"); err != nil {
		b.Fatal(err)
	}
	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	// A conversation's messages as the platform writes them (~600 bytes).
	msg := func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": sv("CONV#c1"), "sk": sv(fmt.Sprintf("MSG#%04d", i)), "type": sv("text"),
			"payload": sv(`{"text":"` + strings.Repeat("x", 400) + `"}`), "userId": sv("user_1"), "createdAt": sv("2026-11-29T05:00:00.000Z"),
			"tags": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": sv("b")}}, "n": &types.AttributeValueMemberN{Value: strconv.Itoa(i)}}
	}
	for i := range 40 {
		if _, err := inProc.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("platform"), Item: msg(i)}); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	ops := []struct {
		name string
		call func(db *dynamodb.Client) error
	}{
		{"GetItem", func(db *dynamodb.Client) error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("platform"), Key: map[string]types.AttributeValue{"pk": sv("CONV#c1"), "sk": sv("MSG#0007")}})
			return err
		}},
		{"Query20", func(db *dynamodb.Client) error {
			_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("platform"), KeyConditionExpression: aws.String("pk = :p AND begins_with(sk, :m)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": sv("CONV#c1"), ":m": sv("MSG#")}, Limit: aws.Int32(20), ScanIndexForward: aws.Bool(false)})
			return err
		}},
		{"TransactWriteItems", func(db *dynamodb.Client) error {
			n++
			m := msg(1000 + n)
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String("platform"), Item: m, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
				{Update: &types.Update{TableName: aws.String("platform"), Key: map[string]types.AttributeValue{"pk": sv("CONV#c1"), "sk": sv("META")},
					UpdateExpression: aws.String("SET updatedAt = :t ADD messages :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":t": sv("2026-11-29T05:00:00.000Z"), ":one": &types.AttributeValueMemberN{Value: "1"}}}},
			}})
			return err
		}},
	}
	for _, op := range ops {
		for _, c := range []struct {
			name string
			db   *dynamodb.Client
		}{{"http", overHTTP}, {"inprocess", inProc}} {
			b.Run(op.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if err := op.call(c.db); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
