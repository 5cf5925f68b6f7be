package capacity_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/capacity"
	"github.com/botforge/platform/shared/localdynamo"
)

// TestNoHotPartition: a multi-tenant load (100 conversations across 10
// bots, every message delivered) replayed through the embedded DynamoDB
// spreads its writes: no partition key, of the base table or of an index,
// takes more than 5% of all write units. (With the outbox under one key,
// that key took about a third of them.)
func TestNoHotPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 1,200 messages")
	}
	c, err := capacity.Replay(context.Background(), capacity.Shape{Bots: 10, Conversations: 100, Turns: 6})
	if err != nil {
		t.Fatal(err)
	}
	total := c.Usage.Total().Write
	if c.Deliveries != c.Messages || total < float64(c.Messages) {
		t.Fatalf("replay: %d messages, %d deliveries, %.0f write units", c.Messages, c.Deliveries, total)
	}
	type hot struct {
		p localdynamo.Partition
		w float64
	}
	var keys []hot
	for p, u := range c.Usage.Partitions {
		keys = append(keys, hot{p, u.Write})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].w > keys[j].w })
	var top []string
	for _, k := range keys[:min(5, len(keys))] {
		top = append(top, k.p.Index+" "+k.p.Key)
	}
	t.Logf("%d messages, %.1f write units per message; hottest keys: %s", c.Messages, total/float64(c.Messages), strings.Join(top, ", "))
	for _, k := range keys {
		if share := k.w / total; share > 0.05 {
			t.Errorf("partition key %q (index %q) takes %.1f%% of all write units (%.0f of %.0f)", k.p.Key, k.p.Index, 100*share, k.w, total)
		}
	}
}

// BenchmarkDeliveries: deliveries per second of the local platform, users'
// messages written to 1, 8 and 64 conversations at once and delivered to
// a bot that answers at once (the dispatcher works conversations' shards
// in parallel; one conversation's go out one at a time, in order).
func BenchmarkDeliveries(b *testing.B) {
	for _, convs := range []int{1, 8, 64} {
		b.Run(fmt.Sprint("conversations=", convs), func(b *testing.B) {
			n := max(b.N, convs)
			took, err := capacity.Throughput(context.Background(), convs, n)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n)/took.Seconds(), "deliveries/s")
		})
	}
}
