package scheduler_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/scheduler"
)

type fired struct {
	mu  sync.Mutex
	ins []platform.RecurringInput
	ch  chan struct{}
}

func (f *fired) fire(_ context.Context, raw json.RawMessage) error {
	var in platform.RecurringInput
	_ = json.Unmarshal(raw, &in)
	f.mu.Lock()
	f.ins = append(f.ins, in)
	f.mu.Unlock()
	select {
	case f.ch <- struct{}{}:
	default:
	}
	return nil
}

func (f *fired) count(event string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, in := range f.ins {
		if in.Event == event {
			n++
		}
	}
	return n
}

func TestLocalSchedulerFiresAndPersists(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "schedules.json")
	f := &fired{ch: make(chan struct{}, 100)}
	l, err := scheduler.OpenLocal(path, f.fire, nil, time.Second, scheduler.WithSubMinute())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	every := platform.Schedule{Name: "b-1", Cron: "* * * * * *", Input: platform.RecurringInput{BotID: "b", Event: "every"}}
	if err := l.CreateSchedule(ctx, every); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateSchedule(ctx, every); platform.TypeOf(err) != platform.ErrAlreadyExists {
		t.Fatalf("duplicate: %v", err)
	}
	rare := platform.Schedule{Name: "b-2", Cron: "0 0 1 1 *", Input: platform.RecurringInput{BotID: "b", Event: "rare"}}
	if err := l.CreateSchedule(ctx, rare); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for f.count("every") < 2 {
		select {
		case <-f.ch:
		case <-deadline:
			t.Fatalf("fired %d times in 5s", f.count("every"))
		}
	}
	if f.count("rare") != 0 {
		t.Fatal("a yearly schedule fired")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the schedules are back and keep firing.
	f2 := &fired{ch: make(chan struct{}, 100)}
	l2, err := scheduler.OpenLocal(path, f2.fire, nil, time.Second, scheduler.WithSubMinute())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := l2.Schedules(); len(got) != 2 || got[0].Name != "b-1" || got[1].Cron != "0 0 1 1 *" {
		t.Fatalf("reloaded: %+v", got)
	}
	select {
	case <-f2.ch:
	case <-time.After(3 * time.Second):
		t.Fatal("reloaded schedule did not fire")
	}
	// Deleted, it stops.
	if err := l2.DeleteSchedule(ctx, "b-1"); err != nil {
		t.Fatal(err)
	}
	if err := l2.DeleteSchedule(ctx, "b-1"); platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("second delete: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // a firing in flight may still land
	n := f2.count("every")
	time.Sleep(1500 * time.Millisecond)
	if f2.count("every") != n {
		t.Fatal("a deleted schedule kept firing")
	}
	if err := l2.UpdateSchedule(ctx, every); platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("update of a missing schedule: %v", err)
	}
	if err := l2.CheckCron("*/2 * * * * *"); err != nil {
		t.Fatalf("local scheduler refuses seconds: %v", err)
	}
	if err := l2.CheckCron("nope"); platform.TypeOf(err) != platform.ErrInvalidPayload {
		t.Fatalf("bad cron: %v", err)
	}
}

// TestLocalSchedulerAtMostOnceAMinute: without WithSubMinute the local
// scheduler refuses what fires more than once a minute, as EventBridge
// does, and drops such a schedule saved by an older version.
func TestLocalSchedulerAtMostOnceAMinute(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedules.json")
	f := &fired{ch: make(chan struct{}, 100)}
	fast, err := scheduler.OpenLocal(path, f.fire, nil, time.Second, scheduler.WithSubMinute())
	if err != nil {
		t.Fatal(err)
	}
	every := platform.Schedule{Name: "b-1", Cron: "*/2 * * * * *", Input: platform.RecurringInput{BotID: "b", Event: "every"}}
	if err := fast.CreateSchedule(context.Background(), every); err != nil {
		t.Fatal(err)
	}
	fast.Close()

	l, err := scheduler.OpenLocal(path, f.fire, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Schedules(); len(got) != 0 {
		t.Fatalf("a saved every-2-seconds schedule was kept: %+v", got)
	}
	for _, cron := range []string{"* * * * * *", "*/2 * * * * *", "0,30 * * * * *"} {
		if err := l.CheckCron(cron); platform.TypeOf(err) != platform.ErrInvalidPayload || !strings.Contains(err.Error(), "at most once a minute") {
			t.Errorf("CheckCron(%q): %v", cron, err)
		}
		s := every
		s.Cron = cron
		if err := l.CreateSchedule(context.Background(), s); platform.TypeOf(err) != platform.ErrInvalidPayload {
			t.Errorf("CreateSchedule(%q): %v", cron, err)
		}
	}
	for _, cron := range []string{"* * * * *", "15 * * * * *", "@daily"} {
		if err := l.CheckCron(cron); err != nil {
			t.Errorf("CheckCron(%q): %v", cron, err)
		}
	}
}
