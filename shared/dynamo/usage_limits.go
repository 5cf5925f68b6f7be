package dynamo

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Usage counters (docs/account.md, "Usage and quotas"): per bot, one item
// per UTC month (USAGE#<bot> / P#<YYYY-MM>) holding the messages, events
// and invocations of the month, and one item (USAGE#<bot> / TOTAL) holding
// the bytes of its files. Each moves by an atomic ADD in the transaction of
// the write it counts (invocations: right after the delivery), and a
// quota is a condition on that ADD, so a refused write writes nothing and
// concurrent writes can never pass a quota together.

// Counter attributes.
const (
	UsageMessages    = "msgs"
	UsageEvents      = "evts"
	UsageInvocations = "invk"
	UsageStorage     = "stor"
)

// Limits are the operator's quotas, per bot (0: none).
type Limits struct {
	MessagesPerMonth    int64
	EventsPerMonth      int64
	InvocationsPerMonth int64
	StorageBytes        int64
}

// Quota variables of the environment (docs/account.md).
const (
	EnvQuotaMessages    = "BP_QUOTA_MESSAGES_PER_MONTH"
	EnvQuotaEvents      = "BP_QUOTA_EVENTS_PER_MONTH"
	EnvQuotaInvocations = "BP_QUOTA_INVOCATIONS_PER_MONTH"
	EnvQuotaStorage     = "BP_QUOTA_STORAGE_BYTES"
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
		{EnvQuotaInvocations, &l.InvocationsPerMonth}, {EnvQuotaStorage, &l.StorageBytes},
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
func (s *Store) SetLimits(l Limits) { s.limits.Store(&l) }

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
	}
	return 0
}

func usagePK(bot string) string { return "USAGE#" + bot }

const usageTotalSK = "TOTAL"

// UsagePeriod is the month of t (UTC), as the usage operations name it.
func UsagePeriod(t time.Time) string { return t.UTC().Format("2006-01") }

func usageSK(attr string, now time.Time) string {
	if attr == UsageStorage {
		return usageTotalSK
	}
	return "P#" + UsagePeriod(now)
}

var errQuota = func(attr string, limit int64) error {
	what := map[string]string{UsageMessages: "messages this month", UsageEvents: "events this month",
		UsageInvocations: "bot invocations this month", UsageStorage: "bytes of file storage"}[attr]
	return platform.Errorf(platform.ErrQuotaExceeded, "the bot's quota of %d %s is reached", limit, what)
}

// usageAdd is the unconditional ADD of delta to a bot's counter (what is
// counted without a quota: the platform's own events).
func usageAdd(bot, attr string, delta int64, alsoOne ...string) types.TransactWriteItem {
	now := platform.Clock()
	u := &types.Update{
		Key:                       key(usagePK(bot), usageSK(attr, now)),
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
)

var dailyPrefix = map[string]string{UsageMessages: "m", UsageUserMessages: "u", UsageBotMessages: "b", UsageEvents: "e"}

func dayAttr(prefix string, day int) string { return fmt.Sprintf("%s%02d", prefix, day) }

// countUsage is the ADD of delta to a bot's counter; with enforce and a
// quota for it, conditional on staying within the quota. It fails at once
// (quota != nil) when delta alone exceeds the quota. alsoOne names
// counters of the same item to raise by one in the same update (a
// transaction may not touch one item twice: a message and its
// message_created event).
func (s *Store) countUsage(bot, attr string, delta int64, enforce bool, alsoOne ...string) (types.TransactWriteItem, error) {
	w := usageAdd(bot, attr, delta, alsoOne...)
	u := w.Update
	if limit := s.Limits().of(attr); enforce && limit > 0 && delta > 0 {
		if delta > limit {
			return types.TransactWriteItem{}, errQuota(attr, limit)
		}
		u.ConditionExpression = aws.String("attribute_not_exists(#c) OR #c <= :max")
		u.ExpressionAttributeValues[":max"] = num(limit - delta)
	}
	return w, nil
}

// DayUsage is what a bot did in one UTC day.
type DayUsage struct{ Messages, UserMessages, BotMessages, Events int64 }

// BotUsageDays reads a bot's per-day counters from..to (yyyy-mm-dd,
// inclusive): one Query over the months' items.
func (s *Store) BotUsageDays(ctx context.Context, bot, from, to string) (map[string]DayUsage, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :a AND :b"),
		ExpressionAttributeValues: item{":pk": str(usagePK(bot)), ":a": str("P#" + from[:7]), ":b": str("P#" + to[:7])},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	out := map[string]DayUsage{}
	for _, it := range items {
		month := strings.TrimPrefix(getS(it, attrSK), "P#")
		for d := 1; d <= 31; d++ {
			u := DayUsage{Messages: getN(it, dayAttr("m", d)), UserMessages: getN(it, dayAttr("u", d)),
				BotMessages: getN(it, dayAttr("b", d)), Events: getN(it, dayAttr("e", d))}
			if u != (DayUsage{}) {
				out[fmt.Sprintf("%s-%02d", month, d)] = u
			}
		}
	}
	return out, nil
}

// quotaError is the QuotaExceeded error of counter attr.
func (s *Store) quotaError(attr string) error { return errQuota(attr, s.Limits().of(attr)) }

// CountInvocation counts one delivery to a bot (the runtime's, after it).
func (s *Store) CountInvocation(ctx context.Context, bot string) error {
	w, err := s.countUsage(bot, UsageInvocations, 1, false)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: w.Update.Key,
		UpdateExpression: w.Update.UpdateExpression, ExpressionAttributeNames: w.Update.ExpressionAttributeNames,
		ExpressionAttributeValues: w.Update.ExpressionAttributeValues})
	return err
}

// InvocationsLeft tells whether a bot may be invoked once more this month.
func (s *Store) InvocationsLeft(ctx context.Context, bot string) (bool, error) {
	limit := s.Limits().InvocationsPerMonth
	if limit <= 0 {
		return true, nil
	}
	c, err := s.BotUsage(ctx, bot, platform.Clock())
	return c.Invocations < limit, err
}

// BotUsageCounts are a bot's counters of a month.
type BotUsageCounts struct {
	Messages, Events, Invocations, StorageBytes int64
}

// BotUsage reads a bot's counters for the month of now (two GetItems).
func (s *Store) BotUsage(ctx context.Context, bot string, now time.Time) (BotUsageCounts, error) {
	var c BotUsageCounts
	it, err := s.get(ctx, usagePK(bot), "P#"+UsagePeriod(now))
	if err != nil {
		return c, err
	}
	c.Messages, c.Events, c.Invocations = getN(it, UsageMessages), getN(it, UsageEvents), getN(it, UsageInvocations)
	if it, err = s.get(ctx, usagePK(bot), usageTotalSK); err != nil {
		return c, err
	}
	c.StorageBytes = getN(it, UsageStorage)
	return c, nil
}

// purgeBotUsage deletes a deleted bot's counters.
func (s *Store) purgeBotUsage(ctx context.Context, bot string) error {
	return s.purge(ctx, usagePK(bot))
}
