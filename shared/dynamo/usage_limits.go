package dynamo

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

// Usage counters (docs/account.md, "Usage and quotas"): per bot and UTC
// month, usageShards items (USAGE#<bot> / P#<YYYY-MM>#<shard>) holding the
// messages, events and invocations of the month, and one item
// (USAGE#<bot> / TOTAL) holding the bytes of its files. Each moves by an
// atomic ADD in the transaction of the write it counts (invocations: by the
// dispatcher during the call, or pre-paid by a user's message's own ADD:
// platform.Delivery.Prepaid); reads add the month's shards up (one Query).
//
// Why shards: every message of a bot is counted, and transactions that
// touch one item run one at a time; one counter item per bot made all of a
// bot's messages wait for each other (8 writers no faster than 1). A write
// without a quota adds to a random shard. With a quota the count must be
// exact, so a quota is a condition on the ADD, on shard 0 only: that shard
// then takes all the writes of the counter (they serialize, the price of
// exactness), and the condition allows what the other shards already hold
// this month (one Query before the write). A refused write writes nothing,
// and concurrent writes can never pass a quota together.
const usageShards = 16

// Spread keys (docs/data-model.md, "Heat"): the 16 shards above share one
// partition key, USAGE#<bot>, which takes every count of the bot and caps
// it at 1,000 write units a second (about 400 messages/s). While no quota
// is enforced (none configured in this process: quotasOn), counts go
// instead to usageKeys partition keys of their own, USAGE#<bot>#<nn> /
// P#<YYYY-MM>, at random; reads add those up too (one BatchGetItem of the
// month's usageKeys items besides the Query of USAGE#<bot>). With a quota,
// counts stay on USAGE#<bot> as above (exactness serializes them anyway),
// so the spread keys no longer change and a quota check reads their sum
// once per process and month (spreadCache).
const usageKeys = 32

// quotasOn is set once a store of the process enforces a quota: from then
// on every count of the process goes to USAGE#<bot> (see usageKeys).
var quotasOn atomic.Bool

func usageKeyPK(bot string, n int) string { return fmt.Sprintf("%s#%02d", usagePK(bot), n) }

// Counter attributes.
const (
	UsageMessages    = "msgs"
	UsageEvents      = "evts"
	UsageInvocations = "invk"
	UsageStorage     = "stor"
	// LLM calls and tokens (docs/llm.md): llmc, llmi, llmo, and per model
	// llmi:<model>, llmo:<model>; per day lc<DD>, li<DD>, lo<DD>.
	UsageLLMCalls        = "llmc"
	UsageLLMInputTokens  = "llmi"
	UsageLLMOutputTokens = "llmo"
	// usageLLMTokens names the quota on llmi + llmo.
	usageLLMTokens = "llmt"
)

// Limits are the operator's quotas, per bot (0: none).
type Limits struct {
	MessagesPerMonth    int64
	EventsPerMonth      int64
	InvocationsPerMonth int64
	StorageBytes        int64
	LLMTokensPerMonth   int64 // input and output tokens together
}

// Quota variables of the environment (docs/account.md).
const (
	EnvQuotaMessages    = "BP_QUOTA_MESSAGES_PER_MONTH"
	EnvQuotaEvents      = "BP_QUOTA_EVENTS_PER_MONTH"
	EnvQuotaInvocations = "BP_QUOTA_INVOCATIONS_PER_MONTH"
	EnvQuotaStorage     = "BP_QUOTA_STORAGE_BYTES"
	EnvQuotaLLMTokens   = "BP_QUOTA_LLM_TOKENS_PER_MONTH"
)

// LimitsFromEnv reads the quotas from the environment's BP_QUOTA_*
// variables (ParseLimits).
func LimitsFromEnv() (Limits, error) { return ParseLimits(os.Getenv) }

