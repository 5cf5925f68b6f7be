package dispatch

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/writelane"
)

// laneStore is one shard over a store that behaves as the embedded
// DynamoDB does with lanes (shared/writelane): a removal is visible at
// once, then held in its fsync, and a read of the shard waits for it
// unless the read is in the removal's lane.
type laneStore struct {
	memShard
	cond    *sync.Cond
	held    *writelane.Lane // the lane of the removal held in its fsync
	hold    chan struct{}
	holding chan struct{} // closed once the first removal is held
}

func (s *laneStore) PendingDeliveries(ctx context.Context, shard, after string, limit int) ([]platform.Delivery, []int64, error) {
	lane, _ := writelane.From(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.held != nil && s.held != lane {
		s.cond.Wait() // another lane's write in flight where it reads
	}
	return s.afterLocked(after)
}

func (s *laneStore) FinishDelivery(ctx context.Context, d platform.Delivery) error {
	lane, visible := writelane.From(ctx)
	s.mu.Lock()
	s.removeLocked(d.ID)
	first := d.ID == "dlv_1"
	if first {
		s.held = lane
	}
	s.mu.Unlock()
	if visible != nil {
		visible()
	}
	if first {
		close(s.holding)
		<-s.hold // the removal's fsync, held
		s.mu.Lock()
		s.held = nil
		s.cond.Broadcast()
		s.mu.Unlock()
	}
	return nil
}

func (s *laneStore) add(id string) {
	s.mu.Lock()
	s.addLocked(id)
	s.mu.Unlock()
}

// TestNextPassDoesNotWaitForTheLastPassRemoval: the conversation's next
// entry (a user's next message, written after the shard's worker ended
// its pass) is delivered by a new worker of the shard while the removal
// the last worker left in its fsync is still held: every worker of the
// Exclusive dispatcher reads in the lane of its removals. With a lane per
// worker, the new worker's read waits for that fsync.
func TestNextPassDoesNotWaitForTheLastPassRemoval(t *testing.T) {
	const shard = "OUTBOX#bot#conv"
	s := &laneStore{hold: make(chan struct{}), holding: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	s.add("1")
	ended := make(chan string, 4)
	d := &Dispatcher{Store: s, Exclusive: true, workerDone: func(sh string) { ended <- sh }}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); d.Run(ctx, time.Hour) }()
	d.WakeShards([]string{shard})
	select {
	case <-s.holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the first entry was never removed")
	}
	select {
	case <-ended: // the pass found nothing more: its worker is gone
	case <-time.After(10 * time.Second):
		t.Fatal("the shard's worker did not end its pass")
	}
	s.add("2")
	d.WakeShards([]string{shard})
	for deadline := time.Now().Add(10 * time.Second); len(s.timed()) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("while the last pass's removal was held, the shard's next entry was not delivered: %v", s.timed())
		}
	}
	close(s.hold)
	cancel()
	<-ran
	if got := s.timed(); !slices.Equal(got, []string{"wf1", "wf2"}) {
		t.Fatalf("delivered %v", got)
	}
}
