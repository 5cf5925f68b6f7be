package dispatch

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// memShard is one outbox shard of workflow timeouts held in memory: the
// part the fake stores of the lane tests (aside_test.go, lane_test.go)
// share. Its entries go out as TimeOutWorkflow calls, recorded in order.
type memShard struct {
	Store    // the rest is never called
	mu       sync.Mutex
	entries  []platform.Delivery
	timedOut []string // workflow ids, in order
}

// addLocked queues workflow timeout id, due a minute ago; mu held.
func (m *memShard) addLocked(id string) {
	past := platform.FormatTime(time.Now().Add(-time.Minute))
	m.entries = append(m.entries, platform.Delivery{ID: "dlv_" + id, Kind: platform.DeliverWorkflowTimeout, BotID: "bot",
		ConversationID: "conv", WorkflowID: "wf" + id, CreatedAt: past, DueAt: past})
}

// afterLocked is PendingDeliveries' answer; mu held.
func (m *memShard) afterLocked(after string) ([]platform.Delivery, []int64, error) {
	var out []platform.Delivery
	for _, d := range m.entries {
		if d.ID > after {
			out = append(out, d)
		}
	}
	return out, make([]int64, len(out)), nil
}

// removeLocked removes entry id; mu held.
func (m *memShard) removeLocked(id string) {
	m.entries = slices.DeleteFunc(m.entries, func(e platform.Delivery) bool { return e.ID == id })
}

func (m *memShard) DueShards(context.Context, time.Time, int) ([]string, error) { return nil, nil }

func (m *memShard) TimeOutWorkflow(_ context.Context, _, id, _ string, _ time.Time) (bool, error) {
	m.mu.Lock()
	m.timedOut = append(m.timedOut, id)
	m.mu.Unlock()
	return true, nil
}

// timed are the workflow ids timed out so far, in order.
func (m *memShard) timed() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.timedOut)
}
