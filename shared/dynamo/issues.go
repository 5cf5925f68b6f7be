package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Keys of bot issues (docs/logs.md):
//
//	issue          BOTISSUES#<botId> / ISSUE#<issueId>   doc, code, eventsCount (N), lastSeenAt
//	code → issue   BOTISSUES#<botId> / CODE#<code>        issueId (the grouping key)
//	issue event    ISSUE#<issueId>   / EVENT#<slot>       doc, ttl; slot = (n-1) mod 100 of the n-th event
//
// An issue's id is a ULID, so the issues of a bot sort by creation time.
func botIssuesPK(bot string) string     { return "BOTISSUES#" + bot }
func issueSK(id string) string          { return "ISSUE#" + id }
func issueCodeSK(code string) string    { return "CODE#" + code }
func issueEventsPK(issue string) string { return "ISSUE#" + issue }
func issueEventSK(slot int64) string    { return fmt.Sprintf("EVENT#%03d", slot) }

const (
	attrEventsCount = "eventsCount"
	attrLastSeenAt  = "lastSeenAt"
	attrIssueID     = "issueId"
	attrIssueCode   = "code"
)

// issueEventTTL is how long an issue event is kept: an issue keeps its
// latest MaxIssueEvents events, and an event outlives its issue (a deleted
// issue, a race with deleteBotIssue) by at most this long.
const issueEventTTL = platform.IssueEventRetention

func issueItem(botID string, is platform.BotIssue) (item, error) {
	doc := is
	doc.EventsCount, doc.LastSeenAt = 0, "" // kept in their own attributes
	it, err := docItem(botIssuesPK(botID), issueSK(is.ID), doc)
	if err != nil {
		return nil, err
	}
	it[attrIssueCode] = str(is.Code)
	it[attrEventsCount] = num(is.EventsCount)
	it[attrLastSeenAt] = str(is.LastSeenAt)
	return it, nil
}

func issueFrom(it item) (platform.BotIssue, error) {
	var is platform.BotIssue
	if err := decodeDoc(it, &is); err != nil {
		return is, err
	}
	is.EventsCount, is.LastSeenAt = getN(it, attrEventsCount), getS(it, attrLastSeenAt)
	if is.GroupedData == nil {
		is.GroupedData = map[string]platform.IssueValue{}
	}
	return is, nil
}

func issueEventItem(issueID string, slot int64, ev platform.BotIssueEvent, at time.Time) (item, error) {
	it, err := docItem(issueEventsPK(issueID), issueEventSK(slot), ev)
	if err != nil {
		return nil, err
	}
	it[attrTTL] = num(at.Add(issueEventTTL).Unix())
	return it, nil
}

// RecordBotFailure records a failure of a bot as an event of the bot's
// issue of f.Code, creating the issue at the first occurrence. It is safe
// under any concurrency: the first occurrence creates the code's pointer
// and the issue in one transaction conditional on neither existing (losers
// retry and find it); later ones add to eventsCount with one atomic
// UpdateItem ADD, conditional on the issue existing. Steady state: GetItem,
// UpdateItem, PutItem.
func (s *Store) RecordBotFailure(ctx context.Context, botID string, f platform.BotFailure) (platform.BotIssue, error) {
	if !platform.HasPrefix(botID, platform.PrefixBot) {
		return platform.BotIssue{}, platform.NotFound("bot", botID)
	}
	if f.Code == "" || len(f.Code) > platform.MaxIssueCode {
		return platform.BotIssue{}, fmt.Errorf("record bot failure: code must be 1 to %d bytes", platform.MaxIssueCode)
	}
	at := f.At
	if at.IsZero() {
		at = platform.Clock()
	}
	now := platform.FormatTime(at)
	data := f.Data
	if data == nil {
		data = map[string]platform.IssueValue{}
	}
	ev := platform.BotIssueEvent{ID: platform.NewID(platform.PrefixIssueEvent), CreatedAt: now, Data: data}
	pk := botIssuesPK(botID)
	for attempt := 0; attempt < 30; attempt++ {
		if attempt > 0 {
			// Jittered backoff: concurrent first occurrences collide once,
			// then find the issue; a transaction conflict clears quickly.
			time.Sleep(time.Duration(rand.IntN(5+min(attempt, 10)*10)) * time.Millisecond)
		}
		ptr, err := s.get(ctx, pk, issueCodeSK(f.Code))
		if err != nil {
			return platform.BotIssue{}, err
		}
		if ptr != nil {
			is, ok, err := s.countIssueEvent(ctx, botID, getS(ptr, attrIssueID), now)
			if err != nil {
				return platform.BotIssue{}, err
			}
			if !ok {
				continue // deleted since the pointer was read: start over
			}
			slot := (is.EventsCount - 1) % platform.MaxIssueEvents
			evIt, err := issueEventItem(is.ID, slot, ev, at)
			if err != nil {
				return platform.BotIssue{}, err
			}
			_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: evIt})
			return is, err
		}
		is, err := s.createIssue(ctx, botID, f, ev, at)
		if errors.Is(err, errRetry) {
			continue
		}
		return is, err
	}
	return platform.BotIssue{}, platform.Errorf(platform.ErrResourceLocked, "the issue %q of bot %q is being changed concurrently, retry", f.Code, botID)
}

