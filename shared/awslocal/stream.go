package awslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/botforge/platform/shared/iampolicy"
)

type iampolicyStatement = iampolicy.Statement

// evaluate says whether statements allow action on resource.
func evaluate(st []iampolicy.Statement, action, resource string, ctx map[string]string) (bool, *iampolicy.Statement) {
	d, by := iampolicy.Evaluate(st, iampolicy.Request{Action: action, Resource: resource, Context: ctx})
	return d == iampolicy.Allow, by
}

func wildcard(pattern, s string) bool { return iampolicy.Match(pattern, s) }

// roleStatements are the statements of every role of the template, by the
// role's ARN.
func (t *Template) roleStatements() (map[string][]iampolicy.Statement, error) {
	out := map[string][]iampolicy.Statement{}
	for id := range t.resources {
		if t.typeOf(id) != "AWS::IAM::Role" {
			continue
		}
		arn, err := t.getAtt(id, "Arn")
		if err != nil {
			return nil, err
		}
		st, err := t.rolePolicy(id)
		if err != nil {
			// A role no function of the stack runs with, in a form not
			// resolved here: a service assuming it is refused.
			continue
		}
		out[arn] = st
	}
	return out, nil
}

// streamMapping is an event source mapping of the table's stream (one per
// function with a DynamoDB event, as on AWS): the records its filters let
// through, in batches of BatchSize, to the function, each batch retried MaximumRetryAttempts times and then
// dropped (-1: until its records are older than MaximumRecordAgeInSeconds, for ever when that is -1 too: the
// stand-in's stream keeps its records). It reads the stream with the function's role, as Lambda does:
// a role that may not read it makes the mapping fail (reported), and no
// record is delivered.
type streamMapping struct {
	stack *Stack

	mu      sync.Mutex
	src     *StreamSource
	fn      *Function
	filters []map[string]any
	// lanes: the ParallelizationFactor's concurrent batches of the
	// shard, a record's lane chosen by its partition key (a key's records
	// stay in order, as Lambda keeps them).
	lanes []*lane
	// invokeFn and gaveUp replace the function's invocation and the
	// on-failure destination in tests of the delivery's bounds.
	invokeFn func(ctx context.Context, payload []byte) invokeResult
	gaveUp   func(batch []map[string]any, condition string, invokes int)
}

// lane is one of the concurrent batch sequences of the shard.
type lane struct {
	pending []map[string]any // under streamMapping.mu
	wake    chan struct{}
}

// laneOf is the lane of a record of these keys among n: by its partition
// key (pk), so that one key's records go through one lane, in order.
func laneOf(keys map[string]any, n int) int {
	h := fnv.New32a()
	pk, _ := json.Marshal(keys["pk"])
	h.Write(pk)
	return int(h.Sum32() % uint32(n))
}

func (m *streamMapping) start(ctx context.Context, wg *sync.WaitGroup, f *Function) error {
	if f.Stream.StreamARN != m.stack.Template.StreamARN {
		return fmt.Errorf("%s: the stream %s is not the table's", f.LogicalID, f.Stream.StreamARN)
	}
	var filters []map[string]any
	for _, p := range f.Stream.Filters {
		var pat map[string]any
		if err := json.Unmarshal([]byte(p), &pat); err != nil {
			return fmt.Errorf("%s: filter pattern %s: %w", f.LogicalID, p, err)
		}
		filters = append(filters, pat)
	}
	ok := true
	for _, a := range []struct{ action, res string }{
		{"dynamodb:ListStreams", "*"}, {"dynamodb:DescribeStream", f.Stream.StreamARN}, {"dynamodb:GetShardIterator", f.Stream.StreamARN},
	} {
		ok = m.stack.authorize(f, "dynamodb", a.action, a.res) && ok
	}
	if !ok {
		m.stack.log.Error("aws-local: the table's event source mapping cannot read the stream with the function's role: no record is delivered", "function", f.LogicalID)
		return nil
	}
	m.mu.Lock()
	m.src, m.fn, m.filters = f.Stream, f, filters
	for range max(1, f.Stream.Parallelization) {
		m.lanes = append(m.lanes, &lane{wake: make(chan struct{}, 1)})
	}
	m.mu.Unlock()
	for _, l := range m.lanes {
		wg.Add(1)
		go func() { defer wg.Done(); m.loop(ctx, l) }()
	}
	return nil
}

