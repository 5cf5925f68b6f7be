package local_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/botforge/platform/shared/dispatch"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/local"
)

// TestIdleDispatcherDoesNotSweep: an idle local platform does not sweep
// the outbox's 64 index partitions every second: it sweeps when an entry
// it left waiting comes due, or every dispatch.FullSweep. Over a window of
// three ticks it makes less than two sweeps' Queries (the first, at start,
// may fall in the window; sweeping every tick would make four).
func TestIdleDispatcherDoesNotSweep(t *testing.T) {
	p, err := local.Open(context.Background(), t.TempDir(), "http://127.0.0.1:1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if dispatch.FullSweep < 10*time.Second {
		t.Fatalf("FullSweep %s", dispatch.FullSweep)
	}
	before := p.Dynamo.Calls()["Query"]
	time.Sleep(3500 * time.Millisecond) // the window measured: three ticks of the dispatcher
	if n := p.Dynamo.Calls()["Query"] - before; n >= 2*dynamo.SweepBuckets {
		t.Fatalf("%d Queries in 3.5 s of idleness", n)
	}
}