// ParseLimits reads the quotas from the BP_QUOTA_* variables get answers
// (unset, empty or 0: none; anything but a non-negative integer is an
// error).
func ParseLimits(get func(string) string) (Limits, error) {
	var l Limits
	for _, v := range []struct {
		name string
		dst  *int64
	}{
		{EnvQuotaMessages, &l.MessagesPerMonth}, {EnvQuotaEvents, &l.EventsPerMonth},
		{EnvQuotaInvocations, &l.InvocationsPerMonth}, {EnvQuotaStorage, &l.StorageBytes}, {EnvQuotaLLMTokens, &l.LLMTokensPerMonth},
	} {
		s := strings.TrimSpace(get(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return l, fmt.Errorf("%s must be a non-negative integer, not %q", v.name, s)
		}
		*v.dst = n
	}
	return l, nil
}

// SetLimits sets the quotas the store enforces.
func (s *Store) SetLimits(l Limits) {
	if l != (Limits{}) {
		quotasOn.Store(true)
	}
	s.limits.Store(&l)
}

// Limits answers the quotas the store enforces.
func (s *Store) Limits() Limits {
	if l := s.limits.Load(); l != nil {
		return *l
	}
	return Limits{}
}

func (l Limits) of(attr string) int64 {
	switch attr {
	case UsageMessages:
		return l.MessagesPerMonth
	case UsageEvents:
		return l.EventsPerMonth
	case UsageInvocations:
		return l.InvocationsPerMonth
	case UsageStorage:
		return l.StorageBytes
	case usageLLMTokens:
		return l.LLMTokensPerMonth
	}
	return 0
}

func usagePK(bot string) string { return "USAGE#" + bot }

const usageTotalSK = "TOTAL"

// UsagePeriod is the month of t (UTC), as the usage operations name it.
func UsagePeriod(t time.Time) string { return t.UTC().Format("2006-01") }

// usageSK is the key of counter attr's item: shard of the month of now
// (the TOTAL item for storage, which is not sharded).
func usageSK(attr string, now time.Time, shard int) string {
	if attr == UsageStorage {
		return usageTotalSK
	}
	return fmt.Sprintf("%s#%02d", monthSK(now), shard)
}

// monthSK starts the keys of the month of now's shards.
func monthSK(now time.Time) string { return "P#" + UsagePeriod(now) }

var errQuota = func(attr string, limit int64) error {
	what := map[string]string{UsageMessages: "messages this month", UsageEvents: "events this month",
		UsageInvocations: "bot invocations this month", UsageStorage: "bytes of file storage", usageLLMTokens: "LLM tokens this month"}[attr]
	return platform.Errorf(platform.ErrQuotaExceeded, "the bot's quota of %d %s is reached", limit, what)
}

// usageAdd is the unconditional ADD of delta to a bot's counter (what is
// counted without a quota: the platform's own events).
func usageAdd(bot, attr string, delta int64, alsoOne ...string) types.TransactWriteItem {
	if attr != UsageStorage && !quotasOn.Load() {
		w := usageAddAt(bot, attr, 0, delta, alsoOne...)
		w.Update.Key = key(usageKeyPK(bot, rand.IntN(usageKeys)), monthSK(platform.Clock()))
		return w
	}
	return usageAddAt(bot, attr, rand.IntN(usageShards), delta, alsoOne...)
}

// usageAddAt is usageAdd on one shard.
func usageAddAt(bot, attr string, shard int, delta int64, alsoOne ...string) types.TransactWriteItem {
	now := platform.Clock()
	u := &types.Update{
		Key:                       key(usagePK(bot), usageSK(attr, now, shard)),
		UpdateExpression:          aws.String("ADD #c :d"),
		ExpressionAttributeNames:  map[string]string{"#c": attr},
		ExpressionAttributeValues: item{":d": num(delta)},
	}
	add := func(name string, v int64) {
		n := fmt.Sprintf("#a%d", len(u.ExpressionAttributeNames))
		val := ":d"
		if v != delta {
			val = ":one"
			u.ExpressionAttributeValues[val] = num(1)
		}
		u.UpdateExpression = aws.String(*u.UpdateExpression + ", " + n + " " + val)
		u.ExpressionAttributeNames[n] = name
	}
	// The day's counter of what is counted per day, on the month's item.
	day := func(name string, v int64) {
		if p, ok := dailyPrefix[name]; ok {
			add(dayAttr(p, now.UTC().Day()), v)
		}
	}
	day(attr, delta)
	for _, a := range alsoOne {
		if a != attr {
			add(a, 1)
		}
		day(a, 1)
	}
	return types.TransactWriteItem{Update: u}
}

// Per-day counters, attributes of the month's item (getBotAnalytics):
// m<DD> messages, u<DD> users' (incoming) messages, b<DD> the bot's
// (outgoing) messages, e<DD> events.
const (
	UsageUserMessages = "umsgs"
	UsageBotMessages  = "bmsgs"
	// UsageNewUsers counts the users a bot gets (n<DD> per day).
	UsageNewUsers = "nusr"
)

var dailyPrefix = map[string]string{UsageMessages: "m", UsageUserMessages: "u", UsageBotMessages: "b", UsageEvents: "e", UsageNewUsers: "n"}

func dayAttr(prefix string, day int) string { return fmt.Sprintf("%s%02d", prefix, day) }

// countUsage is the ADD of delta to a bot's counter; with enforce and a
// quota for it, conditional on staying within the quota. It fails at once
// (quota != nil) when delta alone exceeds the quota. alsoOne names
// counters of the same item to raise by one in the same update (a
// transaction may not touch one item twice: a message and its
// message_created event).
func (s *Store) countUsage(ctx context.Context, bot, attr string, delta int64, enforce bool, alsoOne ...string) (types.TransactWriteItem, error) {
	limit := s.Limits().of(attr)
	if !enforce || limit <= 0 || delta <= 0 {
		return usageAdd(bot, attr, delta, alsoOne...), nil
	}
	if delta > limit {
		return types.TransactWriteItem{}, errQuota(attr, limit)
	}
	// Exact: on shard 0, allowing for what the other shards hold.
	var others int64
	if attr != UsageStorage {
		items, err := s.monthShards(ctx, bot, platform.Clock())
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		zero := usageSK(attr, platform.Clock(), 0)
		for _, it := range items {
			if getS(it, attrSK) != zero {
				others += getN(it, attr)
			}
		}
	}
	w := usageAddAt(bot, attr, 0, delta, alsoOne...)
	w.Update.ConditionExpression = aws.String("attribute_not_exists(#c) OR #c <= :max")
	w.Update.ExpressionAttributeValues[":max"] = num(limit - delta - others)
	return w, nil
}

// usageRoom fails with the quota's error when counter attr (a monthly one)
// has no room for n more this month (one Query; none without a quota).
func (s *Store) usageRoom(ctx context.Context, bot, attr string, n int64) error {
	limit := s.Limits().of(attr)
	if limit <= 0 || n <= 0 {
		return nil
	}
	if n > limit {
		return errQuota(attr, limit)
	}
	items, err := s.monthShards(ctx, bot, platform.Clock())
	if err != nil {
		return err
	}
	used := int64(0)
	for _, it := range items {
		used += getN(it, attr)
	}
	if used+n > limit {
		return errQuota(attr, limit)
	}
	return nil
}

// monthShards reads the counter items of a bot's month of now: one Query
// of USAGE#<bot>, and the month's items of the spread keys (one
// BatchGetItem; with quotas on, once per process and month).
func (s *Store) monthShards(ctx context.Context, bot string, now time.Time) ([]item, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :m)"),
		ExpressionAttributeValues: item{":pk": str(usagePK(bot)), ":m": str(monthSK(now))},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	spread, err := s.spreadItems(ctx, bot, now)
	return append(items, spread...), err
}

