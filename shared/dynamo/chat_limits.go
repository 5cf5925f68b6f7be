package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"log/slog"
	"strconv"
	"strings"
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
// Counts (Count): items pk "LIMIT#<scope key>", sk "c#<window
// seconds>#<window number>" (a fixed-window count), a number n and a ttl
// past which nothing reads them; one ADD per scope, conditioned on
// n < max, in one transaction when there are several scopes (all or
// none).
//
// Held slots (Hold): one item per scope, sk "held", with the total n and
// a count per holder (an attribute "h_<holder id>"). A holder is a
// Limiter: one per process, with an id of its own per process start (and
// a new one when its heartbeat lapsed, below). It keeps ONE heartbeat
// item, pk "LIMIT#holder#<id>", sk "hb", whose exp it writes again every
// heartbeat period (HeartbeatPeriod) while it holds slots, to three
// periods on: one write per process per period, whatever the number of
// its streams. An idle stream writes nothing.
//
// Taking slots: "ADD n :1, h_<me> :1" per scope, conditioned on n < max,
// in one transaction when there are several scopes (all or none): exact
// under any concurrency. Releasing: "ADD n :-1, h_<me> :-1" conditioned
// on h_<me> > 0 (a holder purged meanwhile subtracts nothing again); the
// holder's last slot of a scope removes its entry.
//
// A holder that dies keeps its counts: they are freed lazily, when they
// matter. A take refused reads the scope items, reads the heartbeats of
// their holders (BatchGetItem; a heartbeat known to run is not read
// again), and purges every holder whose heartbeat is gone or expired:
// "ADD n :-c REMOVE h_<dead>" conditioned on h_<dead> = c, so two purgers
// cannot subtract twice; then it tries the take once more. So a dead
// holder's slots are counted until someone needs them, and not after.
//
// The heartbeat is written before the first slot under an id is taken,
// so a holder is never judged dead while it takes. A holder whose
// heartbeat came within a period of its expiry without being renewed (a
// frozen process) may have been purged: it takes its next slots under a
// new id, so an old release never subtracts a new slot (the streams it
// held before are counted no more: the limits undercount them until they
// end, they never lock anybody out).
//
// A scope item has no expiry while slots are taken in it; a release sets
// one (ScopeIdleTTL on), which the next take removes: the items of keys
// and addresses nobody streams from any more leave the table by
// themselves.

// HeartbeatPeriod is how often a process holding slots writes its
// heartbeat; its heartbeat expires three periods on (a dead holder's
// slots can be reclaimed from then on).
var HeartbeatPeriod = time.Minute

// ScopeIdleTTL is how long a scope item stays after a release with no
// take since.
var ScopeIdleTTL = 7 * 24 * time.Hour

const (
	limitPrefix  = "LIMIT#"
	holderPrefix = "h_" // a scope item's per-holder count attribute
	heldSK       = "held"
)

// Limiter is the store's platform.SharedLimits. It is per process: one
// holder of slots, with one heartbeat.
type Limiter struct {
	s *Store
	// Now is the clock (nil: time.Now). With a clock of its own, nothing
	// writes the heartbeat by itself: the caller calls Renew.
	Now func() time.Time
	// Period is the heartbeat period (zero: HeartbeatPeriod).
	Period time.Duration
	Log    *slog.Logger

	beatMu    sync.Mutex // one heartbeat write at a time
	mu        sync.Mutex
	id        string    // the holder id new slots are taken under ("": none yet)
	beatUntil time.Time // the expiry of id's heartbeat as written
	leases    map[*lease]struct{}
	held      map[string]int64     // holder id + "\x00" + scope key -> slots held here
	alive     map[string]time.Time // other holders' heartbeat expiries as last read
	running   bool

	releaseCtx context.Context // nil: context.Background (tests count the releases' calls)
}

type lease struct {
	id     string
	scopes []platform.Scope
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
	return &Limiter{s: s, leases: map[*lease]struct{}{}, held: map[string]int64{}, alive: map[string]time.Time{}}
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Limiter) period() time.Duration {
	if l.Period > 0 {
		return l.Period
	}
	return HeartbeatPeriod
}

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

func heartbeatKey(id string) item { return limitKey("holder#"+id, "hb") }

// newHolderID is a holder id: 64 random bits, short since every scope
// item names its holders.
func newHolderID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// fresh: the heartbeat is not within a period of its expiry (what
// another process's clock may read as expired).
func (l *Limiter) fresh(now time.Time) bool {
	return l.id != "" && l.beatUntil.Sub(now) >= l.period()
}

// beat writes holder id's heartbeat, expiring three periods from now.
func (l *Limiter) beat(ctx context.Context, id string, now time.Time) (time.Time, error) {
	exp := now.Add(3 * l.period())
	it := heartbeatKey(id)
	it["exp"] = num(exp.UnixMilli())
	it[attrTTL] = num(exp.Add(24 * time.Hour).Unix())
	for attempt := 0; ; attempt++ {
		_, err := l.s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &l.s.table, Item: it})
		if err == nil || !retryable(err) || attempt >= 10 {
			return exp, err
		}
		if err := pause(ctx, attempt); err != nil {
			return exp, err
		}
	}
}

