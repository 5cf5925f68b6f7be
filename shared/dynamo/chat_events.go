package dynamo

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

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
	// Delivery is the id of the outbox entry that delivers the event,
	// written with it: its status is then derived when read rather than
	// written once more when it is delivered (docs/data-model.md, "Items
	// per message"). Stored pending, it is pending while that entry is
	// there and processed once it is gone; the dispatcher writes the other
	// outcomes (failed, ignored) before it removes the entry.
	Delivery string `json:"_dlv,omitempty"`
	// FromMessage marks a message_created event stored without a copy of
	// its message: its payload ({"message": ...}) is the message record's,
	// read with it (derivePayloads), and written into the event before the
	// message changes or goes (keepMessagePayload). The event's item and
	// its two list entries stay under 1 KB (docs/data-model.md, "Items per
	// message").
	FromMessage bool `json:"_fromMsg,omitempty"`
	// derived: the event has no item; it was made from its message
	// (messageEventDoc).
	derived bool
}

// messageEventDoc is the message_created event of a user's message rec
// whose event is derived from it (attrHasEvent holds its delivery): as
// its creation would have stored it, pending (its status then derived from
// the delivery), with the message as its payload.
func messageEventDoc(rec msgRecord) (eventDoc, error) {
	e := messageEvent(rec.Message)
	p, err := json.Marshal(map[string]any{"message": rec.Message})
	if err != nil {
		return eventDoc{}, err
	}
	e.Payload = p
	return eventDoc{Event: e, Delivery: rec.dlv, FromMessage: true, derived: true}, nil
}

// storedEventItem is the item of event d; listed: with its entries in the
// bot's events list (gsi1) and its conversation's (gsi2), which an event
// derived from its message has none of while the message is there (it is
// listed through the message).
func storedEventItem(bot string, d eventDoc, listed bool) (item, error) {
	d.StoredWorkflow, d.StoredScheduled = d.WorkflowID, d.ScheduledFor
	it, err := chatItem(eventPK(bot, d.ID), skEvent, d)
	if err != nil {
		return nil, err
	}
	it[attrTTL] = num(d.ExpiresAt().Unix())
	if listed {
		it[attrGSI1PK], it[attrGSI1SK] = str(listShard(bot, listEvents, d.ID)), str(timeKey(d.CreatedAt, d.ID))
		if d.ConversationID != "" {
			it[attrGSI2PK], it[attrGSI2SK] = str(convEvents(bot, d.ConversationID)), str(timeKey(d.CreatedAt, d.ID))
		}
	}
	return it, nil
}

// noPayload: a payload stored as none (null once read back).
func noPayload(p json.RawMessage) bool { return len(p) == 0 || string(p) == "null" }

// messageEventID is the id of the message_created event of a user's
// message: the message's own, so that the event is found from it.
func messageEventID(messageID string) string {
	return platform.PrefixEvent + strings.TrimPrefix(messageID, platform.PrefixMessage)
}

