package metrics

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Series keeps the platform's metrics over time in memory for the
// console's health page (GET /v1/admin/metrics, docs/metrics.md): every
// Step a snapshot of the cumulative counts, in two rings: the last hour
// at Step, the last day at DayStep. An answer is the differences between
// consecutive snapshots (a rate per step), the gauges as sampled, and the
// latency quantiles of each step's histogram observations.
type Series struct {
	Step    time.Duration // default 10 s
	DayStep time.Duration // default 5 min

	mu      sync.Mutex
	hour    []snapshot
	day     []snapshot
	lastDay time.Time
}

// snapshot is the cumulative values at one time, by key: "requests",
// "errors", "latency_le:<bound>", "deliveries", "failures", "retries",
// "outbox_age", "streams", "llm_tokens:<model>", "bot_messages:<bot>",
// "bot_events:<bot>", "bot_llm_tokens:<bot>|<model>".
type snapshot struct {
	at time.Time
	v  map[string]float64
}

func (s *Series) steps() (time.Duration, time.Duration) {
	step, day := s.Step, s.DayStep
	if step <= 0 {
		step = 10 * time.Second
	}
	if day <= 0 {
		day = 5 * time.Minute
	}
	return step, day
}

// Run samples every Step until ctx is done.
func (s *Series) Run(ctx context.Context) {
	step, _ := s.steps()
	s.Sample(time.Now())
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Sample(now)
		}
	}
}

// Sample takes a snapshot now.
func (s *Series) Sample(now time.Time) {
	snap := snapshot{at: now, v: take()}
	step, dayStep := s.steps()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hour = appendRing(s.hour, snap, int(time.Hour/step)+1)
	if s.lastDay.IsZero() || now.Sub(s.lastDay) >= dayStep {
		s.day = appendRing(s.day, snap, int(24*time.Hour/dayStep)+1)
		s.lastDay = now
	}
}

func appendRing(r []snapshot, s snapshot, n int) []snapshot {
	r = append(r, s)
	if len(r) > n {
		r = append(r[:0:0], r[len(r)-n:]...)
	}
	return r
}