// countIssueEvent adds one event to an existing issue; ok is false when the
// issue no longer exists.
func (s *Store) countIssueEvent(ctx context.Context, botID, issueID, now string) (platform.BotIssue, bool, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      key(botIssuesPK(botID), issueSK(issueID)),
		UpdateExpression:         aws.String("ADD #n :one SET #seen = :now"),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames: map[string]string{"#n": attrEventsCount, "#seen": attrLastSeenAt},
		ExpressionAttributeValues: item{
			":one": num(1), ":now": str(now),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return platform.BotIssue{}, false, nil
	}
	if err != nil {
		return platform.BotIssue{}, false, err
	}
	is, err := issueFrom(out.Attributes)
	return is, err == nil, err
}

// createIssue creates the issue of a first occurrence, with its pointer and
// first event, in one transaction; errRetry when another occurrence created
// it first (or the transaction met a concurrent one).
func (s *Store) createIssue(ctx context.Context, botID string, f platform.BotFailure, ev platform.BotIssueEvent, at time.Time) (platform.BotIssue, error) {
	is := platform.BotIssue{
		ID: platform.NewID(platform.PrefixIssue), Code: f.Code,
		CreatedAt: ev.CreatedAt, LastSeenAt: ev.CreatedAt,
		Title: f.Title, Description: f.Description, GroupedData: f.GroupedData,
		EventsCount: 1, Category: f.Category,
	}
	if is.GroupedData == nil {
		is.GroupedData = map[string]platform.IssueValue{}
	}
	if is.Category == "" {
		is.Category = platform.IssueUserCode
	}
	if f.ResolutionLink != "" {
		link := f.ResolutionLink
		is.ResolutionLink = &link
	}
	isIt, err := issueItem(botID, is)
	if err != nil {
		return is, err
	}
	ptr := key(botIssuesPK(botID), issueCodeSK(f.Code))
	ptr[attrIssueID] = str(is.ID)
	evIt, err := issueEventItem(is.ID, 0, ev, at)
	if err != nil {
		return is, err
	}
	err = s.transact(ctx, []types.TransactWriteItem{
		putNew(ptr), putNew(isIt), {Put: &types.Put{Item: evIt}},
	}, func(int) error { return errRetry })
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		return is, errRetry // a concurrent transaction on the same items
	}
	return is, err
}

// ListBotIssues lists a bot's issues, newest first (one Query).
func (s *Store) ListBotIssues(ctx context.Context, botID string, p Page) ([]platform.BotIssue, map[string]string, error) {
	items, next, err := s.queryPage(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(botIssuesPK(botID)), ":p": str("ISSUE#")},
		ScanIndexForward:          aws.Bool(false),
		ConsistentRead:            aws.Bool(true),
	}, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.BotIssue, 0, len(items))
	for _, it := range items {
		is, err := issueFrom(it)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, is)
	}
	return out, next, nil
}

