package awslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// records are stream records of sequence numbers seqs, arrived at.
func records(at time.Time, seqs ...int64) []map[string]any {
	var out []map[string]any
	for _, n := range seqs {
		out = append(out, map[string]any{"eventName": "INSERT", "dynamodb": map[string]any{
			"ApproximateCreationDateTime": at.Unix(), "SequenceNumber": seqString(n),
			"Keys": map[string]any{"pk": map[string]string{"S": fmt.Sprint("K#", n)}}}})
	}
	return out
}

func seqsOf(batch []map[string]any) []int64 {
	var out []int64
	for _, r := range batch {
		out = append(out, seqOf(r))
	}
	return out
}

// The mapping's bounds, as Lambda applies them: a failed batch is halved
// (BisectBatchOnFunctionError) until the record that fails is alone; that
// one is retried MaximumRetryAttempts times and given up; the others are
// delivered. A batch whose first record is older than
// MaximumRecordAgeInSeconds is given up without an invocation.
func TestStreamMappingBounds(t *testing.T) {
	type gave struct {
		seqs      []int64
		condition string
		invokes   int
	}
	for _, tc := range []struct {
		name    string
		src     StreamSource
		age     time.Duration
		want    []gave
		invokes int     // invocations in all
		ok      []int64 // records delivered in a successful invocation
	}{
		{"bisected to the failing record", StreamSource{MaxRetryAttempts: 2, Bisect: true, MaxRecordAgeSeconds: -1}, 0,
			[]gave{{[]int64{3}, "RetryAttemptsExhausted", 3}}, 1 + 1 + 1 + 3 + 1, []int64{1, 2, 4}},
		{"without bisecting: the whole batch", StreamSource{MaxRetryAttempts: 2, MaxRecordAgeSeconds: -1}, 0,
			[]gave{{[]int64{1, 2, 3, 4}, "RetryAttemptsExhausted", 3}}, 3, nil},
		{"too old to be sent again", StreamSource{MaxRetryAttempts: 2, Bisect: true, MaxRecordAgeSeconds: 60}, 2 * time.Minute,
			[]gave{{[]int64{1, 2, 3, 4}, "RecordAgeExceeded", 0}}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []gave
			var ok []int64
			invokes := 0
			m := &streamMapping{src: &tc.src, fn: &Function{LogicalID: "ChatFanoutFunction"},
				invokeFn: func(_ context.Context, payload []byte) invokeResult {
					invokes++
					var ev struct{ Records []map[string]any }
					_ = json.Unmarshal(payload, &ev)
					if strings.Contains(string(payload), seqString(3)) {
						return invokeResult{FunctionError: true, Payload: []byte(`{"errorMessage":"record 3 fails"}`)}
					}
					ok = append(ok, seqsOf(ev.Records)...)
					return invokeResult{}
				},
				gaveUp: func(batch []map[string]any, condition string, n int) {
					got = append(got, gave{seqsOf(batch), condition, n})
				},
			}
			m.deliver(context.Background(), records(time.Now().Add(-tc.age), 1, 2, 3, 4))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || invokes != tc.invokes || !slices.Equal(ok, tc.ok) {
				t.Fatalf("given up %v (want %v), %d invocations (want %d), delivered %v (want %v)", got, tc.want, invokes, tc.invokes, ok, tc.ok)
			}
		})
	}
}

// TestStreamMappingRetriesUntilItSucceeds: with the dispatcher's mapping
// (MaximumRetryAttempts and MaximumRecordAgeInSeconds -1, template.yaml) a
// failing batch is never given up: the record that fails is retried, past
// any bounded count (here 6 failures, where the bounded mappings give up
// after 3 invocations), until the function succeeds.
func TestStreamMappingRetriesUntilItSucceeds(t *testing.T) {
	tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "")
	if err != nil {
		t.Fatal(err)
	}
	src := tpl.FunctionByName("DispatcherFunction").Stream
	if src == nil || src.MaxRetryAttempts != -1 || src.MaxRecordAgeSeconds != -1 || !src.Bisect {
		t.Fatalf("the dispatcher's mapping: %+v; want MaximumRetryAttempts and MaximumRecordAgeInSeconds -1, bisect", src)
	}
	var gaveUp []int64
	var ok []int64
	fails := 0
	m := &streamMapping{src: src, fn: &Function{LogicalID: "DispatcherFunction"},
		invokeFn: func(_ context.Context, payload []byte) invokeResult {
			var ev struct{ Records []map[string]any }
			_ = json.Unmarshal(payload, &ev)
			if strings.Contains(string(payload), seqString(3)) && fails < 6 {
				fails++
				return invokeResult{FunctionError: true, Payload: []byte(`{"errorMessage":"record 3 fails"}`)}
			}
			ok = append(ok, seqsOf(ev.Records)...)
			return invokeResult{}
		},
		gaveUp: func(batch []map[string]any, condition string, n int) { gaveUp = append(gaveUp, seqsOf(batch)...) },
	}
	m.deliver(context.Background(), records(time.Now().Add(-2*time.Hour), 1, 2, 3, 4))
	if len(gaveUp) != 0 || fails != 6 || !slices.Equal(ok, []int64{1, 2, 3, 4}) {
		t.Fatalf("given up %v (want none), %d failures (want 6), delivered %v (want [1 2 3 4])", gaveUp, fails, ok)
	}
}