// take reads the current values of the metrics the page charts.
func take() map[string]float64 {
	refresh()
	v := map[string]float64{}
	fams, err := Registry.Gather()
	if err != nil {
		return v
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			l := labelsOf(m)
			switch f.GetName() {
			case Requests.Name:
				v["requests"] += m.GetCounter().GetValue()
			case RequestErrors.Name:
				v["errors"] += m.GetCounter().GetValue()
			case RequestDuration.Name:
				for _, b := range m.GetHistogram().GetBucket() {
					v["latency_le:"+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] += float64(b.GetCumulativeCount())
				}
				v["latency_count"] += float64(m.GetHistogram().GetSampleCount())
			case Deliveries.Name:
				if l["result"] == "delivered" {
					v["deliveries"] += m.GetCounter().GetValue()
				}
			case DeliveryFailures.Name:
				v["failures"] += m.GetCounter().GetValue()
			case DeliveryRetries.Name:
				v["retries"] += m.GetCounter().GetValue()
			case OutboxAge.Name:
				v["outbox_age"] = m.GetGauge().GetValue()
			case OpenStreams.Name:
				v["streams"] += m.GetGauge().GetValue()
			case LLMTokens.Name:
				v["llm_tokens:"+l["model"]] += m.GetCounter().GetValue()
				v["bot_llm_tokens:"+l["bot"]+"|"+l["model"]] += m.GetCounter().GetValue()
			case Messages.Name:
				v["bot_messages:"+l["bot"]] += m.GetCounter().GetValue()
			case Events.Name:
				v["bot_events:"+l["bot"]] += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// Chart is one chart's data: Times (unix seconds, the end of each step)
// and one line per name, values aligned with Times.
type Chart struct {
	Unit  string               `json:"unit"`
	Lines map[string][]float64 `json:"lines"`
}

// Answer is what GET /v1/admin/metrics returns.
type Answer struct {
	Window string           `json:"window"` // "hour" or "day"
	Step   int              `json:"stepSeconds"`
	Times  []int64          `json:"times"`
	Charts map[string]Chart `json:"charts"`
}

// Read returns the window's charts ("hour" or "day"); bot, when set,
// narrows them to that bot's messages, events and LLM tokens.
func (s *Series) Read(window, bot string) Answer {
	step, dayStep := s.steps()
	s.mu.Lock()
	ring := s.hour
	if window == "day" {
		ring, step = s.day, dayStep
	}
	ring = append([]snapshot(nil), ring...)
	s.mu.Unlock()
	a := Answer{Window: window, Step: int(step / time.Second), Times: []int64{}, Charts: map[string]Chart{}}
	line := func(chart, unit, name string, f func(prev, cur snapshot) float64) {
		c, ok := a.Charts[chart]
		if !ok {
			c = Chart{Unit: unit, Lines: map[string][]float64{}}
		}
		vals := make([]float64, 0, len(ring))
		for i := 1; i < len(ring); i++ {
			vals = append(vals, clean(f(ring[i-1], ring[i])))
		}
		c.Lines[name] = vals
		a.Charts[chart] = c
	}
	delta := func(key string) func(prev, cur snapshot) float64 {
		return func(p, c snapshot) float64 { return max(c.v[key]-p.v[key], 0) }
	}
	gaugeOf := func(key string) func(prev, cur snapshot) float64 {
		return func(_, c snapshot) float64 { return c.v[key] }
	}
	for i := 1; i < len(ring); i++ {
		a.Times = append(a.Times, ring[i].at.Unix())
	}
	keys := map[string]bool{}
	for _, sn := range ring {
		for k := range sn.v {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	if bot != "" {
		line("messages", "count", "messages", delta("bot_messages:"+bot))
		line("messages", "count", "events", delta("bot_events:"+bot))
		a.Charts["llmTokens"] = Chart{Unit: "tokens", Lines: map[string][]float64{}}
		for _, k := range sorted {
			if m, ok := strings.CutPrefix(k, "bot_llm_tokens:"+bot+"|"); ok {
				line("llmTokens", "tokens", m, delta(k))
			}
		}
		return a
	}
	line("requests", "count", "requests", delta("requests"))
	line("requests", "count", "errors (5xx)", delta("errors"))
	line("latency", "seconds", "p50", quantile(0.5))
	line("latency", "seconds", "p95", quantile(0.95))
	line("deliveries", "count", "delivered", delta("deliveries"))
	line("deliveries", "count", "failed", delta("failures"))
	line("deliveries", "count", "retried", delta("retries"))
	line("outboxAge", "seconds", "oldest entry", gaugeOf("outbox_age"))
	line("streams", "count", "open streams", gaugeOf("streams"))
	a.Charts["llmTokens"] = Chart{Unit: "tokens", Lines: map[string][]float64{}}
	for _, k := range sorted {
		if m, ok := strings.CutPrefix(k, "llm_tokens:"); ok {
			line("llmTokens", "tokens", m, delta(k))
		}
	}
	return a
}

// quantile estimates a latency quantile of one step's requests from the
// histogram's buckets (linear within a bucket, as Prometheus does); 0 for
// a step without requests.
func quantile(q float64) func(prev, cur snapshot) float64 {
	return func(p, c snapshot) float64 {
		total := c.v["latency_count"] - p.v["latency_count"]
		if total <= 0 {
			return 0
		}
		rank := q * total
		lower, below := 0.0, 0.0
		for _, b := range latencyBuckets {
			key := "latency_le:" + strconv.FormatFloat(b, 'g', -1, 64)
			n := c.v[key] - p.v[key]
			if n >= rank {
				if n == below {
					return b
				}
				return lower + (b-lower)*(rank-below)/(n-below)
			}
			lower, below = b, n
		}
		return latencyBuckets[len(latencyBuckets)-1]
	}
}

func clean(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Round(v*1000) / 1000
}