// GetBotIssue reads an issue of a bot (one GetItem).
func (s *Store) GetBotIssue(ctx context.Context, botID, issueID string) (platform.BotIssue, error) {
	if !platform.HasPrefix(issueID, platform.PrefixIssue) {
		return platform.BotIssue{}, platform.NotFound("issue", issueID)
	}
	it, err := s.get(ctx, botIssuesPK(botID), issueSK(issueID))
	if err != nil {
		return platform.BotIssue{}, err
	}
	if it == nil {
		return platform.BotIssue{}, platform.NotFound("issue", issueID)
	}
	return issueFrom(it)
}

// DeleteBotIssue deletes an issue and its code pointer in one transaction,
// then its events: a failure of the same code recorded afterwards opens a
// new issue.
func (s *Store) DeleteBotIssue(ctx context.Context, botID, issueID string) error {
	is, err := s.GetBotIssue(ctx, botID, issueID)
	if err != nil {
		return err
	}
	err = s.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			Key:                 key(botIssuesPK(botID), issueSK(issueID)),
			ConditionExpression: aws.String("attribute_exists(pk)"),
		}},
		{Delete: &types.Delete{
			Key:                       key(botIssuesPK(botID), issueCodeSK(is.Code)),
			ConditionExpression:       aws.String("attribute_not_exists(pk) OR #id = :id"),
			ExpressionAttributeNames:  map[string]string{"#id": attrIssueID},
			ExpressionAttributeValues: item{":id": str(issueID)},
		}},
	}, func(i int) error {
		if i == 0 {
			return platform.NotFound("issue", issueID)
		}
		return errRetry
	})
	if err == errRetry {
		// The pointer names another issue: cannot happen while pointers and
		// issues are created and deleted together; report a conflict.
		return platform.Errorf(platform.ErrResourceLocked, "issue %q is being changed concurrently, retry", issueID)
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		return platform.Errorf(platform.ErrResourceLocked, "issue %q is being changed concurrently, retry", issueID)
	}
	if err != nil {
		return err
	}
	keys, err := s.queryAllKeys(ctx, issueEventsPK(issueID), "EVENT#")
	if err != nil {
		return err
	}
	return s.batchDelete(ctx, keys)
}

// ListBotIssueEvents lists the latest events of an issue (at most
// MaxIssueEvents), newest first: one Query of the issue's event slots.
func (s *Store) ListBotIssueEvents(ctx context.Context, issueID string) ([]platform.BotIssueEvent, error) {
	evs, err := queryAllDocs[platform.BotIssueEvent](ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(issueEventsPK(issueID)), ":p": str("EVENT#")},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	now := platform.Clock()
	kept := evs[:0]
	for _, ev := range evs {
		if ev.Expired(now) {
			continue // past its retention (DynamoDB's TTL deletes it later)
		}
		if ev.Data == nil {
			ev.Data = map[string]platform.IssueValue{}
		}
		kept = append(kept, ev)
	}
	evs = kept
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].CreatedAt != evs[j].CreatedAt {
			return evs[i].CreatedAt > evs[j].CreatedAt
		}
		return evs[i].ID > evs[j].ID
	})
	return evs, nil
}

// DeleteBotIssues deletes every issue of a bot and their events (for the
// deletion of a bot): Query of the bot's issue items, per issue a Query of
// its events, BatchWriteItem.
func (s *Store) DeleteBotIssues(ctx context.Context, botID string) error {
	issues, err := s.queryAllKeys(ctx, botIssuesPK(botID), "ISSUE#")
	if err != nil {
		return err
	}
	codes, err := s.queryAllKeys(ctx, botIssuesPK(botID), "CODE#")
	if err != nil {
		return err
	}
	var all []item
	for _, k := range issues {
		id := strings.TrimPrefix(getS(k, attrSK), "ISSUE#")
		evs, err := s.queryAllKeys(ctx, issueEventsPK(id), "EVENT#")
		if err != nil {
			return err
		}
		all = append(all, evs...)
	}
	all = append(all, codes...)
	return s.batchDelete(ctx, append(all, issues...))
}
