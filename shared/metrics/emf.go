package metrics

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The AWS outlet: CloudWatch's Embedded Metric Format. A Lambda function
// turns it on (EnableEMF) and flushes after each invocation (FlushEMF):
// one JSON line per metric and label set counted during the invocation,
// on stdout, where CloudWatch Logs extracts the metrics. Nothing is sent
// on the request path.

// DefaultNamespace is the CloudWatch namespace of the metrics unless
// PLATFORM_METRICS_NAMESPACE names another.
const DefaultNamespace = "BotPlatform"

// EnvNamespace names the variable overriding the namespace.
const EnvNamespace = "PLATFORM_METRICS_NAMESPACE"

var (
	emfOn   atomic.Bool
	emfMu   sync.Mutex
	pending = map[string]*emfEntry{}
)

type emfEntry struct {
	m      *Metric
	labels []string
	sum    float64         // counter: the invocation's increase
	value  float64         // gauge: the value at the last change
	hist   map[float64]int // histogram: observed value -> count
}

// EnableEMF makes the metrics counted from now on wait for FlushEMF.
func EnableEMF() { emfOn.Store(true) }

func emfRecord(m *Metric, labels []string, v float64) {
	if !emfOn.Load() {
		return
	}
	key := m.Name + "\x00" + strings.Join(labels, "\x00")
	emfMu.Lock()
	defer emfMu.Unlock()
	e := pending[key]
	if e == nil {
		e = &emfEntry{m: m, labels: append([]string(nil), labels...)}
		pending[key] = e
	}
	switch m.kind {
	case kindCounter:
		e.sum += v
	case kindGauge:
		// The gauge's value, not the change (Add on open streams); its
		// peak over the invocation: a stream opened and closed, an entry
		// waiting then delivered, within one invocation still show.
		var d dto.Metric
		if m.g.WithLabelValues(labels...).Write(&d) == nil && d.Gauge != nil {
			e.value = max(e.value, d.Gauge.GetValue())
		}
	case kindHistogram:
		if e.hist == nil {
			e.hist = map[float64]int{}
		}
		// Millisecond precision: EMF takes at most 100 distinct values
		// per document, and latencies need no finer grain.
		e.hist[math.Round(v*1000)/1000]++
	}
}

// NotePeak tells EMF that an unlabelled gauge reached v during the
// invocation (the age an outbox entry had when delivered) without setting
// it: the exposition shows the gauge's current value, EMF its peak.
func (m *Metric) NotePeak(v float64) {
	if !emfOn.Load() || m.kind != kindGauge {
		return
	}
	emfMu.Lock()
	defer emfMu.Unlock()
	e := pending[m.Name+"\x00"]
	if e == nil {
		e = &emfEntry{m: m}
		pending[m.Name+"\x00"] = e
	}
	e.value = max(e.value, v)
}

// FlushEMF writes what was counted since the last flush as EMF lines to w
// (os.Stdout when nil), with the properties given (e.g. the function's
// name) on every line, and forgets it. Every metric is published twice:
// with no dimension (the total, which alarms use) and with its labels as
// dimensions.
func FlushEMF(w io.Writer, props map[string]string) error {
	if w == nil {
		w = os.Stdout
	}
	refresh()
	emfMu.Lock()
	batch := pending
	pending = map[string]*emfEntry{}
	emfMu.Unlock()
	ns := os.Getenv(EnvNamespace)
	if ns == "" {
		ns = DefaultNamespace
	}
	keys := make([]string, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ts := time.Now().UnixMilli()
	var out []byte
	for _, k := range keys {
		for _, line := range batch[k].documents(ns, ts, props) {
			b, err := json.Marshal(line)
			if err != nil {
				return err
			}
			out = append(append(out, b...), '\n')
		}
	}
	if len(out) == 0 {
		return nil
	}
	_, err := w.Write(out)
	return err
}

// documents renders one entry as EMF documents (one, or several for a
// histogram of more than 100 distinct values).
func (e *emfEntry) documents(ns string, ts int64, props map[string]string) []map[string]any {
	dims := [][]string{{}}
	if len(e.m.Labels) > 0 {
		dims = append(dims, e.m.Labels)
	}
	doc := func(value any) map[string]any {
		d := map[string]any{}
		for k, v := range props {
			d[k] = v
		}
		for i, l := range e.m.Labels {
			d[l] = e.labels[i]
		}
		d["_aws"] = map[string]any{
			"Timestamp": ts,
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  ns,
				"Dimensions": dims,
				"Metrics":    []any{map[string]any{"Name": e.m.Name, "Unit": e.m.Unit}},
			}},
		}
		d[e.m.Name] = value
		return d
	}
	switch e.m.kind {
	case kindCounter:
		return []map[string]any{doc(e.sum)}
	case kindGauge:
		return []map[string]any{doc(e.value)}
	}
	vals := make([]float64, 0, len(e.hist))
	for v := range e.hist {
		vals = append(vals, v)
	}
	sort.Float64s(vals)
	var docs []map[string]any
	for len(vals) > 0 {
		n := min(len(vals), 100)
		counts := make([]int, n)
		for i, v := range vals[:n] {
			counts[i] = e.hist[v]
		}
		docs = append(docs, doc(map[string]any{"Values": vals[:n], "Counts": counts}))
		vals = vals[n:]
	}
	return docs
}
