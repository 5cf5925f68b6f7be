package dispatch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// sparseStore is one shard of one workflow timeout whose entry is in no
// sweep index (DueShards finds nothing: SparseSweep), over a store whose
// first shard read fails when failRead is set.
type sparseStore struct {
	Store    // the rest is never called
	mu       sync.Mutex
	entries  []platform.Delivery
	failRead bool
	timedOut []string
}

func (s *sparseStore) PendingDeliveries(_ context.Context, _, after string, _ int) ([]platform.Delivery, []int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failRead {
		s.failRead = false
		return nil, nil, errors.New("a read failed")
	}
	var out []platform.Delivery
	for _, d := range s.entries {
		if d.ID > after {
			out = append(out, d)
		}
	}
	return out, make([]int64, len(out)), nil
}

func (s *sparseStore) DueShards(context.Context, time.Time, int) ([]string, error) { return nil, nil }

func (s *sparseStore) TimeOutWorkflow(_ context.Context, _, id, _ string, _ time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timedOut = append(s.timedOut, id)
	return true, nil
}

func (s *sparseStore) FinishDelivery(_ context.Context, d platform.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = slices.DeleteFunc(s.entries, func(e platform.Delivery) bool { return e.ID == d.ID })
	return nil
}

func (s *sparseStore) timed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.timedOut)
}

func newSparseStore(failRead bool) *sparseStore {
	past := platform.FormatTime(time.Now().Add(-time.Minute))
	return &sparseStore{failRead: failRead, entries: []platform.Delivery{{ID: "dlv_1", Kind: platform.DeliverWorkflowTimeout,
		BotID: "bot", ConversationID: "conv", WorkflowID: "wf1", CreatedAt: past, DueAt: past}}}
}

// waitTimed waits until s has timed out want.
func waitTimed(t *testing.T, s *sparseStore, want []string, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(s.timed(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: delivered %v, want %v", what, s.timed(), want)
		}
	}
}

// TestFailedPassIsWorkedAgain: a shard named by its commit whose pass
// fails (a read) is worked again at Run's next tick, though no sweep
// index lists it (an entry written due at once, SparseSweep).
func TestFailedPassIsWorkedAgain(t *testing.T) {
	s := newSparseStore(true)
	d := &Dispatcher{Store: s, Exclusive: true, AllShards: func(context.Context) ([]string, error) { return nil, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); d.Run(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-ran }()
	d.WakeShards([]string{"OUTBOX#bot#conv"})
	waitTimed(t, s, []string{"wf1"}, "after a failed read of its shard")
}

// TestStartListsEveryShard: Run starts by working every shard AllShards
// lists (not the sweep index's: an entry written due at once is in none),
// and, when that listing fails, tries it again at its ticks until it
// succeeds.
func TestStartListsEveryShard(t *testing.T) {
	for _, failFirst := range []bool{false, true} {
		s := newSparseStore(false)
		var mu sync.Mutex
		calls := 0
		d := &Dispatcher{Store: s, Exclusive: true, AllShards: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if failFirst && calls == 1 {
				return nil, errors.New("listing failed")
			}
			return []string{"OUTBOX#bot#conv"}, nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { defer close(ran); d.Run(ctx, 10*time.Millisecond) }()
		waitTimed(t, s, []string{"wf1"}, "at start")
		cancel()
		<-ran
	}
}