// reserve counts a lease of scopes here, under a holder id whose
// heartbeat is written (first, when it is not fresh: a new id).
func (l *Limiter) reserve(ctx context.Context, scopes []platform.Scope) (*lease, error) {
	l.beatMu.Lock()
	defer l.beatMu.Unlock()
	now := l.now()
	l.mu.Lock()
	ok := l.fresh(now)
	l.mu.Unlock()
	if !ok {
		id := newHolderID()
		exp, err := l.beat(ctx, id, now)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.id, l.beatUntil = id, exp
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := &lease{id: l.id, scopes: scopes}
	l.leases[ls] = struct{}{}
	for _, s := range scopes {
		l.held[ls.id+"\x00"+s.Key]++
	}
	if !l.running && l.Now == nil {
		l.running = true
		go l.renewLoop()
	}
	return ls, nil
}

// unreserve forgets a lease here, answering for each scope whether it was
// the holder's last slot there.
func (l *Limiter) unreserve(ls *lease) (last []bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.leases, ls)
	last = make([]bool, len(ls.scopes))
	for i, s := range ls.scopes {
		k := ls.id + "\x00" + s.Key
		if l.held[k]--; l.held[k] <= 0 {
			delete(l.held, k)
			last[i] = true
		}
	}
	return last
}

func heldKey(scope string) item { return limitKey(scope, heldSK) }

// take adds one slot of holder id to each scope, conditioned on n < max.
func (l *Limiter) take(ctx context.Context, id string, scopes []platform.Scope) (failed int, err error) {
	ups := make([]types.TransactWriteItem, len(scopes))
	for i, s := range scopes {
		ups[i] = types.TransactWriteItem{Update: &types.Update{
			TableName:                 &l.s.table,
			Key:                       heldKey(s.Key),
			UpdateExpression:          aws.String("ADD n :one, #me :one REMOVE #ttl"),
			ConditionExpression:       aws.String("attribute_not_exists(n) OR n < :max"),
			ExpressionAttributeNames:  map[string]string{"#me": holderPrefix + id, "#ttl": attrTTL},
			ExpressionAttributeValues: item{":one": num(1), ":max": num(s.Max)},
		}}
	}
	return l.write(ctx, ups)
}

// Hold implements platform.SharedLimits.
func (l *Limiter) Hold(ctx context.Context, scopes ...platform.Scope) (func(), error) {
	scopes = limited(scopes)
	if len(scopes) == 0 {
		return func() {}, nil
	}
	ls, err := l.reserve(ctx, scopes)
	if err != nil {
		return nil, err
	}
	failed, err := l.take(ctx, ls.id, scopes)
	if err == nil && failed >= 0 {
		var purged bool
		if purged, err = l.reclaim(ctx, ls.id, scopes); err == nil && purged {
			failed, err = l.take(ctx, ls.id, scopes)
		}
	}
	if err != nil || failed >= 0 {
		l.unreserve(ls)
		if err != nil {
			return nil, err
		}
		return nil, refused(scopes[failed])
	}
	var once sync.Once
	return func() { once.Do(func() { l.release(ls) }) }, nil
}

// release gives a lease's slots back, one UpdateItem per scope (each on
// its own: a scope where this holder was purged meanwhile subtracts
// nothing).
func (l *Limiter) release(ls *lease) {
	last := l.unreserve(ls)
	// The stream's own context is over: the release has its own.
	base := l.releaseCtx
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithTimeout(base, 10*time.Second)
	defer cancel()
	ttl := num(l.now().Add(ScopeIdleTTL).Unix())
	for i, s := range ls.scopes {
		names := map[string]string{"#me": holderPrefix + ls.id, "#ttl": attrTTL}
		if last[i] {
			// Its last slot here: the entry goes (when no other release
			// of this holder there is in flight, that is, when it is 1).
			applied, err := l.update1(ctx, &types.Update{Key: heldKey(s.Key), ExpressionAttributeNames: names,
				UpdateExpression:          aws.String("ADD n :m REMOVE #me SET #ttl = :ttl"),
				ConditionExpression:       aws.String("#me = :one"),
				ExpressionAttributeValues: item{":m": num(-1), ":one": num(1), ":ttl": ttl}})
			if err != nil {
				l.log().Error("releasing a held slot (a refused take reclaims it once this process is gone)", "scope", s.Key, "err", err)
			}
			if err != nil || applied {
				continue
			}
		}
		if _, err := l.update1(ctx, &types.Update{Key: heldKey(s.Key), ExpressionAttributeNames: names,
			UpdateExpression:          aws.String("ADD n :m, #me :m SET #ttl = :ttl"),
			ConditionExpression:       aws.String("#me > :zero"),
			ExpressionAttributeValues: item{":m": num(-1), ":zero": num(0), ":ttl": ttl}}); err != nil {
			l.log().Error("releasing a held slot (a refused take reclaims it once this process is gone)", "scope", s.Key, "err", err)
		}
	}
}

