package capacity

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"sync"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/runtime"
)

// The AWS path (Shape.AWS): the platform opened with local.OpenAWSDispatch
// (the store built by runtime.NewStore, as the Lambda functions build it:
// its sweep index sparse, or full under PLATFORM_OUTBOX_SWEEP_INDEX=full;
// the dispatcher is built as the dispatcher function's: a lease per
// delivery), driven as the
// dispatcher function is: the table's committed changes that template.yaml's
// event source mapping lets through (an INSERT of an OUTBOX# key) go in
// batches of at most streamBatch records to runtime.DrainOutbox, the
// function's handler, each record on one of streamLanes lanes by its
// partition key (ParallelizationFactor: a key's records in order, one
// batch of a lane at a time). What the embedded DynamoDB counts is then
// what the AWS build's writes and reads take per delivery. Left out: the
// one-minute sweep (RunOnce; the model prices it apart, per minute) and a
// batch's retries (none fails here).
const (
	streamBatch = 100 // BatchSize
	streamLanes = 10  // ParallelizationFactor
)

// awsStream is the event source mapping's stand-in.
type awsStream struct {
	table string
	drain func(ctx context.Context, event json.RawMessage) error
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	lanes [streamLanes]streamLane

	mu    sync.Mutex
	first error // the first batch that failed
}

type streamLane struct {
	mu      sync.Mutex
	pending []json.RawMessage // records, in commit order
	wake    chan struct{}
}

// startAWSStream feeds p's table's outbox inserts to p's dispatcher,
// through runtime.DrainOutbox, until close.
func startAWSStream(p *local.Platform) *awsStream {
	s := &awsStream{table: p.Env.Table, drain: runtime.DrainOutbox(p.Dispatcher)}
	s.ctx, s.stop = context.WithCancel(context.Background())
	for i := range s.lanes {
		s.lanes[i].wake = make(chan struct{}, 1)
		s.wg.Add(1)
		go s.run(&s.lanes[i])
	}
	p.Dynamo.OnChange(s.changes)
	return s
}

// changes takes the table's committed changes (on the writer's goroutine:
// it never blocks).
func (s *awsStream) changes(cs []localdynamo.Change) {
	for _, c := range cs {
		if c.Table != s.table || c.EventName != "INSERT" {
			continue
		}
		var keys struct {
			PK struct{ S string } `json:"pk"`
		}
		if json.Unmarshal(c.Keys, &keys) != nil || !dynamo.IsShard(keys.PK.S) {
			continue // the filter: an insert into an outbox shard
		}
		rec, _ := json.Marshal(map[string]any{"eventSource": "aws:dynamodb", "eventName": c.EventName,
			"dynamodb": map[string]json.RawMessage{"Keys": c.Keys}})
		h := fnv.New32a()
		_, _ = h.Write([]byte(keys.PK.S))
		l := &s.lanes[h.Sum32()%streamLanes]
		l.mu.Lock()
		l.pending = append(l.pending, rec)
		l.mu.Unlock()
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// run invokes the handler with each batch of lane l, one at a time.
func (s *awsStream) run(l *streamLane) {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-l.wake:
		}
		for {
			l.mu.Lock()
			n := min(len(l.pending), streamBatch)
			batch := l.pending[:n:n]
			l.pending = l.pending[n:]
			l.mu.Unlock()
			if n == 0 {
				break
			}
			event, _ := json.Marshal(map[string]any{"Records": batch})

			if err := s.drain(s.ctx, event); err != nil && s.ctx.Err() == nil {
				s.mu.Lock()
				if s.first == nil {
					s.first = err
				}
				s.mu.Unlock()
			}
		}
	}
}

// err is the first batch's failure, if any.
func (s *awsStream) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// close stops the lanes once their batches under way are done.
func (s *awsStream) close() {
	s.stop()
	s.wg.Wait()
}