// spreadItems reads the month of now's items of the bot's spread keys.
// With quotas on nothing writes them any more, so they are read once per
// process and month.
func (s *Store) spreadItems(ctx context.Context, bot string, now time.Time) ([]item, error) {
	month := monthSK(now)
	cached := quotasOn.Load()
	if cached {
		if v, ok := s.spreadCache.Load(bot + "|" + month); ok {
			return v.([]item), nil
		}
	}
	keys := make([]item, usageKeys)
	for n := range usageKeys {
		keys[n] = key(usageKeyPK(bot, n), month)
	}
	items, err := s.batchGet(ctx, keys)
	if err == nil && cached {
		s.spreadCache.Store(bot+"|"+month, items)
	}
	return items, err
}

// DayUsage is what a bot did in one UTC day.
type DayUsage struct {
	Messages, UserMessages, BotMessages, Events, NewUsers int64
	LLMCalls, LLMInputTokens, LLMOutputTokens             int64
}

// LLMRoom fails with 403 QuotaExceeded when the bot's LLM tokens this
// month (input and output) have reached BP_QUOTA_LLM_TOKENS_PER_MONTH: asked
// before a call, whose tokens are known only after it (one Query; none
// without a quota). A call started with room may end past the quota; the
// next one is refused.
func (s *Store) LLMRoom(ctx context.Context, bot string) error {
	limit := s.Limits().LLMTokensPerMonth
	if limit <= 0 {
		return nil
	}
	items, err := s.monthShards(ctx, bot, platform.Clock())
	if err != nil {
		return err
	}
	var used int64
	for _, it := range items {
		used += getN(it, UsageLLMInputTokens) + getN(it, UsageLLMOutputTokens)
	}
	if used >= limit {
		return errQuota(usageLLMTokens, limit)
	}
	return nil
}

