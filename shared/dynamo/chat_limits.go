package dynamo

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Limits that hold across the whole platform (platform.SharedLimits): the
// Chat API's open streams per user key, installation and address, and its
// anonymous user creations per address and installation. They are kept
// in the table, so every function and execution environment on AWS, and
// the local platform on the embedded DynamoDB, counts the same.
//
// Items: pk "LIMIT#<scope key>", sk "c#<window seconds>#<window number>"
// (a fixed-window count) or "h#<lease window number>" (held slots), a
// number n and a ttl past which nothing reads them.
//
// Counts: one ADD per scope, conditioned on n < max, in one transaction
// when there are several scopes (all or none).
//
// Held slots are leases counted by lease window (LeaseWindow long): a
// holder is counted in the current window and the next one. Taking a slot
// adds 1 to both in every scope, conditioned on the current one's n < max;
// while it is held, at the start of each window, the process adds its
// holders to the next window (one ADD per scope for all the process's
// holders in it); releasing subtracts it from the windows it was counted
// in. A holder that dies stops being renewed, so it is counted no more
// once the windows it was counted in have passed: its slot frees itself
// within two windows. A window's count never exceeds max: a slot is taken
// only where the current window has room, and the next window counts only
// holders the current one counts.

// LeaseWindow is how long a held slot's lease window is (a dead holder's
// slot is free again within two).
var LeaseWindow = time.Minute

const limitPrefix = "LIMIT#"

// Limiter is the store's platform.SharedLimits. It is per process: it
// renews the leases of the slots held here.
type Limiter struct {
	s *Store
	// Now is the clock (nil: time.Now). With a clock of its own, nothing
	// renews the leases by itself: the caller calls Renew.
	Now func() time.Time
	// Window is the lease window (zero: LeaseWindow).
	Window time.Duration
	Log    *slog.Logger

	mu      sync.Mutex
	leases  map[*lease]struct{}
	running bool
}

type lease struct {
	scopes []platform.Scope
	from   int64 // first window counted in
	until  int64 // last window counted in
}

var _ platform.SharedLimits = (*Limiter)(nil)

// Limiter returns the store's limiter, one per Store.
func (s *Store) Limiter() *Limiter {
	s.limiterOnce.Do(func() { s.limiter = s.NewLimiter() })
	return s.limiter
}

// NewLimiter returns a limiter of its own over the store's table (a
// second process's, in tests).
func (s *Store) NewLimiter() *Limiter {
	return &Limiter{s: s, leases: map[*lease]struct{}{}}
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Limiter) window() time.Duration {
	if l.Window > 0 {
		return l.Window
	}
	return LeaseWindow
}

func (l *Limiter) windowAt(t time.Time) int64 { return t.UnixNano() / int64(l.window()) }

func limitKey(scope, sk string) item {
	return item{attrPK: str(limitPrefix + scope), attrSK: str(sk)}
}

// add is the update adding delta to n of one limit item, expiring at ttl,
// conditioned on n < max when max > 0.
func (l *Limiter) add(scope, sk string, delta, max int64, ttl time.Time) types.TransactWriteItem {
	u := &types.Update{
		TableName:                 &l.s.table,
		Key:                       limitKey(scope, sk),
		UpdateExpression:          aws.String("ADD n :d SET #ttl = :ttl"),
		ExpressionAttributeNames:  map[string]string{"#ttl": attrTTL},
		ExpressionAttributeValues: item{":d": num(delta), ":ttl": num(ttl.Unix())},
	}
	if max > 0 {
		u.ConditionExpression = aws.String("attribute_not_exists(n) OR n < :max")
		u.ExpressionAttributeValues[":max"] = num(max)
	}
	return types.TransactWriteItem{Update: u}
}

// write runs the updates: a single one as UpdateItem (half the units of a
// transaction), several as one transaction. A failed condition is the
// index of its update.
func (l *Limiter) write(ctx context.Context, ups []types.TransactWriteItem) (failed int, err error) {
	if len(ups) == 1 {
		u := ups[0].Update
		for attempt := 0; ; attempt++ {
			_, err = l.s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
				ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues})
			var cf *types.ConditionalCheckFailedException
			if errors.As(err, &cf) {
				return 0, nil
			}
			if err == nil || !retryable(err) || attempt >= 10 {
				return -1, err
			}
			if err := pause(ctx, attempt); err != nil {
				return -1, err
			}
		}
	}
	err = l.s.txWrite(ctx, ups)
	if i := failedAt(err); i >= 0 {
		return i, nil
	}
	return -1, err
}

func retryable(err error) bool {
	var t *types.ProvisionedThroughputExceededException
	var r *types.RequestLimitExceeded
	return errors.As(err, &t) || errors.As(err, &r)
}

func refused(s platform.Scope) error {
	return platform.Errorf(platform.ErrRateLimited, "%s", s.Refusal)
}