// update1 runs one conditional update: applied false when its condition
// failed.
func (l *Limiter) update1(ctx context.Context, u *types.Update) (applied bool, err error) {
	u.TableName = &l.s.table
	failed, err := l.write(ctx, []types.TransactWriteItem{{Update: u}})
	return err == nil && failed < 0, err
}

// reclaim purges, from the scope items, the counts of holders whose
// heartbeat is gone or expired (never holder me's), answering whether it
// purged any.
func (l *Limiter) reclaim(ctx context.Context, me string, scopes []platform.Scope) (bool, error) {
	keys := make([]item, len(scopes))
	for i, s := range scopes {
		keys[i] = heldKey(s.Key)
	}
	items, err := l.s.batchGet(ctx, keys)
	if err != nil {
		return false, err
	}
	now := l.now()
	unknown := map[string]bool{}
	l.mu.Lock()
	for _, it := range items {
		for name := range it {
			id, ok := strings.CutPrefix(name, holderPrefix)
			if !ok || id == me {
				continue
			}
			if exp, ok := l.alive[id]; !ok || !exp.After(now) {
				unknown[id] = true
			}
		}
	}
	l.mu.Unlock()
	if len(unknown) == 0 {
		return false, nil
	}
	hbKeys := make([]item, 0, len(unknown))
	for id := range unknown {
		hbKeys = append(hbKeys, heartbeatKey(id))
	}
	beats, err := l.s.batchGet(ctx, hbKeys)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	for _, b := range beats {
		id := strings.TrimPrefix(strings.TrimPrefix(getS(b, attrPK), limitPrefix), "holder#")
		if exp := time.UnixMilli(getN(b, "exp")); exp.After(now) {
			l.alive[id] = exp
			delete(unknown, id)
		}
	}
	for id, exp := range l.alive { // forget the expired
		if !exp.After(now) {
			delete(l.alive, id)
		}
	}
	l.mu.Unlock()
	if len(unknown) == 0 {
		return false, nil
	}
	purged := false
	for _, it := range items {
		// One update per item for all its dead holders, conditioned on
		// each count being the one read: two purgers subtract once.
		names, values := map[string]string{}, item{}
		var removes, conds []string
		var total int64
		for name := range it {
			id, ok := strings.CutPrefix(name, holderPrefix)
			if !ok || !unknown[id] {
				continue
			}
			c := getN(it, name)
			k := strconv.Itoa(len(removes))
			names["#d"+k], values[":c"+k] = name, num(c)
			removes, conds = append(removes, "#d"+k), append(conds, "#d"+k+" = :c"+k)
			total += c
		}
		if len(removes) == 0 {
			continue
		}
		values[":neg"] = num(-total)
		// Not applied: another purger was first (or the item changed
		// since): the take is tried again all the same.
		_, err := l.update1(ctx, &types.Update{Key: item{attrPK: it[attrPK], attrSK: it[attrSK]},
			UpdateExpression: aws.String("ADD n :neg REMOVE " + strings.Join(removes, ", ")), ConditionExpression: aws.String(strings.Join(conds, " AND ")),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values})
		if err != nil {
			return purged, err
		}
		purged = true
	}
	return purged, nil
}

func (l *Limiter) log() *slog.Logger {
	if l.Log != nil {
		return l.Log
	}
	return slog.Default()
}

// Renew writes this process's heartbeat again while it holds slots (one
// PutItem, whatever their number); with nothing held it writes nothing.
// It is called every heartbeat period (by itself with the real clock). A
// heartbeat found within a period of its expiry is not renewed: this
// process may have been judged dead meanwhile, and its next slots are
// taken under a new id.
func (l *Limiter) Renew(ctx context.Context) error {
	l.beatMu.Lock()
	defer l.beatMu.Unlock()
	now := l.now()
	l.mu.Lock()
	id, holding := l.id, false
	for ls := range l.leases {
		if ls.id == id {
			holding = true
			break
		}
	}
	if id != "" && !l.fresh(now) {
		l.id = ""
		holding = false
		l.log().Warn("the limits' heartbeat lapsed (a stalled process): the slots held are counted no more", "holder", id)
	}
	l.mu.Unlock()
	if !holding {
		return nil
	}
	exp, err := l.beat(ctx, id, now)
	if err != nil {
		return err
	}
	l.mu.Lock()
	if l.id == id {
		l.beatUntil = exp
	}
	l.mu.Unlock()
	return nil
}

// renewLoop renews the heartbeat every period while slots are held.
func (l *Limiter) renewLoop() {
	for {
		p := l.period()
		time.Sleep(p)
		l.mu.Lock()
		if len(l.leases) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), p/2)
		if err := l.Renew(ctx); err != nil {
			l.log().Error("renewing the limits' heartbeat", "err", err)
		}
		cancel()
	}
}

// Held is how many slots scope holds now, across the platform (dead
// holders' included until a refused take reclaims them), for tests and
// the operator's eyes.
func (l *Limiter) Held(ctx context.Context, scope string) (int64, error) {
	out, err := l.s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.s.table, Key: heldKey(scope), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, err
	}
	return getN(out.Item, "n"), nil
}