// CountLLM counts one LLM call of a bot: a call, its input and output
// tokens, in total and for its model ("<provider>:<model>"), this month
// and today (one UpdateItem, an atomic ADD on a random shard).
func (s *Store) CountLLM(ctx context.Context, bot, model string, in, out int64) error {
	now := platform.Clock()
	d := now.UTC().Day()
	names := map[string]string{}
	vals := item{}
	var adds []string
	add := func(attr string, v int64) {
		n := fmt.Sprintf("#a%d", len(names))
		vn := fmt.Sprintf(":v%d", len(names))
		names[n], vals[vn] = attr, num(v)
		adds = append(adds, n+" "+vn)
	}
	// The platform's metrics count the tokens too (docs/metrics.md).
	metrics.LLMTokens.Add(float64(in), bot, model, "input")
	metrics.LLMTokens.Add(float64(out), bot, model, "output")
	add(UsageLLMCalls, 1)
	add(UsageLLMInputTokens, in)
	add(UsageLLMOutputTokens, out)
	add(UsageLLMInputTokens+":"+model, in)
	add(UsageLLMOutputTokens+":"+model, out)
	add(dayAttr("lc", d), 1)
	add(dayAttr("li", d), in)
	add(dayAttr("lo", d), out)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: usageAdd(bot, UsageLLMCalls, 1).Update.Key,
		UpdateExpression: aws.String("ADD " + strings.Join(adds, ", ")), ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	})
	return err
}

// LLMUsage is a bot's LLM calls and tokens in a month, in total and per
// model.
type LLMUsage struct {
	Calls, InputTokens, OutputTokens int64
	Models                           map[string][2]int64 // model -> input, output tokens
}

// BotLLMUsage reads a bot's LLM usage of the month of now (one Query).
func (s *Store) BotLLMUsage(ctx context.Context, bot string, now time.Time) (LLMUsage, error) {
	u := LLMUsage{Models: map[string][2]int64{}}
	items, err := s.monthShards(ctx, bot, now)
	if err != nil {
		return u, err
	}
	for _, it := range items {
		u.Calls += getN(it, UsageLLMCalls)
		u.InputTokens += getN(it, UsageLLMInputTokens)
		u.OutputTokens += getN(it, UsageLLMOutputTokens)
		for name := range it {
			if m, ok := strings.CutPrefix(name, UsageLLMInputTokens+":"); ok {
				v := u.Models[m]
				v[0] += getN(it, name)
				u.Models[m] = v
			} else if m, ok := strings.CutPrefix(name, UsageLLMOutputTokens+":"); ok {
				v := u.Models[m]
				v[1] += getN(it, name)
				u.Models[m] = v
			}
		}
	}
	return u, nil
}

