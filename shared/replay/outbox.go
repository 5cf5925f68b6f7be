package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/botforge/platform/shared/dynamo"
)

// The outbox scan: the operator's recovery for outbox entries nothing
// else would find. On AWS an entry due at once is written without its
// sweep index attributes (gsi1pk, gsi1sk): the table's stream names its
// shard to the dispatcher function, whose mapping retries a batch for as
// long as the stream keeps its records (24 hours). A dispatcher down for
// longer leaves such entries where neither the stream nor the sweep finds
// them. OutboxScan reads the table for them (a Scan in parallel segments,
// filtered to outbox entries without gsi1pk) and invokes the dispatcher
// function with synthetic stream batches naming their shards, as the
// mapping would have: the function works those shards as if the stream
// had delivered them (runtime.StreamShards, runtime.DrainOutbox).
// Delivering twice is not a risk: the dispatcher leases an entry before it
// delivers it and removes it once delivered.

// BatchRecords is the most records a synthetic batch holds (the mapping's
// BatchSize).
const BatchRecords = 100

// Scanner is the part of the DynamoDB client OutboxScan reads with.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Invoker is the part of the Lambda client OutboxScan invokes with.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// OutboxScan finds the outbox entries outside the sweep index older than
// OlderThan and hands their shards to the dispatcher function.
type OutboxScan struct {
	DynamoDB Scanner
	Lambda   Invoker
	Table    string
	Function string // the dispatcher function's name or ARN
	// Segments is how many parallel Scan segments read the table
	// (default 4).
	Segments int
	// OlderThan: an entry due (dueAt, epoch ms: for an entry due at once,
	// when it was written) less than this long ago is left alone: its
	// stream record is still on its way (default 15 minutes).
	OlderThan time.Duration
	// DryRun lists what would be sent; nothing is invoked.
	DryRun bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Entry is an outbox entry the scan found.
type Entry struct {
	Shard, ID string
	Due       time.Time
}

// ShardResult is what became of one shard's entries.
type ShardResult struct {
	Shard   string
	Entries int
	Oldest  time.Time
	Batch   int    // the synthetic batch that named it (1-based)
	Outcome string // Replayed, Failed or DryRun
	Err     error
}

func (r ShardResult) String() string {
	s := fmt.Sprintf("%s %d entries, oldest due %s, batch %d: %s", r.Shard, r.Entries, r.Oldest.UTC().Format(time.RFC3339), r.Batch, r.Outcome)
	if r.Err != nil {
		s += ": " + r.Err.Error()
	}
	return s
}

// Run scans, then invokes the function once per batch (or, with DryRun,
// describes them), and returns a result per shard in batch order.
func (o *OutboxScan) Run(ctx context.Context) ([]ShardResult, error) {
	if o.Table == "" || (o.Function == "" && !o.DryRun) {
		return nil, errors.New("outbox scan: a table and a function are needed")
	}
	entries, err := o.Scan(ctx)
	if err != nil {
		return nil, err
	}
	batches := Batches(entries)
	var out []ShardResult
	for i, b := range batches {
		for _, shard := range b.Shards {
			r := ShardResult{Shard: shard, Batch: i + 1, Outcome: DryRun}
			for _, e := range b.Records {
				if e.Shard == shard {
					if r.Entries++; r.Oldest.IsZero() || e.Due.Before(r.Oldest) {
						r.Oldest = e.Due
					}
				}
			}
			out = append(out, r)
		}
	}
	if o.DryRun {
		return out, nil
	}
	// The batches, a few at once (each a dispatcher pass over its shards).
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, b := range batches {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = o.invoke(ctx, b)
		}()
	}
	wg.Wait()
	for i := range out {
		if err := errs[out[i].Batch-1]; err != nil {
			out[i].Outcome, out[i].Err = Failed, err
		} else {
			out[i].Outcome = Replayed
		}
	}
	return out, nil
}

// invoke sends one batch to the function and waits for its answer.
func (o *OutboxScan) invoke(ctx context.Context, b Batch) error {
	res, err := o.Lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(o.Function), Payload: b.Event()})
	switch {
	case err != nil:
		return err
	case res.FunctionError != nil:
		return fmt.Errorf("function error %s: %s", aws.ToString(res.FunctionError), res.Payload)
	}
	return nil
}