func limited(scopes []platform.Scope) []platform.Scope {
	out := make([]platform.Scope, 0, len(scopes))
	for _, s := range scopes {
		if s.Max > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Count implements platform.SharedLimits: fixed windows of length window.
func (l *Limiter) Count(ctx context.Context, window time.Duration, scopes ...platform.Scope) error {
	scopes = limited(scopes)
	if len(scopes) == 0 {
		return nil
	}
	now := l.now()
	w := now.UnixNano() / int64(window)
	sk := "c#" + strconv.FormatInt(int64(window/time.Second), 10) + "#" + strconv.FormatInt(w, 10)
	ttl := time.Unix(0, (w+2)*int64(window))
	ups := make([]types.TransactWriteItem, len(scopes))
	for i, s := range scopes {
		ups[i] = l.add(s.Key, sk, 1, s.Max, ttl)
	}
	failed, err := l.write(ctx, ups)
	if err != nil {
		return err
	}
	if failed >= 0 {
		return refused(scopes[failed])
	}
	return nil
}

func holdSK(w int64) string { return "h#" + strconv.FormatInt(w, 10) }

// ttlOf is when window w's count is read no more (its end, and a window
// more for clocks that differ).
func (l *Limiter) ttlOf(w int64) time.Time { return time.Unix(0, (w+2)*int64(l.window())) }

// Hold implements platform.SharedLimits.
func (l *Limiter) Hold(ctx context.Context, scopes ...platform.Scope) (func(), error) {
	scopes = limited(scopes)
	if len(scopes) == 0 {
		return func() {}, nil
	}
	c := l.windowAt(l.now())
	ups := make([]types.TransactWriteItem, 0, 2*len(scopes))
	for _, s := range scopes {
		ups = append(ups, l.add(s.Key, holdSK(c), 1, s.Max, l.ttlOf(c)), l.add(s.Key, holdSK(c+1), 1, 0, l.ttlOf(c+1)))
	}
	failed, err := l.write(ctx, ups)
	if err != nil {
		return nil, err
	}
	if failed >= 0 {
		return nil, refused(scopes[failed/2])
	}
	ls := &lease{scopes: scopes, from: c, until: c + 1}
	l.mu.Lock()
	l.leases[ls] = struct{}{}
	start := !l.running && l.Now == nil
	l.running = l.running || start
	l.mu.Unlock()
	if start {
		go l.renewLoop()
	}
	var once sync.Once
	return func() { once.Do(func() { l.release(ls) }) }, nil
}

// release gives a lease's slots back: minus one in the windows from now
// on that counted it (the ones before are read no more).
func (l *Limiter) release(ls *lease) {
	l.mu.Lock()
	delete(l.leases, ls)
	from, until := max(ls.from, l.windowAt(l.now())), ls.until
	l.mu.Unlock()
	// The stream's own context is over: the release has its own.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for w := from; w <= until; w++ {
		for _, s := range ls.scopes {
			if _, err := l.write(ctx, []types.TransactWriteItem{l.add(s.Key, holdSK(w), -1, 0, l.ttlOf(w))}); err != nil {
				l.log().Error("releasing a held slot (its lease frees it)", "scope", s.Key, "err", err)
			}
		}
	}
}

func (l *Limiter) log() *slog.Logger {
	if l.Log != nil {
		return l.Log
	}
	return slog.Default()
}

// Renew counts the slots held here in the next window (one ADD per scope
// for all of them). It is called at the start of each window (by itself
// with the real clock).
func (l *Limiter) Renew(ctx context.Context) error {
	c := l.windowAt(l.now())
	l.mu.Lock()
	adds := map[string]map[int64]int64{} // scope key -> window -> holders
	var renewed []*lease
	for ls := range l.leases {
		if ls.until >= c+1 {
			continue
		}
		// A holder stalled past a whole window (a frozen process) is
		// counted again from the current one.
		for w := max(ls.until+1, c); w <= c+1; w++ {
			for _, s := range ls.scopes {
				if adds[s.Key] == nil {
					adds[s.Key] = map[int64]int64{}
				}
				adds[s.Key][w]++
			}
		}
		renewed = append(renewed, ls)
	}
	l.mu.Unlock()
	var first error
	for key, ws := range adds {
		for w, n := range ws {
			if _, err := l.write(ctx, []types.TransactWriteItem{l.add(key, holdSK(w), n, 0, l.ttlOf(w))}); err != nil && first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return first
	}
	var gone []*lease
	l.mu.Lock()
	for _, ls := range renewed {
		if _, ok := l.leases[ls]; !ok {
			gone = append(gone, ls) // released meanwhile, from the windows it knew
			continue
		}
		if ls.until < c {
			ls.from = c
		}
		ls.until = c + 1
	}
	l.mu.Unlock()
	for _, ls := range gone {
		for w := max(ls.until+1, c); w <= c+1; w++ {
			for _, s := range ls.scopes {
				if _, err := l.write(ctx, []types.TransactWriteItem{l.add(s.Key, holdSK(w), -1, 0, l.ttlOf(w))}); err != nil {
					l.log().Error("releasing a held slot (its lease frees it)", "scope", s.Key, "err", err)
				}
			}
		}
	}
	return nil
}

// renewLoop renews at the start of each window while slots are held.
func (l *Limiter) renewLoop() {
	for {
		win := l.window()
		now := time.Now()
		next := now.Truncate(win).Add(win)
		time.Sleep(next.Sub(now) + 10*time.Millisecond)
		l.mu.Lock()
		if len(l.leases) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), win/2)
		if err := l.Renew(ctx); err != nil {
			l.log().Error("renewing the held slots' leases", "err", err)
		}
		cancel()
	}
}

// Held is how many slots scope holds now, across the platform (for tests
// and the operator's eyes).
func (l *Limiter) Held(ctx context.Context, scope string) (int64, error) {
	out, err := l.s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.s.table, Key: limitKey(scope, holdSK(l.windowAt(l.now()))), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, err
	}
	return getN(out.Item, "n"), nil
}