// BotUsageDays reads a bot's per-day counters from..to (yyyy-mm-dd,
// inclusive): one Query over the months' items.
func (s *Store) BotUsageDays(ctx context.Context, bot, from, to string) (map[string]DayUsage, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :a AND :b"),
		// "~" sorts after the shard suffixes of the last month.
		ExpressionAttributeValues: item{":pk": str(usagePK(bot)), ":a": str("P#" + from[:7]), ":b": str("P#" + to[:7] + "~")},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	// The spread keys hold one item per month (sk P#<YYYY-MM>): the range's
	// months are read by key, usageKeys per month in BatchGetItems of 100,
	// rather than a Query per spread key.
	first, err1 := time.Parse("2006-01", from[:7])
	last, err2 := time.Parse("2006-01", to[:7])
	if err1 != nil || err2 != nil {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "dates %q..%q are not yyyy-mm-dd", from, to)
	}
	var keys []item
	for m := first; !m.After(last); m = m.AddDate(0, 1, 0) {
		for n := range usageKeys {
			keys = append(keys, key(usageKeyPK(bot, n), monthSK(m)))
		}
	}
	spread, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	items = append(items, spread...)
	out := map[string]DayUsage{}
	for _, it := range items {
		month := strings.TrimPrefix(getS(it, attrSK), "P#")
		if len(month) > 7 {
			month = month[:7] // a shard's
		}
		for d := 1; d <= 31; d++ {
			day := fmt.Sprintf("%s-%02d", month, d)
			u := out[day]
			u.Messages += getN(it, dayAttr("m", d))
			u.UserMessages += getN(it, dayAttr("u", d))
			u.BotMessages += getN(it, dayAttr("b", d))
			u.Events += getN(it, dayAttr("e", d))
			u.NewUsers += getN(it, dayAttr("n", d))
			u.LLMCalls += getN(it, dayAttr("lc", d))
			u.LLMInputTokens += getN(it, dayAttr("li", d))
			u.LLMOutputTokens += getN(it, dayAttr("lo", d))
			if u != (DayUsage{}) {
				out[day] = u
			}
		}
	}
	return out, nil
}

// quotaError is the QuotaExceeded error of counter attr.
func (s *Store) quotaError(attr string) error { return errQuota(attr, s.Limits().of(attr)) }

// CountInvocation counts one delivery to a bot (the runtime's, after it).
func (s *Store) CountInvocation(ctx context.Context, bot string) error {
	w := usageAdd(bot, UsageInvocations, 1)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: w.Update.Key,
		UpdateExpression: w.Update.UpdateExpression, ExpressionAttributeNames: w.Update.ExpressionAttributeNames,
		ExpressionAttributeValues: w.Update.ExpressionAttributeValues})
	return err
}

// invocationRefund gives back the invocation pre-paid for delivery d
// (platform.Delivery.Prepaid), in the month that counted it: the one its
// mark names (markPrepaid), or, for an entry marked before marks named
// one, the month of the entry's creation.
func invocationRefund(d platform.Delivery) types.TransactWriteItem {
	w := usageAdd(d.BotID, UsageInvocations, -1)
	then := "P#" + d.PrepaidIn
	if d.PrepaidIn == "" {
		t, err := time.Parse(platform.TimeFormat, d.CreatedAt)
		if err != nil {
			return w
		}
		then = monthSK(t)
	}
	if now, sk := monthSK(platform.Clock()), getS(w.Update.Key, attrSK); now != then && strings.HasPrefix(sk, now) {
		w.Update.Key[attrSK] = str(then + strings.TrimPrefix(sk, now))
	}
	return w
}

