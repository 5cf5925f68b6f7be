package dispatch

import (
	"sync"
	"time"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

// The dispatcher's share of the platform's metrics (docs/metrics.md):
// deliveries by kind and result, retries and failures, how late attempts
// start (dispatch lag), and the age of the oldest entry found due and not
// yet delivered (outbox age), kept for every dispatcher of the process.

// pendingEntries are the outbox entries a dispatcher of this process found
// due and has not seen finished (being delivered, or waiting for a
// retry), with the time each has been waiting since.
var pendingEntries = struct {
	sync.Mutex
	since map[string]time.Time
}{since: map[string]time.Time{}}

func init() { metrics.OutboxAge.SetFunc(func() float64 { return OutboxAge(time.Now()).Seconds() }) }

// OutboxAge is how long the oldest entry found due and not delivered yet
// has been waiting at now; 0 for none.
func OutboxAge(now time.Time) time.Duration {
	pendingEntries.Lock()
	defer pendingEntries.Unlock()
	var oldest time.Duration
	for _, t := range pendingEntries.since {
		oldest = max(oldest, now.Sub(t))
	}
	return oldest
}

// ForgetPending forgets the entries found due (a Lambda invocation starts
// afresh: another may have delivered them since).
func ForgetPending() {
	pendingEntries.Lock()
	clear(pendingEntries.since)
	pendingEntries.Unlock()
}

// notePending records dl as due and not delivered: waiting since its due
// time, or, once attempted (a retry), since it was created.
func notePending(dl platform.Delivery, now time.Time) {
	since, err := time.Parse(platform.TimeFormat, dl.DueAt)
	if dl.Attempts > 0 || err != nil {
		if c, err := time.Parse(platform.TimeFormat, dl.CreatedAt); err == nil {
			since = c
		}
	}
	if since.IsZero() || since.After(now) {
		since = now
	}
	pendingEntries.Lock()
	if _, ok := pendingEntries.since[dl.ID]; !ok {
		pendingEntries.since[dl.ID] = since
	}
	pendingEntries.Unlock()
}

// forgetPending forgets an entry finished (or under way elsewhere); EMF
// still publishes the age it reached (the invocation's peak).
func forgetPending(id string) {
	pendingEntries.Lock()
	since, ok := pendingEntries.since[id]
	delete(pendingEntries.since, id)
	pendingEntries.Unlock()
	if ok {
		metrics.OutboxAge.NotePeak(time.Since(since).Seconds())
	}
}

// countAttempt counts one attempt's result.
func countAttempt(kind string, out outcome, retried bool) {
	result := "delivered"
	switch {
	case retried:
		result = "retried"
		metrics.DeliveryRetries.Inc(kind)
	case out.skip:
		result = "skipped"
	case out.ignored:
		result = "ignored"
	case !out.ok:
		result = "failed"
		metrics.DeliveryFailures.Inc(kind)
	}
	metrics.Deliveries.Inc(kind, result)
}
