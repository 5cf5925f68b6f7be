package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/botforge/platform/shared/fsutil"
	"github.com/botforge/platform/shared/platform"
)

// Fire is what a schedule invokes: the scheduler function's handler, given
// the schedule's input as the Lambda function receives it.
type Fire func(ctx context.Context, input json.RawMessage) error

// Local is platform.Scheduler in-process, for the local platform: schedules
// run on robfig/cron (a six-field expression with one value of seconds is
// accepted, unlike EventBridge; like EventBridge, nothing fires more than
// once a minute unless AllowSubMinute) and call fire, the same code the
// scheduler function runs in Lambda. Schedules are kept durably in a JSON
// file, as EventBridge keeps them, so they survive a restart.
type Local struct {
	path    string
	fire    Fire
	log     *slog.Logger
	timeout time.Duration

	// base is cancelled on Close, so running firings stop promptly.
	base   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	cron    *cron.Cron
	entries map[string]localEntry
	closed  bool
	// subMinute lets schedules fire more than once a minute (tests).
	subMinute bool
}

// LocalOption configures OpenLocal.
type LocalOption func(*Local)

// WithSubMinute lets schedules fire up to every second, saved ones
// included: for tests only (see AllowSubMinute).
func WithSubMinute() LocalOption { return func(l *Local) { l.subMinute = true } }

type localEntry struct {
	Schedule platform.Schedule `json:"schedule"`
	id       cron.EntryID
}

var _ platform.Scheduler = (*Local)(nil)

var parser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// OpenLocal loads the schedules kept in path (created when missing) and
// starts running them. Each firing gets timeout to complete.
// A saved schedule firing more than once a minute (written by an older
// version) is dropped, loudly.
func OpenLocal(path string, fire Fire, log *slog.Logger, timeout time.Duration, opts ...LocalOption) (*Local, error) {
	if log == nil {
		log = slog.Default()
	}
	if timeout <= 0 {
		timeout = time.Minute
	}
	l := &Local{
		path: path, fire: fire, log: log, timeout: timeout,
		cron:    cron.New(cron.WithParser(parser), cron.WithLocation(time.UTC)),
		entries: map[string]localEntry{},
	}
	for _, o := range opts {
		o(l)
	}
	l.base, l.cancel = context.WithCancel(context.Background())
	var saved []localEntry
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &saved); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	for _, e := range saved {
		if err := l.add(e.Schedule); err != nil {
			// A schedule that no longer parses is dropped, loudly.
			log.Error("dropping a saved schedule", "name", e.Schedule.Name, "cron", e.Schedule.Cron, "err", err)
		}
	}
	l.cron.Start()
	return l, nil
}

// Close stops the scheduler, cancels running firings and waits (a few
// seconds at most) for them to end.
func (l *Local) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	ctx := l.cron.Stop()
	l.cancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	return nil
}

// AllowSubMinute lets schedules made from now on fire up to every second.
// Tests use it to see firings within seconds; the platform never does.
func (l *Local) AllowSubMinute() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subMinute = true
}

// parse parses a cron expression and applies the frequency rule; l.mu is
// held or l is not shared yet.
func (l *Local) parse(expr string) (Cron, error) {
	c, err := ParseCron(expr)
	if err != nil {
		return c, err
	}
	if !l.subMinute {
		if err := c.CheckFrequency(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// CheckCron accepts five fields, six with one value of seconds (any
// seconds with AllowSubMinute), and the descriptors.
func (l *Local) CheckCron(expr string) error {
	l.mu.Lock()
	c, err := l.parse(expr)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := parser.Parse(c.Robfig()); err != nil {
		return platform.Invalid("cron %q: %v", expr, err)
	}
	return nil
}

// add registers a schedule with the cron runner; l.mu is held or l is not
// shared yet.
func (l *Local) add(s platform.Schedule) error {
	c, err := l.parse(s.Cron)
	if err != nil {
		return err
	}
	spec, err := parser.Parse(c.Robfig())
	if err != nil {
		return platform.Invalid("cron %q: %v", s.Cron, err)
	}
	in, err := json.Marshal(s.Input)
	if err != nil {
		return err
	}
	name := s.Name
	job := cron.NewChain(cron.SkipIfStillRunning(cron.DiscardLogger)).Then(cron.FuncJob(func() {
		ctx, cancel := context.WithTimeout(l.base, l.timeout)
		defer cancel()
		if err := l.fire(ctx, in); err != nil {
			l.log.Error("recurring event firing failed", "schedule", name, "err", err)
		}
	}))
	id := l.cron.Schedule(spec, job)
	l.entries[s.Name] = localEntry{Schedule: s, id: id}
	return nil
}

// save writes every schedule to the file durably (temp file, fsync, rename).
func (l *Local) save() error {
	list := make([]localEntry, 0, len(l.entries))
	for _, e := range l.entries {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Schedule.Name < list[j].Schedule.Name })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(l.path, b)
}

// CreateSchedule adds a schedule; a taken name is ErrAlreadyExists.
func (l *Local) CreateSchedule(_ context.Context, s platform.Schedule) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.entries[s.Name]; ok {
		return platform.Errorf(platform.ErrAlreadyExists, "schedule %q already exists", s.Name)
	}
	if err := l.add(s); err != nil {
		return err
	}
	return l.save()
}

// UpdateSchedule replaces a schedule; a missing one is ErrResourceNotFound.
func (l *Local) UpdateSchedule(_ context.Context, s platform.Schedule) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.entries[s.Name]
	if !ok {
		return platform.NotFound("schedule", s.Name)
	}
	if err := l.add(s); err != nil {
		return err
	}
	l.cron.Remove(old.id)
	return l.save()
}

// DeleteSchedule removes a schedule; a missing one is ErrResourceNotFound.
func (l *Local) DeleteSchedule(_ context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.entries[name]
	if !ok {
		return platform.NotFound("schedule", name)
	}
	l.cron.Remove(old.id)
	delete(l.entries, name)
	return l.save()
}

// Schedules lists the schedules (for tests and tools).
func (l *Local) Schedules() []platform.Schedule {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]platform.Schedule, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, e.Schedule)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