// usagePeriodOf is the month (UsagePeriod) of usage item key sk.
func usagePeriodOf(sk string) string {
	period, _, _ := strings.Cut(strings.TrimPrefix(sk, "P#"), "#")
	return period
}

// prepaidMark is the value of a pre-paid entry's mark: the month that
// counted its invocation (1 when unknown).
func prepaidMark(period string) types.AttributeValue {
	if period == "" {
		return num(1)
	}
	return str(period)
}

// Prepays tells whether the store counts a user's message's invocation in
// the message's own usage write (platform.Delivery.Prepaid): only while no
// invocations quota is enforced. Under one, the quota check before each
// delivery needs the count of invocations made, which pre-paid deliveries
// still queued would overstate: the dispatcher counts each attempt then,
// as before.
func (s *Store) Prepays() bool { return s.Limits().InvocationsPerMonth <= 0 }

// InvocationsLeft tells whether a bot may be invoked once more this month.
// prepaid says the delivery's invocation is in the count already (a
// pre-paid delivery's first attempt, reaching a quota set since its
// message was written): it is then allowed as it would have been before
// its count.
func (s *Store) InvocationsLeft(ctx context.Context, bot string, prepaid bool) (bool, error) {
	limit := s.Limits().InvocationsPerMonth
	if limit <= 0 {
		return true, nil
	}
	c, err := s.BotUsage(ctx, bot, platform.Clock())
	if prepaid {
		c.Invocations--
	}
	return c.Invocations < limit, err
}

// BotUsageCounts are a bot's counters of a month.
type BotUsageCounts struct {
	Messages, Events, Invocations, StorageBytes int64
}

// BotUsage reads a bot's counters for the month of now (a Query of the
// month's shards, a GetItem).
func (s *Store) BotUsage(ctx context.Context, bot string, now time.Time) (BotUsageCounts, error) {
	var c BotUsageCounts
	items, err := s.monthShards(ctx, bot, now)
	if err != nil {
		return c, err
	}
	for _, it := range items {
		c.Messages += getN(it, UsageMessages)
		c.Events += getN(it, UsageEvents)
		c.Invocations += getN(it, UsageInvocations)
	}
	it, err := s.get(ctx, usagePK(bot), usageTotalSK)
	if err != nil {
		return c, err
	}
	c.StorageBytes = getN(it, UsageStorage)
	return c, nil
}

// purgeBotUsage deletes a deleted bot's counters.
func (s *Store) purgeBotUsage(ctx context.Context, bot string) error {
	for n := range usageKeys {
		if err := s.purge(ctx, usageKeyPK(bot, n)); err != nil {
			return err
		}
	}
	return s.purge(ctx, usagePK(bot))
}

// usageAllKeys runs query (its :pk set here) on USAGE#<bot> and on each
// spread key, one Query each (reads of past months: analytics, usage).
func (s *Store) usageAllKeys(ctx context.Context, bot string, query *dynamodb.QueryInput) ([]item, error) {
	var out []item
	for n := -1; n < usageKeys; n++ {
		pk := usagePK(bot)
		if n >= 0 {
			pk = usageKeyPK(bot, n)
		}
		q := *query
		q.ExpressionAttributeValues = maps.Clone(query.ExpressionAttributeValues)
		q.ExpressionAttributeValues[":pk"] = str(pk)
		items, err := queryAllItems(ctx, s, &q)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// BotInvocationsByMonth reads a bot's invocations of every month it has
// counters for (YYYY-MM -> calls): one Query over its month shards.
func (s *Store) BotInvocationsByMonth(ctx context.Context, bot string) (map[string]int64, error) {
	items, err := s.usageAllKeys(ctx, bot, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":p": str("P#")},
		ProjectionExpression:      aws.String("sk, #i"),
		ExpressionAttributeNames:  map[string]string{"#i": UsageInvocations},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, it := range items {
		month := strings.TrimPrefix(getS(it, attrSK), "P#")
		if len(month) > 7 {
			month = month[:7]
		}
		out[month] += getN(it, UsageInvocations)
	}
	return out, nil
}
