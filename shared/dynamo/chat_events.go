package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

const listEvents = "EVTS"

// convEvents is the GSI2 partition of a conversation's events.
func convEvents(bot, conv string) string { return "BOT#" + bot + "#CONV#" + conv + "#EVTS" }

// workflowPK is the key of a workflow record. No operation creates
// workflows yet; states and events naming one are checked against it.
func workflowPK(bot, id string) string { return "WF#" + bot + "#" + id }

const skWorkflow = "WF"

// eventDoc is how an event is stored: its wire shape and the fields the
// wire shape does not carry.
type eventDoc struct {
	platform.Event
	StoredWorkflow  string `json:"_workflowId,omitempty"`
	StoredScheduled string `json:"_scheduledFor,omitempty"`
}

func eventFrom(it item) (platform.Event, int64, error) {
	var d eventDoc
	if err := decodeDoc(it, &d); err != nil {
		return platform.Event{}, 0, err
	}
	e := d.Event
	e.WorkflowID, e.ScheduledFor = d.StoredWorkflow, d.StoredScheduled
	return e, getN(it, attrVer), nil
}

// CreateEvent stores an event; the conversation, user, message and
// workflow it names must exist in the bot, checked in the same transaction
// (one PutItem when it names none). It does not deliver it (the caller
// does: recurring events).
func (s *Store) CreateEvent(ctx context.Context, bot string, e platform.Event) error {
	return s.createEvent(ctx, bot, e, false)
}

// EmitEvent stores an event and, in the same transaction, queues its
// delivery to the bot (when due, for a scheduled event).
func (s *Store) EmitEvent(ctx context.Context, bot string, e platform.Event) error {
	return s.createEvent(ctx, bot, e, true)
}

// EmitEventWithinQuota is EmitEvent for an event the API creates: it
// counts against the bot's monthly events quota (QuotaExceeded, nothing
// written, past it).
func (s *Store) EmitEventWithinQuota(ctx context.Context, bot string, e platform.Event) error {
	return s.createEventCounted(ctx, bot, e, true, true)
}

// eventItem is the stored item of event e.
func eventItem(bot string, e platform.Event) (item, error) {
	it, err := chatItem(eventPK(bot, e.ID), skEvent, eventDoc{Event: e, StoredWorkflow: e.WorkflowID, StoredScheduled: e.ScheduledFor})
	if err != nil {
		return nil, err
	}
	it[attrTTL] = num(e.ExpiresAt().Unix())
	it[attrGSI1PK], it[attrGSI1SK] = str(botList(bot, listEvents)), str(timeKey(e.CreatedAt, e.ID))
	if e.ConversationID != "" {
		it[attrGSI2PK], it[attrGSI2SK] = str(convEvents(bot, e.ConversationID)), str(timeKey(e.CreatedAt, e.ID))
	}
	return it, nil
}

// eventDelivery is the outbox entry delivering event e.
func eventDelivery(bot string, e platform.Event) (types.TransactWriteItem, error) {
	d := newDelivery(platform.DeliverEvent, bot, e.ConversationID, e.ScheduledFor)
	d.EventID, d.MessageID = e.ID, e.MessageID
	return outboxPut(d)
}

// newEventWrites are the writes creating a new event e and its delivery,
// for a transaction that creates what the event tells of.
func newEventWrites(bot string, e platform.Event) ([]types.TransactWriteItem, error) {
	it, err := eventItem(bot, e)
	if err != nil {
		return nil, err
	}
	d, err := eventDelivery(bot, e)
	if err != nil {
		return nil, err
	}
	return []types.TransactWriteItem{putNew(it), d}, nil
}

func (s *Store) createEvent(ctx context.Context, bot string, e platform.Event, deliver bool) error {
	return s.createEventCounted(ctx, bot, e, deliver, false)
}

func (s *Store) createEventCounted(ctx context.Context, bot string, e platform.Event, deliver, quota bool) (err error) {
	defer func() {
		if err == nil {
			metrics.Events.Inc(bot)
		}
	}()
	refs := []struct {
		id, prefix, kind string
		check            func() types.TransactWriteItem
	}{
		{e.ConversationID, platform.PrefixConversation, "conversation", func() types.TransactWriteItem { return liveCheck(convPK(bot, e.ConversationID), skConv) }},
		{e.UserID, platform.PrefixUser, "user", func() types.TransactWriteItem { return liveCheck(userPK(bot, e.UserID), skUser) }},
		{e.MessageID, platform.PrefixMessage, "message", func() types.TransactWriteItem { return mustExist(msgPK(bot, e.MessageID), skMsg) }},
		{e.WorkflowID, "", "workflow", func() types.TransactWriteItem { return mustExist(workflowPK(bot, e.WorkflowID), skWorkflow) }},
	}
	it, err := eventItem(bot, e)
	if err != nil {
		return err
	}
	w := []types.TransactWriteItem{putNew(it)}
	var kinds []string
	for _, r := range refs {
		if r.id == "" || (r.id == bot && r.kind == "user") {
			continue
		}
		if r.prefix != "" && !platform.HasPrefix(r.id, r.prefix) {
			return platform.NotFound(r.kind, r.id)
		}
		w = append(w, r.check())
		kinds = append(kinds, r.kind+" "+r.id)
	}
	if deliver {
		d, err := eventDelivery(bot, e)
		if err != nil {
			return err
		}
		w = append(w, d)
	}
	count, err := s.countUsage(ctx, bot, UsageEvents, 1, quota)
	if err != nil {
		return err
	}
	counter := len(w)
	w = append(w, count)
	err = s.txWrite(ctx, w)
	if err == nil && deliver {
		s.notifyOutbox()
	}
	if i := failedAt(err); i == counter {
		return s.quotaError(UsageEvents)
	} else if i > 0 {
		return platform.Errorf(platform.ErrResourceNotFound, "%s not found", kinds[i-1])
	} else if i == 0 {
		return platform.Errorf(platform.ErrAlreadyExists, "event %q already exists", e.ID)
	}
	return err
}

