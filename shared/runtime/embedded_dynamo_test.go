package runtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