// derivePayloads fills the payload of message_created events stored
// without their message (eventDoc.FromMessage) from the message records:
// one GetItem, or one BatchGetItem per 100, strongly consistent; nothing
// for other events. A message gone meanwhile (a racing deletion) leaves
// the payload {"message": null}.
func (s *Store) derivePayloads(ctx context.Context, bot string, docs []*eventDoc) error {
	var keys []item
	for _, d := range docs {
		if d != nil && d.FromMessage && noPayload(d.Payload) {
			keys = append(keys, key(msgPK(bot, d.MessageID), skMsg))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	var got map[string]item
	if len(keys) == 1 {
		it, err := s.get(ctx, getS(keys[0], attrPK), skMsg)
		if err != nil {
			return err
		}
		got = map[string]item{}
		if it != nil {
			got[keyID(getS(keys[0], attrPK), skMsg)] = it
		}
	} else {
		var err error
		if got, err = s.getMany(ctx, keys); err != nil {
			return err
		}
	}
	for _, d := range docs {
		if d == nil || !d.FromMessage || !noPayload(d.Payload) {
			continue
		}
		var m *platform.Message
		if it, ok := got[keyID(msgPK(bot, d.MessageID), skMsg)]; ok {
			rec, _, err := msgFrom(it)
			if err != nil {
				return err
			}
			m = &rec.Message
		}
		p, err := json.Marshal(map[string]any{"message": m})
		if err != nil {
			return err
		}
		d.Payload = p
	}
	return nil
}

// keepMessagePayload is the write, for the transaction that changes or
// deletes message m (read at version ver), that stores m as it is into
// its message_created event when that event derives its payload from m,
// and, when m is deleted and its event listed in its conversation through
// m's copy (attrHasEvent), gives the event its own entry in the
// conversation's events list (gsi2), the copy going (one GetItem; no
// write when there is no such event, or nothing to change). The event is
// conditional on its version read.
//
// An event derived from m (no item: rec.dlv) gets its item, written as
// created with m as its payload (new: a racing write of it retries the
// transaction), listed in the bot's and the conversation's events lists
// when m is deleted (no longer listed through m).
func (s *Store) keepMessagePayload(ctx context.Context, bot string, rec msgRecord, deleting bool) ([]types.TransactWriteItem, error) {
	m := rec.Message
	if m.UserID == bot {
		return nil, nil
	}
	id := messageEventID(m.ID)
	it, err := s.get(ctx, eventPK(bot, id), skEvent)
	if err != nil {
		return nil, err
	}
	if it == nil {
		if rec.dlv == "" {
			return nil, nil
		}
		d, err := messageEventDoc(rec)
		if err != nil {
			return nil, err
		}
		d.FromMessage = false
		ev, err := storedEventItem(bot, d, deleting)
		if err != nil {
			return nil, err
		}
		return []types.TransactWriteItem{putNew(ev)}, nil
	}
	d, ver, err := eventRecord(it)
	if err != nil || d.MessageID != m.ID {
		return nil, err
	}
	_, listed := it[attrGSI2PK]
	relist := deleting && rec.ev && !listed && d.ConversationID != ""
	_, inBotList := it[attrGSI1PK]
	relistBot := deleting && rec.dlv != "" && !inBotList
	keep := d.FromMessage && noPayload(d.Payload)
	if !keep && !relist && !relistBot {
		return nil, nil
	}
	set := "SET #ver = :next"
	names := map[string]string{"#ver": attrVer}
	vals := item{":next": num(ver + 1), ":ver": num(ver)}
	if keep {
		if d.Payload, err = json.Marshal(map[string]any{"message": m}); err != nil {
			return nil, err
		}
		d.FromMessage = false
		doc, err := marshalDoc(d)
		if err != nil {
			return nil, err
		}
		set += ", #doc = :doc"
		names["#doc"], vals[":doc"] = attrDoc, str(doc)
	}
	if relist {
		set += ", #g2pk = :g2pk, #g2sk = :g2sk"
		names["#g2pk"], names["#g2sk"] = attrGSI2PK, attrGSI2SK
		vals[":g2pk"], vals[":g2sk"] = str(convEvents(bot, d.ConversationID)), str(timeKey(d.CreatedAt, d.ID))
	}
	if relistBot {
		set += ", #g1pk = :g1pk, #g1sk = :g1sk"
		names["#g1pk"], names["#g1sk"] = attrGSI1PK, attrGSI1SK
		vals[":g1pk"], vals[":g1sk"] = str(listShard(bot, listEvents, d.ID)), str(timeKey(d.CreatedAt, d.ID))
	}
	return []types.TransactWriteItem{{Update: &types.Update{
		Key:                       key(eventPK(bot, id), skEvent),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String("#ver = :ver"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}}}, nil
}

func eventFrom(it item) (platform.Event, int64, error) {
	d, ver, err := eventRecord(it)
	return d.Event, ver, err
}

// eventRecord decodes a stored event with what its wire shape does not
// carry.
func eventRecord(it item) (eventDoc, int64, error) {
	var d eventDoc
	if err := decodeDoc(it, &d); err != nil {
		return d, 0, err
	}
	d.Event.WorkflowID, d.Event.ScheduledFor = d.StoredWorkflow, d.StoredScheduled
	return d, getN(it, attrVer), nil
}

// eventShard is the outbox entry delivering an event of the bot (whose
// status is derived from it).
func eventEntry(bot string, d eventDoc) item {
	return key(Shard(platform.Delivery{ID: d.Delivery, BotID: bot, ConversationID: d.ConversationID}), d.Delivery)
}

// deriveStatus settles the status of events stored pending whose delivery
// settles it (eventDoc.Delivery): pending while the entry is in the
// outbox; once it is gone, the event is read again (strongly consistent)
// and, still stored pending, was processed, else it is what the
// dispatcher wrote before removing the entry. Reads: one BatchGetItem of
// the entries (one GetItem for one), and one of the events whose entry is
// gone; nothing for events already settled.
func (s *Store) deriveStatus(ctx context.Context, bot string, docs []*eventDoc) error {
	var entries []item
	for _, d := range docs {
		if d != nil && d.Status == platform.EventPending && d.Delivery != "" {
			entries = append(entries, eventEntry(bot, *d))
		}
	}
	if len(entries) == 0 {
		return nil
	}
	queued, err := s.exist(ctx, entries)
	if err != nil {
		return err
	}
	var again []item
	for _, d := range docs {
		if d != nil && d.Status == platform.EventPending && d.Delivery != "" {
			k := eventEntry(bot, *d)
			if !queued[keyID(getS(k, attrPK), getS(k, attrSK))] {
				again = append(again, key(eventPK(bot, d.ID), skEvent))
			}
		}
	}
	now, err := s.getMany(ctx, again)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if d == nil || d.Status != platform.EventPending || d.Delivery == "" {
			continue
		}
		k := eventEntry(bot, *d)
		if queued[keyID(getS(k, attrPK), getS(k, attrSK))] {
			continue
		}
		it, ok := now[keyID(eventPK(bot, d.ID), skEvent)]
		if !ok && d.derived {
			d.Status = platform.EventProcessed // no item: its delivery wrote no other outcome
			continue
		}
		if !ok {
			continue // gone meanwhile (its conversation deleted)
		}
		fresh, _, err := eventRecord(it)
		if err != nil {
			return err
		}
		if fresh.Status == platform.EventPending {
			fresh.Status = platform.EventProcessed
		}
		d.Status, d.FailureReason = fresh.Status, fresh.FailureReason
	}
	return nil
}

// exist tells which of the keys name an item (strongly consistent, keys
// only: one GetItem for one key, else BatchGetItem), by keyID.
func (s *Store) exist(ctx context.Context, keys []item) (map[string]bool, error) {
	out := map[string]bool{}
	if len(keys) == 1 {
		res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: keys[0], ConsistentRead: aws.Bool(true),
			ProjectionExpression: aws.String("pk, sk")})
		if err != nil {
			return nil, err
		}
		if res.Item != nil {
			out[keyID(getS(keys[0], attrPK), getS(keys[0], attrSK))] = true
		}
		return out, nil
	}
	got, err := s.getMany(ctx, keys)
	for k := range got {
		out[k] = true
	}
	return out, err
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

// eventItem is the stored item of event e; dlv is the id of the outbox
// entry delivering it ("" for none).
func eventItem(bot string, e platform.Event, dlv string) (item, error) {
	// A message_created event without a payload takes its message's
	// (newEventWrites' caller, messageDeliveries, leaves it out).
	fromMsg := e.Type == platform.EventMessageCreated && e.Payload == nil && e.MessageID != ""
	it, err := chatItem(eventPK(bot, e.ID), skEvent, eventDoc{Event: e, StoredWorkflow: e.WorkflowID, StoredScheduled: e.ScheduledFor, Delivery: dlv, FromMessage: fromMsg})
	if err != nil {
		return nil, err
	}
	it[attrTTL] = num(e.ExpiresAt().Unix())
	it[attrGSI1PK], it[attrGSI1SK] = str(listShard(bot, listEvents, e.ID)), str(timeKey(e.CreatedAt, e.ID))
	// A user's message_created event lists in its conversation through its
	// message's copy (attrHasEvent, listConvEvents): no entry of its own
	// while the message is there (deleteMessage gives it one).
	if e.ConversationID != "" && !fromMsg {
		it[attrGSI2PK], it[attrGSI2SK] = str(convEvents(bot, e.ConversationID)), str(timeKey(e.CreatedAt, e.ID))
	}
	return it, nil
}

// eventDelivery is the outbox entry delivering event e, and its id. Its
// removal settles the event's status (processed) unless the dispatcher
// wrote another.
func eventDelivery(bot string, e platform.Event) (types.TransactWriteItem, string, error) {
	d := newDelivery(platform.DeliverEvent, bot, e.ConversationID, e.ScheduledFor)
	// A scheduled event is written processed when delivered (its stored
	// status is not pending, which derivation starts from).
	d.EventID, d.MessageID, d.Settles = e.ID, e.MessageID, e.Status == platform.EventPending
	if e.Type == platform.EventMessageCreated {
		d.EventType = e.Type
	}
	w, err := outboxPut(d)
	if !d.Settles {
		return w, "", err
	}
	return w, d.ID, err
}

// newEventWrites are the writes creating a new event e and its delivery,
// for a transaction that creates what the event tells of.
func newEventWrites(bot string, e platform.Event) ([]types.TransactWriteItem, error) {
	d, dlv, err := eventDelivery(bot, e)
	if err != nil {
		return nil, err
	}
	it, err := eventItem(bot, e, dlv)
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
	var (
		d   types.TransactWriteItem
		dlv string
	)
	if deliver {
		var err error
		if d, dlv, err = eventDelivery(bot, e); err != nil {
			return err
		}
	}
	it, err := eventItem(bot, e, dlv)
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

// GetEvent reads an event of the bot (one GetItem), its status as stored
// (the dispatcher's read: a pending event whose delivery settles it reads
// pending).
func (s *Store) GetEvent(ctx context.Context, bot, id string) (platform.Event, error) {
	d, _, err := s.getEvent(ctx, bot, id)
	if err == nil {
		err = s.derivePayloads(ctx, bot, []*eventDoc{&d})
	}
	return d.Event, err
}

// ReadEvent reads an event of the bot as the API answers it: its status
// derived from its delivery while stored pending (one GetItem, and then
// one for its outbox entry and, that gone, one more of the event).
func (s *Store) ReadEvent(ctx context.Context, bot, id string) (platform.Event, error) {
	d, _, err := s.getEvent(ctx, bot, id)
	if err == nil {
		err = s.deriveStatus(ctx, bot, []*eventDoc{&d})
	}
	if err == nil {
		err = s.derivePayloads(ctx, bot, []*eventDoc{&d})
	}
	return d.Event, err
}

func (s *Store) getEvent(ctx context.Context, bot, id string) (eventDoc, int64, error) {
	if !platform.HasPrefix(id, platform.PrefixEvent) {
		return eventDoc{}, 0, platform.NotFound("event", id)
	}
	it, err := s.get(ctx, eventPK(bot, id), skEvent)
	if err != nil {
		return eventDoc{}, 0, err
	}
	var (
		d   eventDoc
		ver int64
	)
	if it == nil {
		// A user's message_created event: derived from its message
		// (one more GetItem).
		rec, err := s.get(ctx, msgPK(bot, platform.PrefixMessage+strings.TrimPrefix(id, platform.PrefixEvent)), skMsg)
		if err != nil {
			return eventDoc{}, 0, err
		}
		if rec == nil {
			return eventDoc{}, 0, platform.NotFound("event", id)
		}
		m, _, err := msgFrom(rec)
		if err != nil {
			return eventDoc{}, 0, err
		}
		if m.dlv == "" || m.UserID == bot {
			return eventDoc{}, 0, platform.NotFound("event", id)
		}
		d, err = messageEventDoc(m)
	} else {
		d, ver, err = eventRecord(it)
	}
	if err == nil && d.Expired(platform.Clock()) {
		return eventDoc{}, 0, platform.NotFound("event", id) // past its retention
	}
	return d, ver, err
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
		rec, ver, err := s.getEvent(ctx, bot, id)
		if err != nil {
			return err
		}
		e := rec.Event
		if err := change(&e); err != nil {
			return err
		}
		if rec.derived {
			// Its first item (new), listed through its message as
			// before, the payload still the message's; the message
			// required there (gone, with its conversation: no item left
			// behind), and its conversation live: once marked for
			// deletion, the deletion's sweep deletes the conversation's
			// events, then its messages, and an item made in between
			// would outlive both. The event or message condition
			// failing is retried: the event written meanwhile
			// (deleteMessage, updateMessage) is changed, a message gone
			// is a 404; the conversation's is a 404 at once.
			e.Payload = nil
			it, err := storedEventItem(bot, eventDoc{Event: e, Delivery: rec.Delivery, FromMessage: true}, false)
			if err != nil {
				return err
			}
			w := []types.TransactWriteItem{putNew(it), mustExist(msgPK(bot, e.MessageID), skMsg)}
			if e.ConversationID != "" {
				w = append(w, liveCheck(convPK(bot, e.ConversationID), skConv))
			}
			err = s.txWrite(ctx, w)
			switch at := failedAt(err); {
			case at == 2:
				return platform.NotFound("event", id)
			case at >= 0:
				return errRetry
			}
			return err
		}
		d, err := marshalDoc(eventDoc{Event: e, StoredWorkflow: e.WorkflowID, StoredScheduled: e.ScheduledFor, Delivery: rec.Delivery, FromMessage: rec.FromMessage})
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
// bot's (GSI1), merged with the message_created events of users' messages
// listed through their messages (listMergedEvents); the other filters
// apply to the events read.
func (s *Store) ListEvents(ctx context.Context, f EventFilter, p Page) ([]platform.Event, map[string]string, error) {
	now := platform.Clock()
	// Each batch read: statuses derived (one or two BatchGetItem), then
	// filtered (a status filter sees derived ones), payloads derived.
	load := func(docs []*eventDoc) ([]*platform.Event, error) {
		for i, d := range docs {
			if d != nil && d.Expired(now) { // expired: past its retention
				docs[i] = nil
			}
		}
		if err := s.deriveStatus(ctx, f.BotID, docs); err != nil {
			return nil, err
		}
		out := make([]*platform.Event, len(docs))
		var kept []*eventDoc
		for _, d := range docs {
			if d != nil && f.accepts(d.Event) {
				kept = append(kept, d)
			}
		}
		if err := s.derivePayloads(ctx, f.BotID, kept); err != nil {
			return nil, err
		}
		for i, d := range docs {
			if d != nil && f.accepts(d.Event) {
				out[i] = &d.Event
			}
		}
		return out, nil
	}
	// The events of users' messages are read through the messages, back
	// to the retention's start (older ones are expired).
	since := platform.FormatTime(now.Add(-platform.EventRetention))
	var ml msgEvents
	switch {
	case f.ConversationID != "":
		ml = msgEvents{
			entries: span{index: GSI2, pk: convEvents(f.BotID, f.ConversationID), desc: true},
			msgs:    span{pk: convPK(f.BotID, f.ConversationID), lo: skMsgCopy + since, hi: skMsgCopy + "~", desc: true},
			pos:     copyEventKey, sk: copySK,
		}
	case (f.Type != "" && f.Type != platform.EventMessageCreated) || f.WorkflowID != "":
		// None of the events listed through messages can pass.
		sp := listSpan(GSI1, f.BotID, listEvents, true)
		out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, func(items []item) ([]*platform.Event, error) {
			docs, err := eventDocs(items)
			if err != nil {
				return nil, err
			}
			return load(docs)
		})
		return out, startOf(next), err
	default:
		msgs := listSpan(GSI1, f.BotID, listMsgs, true)
		msgs.lo = since
		ml = msgEvents{
			entries: listSpan(GSI1, f.BotID, listEvents, true), msgs: msgs,
			pos: msgEventKey, sk: msgListSK, derivedOnly: true,
		}
	}
	ml.want = func(m platform.Message) bool {
		return (f.ConversationID == "" || m.ConversationID == f.ConversationID) &&
			(f.UserID == "" || m.UserID == f.UserID) &&
			(f.MessageID == "" || m.ID == f.MessageID)
	}
	out, next, err := s.listMergedEvents(ctx, f.BotID, ml, positionOf(p), int(p.Limit), load)
	return out, startOf(next), err
}

// eventDocs decodes stored events (nil stays nil).
func eventDocs(items []item) ([]*eventDoc, error) {
	docs := make([]*eventDoc, len(items))
	for i, it := range items {
		if it == nil {
			continue
		}
		d, _, err := eventRecord(it)
		if err != nil {
			return nil, err
		}
		docs[i] = &d
	}
	return docs, nil
}

// copyEventKey is the position in the conversation's events list (gsi2's
// sort key, <createdAt>#<event id>) of the message_created event of the
// message whose copy has sort key sk (MSG#<createdAt>#<message id>), and
// copySK the reverse: the two orders agree (the event's id is the
// message's with the other prefix).
func copyEventKey(sk string) string {
	return msgEventKey(strings.TrimPrefix(sk, skMsgCopy))
}

func copySK(pos string) string {
	if pos == "" {
		return ""
	}
	return skMsgCopy + msgListSK(pos)
}

// msgEventKey is the position in the bot's events list (gsi1's sort key,
// <createdAt>#<event id>) of the message_created event of the message at
// sk in the bot's messages list (<createdAt>#<message id>), and msgListSK
// the reverse.
func msgEventKey(sk string) string {
	return strings.Replace(sk, "#"+platform.PrefixMessage, "#"+platform.PrefixEvent, 1)
}

func msgListSK(pos string) string {
	return strings.Replace(pos, "#"+platform.PrefixEvent, "#"+platform.PrefixMessage, 1)
}

// msgEvents is a list of events merged with the events listed through
// messages (listMergedEvents).
type msgEvents struct {
	entries span // the events with an entry of their own
	msgs    span // the messages (their copies, or their records)
	// pos: a message's position in the events list from its sort key in
	// msgs; sk the reverse.
	pos, sk func(string) string
	// derivedOnly: only messages whose event is derived (attrHasEvent a
	// string: the bot's list; the others' events have entries there).
	derivedOnly bool
	want        func(platform.Message) bool // nil: every message
}

// listMergedEvents lists events, newest first: those with an entry in
// the list (ml.entries) merged with the message_created events of users'
// messages listed through the messages (ml.msgs, marked attrHasEvent):
// their items read by key in one BatchGetItem, an event with none derived
// from its message (messageEventDoc). Both are read after the same
// position; items are taken down to where a source with more stopped
// (past it, that source's next could come first). An event listed by both
// (an entry written while its message was there: an import) is taken
// once.
func (s *Store) listMergedEvents(ctx context.Context, bot string, ml msgEvents, after string, size int, load func([]*eventDoc) ([]*platform.Event, error)) ([]platform.Event, string, error) {
	entries, msgs := ml.entries, ml.msgs
	out := make([]platform.Event, 0, size)
	var pos []string
	cursor, batch, read := after, size+1, 0
	for {
		n := min(batch, maxBatch)
		es, moreE, err := s.read(ctx, entries, cursor, n)
		if err != nil {
			return nil, "", err
		}
		ms, moreM, err := s.read(ctx, msgs, ml.sk(cursor), n)
		if err != nil {
			return nil, "", err
		}
		read += len(es) + len(ms)
		frontier := "" // items at or after it (in the list's order) are complete
		if moreE && len(es) > 0 {
			frontier = entries.sortKey(es[len(es)-1])
		}
		if moreM && len(ms) > 0 {
			frontier = max(frontier, ml.pos(msgs.sortKey(ms[len(ms)-1])))
		}
		type at struct {
			pos   string
			entry bool
			doc   *eventDoc // an entry's event (projecting all), or the derived one
			key   item      // the event's item, read by key
		}
		var merged []at
		for _, it := range es {
			d, _, err := eventRecord(it)
			if err != nil {
				return nil, "", err
			}
			merged = append(merged, at{pos: entries.sortKey(it), entry: true, doc: &d})
		}
		var keys []item
		for _, it := range ms {
			ev, marked := it[attrHasEvent]
			if !marked {
				continue
			}
			_, derived := ev.(*types.AttributeValueMemberS)
			if ml.derivedOnly && !derived {
				continue
			}
			rec, _, err := msgFrom(it)
			if err != nil {
				return nil, "", err
			}
			if ml.want != nil && !ml.want(rec.Message) {
				continue
			}
			a := at{pos: ml.pos(msgs.sortKey(it)), key: key(eventPK(bot, messageEventID(rec.ID)), skEvent)}
			if derived {
				d, err := messageEventDoc(rec)
				if err != nil {
					return nil, "", err
				}
				a.doc = &d
			}
			keys = append(keys, a.key)
			merged = append(merged, a)
		}
		sort.SliceStable(merged, func(i, j int) bool {
			if merged[i].pos != merged[j].pos {
				return merged[i].pos > merged[j].pos
			}
			return merged[i].entry && !merged[j].entry
		})
		for len(merged) > 0 && merged[len(merged)-1].pos < frontier {
			merged = merged[:len(merged)-1]
		}
		got, err := s.getMany(ctx, keys)
		if err != nil {
			return nil, "", err
		}
		var kept []at
		for i, m := range merged {
			if i > 0 && m.pos == merged[i-1].pos {
				continue // listed by its entry
			}
			if m.key != nil {
				if it, ok := got[keyID(getS(m.key, attrPK), getS(m.key, attrSK))]; ok {
					d, _, err := eventRecord(it) // its item: its status or payload written
					if err != nil {
						return nil, "", err
					}
					if m.doc != nil && d.FromMessage && noPayload(d.Payload) {
						d.Payload = m.doc.Payload // its message's, read here already
					}
					m.doc = &d
				}
			}
			kept = append(kept, m) // doc nil: gone (expired, deleted)
		}
		docs := make([]*eventDoc, len(kept))
		for i, m := range kept {
			docs[i] = m.doc
		}
		vals, err := load(docs)
		if err != nil {
			return nil, "", err
		}
		for i, m := range kept {
			cursor = m.pos
			if vals[i] == nil {
				continue
			}
			out, pos = append(out, *vals[i]), append(pos, m.pos)
			if len(out) > size {
				return out[:size], pos[size-1], nil
			}
		}
		if !moreE && !moreM {
			return out, "", nil
		}
		if frontier == "" || frontier == cursor {
			return out, cursor, nil // no progress (cannot happen with batches of 2 or more)
		}
		cursor = frontier
		if read >= maxPageReads {
			return out, cursor, nil
		}
		batch = max(size+1-len(out), 2*batch)
	}
}

// DeleteExpiredEvents deletes, among the bot's limit oldest events, those
// past their retention, and returns how many it deleted: one Query of the
// bot's event list (gsi1, oldest first; one per key of the list, merged)
// and one BatchWriteItem. In AWS
// DynamoDB's TTL deletes them; the local platform, whose embedded DynamoDB
// deletes nothing, calls this at each recurring-event firing so that the
// events firings create do not accumulate past their retention.
func (s *Store) DeleteExpiredEvents(ctx context.Context, bot string, limit int32) (int, error) {
	items, _, err := s.read(ctx, listSpan(GSI1, bot, listEvents, false), "", int(limit))
	if err != nil {
		return 0, err
	}
	now := platform.Clock()
	var keys []item
	for _, it := range items {
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