// GetEvent reads an event of the bot (one GetItem).
func (s *Store) GetEvent(ctx context.Context, bot, id string) (platform.Event, error) {
	e, _, err := s.getEvent(ctx, bot, id)
	return e, err
}

func (s *Store) getEvent(ctx context.Context, bot, id string) (platform.Event, int64, error) {
	if !platform.HasPrefix(id, platform.PrefixEvent) {
		return platform.Event{}, 0, platform.NotFound("event", id)
	}
	it, err := s.get(ctx, eventPK(bot, id), skEvent)
	if err != nil {
		return platform.Event{}, 0, err
	}
	if it == nil {
		return platform.Event{}, 0, platform.NotFound("event", id)
	}
	e, ver, err := eventFrom(it)
	if err == nil && e.Expired(platform.Clock()) {
		return platform.Event{}, 0, platform.NotFound("event", id) // past its retention
	}
	return e, ver, err
}

// CancelScheduledEvent marks a scheduled event canceled (conditional on the
// version read: a concurrent change is retried, not lost).
func (s *Store) CancelScheduledEvent(ctx context.Context, bot, id string) error {
	return s.updateEvent(ctx, bot, id, func(e *platform.Event) error {
		if e.Status != platform.EventScheduled {
			return platform.NotFound("scheduled event", id)
		}
		e.Status = platform.EventCanceled
		return nil
	})
}

// updateEvent changes an event with change, conditional on the version
// read (a concurrent change is retried, not lost).
func (s *Store) updateEvent(ctx context.Context, bot, id string, change func(*platform.Event) error) error {
	return optimistic(ctx, "event "+id, func() error {
		e, ver, err := s.getEvent(ctx, bot, id)
		if err != nil {
			return err
		}
		if err := change(&e); err != nil {
			return err
		}
		d, err := marshalDoc(eventDoc{Event: e, StoredWorkflow: e.WorkflowID, StoredScheduled: e.ScheduledFor})
		if err != nil {
			return err
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &s.table,
			Key:                       key(eventPK(bot, id), skEvent),
			UpdateExpression:          aws.String("SET #doc = :doc, #ver = :next"),
			ConditionExpression:       aws.String("#ver = :ver"),
			ExpressionAttributeNames:  map[string]string{"#doc": attrDoc, "#ver": attrVer},
			ExpressionAttributeValues: item{":doc": str(d), ":next": num(ver + 1), ":ver": num(ver)},
		})
		if isConditionFailed(err) {
			return errRetry
		}
		return err
	})
}

// EventFilter selects ListEvents ("" = any).
type EventFilter struct {
	BotID          string
	Type           string
	ConversationID string
	UserID         string
	MessageID      string
	WorkflowID     string
	Status         string
}

func (f EventFilter) accepts(e platform.Event) bool {
	return (f.Type == "" || e.Type == f.Type) &&
		(f.ConversationID == "" || e.ConversationID == f.ConversationID) &&
		(f.UserID == "" || e.UserID == f.UserID) &&
		(f.MessageID == "" || e.MessageID == f.MessageID) &&
		(f.WorkflowID == "" || e.WorkflowID == f.WorkflowID) &&
		(f.Status == "" || e.Status == f.Status)
}

// ListEvents lists events, most recent first: a conversation's (GSI2) or the
// bot's (GSI1); the other filters apply to the events read.
func (s *Store) ListEvents(ctx context.Context, f EventFilter, p Page) ([]platform.Event, map[string]string, error) {
	sp := span{index: GSI1, pk: botList(f.BotID, listEvents), desc: true}
	if f.ConversationID != "" {
		sp = span{index: GSI2, pk: convEvents(f.BotID, f.ConversationID), desc: true}
	}
	now := platform.Clock()
	decode := func(it item) (platform.Event, bool, error) {
		e, _, err := eventFrom(it)
		return e, err == nil && !e.Expired(now), err // expired: past its retention
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, keep(decode, f.accepts))
	return out, startOf(next), err
}

// DeleteExpiredEvents deletes, among the bot's limit oldest events, those
// past their retention, and returns how many it deleted: one Query of the
// bot's event list (gsi1, oldest first) and one BatchWriteItem. In AWS
// DynamoDB's TTL deletes them; the local platform, whose embedded DynamoDB
// deletes nothing, calls this at each recurring-event firing so that the
// events firings create do not accumulate past their retention.
func (s *Store) DeleteExpiredEvents(ctx context.Context, bot string, limit int32) (int, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrGSI1PK},
		ExpressionAttributeValues: item{":pk": str(botList(bot, listEvents))},
		ScanIndexForward:          aws.Bool(true),
		Limit:                     aws.Int32(limit),
	})
	if err != nil {
		return 0, err
	}
	now := platform.Clock()
	var keys []item
	for _, it := range out.Items {
		// An expired event stays expired (its times never change), so
		// deleting it needs no condition.
		if e, _, err := eventFrom(it); err == nil && e.Expired(now) {
			keys = append(keys, key(getS(it, attrPK), getS(it, attrSK)))
		}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	return len(keys), s.batchDelete(ctx, keys)
}
