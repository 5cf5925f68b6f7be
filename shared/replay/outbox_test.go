package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/replay"
	"github.com/botforge/platform/shared/runtime"
)

// fakeLambda records the payloads it is invoked with; fail makes the
// invocations whose batch names that shard answer a function error.
type fakeLambda struct {
	mu       sync.Mutex
	function []string
	payloads [][]byte
	fail     string
}

func (f *fakeLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.function = append(f.function, aws.ToString(in.FunctionName))
	f.payloads = append(f.payloads, in.Payload)
	if shards, _ := runtime.StreamShards(in.Payload); f.fail != "" && slices.Contains(shards, f.fail) {
		return &lambda.InvokeOutput{FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorMessage":"boom"}`)}, nil
	}
	return &lambda.InvokeOutput{StatusCode: 200}, nil
}

// TestOutboxScanOnMoto: on moto_server's DynamoDB (its Scan segments,
// filters and projections are DynamoDB's), the outbox scan sends the
// dispatcher function the shards of the outbox entries outside the sweep
// index due more than -older-than ago, and none other: not an entry in
// the sweep index, not a young one, not the previous layout's
// OUTBOX#LATER, not another item. The batches are stream batches
// runtime.StreamShards reads, at most 100 records each, a shard's records
// in one batch; a dry run invokes nothing; a failed invocation marks its
// batch's shards failed.
func TestOutboxScanOnMoto(t *testing.T) {
	ctx := context.Background()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(mototest.Start(t)),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	const table = "outboxscan"
	if err := dynamo.EnsureTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	bot := platform.NewID(platform.PrefixBot)
	shard := func() string { return "OUTBOX#" + bot + "#" + platform.NewID(platform.PrefixConversation) }
	var puts []map[string]types.AttributeValue
	entry := func(pk string, due time.Time, indexed bool) string {
		id := platform.NewID(dynamo.PrefixDelivery)
		it := map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: id},
			"doc":      &types.AttributeValueMemberS{Value: `{}`},
			"dueAt":    &types.AttributeValueMemberN{Value: strconv.FormatInt(due.UnixMilli(), 10)},
			"attempts": &types.AttributeValueMemberN{Value: "0"},
		}
		if indexed {
			it["gsi1pk"] = &types.AttributeValueMemberS{Value: "OUTBOX#DUE#7"}
			it["gsi1sk"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("%013d#%s", due.UnixMilli(), id)}
		}
		puts = append(puts, it)
		return id
	}
	old := now.Add(-26 * time.Hour)
	want := map[string]int{} // shard: entries to be sent
	// 150 shards of one old entry, one of 3, one of 120 (more than a batch).
	for i := range 150 {
		s := shard()
		entry(s, old.Add(time.Duration(i)*time.Second), false)
		want[s] = 1
	}
	three := shard()
	for range 3 {
		entry(three, old, false)
	}
	want[three] = 3
	big := shard()
	for i := range 120 {
		entry(big, old.Add(time.Duration(i)*time.Millisecond), false)
	}
	want[big] = 120
	// Left alone: in the sweep index, young, not a shard.
	indexed := shard()
	entry(indexed, old, true)
	young := shard()
	entry(young, now.Add(-time.Minute), false)
	mixed := shard() // an old unindexed entry sent, an indexed one beside it not counted
	entry(mixed, old, false)
	entry(mixed, old, true)
	want[mixed] = 1
	entry("OUTBOX#LATER", old, false)
	entry("OUTBOX#DUE#3", old, false)
	entry("OUTBOX", old, false)
	entry("CONV#"+bot+"#x", old, false)
	for i := 0; i < len(puts); i += 25 {
		var reqs []types.WriteRequest
		for _, it := range puts[i:min(i+25, len(puts))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		if _, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("dry run", func(t *testing.T) {
		f := &fakeLambda{}
		o := &replay.OutboxScan{DynamoDB: db, Lambda: f, Table: table, Function: "stack-dispatcher", Segments: 3, OlderThan: 15 * time.Minute, DryRun: true}
		res, err := o.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.payloads) != 0 {
			t.Errorf("a dry run invoked the function %d times", len(f.payloads))
		}
		got := map[string]int{}
		for _, r := range res {
			got[r.Shard] += r.Entries
			if r.Outcome != replay.DryRun {
				t.Errorf("%s: outcome %q in a dry run", r.Shard, r.Outcome)
			}
		}
		if !equal(got, want) {
			t.Errorf("dry run listed %d shards, want %d: %v", len(got), len(want), diff(got, want))
		}
	})

	t.Run("sent", func(t *testing.T) {
		f := &fakeLambda{}
		o := &replay.OutboxScan{DynamoDB: db, Lambda: f, Table: table, Function: "stack-dispatcher", Segments: 4, OlderThan: 15 * time.Minute}
		res, err := o.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}   // records per shard, across batches
		where := map[string]int{} // the batch of each shard's records
		for i, p := range f.payloads {
			if f.function[i] != "stack-dispatcher" {
				t.Errorf("invoked %q", f.function[i])
			}
			shards, ok := runtime.StreamShards(p)
			if !ok || len(shards) == 0 {
				t.Fatalf("batch %d is not a stream batch runtime.StreamShards reads: %s", i, p)
			}
			var ev struct {
				Records []struct {
					EventSource, EventName string
					DynamoDB               struct {
						Keys map[string]struct{ S string }
					} `json:"dynamodb"`
				}
			}
			if err := json.Unmarshal(p, &ev); err != nil {
				t.Fatal(err)
			}
			if n := len(ev.Records); n > replay.BatchRecords {
				t.Errorf("batch %d: %d records, more than %d", i, n, replay.BatchRecords)
			}
			for _, r := range ev.Records {
				if r.EventSource != "aws:dynamodb" || r.EventName != "INSERT" || r.DynamoDB.Keys["sk"].S == "" {
					t.Errorf("batch %d: record %+v", i, r)
				}
				pk := r.DynamoDB.Keys["pk"].S
				got[pk]++
				if b, ok := where[pk]; ok && b != i && pk != big {
					t.Errorf("shard %s has records in batches %d and %d", pk, b, i)
				}
				where[pk] = i
			}
		}
		if !equal(got, want) {
			t.Errorf("sent %d shards, want %d: %v", len(got), len(want), diff(got, want))
		}
		if len(res) < len(want) {
			t.Errorf("%d results for %d shards", len(res), len(want))
		}
		for _, r := range res {
			if r.Outcome != replay.Replayed || r.Err != nil {
				t.Errorf("%s", r)
			}
		}
		t.Logf("%d entries of %d shards in %d batches", sum(got), len(got), len(f.payloads))
	})

	t.Run("a failed invocation", func(t *testing.T) {
		f := &fakeLambda{fail: three}
		o := &replay.OutboxScan{DynamoDB: db, Lambda: f, Table: table, Function: "stack-dispatcher"}
		res, err := o.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, r := range res {
			if r.Outcome == replay.Failed {
				failed++
				if r.Err == nil {
					t.Errorf("%s failed without its error", r.Shard)
				}
			}
			if r.Shard == three && r.Outcome != replay.Failed {
				t.Errorf("%s: %s, want failed", r.Shard, r.Outcome)
			}
		}
		if failed == 0 || failed == len(res) {
			t.Errorf("%d of %d shards failed, want those of the one failed batch", failed, len(res))
		}
	})
}

// TestBatches: at most BatchRecords records a batch, a shard's records in
// one batch unless it has more than a batch holds.
func TestBatches(t *testing.T) {
	var es []replay.Entry
	add := func(shard string, n int) {
		for i := range n {
			es = append(es, replay.Entry{Shard: shard, ID: fmt.Sprint(shard, i)})
		}
	}
	add("OUTBOX#b#a", 60)
	add("OUTBOX#b#b", 50) // does not fit beside a: a batch of its own
	add("OUTBOX#b#c", 250)
	add("OUTBOX#b#d", 1)
	var sizes []int
	var names [][]string
	for _, b := range replay.Batches(es) {
		sizes = append(sizes, len(b.Records))
		names = append(names, b.Shards)
	}
	if want := []int{60, 50, 100, 100, 51}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v (shards %v)", sizes, want, names)
	}
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func diff(got, want map[string]int) []string {
	var out []string
	for k, v := range want {
		if got[k] != v {
			out = append(out, fmt.Sprintf("%s: %d, want %d", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s: %d, want none", k, v))
		}
	}
	sort.Strings(out)
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
