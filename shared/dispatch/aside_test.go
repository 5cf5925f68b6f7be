package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/writelane"
)

// asideStore is one shard of two workflow timeouts, over a store that
// says when a removal is visible (as the embedded DynamoDB does for a
// lane's write) and then holds the first removal, as a slow fsync would.
type asideStore struct {
	memShard
	reads    []*writelane.Lane
	hold     chan struct{}
	holding  chan struct{} // closed once the first removal is held
	finished chan string   // ids whose FinishDelivery returned
	visible  bool          // the store calls visible (false: another DynamoDB)
}

func (s *asideStore) PendingDeliveries(ctx context.Context, shard, after string, limit int) ([]platform.Delivery, []int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lane, _ := writelane.From(ctx)
	s.reads = append(s.reads, lane)
	return s.afterLocked(after)
}

func (s *asideStore) FinishDelivery(ctx context.Context, d platform.Delivery) error {
	s.mu.Lock()
	s.removeLocked(d.ID)
	s.mu.Unlock()
	if _, visible := writelane.From(ctx); visible != nil && s.visible {
		visible()
	}
	if d.ID == "dlv_1" {
		close(s.holding)
		<-s.hold // the removal's fsync, held
	}
	s.finished <- d.ID
	return nil
}

func newAsideStore(visible bool) *asideStore {
	s := &asideStore{hold: make(chan struct{}), holding: make(chan struct{}), finished: make(chan string, 2), visible: visible}
	s.addLocked("1")
	s.addLocked("2")
	return s
}

// TestNextDeliveryDoesNotWaitForTheRemoval: over a store that says when
// a write is visible (the embedded DynamoDB, shared/writelane), the
// Exclusive dispatcher's worker of a shard delivers the shard's next entry
// while the previous one's removal is still held in its fsync, reading the
// shard in the lane of its removals; Run returns only once the removal is
// done. Over a store that never says so (another DynamoDB), the next
// delivery waits for the removal, as before.
func TestNextDeliveryDoesNotWaitForTheRemoval(t *testing.T) {
	for _, visible := range []bool{true, false} {
		s := newAsideStore(visible)
		d := &Dispatcher{Store: s, Exclusive: true}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { defer close(ran); d.Run(ctx, time.Hour) }()
		d.WakeShards([]string{"OUTBOX#bot#conv"})
		select {
		case <-s.holding:
		case <-time.After(10 * time.Second):
			t.Fatalf("visible %v: the first entry was never removed", visible)
		}
		if visible {
			for deadline := time.Now().Add(10 * time.Second); len(s.timed()) < 2; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("while the first entry's removal was held, the shard's next entry was not delivered: %v", s.timed())
				}
			}
		} else if got := s.timed(); !slices.Equal(got, []string{"wf1"}) {
			// The worker is inside the held removal, and waits for it.
			t.Fatalf("over a store that never says a write is visible, delivered %v while the removal was held, want [wf1]", got)
		}
		if !visible {
			close(s.hold)
		}
		for deadline := time.Now().Add(10 * time.Second); len(s.timed()) < 2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("visible %v: the second entry was not delivered", visible)
			}
		}
		if !slices.Equal(s.timed(), []string{"wf1", "wf2"}) {
			t.Fatalf("visible %v: delivered %v", visible, s.timed())
		}
		// Run, stopped, returns once the removals are done (the first
		// one is still held when visible).
		cancel()
		if visible {
			time.Sleep(50 * time.Millisecond) // not synchronisation: a chance for a wrong Run to return
			select {
			case <-ran:
				t.Fatal("Run returned while a removal was held")
			default:
			}
			close(s.hold)
		}
		<-ran
		if len(s.finished) != 2 {
			t.Fatalf("visible %v: Run returned after %d removals of 2", visible, len(s.finished))
		}
		s.mu.Lock()
		for i, lane := range s.reads {
			if lane == nil {
				t.Fatalf("visible %v: read %d of the shard was not in the worker's lane", visible, i)
			}
		}
		s.mu.Unlock()
	}
}