// changes receives the stream's new records (on the writer's goroutine:
// it only queues).
func (m *streamMapping) changes(recs []map[string]any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fn == nil {
		return
	}
	for _, rec := range recs {
		if !m.passes(rec) {
			continue
		}
		keys, _ := rec["dynamodb"].(map[string]any)["Keys"].(map[string]any)
		l := m.lanes[laneOf(keys, len(m.lanes))]
		l.pending = append(l.pending, rec)
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// passes: with filters, a record goes through when one of them matches.
func (m *streamMapping) passes(rec map[string]any) bool {
	if len(m.filters) == 0 {
		return true
	}
	var generic map[string]any
	b, _ := json.Marshal(rec)
	_ = json.Unmarshal(b, &generic)
	for _, f := range m.filters {
		if matchPattern(f, generic) {
			return true
		}
	}
	return false
}

// matchPattern is Lambda's event filtering (EventBridge patterns): each
// field of the pattern must match; an array lists the accepted values
// (literals, {"prefix": ...}, {"exists": bool}, {"anything-but": ...}).
func matchPattern(pat map[string]any, v map[string]any) bool {
	for k, p := range pat {
		got, present := v[k]
		switch pp := p.(type) {
		case map[string]any:
			sub, ok := got.(map[string]any)
			if !ok || !matchPattern(pp, sub) {
				return false
			}
		case []any:
			ok := false
			for _, alt := range pp {
				if matchValue(alt, got, present) {
					ok = true
					break
				}
			}
			if !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func matchValue(alt, got any, present bool) bool {
	if m, ok := alt.(map[string]any); ok {
		if p, ok := m["prefix"].(string); ok {
			s, isStr := got.(string)
			return isStr && len(s) >= len(p) && s[:len(p)] == p
		}
		if e, ok := m["exists"].(bool); ok {
			return e == present
		}
		if ab, ok := m["anything-but"]; ok {
			if l, ok := ab.([]any); ok {
				for _, x := range l {
					if x == got {
						return false
					}
				}
				return present
			}
			return present && ab != got
		}
		return false
	}
	return present && alt == got
}

// loop delivers one lane's records, a batch at a time.
func (m *streamMapping) loop(ctx context.Context, l *lane) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		if m.src.WindowSeconds > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(m.src.WindowSeconds) * time.Second):
			}
		}
		for {
			m.mu.Lock()
			n := min(len(l.pending), m.src.BatchSize)
			batch := append([]map[string]any(nil), l.pending[:n]...)
			l.pending = l.pending[n:]
			m.mu.Unlock()
			if n == 0 {
				break
			}
			m.stack.authorize(m.fn, "dynamodb", "dynamodb:GetRecords", m.src.StreamARN)
			m.deliver(ctx, batch)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// deliver invokes the function with batch until it succeeds or the
// mapping gives the batch up (failure.go): after MaximumRetryAttempts
// retries, or once its first record is older than
// MaximumRecordAgeInSeconds. With BisectBatchOnFunctionError a failed
// batch of more than one record is halved and each half delivered so
// (as Lambda does, the halving does not count as a retry).
func (m *streamMapping) deliver(ctx context.Context, batch []map[string]any) {
	payload, _ := json.Marshal(map[string]any{"Records": batch})
	for attempt := 0; ; attempt++ {
		if age := m.src.MaxRecordAgeSeconds; age >= 0 && time.Since(arrival(batch[0])) > time.Duration(age)*time.Second {
			m.giveUp(ctx, batch, "RecordAgeExceeded", attempt, invokeResult{})
			return
		}
		var res invokeResult
		if m.invokeFn != nil {
			res = m.invokeFn(ctx, payload)
		} else {
			res = m.stack.funcs[m.fn.LogicalID].Invoke(ctx, payload)
		}
		if res.Err == nil && !res.FunctionError {
			return
		}
		if ctx.Err() != nil {
			return
		}
		if m.src.Bisect && len(batch) > 1 {
			half := len(batch) / 2
			m.deliver(ctx, batch[:half])
			m.deliver(ctx, batch[half:])
			return
		}
		if m.src.MaxRetryAttempts >= 0 && attempt >= m.src.MaxRetryAttempts {
			m.giveUp(ctx, batch, "RetryAttemptsExhausted", attempt+1, res)
			return
		}
		// MaximumRetryAttempts -1 (the dispatcher's): retried until the
		// record is too old, or for ever here (the stream stand-in keeps
		// its records); Lambda backs off between retries, and so does
		// this, so that a batch failing for good does not spin.
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(10*time.Millisecond<<min(attempt, 7), time.Second)):
		}
	}
}