// Scan reads the table in parallel segments for outbox entries without
// sweep index attributes due more than OlderThan ago, oldest first.
func (o *OutboxScan) Scan(ctx context.Context) ([]Entry, error) {
	segments := o.Segments
	if segments <= 0 {
		segments = 4
	}
	older := o.OlderThan
	if older == 0 {
		older = 15 * time.Minute
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	before := now().Add(-older).UnixMilli()
	var (
		mu   sync.Mutex
		out  []Entry
		errs = make([]error, segments)
		wg   sync.WaitGroup
	)
	for seg := range segments {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := &dynamodb.ScanInput{
				TableName:     aws.String(o.Table),
				Segment:       aws.Int32(int32(seg)),
				TotalSegments: aws.Int32(int32(segments)),
				// The keys and the entry's due time only; the filter:
				// outbox partitions but the sweep index's buckets, not
				// in the sweep index, due long enough ago.
				ProjectionExpression:     aws.String("#pk, #sk, #due"),
				FilterExpression:         aws.String("begins_with(#pk, :outbox) AND NOT begins_with(#pk, :bucket) AND attribute_not_exists(#gsi1pk) AND #due < :before"),
				ExpressionAttributeNames: map[string]string{"#pk": "pk", "#sk": "sk", "#due": "dueAt", "#gsi1pk": "gsi1pk"},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":outbox": &types.AttributeValueMemberS{Value: "OUTBOX#"},
					":bucket": &types.AttributeValueMemberS{Value: "OUTBOX#DUE#"},
					":before": &types.AttributeValueMemberN{Value: strconv.FormatInt(before, 10)},
				},
			}
			p := dynamodb.NewScanPaginator(o.DynamoDB, in)
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					errs[seg] = fmt.Errorf("scan %s (segment %d of %d): %w", o.Table, seg, segments, err)
					return
				}
				for _, it := range page.Items {
					pk, sk := attrS(it["pk"]), attrS(it["sk"])
					due, ok := attrN(it["dueAt"])
					if !dynamo.IsShard(pk) || sk == "" || !ok || due >= before {
						continue // not an outbox shard's entry (the previous layout's OUTBOX#LATER)
					}
					mu.Lock()
					out = append(out, Entry{Shard: pk, ID: sk, Due: time.UnixMilli(due)})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Due.Equal(out[j].Due) {
			return out[i].Due.Before(out[j].Due)
		}
		return out[i].Shard+out[i].ID < out[j].Shard+out[j].ID
	})
	return out, nil
}

// Batch is one synthetic stream batch: its records (one per entry), the
// shards they name in order.
type Batch struct {
	Records []Entry
	Shards  []string
}

// Batches groups entries into batches of at most BatchRecords records, a
// shard's records together in one batch (a shard with more entries than
// that takes batches of its own: the dispatcher reads the whole shard from
// its head whichever of its records names it), shards in the order of
// their oldest entry.
func Batches(entries []Entry) []Batch {
	var order []string
	by := map[string][]Entry{}
	for _, e := range entries {
		if _, ok := by[e.Shard]; !ok {
			order = append(order, e.Shard)
		}
		by[e.Shard] = append(by[e.Shard], e)
	}
	var out []Batch
	cur := Batch{}
	flush := func() {
		if len(cur.Records) > 0 {
			out = append(out, cur)
		}
		cur = Batch{}
	}
	for _, shard := range order {
		es := by[shard]
		if len(cur.Records)+len(es) > BatchRecords {
			flush()
		}
		for len(es) > BatchRecords {
			out = append(out, Batch{Records: es[:BatchRecords], Shards: []string{shard}})
			es = es[BatchRecords:]
		}
		cur.Records = append(cur.Records, es...)
		cur.Shards = append(cur.Shards, shard)
	}
	flush()
	return out
}

// Event is the batch as the table's stream mapping gives it to the
// function: a DynamoDB stream record per entry, an INSERT naming its keys
// (the stream's view is KEYS_ONLY), as runtime.StreamShards reads it.
func (b Batch) Event() []byte {
	recs := make([]map[string]any, 0, len(b.Records))
	for i, e := range b.Records {
		recs = append(recs, map[string]any{
			"eventID":      fmt.Sprintf("outbox-scan-%d", i),
			"eventName":    "INSERT",
			"eventVersion": "1.1",
			"eventSource":  "aws:dynamodb",
			"dynamodb": map[string]any{
				"Keys":                        map[string]any{"pk": map[string]string{"S": e.Shard}, "sk": map[string]string{"S": e.ID}},
				"ApproximateCreationDateTime": e.Due.Unix(),
				"StreamViewType":              "KEYS_ONLY",
			},
		})
	}
	ev, _ := json.Marshal(map[string]any{"Records": recs})
	return ev
}

func attrS(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func attrN(v types.AttributeValue) (int64, bool) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	return i, err == nil
}
