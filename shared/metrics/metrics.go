// Package metrics is the platform's one set of operational metrics
// (docs/metrics.md): every count is made once, here, and leaves by two
// outlets. Locally, Handler serves them in the Prometheus exposition
// format (client_golang). In a Lambda function, the same names go to
// CloudWatch through the Embedded Metric Format: FlushEMF writes what an
// invocation counted as JSON lines on stdout, which CloudWatch Logs turns
// into metrics (no API call on the request path). Series keeps them over
// time in memory for the console's health page.
//
// Names are stable (alarms and dashboards use them) and all start with
// platform_. Label values are bounded: operations, status codes, delivery
// kinds, models, DynamoDB operations, and bot ids (a deployment's bots).
package metrics

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry holds every platform metric (and the Go runtime's).
var Registry = prometheus.NewRegistry()

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// kind of a metric, for EMF.
type kind int

const (
	kindCounter kind = iota
	kindGauge
	kindHistogram
)

// Metric is one named metric with its labels. Add, Set and Observe count
// into Prometheus and, when EMF is on, into the pending EMF document.
type Metric struct {
	Name   string
	Help   string
	Labels []string
	Unit   string // CloudWatch unit: Count, Seconds, None
	kind   kind
	c      *prometheus.CounterVec
	g      *prometheus.GaugeVec
	h      *prometheus.HistogramVec
}

// latencyBuckets suit API calls and upstream calls alike (5 ms .. 60 s).
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

var all []*Metric

func counter(name, help, unit string, labels ...string) *Metric {
	m := &Metric{Name: name, Help: help, Labels: labels, Unit: unit, kind: kindCounter}
	m.c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(m.c)
	all = append(all, m)
	return m
}

func gauge(name, help, unit string, labels ...string) *Metric {
	m := &Metric{Name: name, Help: help, Labels: labels, Unit: unit, kind: kindGauge}
	m.g = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(m.g)
	all = append(all, m)
	return m
}

func histogram(name, help string, labels ...string) *Metric {
	m := &Metric{Name: name, Help: help, Labels: labels, Unit: "Seconds", kind: kindHistogram}
	m.h = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, labels)
	Registry.MustRegister(m.h)
	all = append(all, m)
	return m
}

// The platform's metrics. docs/metrics.md lists them with their labels;
// TestDocsListEveryMetric keeps that list and this one in agreement.
var (
	Requests = counter("platform_requests_total",
		"API requests answered, by operation (the reference operationId; raw routes by area, e.g. webhook, console, s3) and HTTP status code.", "Count", "op", "code")
	RequestErrors = counter("platform_request_errors_total",
		"API requests answered with a 5xx status, by operation.", "Count", "op")
	RequestDuration = histogram("platform_request_duration_seconds",
		"Time to answer an API request (until its handler returned; a stream counts its whole life), by operation.", "op")
	Messages = counter("platform_messages_total",
		"Messages created, by bot.", "Count", "bot")
	Events = counter("platform_events_total",
		"Events created, by bot.", "Count", "bot")
	Deliveries = counter("platform_deliveries_total",
		"Delivery attempts of the outbox by the dispatcher, by kind (event, outgoing, ...) and result (delivered, retried, failed, skipped, ignored).", "Count", "kind", "result")
	DeliveryFailures = counter("platform_delivery_failures_total",
		"Deliveries failed for good (refused, or out of attempts), by kind.", "Count", "kind")
	DeliveryRetries = counter("platform_delivery_retries_total",
		"Delivery attempts that failed and were put back for a retry, by kind.", "Count", "kind")
	DispatchLag = histogram("platform_dispatch_lag_seconds",
		"How late the dispatcher starts a delivery attempt: from the entry's due time to the attempt, by kind.", "kind")
	OutboxAge = gauge("platform_outbox_oldest_age_seconds",
		"Age of the oldest outbox entry this dispatcher found due and has not delivered yet (being delivered, or waiting for a retry); 0 when none.", "Seconds")
	OpenStreams = gauge("platform_open_streams",
		"Streams open on this process: end users' Chat API listen streams (sse, websocket) and the console's inbox streams (inbox).", "Count", "transport")
	LLMCalls = counter("platform_llm_calls_total",
		"Calls to the LLM provider, by model and result (ok, error).", "Count", "model", "result")
	LLMTokens = counter("platform_llm_tokens_total",
		"LLM tokens counted to bots, by bot, model and direction (input, output).", "Count", "bot", "model", "direction")
	LLMLatency = histogram("platform_llm_upstream_seconds",
		"Time the LLM provider took to answer a call (a stream: to its end), by model.", "model")
	DynamoUnits = counter("platform_dynamodb_consumed_units_total",
		"DynamoDB capacity units consumed, by DynamoDB operation and kind (read, write).", "Count", "operation", "kind")
	DynamoThrottles = counter("platform_dynamodb_throttles_total",
		"DynamoDB calls refused for throughput (throttled), by DynamoDB operation.", "Count", "operation")
	ColdStarts = counter("platform_cold_starts_total",
		"Process starts that served a first invocation or request (a Lambda cold start), by function.", "Count", "function")
)

// All returns every platform metric, by name.
func All() []*Metric {
	out := append([]*Metric(nil), all...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Add adds v to a counter (or a gauge) with the label values given in the
// order of Labels.
func (m *Metric) Add(v float64, labels ...string) {
	switch m.kind {
	case kindCounter:
		m.c.WithLabelValues(labels...).Add(v)
	case kindGauge:
		m.g.WithLabelValues(labels...).Add(v)
	}
	emfRecord(m, labels, v)
}

// Inc adds 1.
func (m *Metric) Inc(labels ...string) { m.Add(1, labels...) }

// Dec subtracts 1 from a gauge.
func (m *Metric) Dec(labels ...string) { m.Add(-1, labels...) }

// Set sets a gauge.
func (m *Metric) Set(v float64, labels ...string) {
	m.g.WithLabelValues(labels...).Set(v)
	emfRecord(m, labels, v)
}

// Observe records one observation of a histogram (seconds).
func (m *Metric) Observe(v float64, labels ...string) {
	m.h.WithLabelValues(labels...).Observe(v)
	emfRecord(m, labels, v)
}

// Since observes the time since start.
func (m *Metric) Since(start time.Time, labels ...string) {
	m.Observe(time.Since(start).Seconds(), labels...)
}

// gaugeFuncs are gauges computed when read (outbox age).
var (
	gaugeMu    sync.Mutex
	gaugeFuncs = map[*Metric]func() float64{}
)

// SetFunc makes an unlabelled gauge computed when read (a scrape, an EMF
// flush, a series sample); nil removes it.
func (m *Metric) SetFunc(f func() float64) {
	gaugeMu.Lock()
	defer gaugeMu.Unlock()
	if f == nil {
		delete(gaugeFuncs, m)
		return
	}
	gaugeFuncs[m] = f
}

// refresh sets the computed gauges to their current values.
func refresh() {
	gaugeMu.Lock()
	fs := make(map[*Metric]func() float64, len(gaugeFuncs))
	for m, f := range gaugeFuncs {
		fs[m] = f
	}
	gaugeMu.Unlock()
	for m, f := range fs {
		m.Set(f())
	}
}

// StatusCode renders an HTTP status as the code label.
func StatusCode(status int) string { return strconv.Itoa(status) }
