package dynamo

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

const (
	listMsgs = "MSGS"
	// skMsgIdx + message id + "#" + index name: a message's tag index entry,
	// kept in its conversation's partition so deleting the conversation
	// finds it.
	skMsgIdx = "MIDX#"
)

// A message is stored twice, in one transaction: by id (MSG#<bot>#<id>, for
// getMessage and the bot's list of messages) and in its conversation's
// partition (for the conversation's list, strongly consistent, and for its
// deletion).

type msgRecord struct {
	platform.Message
	ver int64
	ev  bool // attrHasEvent
	// dlv: the outbox entry delivering its message_created event when the
	// event is derived from the message (attrHasEvent a string).
	dlv string
}

func msgFrom(it item) (msgRecord, bool, error) {
	var m msgRecord
	if err := decodeDoc(it, &m.Message); err != nil {
		return m, false, err
	}
	if m.Tags == nil {
		m.Tags = map[string]string{}
	}
	m.ver = getN(it, attrVer)
	_, m.ev = it[attrHasEvent]
	m.dlv = getS(it, attrHasEvent)
	return m, true, nil
}

// markHasEvent marks the record and copy msgWrites made (w[0], w[1]) as a
// message whose message_created event is derived from it, delivered by
// the outbox entry dlv (attrHasEvent).
func markHasEvent(w []types.TransactWriteItem, dlv string) {
	w[0].Put.Item[attrHasEvent] = str(dlv)
	w[1].Put.Item[attrHasEvent] = str(dlv)
}

// hasEventAttr is the attrHasEvent value a rewritten copy of rec keeps.
func (rec msgRecord) hasEventAttr() types.AttributeValue {
	if rec.dlv != "" {
		return str(rec.dlv)
	}
	return num(1)
}

// markPrepaid marks the outbox entry among a message's writes w as
// pre-paid (platform.Delivery.Prepaid): its invocation is counted by the
// message's own usage write quota (messageUsage), one write fewer per
// delivery than the dispatcher's UpdateItem. The mark is the month quota
// counts in, which a refund gives back to (invocationRefund): the entry's
// creation time is read from the clock before the usage write's month,
// and the month may turn in between.
func markPrepaid(w []types.TransactWriteItem, quota types.TransactWriteItem) {
	period := usagePeriodOf(getS(quota.Update.Key, attrSK))
	for _, x := range w {
		if x.Put != nil && strings.HasPrefix(getS(x.Put.Item, attrPK), pkOutboxPrefix) {
			x.Put.Item[attrPrepaid] = prepaidMark(period)
		}
	}
}

func msgCopySK(m platform.Message) string { return skMsgCopy + timeKey(m.CreatedAt, m.ID) }

func msgIdxSK(id, k string) string { return skMsgIdx + id + "#" + idxTag(k) }

func msgIndexEntry(bot string, m platform.Message, k string) item {
	v := m.Tags[k]
	it := key(convPK(bot, m.ConversationID), msgIdxSK(m.ID, k))
	it[attrValue], it[attrObject], it[attrConvID] = str(v), str(m.ID), str(m.ConversationID)
	it[attrGSI1PK] = str(idxGSI(bot, platform.TagsOfMessage, idxTag(k)))
	it[attrGSI1SK] = str(idxKey(v, m.CreatedAt, m.ID))
	return it
}

// msgWrites create message m: the record (new), its copy and its tag index
// entries.
func msgWrites(bot string, m platform.Message) ([]types.TransactWriteItem, error) {
	it, err := chatItem(msgPK(bot, m.ID), skMsg, m)
	if err != nil {
		return nil, err
	}
	it[attrConvID] = str(m.ConversationID)
	it[attrGSI1PK], it[attrGSI1SK] = str(listShard(bot, listMsgs, m.ID)), str(timeKey(m.CreatedAt, m.ID))
	cp := key(convPK(bot, m.ConversationID), msgCopySK(m))
	cp[attrDoc], cp[attrObject] = it[attrDoc], str(m.ID)
	w := []types.TransactWriteItem{putNew(it), put(cp)}
	for _, k := range sortedKeys(m.Tags) {
		w = append(w, put(msgIndexEntry(bot, m, k)))
	}
	return w, nil
}

// countMessage moves a conversation's message counter by delta, the
// conversation live: a new message is refused once its conversation is
// marked for deletion, and so is deleteMessage, whose write gives the
// message's event an item (keepMessagePayload) that the deletion's sweep,
// past the conversation's events already, would leave behind.
func countMessage(bot, convID string, delta int64) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(convPK(bot, convID), skConv),
		UpdateExpression:          aws.String("ADD #n :d"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND attribute_not_exists(#del)"),
		ExpressionAttributeNames:  map[string]string{"#n": attrMsgs, "#del": attrDeleting},
		ExpressionAttributeValues: item{":d": num(delta)},
	}}
}

// countNew counts a new message on its conversation's counter item
// (skConvCount), which must exist without the deletion mark: one item of
// no index. A conversation older than counter items has none: the write
// then fails at it, and createMessage counts on the record (countMessage).
func countNew(bot, convID string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(convPK(bot, convID), skConvCount),
		UpdateExpression:          aws.String("ADD #n :d"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND attribute_not_exists(#del)"),
		ExpressionAttributeNames:  map[string]string{"#n": attrMsgs, "#del": attrDeleting},
		ExpressionAttributeValues: item{":d": num(1)},
	}}
}

// checkAuthor requires the message's author to be a live user of the bot
// (the bot itself, userId = bot id, writes outgoing messages and needs
// none), with one strongly consistent GetItem before the message's
// transaction rather than a condition check inside it: a condition check is
// billed as a write, twice in a transaction (2 write units), the read is 1
// read unit. Checked before rather than with the write, a deleteUser
// committing between the two lets the message in, as if it had been written
// just before the deletion: deleting a user leaves its messages (chat.md),
// so the result is the one a message written first would leave, and a
// message written after deleteUser answered is still refused.
func (s *Store) checkAuthor(ctx context.Context, bot, userID string) error {
	if userID == bot {
		return nil
	}
	_, err := s.getUser(ctx, bot, userID)
	return err
}

// CreateMessage stores a new message and counts it in its conversation, in
// one transaction: the counter is exact under any concurrency.
func (s *Store) CreateMessage(ctx context.Context, bot string, m platform.Message) error {
	err := s.createMessage(ctx, bot, m, true)
	if err == nil {
		metrics.Messages.Inc(bot)
		if m.UserID != bot {
			metrics.Events.Inc(bot) // its message_created event (messageDeliveries)
		}
	}
	return err
}

// ImportMessage stores a message as CreateMessage does, without its runtime
// deliveries (importMessages: past messages reach no bot or integration).
func (s *Store) ImportMessage(ctx context.Context, bot string, m platform.Message) error {
	return s.createMessage(ctx, bot, m, false)
}

// CheckMessageImport checks an import before its first write
// (importMessages: bad input writes nothing): every message is built as its
// write builds it, with the same size limit (marshalDoc), and the bot's
// messages quota has room for all of them (each may create one). The
// import's messages are then written one transaction each (up to 100
// messages of several items each cannot be one transaction of at most 100
// items), so what remains is a crash midway, or concurrent writes taking
// the quota's room between this check and the last write (each write still
// enforces the quota exactly): the first messages are then kept.
func (s *Store) CheckMessageImport(ctx context.Context, bot string, ms []platform.Message) error {
	for _, m := range ms {
		if err := s.checkAuthorIDs(bot, m); err != nil {
			return err
		}
		if _, err := msgWrites(bot, m); err != nil {
			return err
		}
	}
	return s.usageRoom(ctx, bot, UsageMessages, int64(len(ms)))
}

func (s *Store) createMessage(ctx context.Context, bot string, m platform.Message, deliver bool) error {
	if err := s.checkAuthorIDs(bot, m); err != nil {
		return err
	}
	w, err := msgWrites(bot, m)
	if err != nil {
		return err
	}
	if err := s.checkAuthor(ctx, bot, m.UserID); err != nil {
		return err
	}
	counter := len(w)
	w = append(w, countNew(bot, m.ConversationID))
	if deliver {
		rt, dlv, err := messageDeliveries(bot, m)
		if err != nil {
			return err
		}
		w = append(w, rt...)
		if dlv != "" {
			markHasEvent(w, dlv)
		}
		if err := carryMessage(rt, m); err != nil { // message_carry.go
			return err
		}
	}
	prepaid := deliver && m.UserID != bot && s.Prepays()
	quota, err := s.messageUsage(ctx, bot, m, deliver, prepaid)
	if err != nil {
		return err
	}
	if prepaid {
		markPrepaid(w, quota)
	}
	w = append(w, quota)
	ctx = guardedByConversation(ctx) // its counter's condition (usage.go)
	err = s.txWrite(ctx, w)
	if failedAt(err) == counter {
		// No counter item: a conversation from before them (counted on
		// its record), or one missing or being deleted (its record says).
		if _, cerr := s.getConv(ctx, bot, m.ConversationID); cerr != nil {
			if platform.TypeOf(cerr) == platform.ErrResourceNotFound {
				return platform.NotFound("conversation", m.ConversationID)
			}
			return cerr
		}
		w[counter] = countMessage(bot, m.ConversationID, 1)
		err = s.txWrite(ctx, w)
	}
	if err == nil {
		s.notifyOutbox()
	}
	if failedAt(err) == len(w)-1 {
		return s.quotaError(UsageMessages)
	}
	return msgWriteError(err, m, counter)
}

// messageDeliveries is what the runtime does with a new message, written in
// the message's transaction: an incoming message (a user's) becomes a
// message_created event for the bot; an outgoing one (the bot's) goes to
// the integration of its conversation. The bot's own messages never reach
// the bot. A user's message_created event gets no item: it is derived
// from the message when read (messageEventDoc); dlv is the id of the
// outbox entry delivering it, which the caller marks the message with
// (markHasEvent; "" for the bot's messages).
func messageDeliveries(bot string, m platform.Message) (w []types.TransactWriteItem, dlv string, err error) {
	if m.UserID == bot {
		d := newDelivery(platform.DeliverOutgoing, bot, m.ConversationID, "")
		d.MessageID = m.ID
		w, err := outboxPut(d)
		return []types.TransactWriteItem{w}, "", err
	}
	d, dlv, err := eventDelivery(bot, messageEvent(m))
	return []types.TransactWriteItem{d}, dlv, err
}

// messageEvent is the message_created event of a user's message m, as its
// creation makes it (pending; no payload: the message's, read with it).
func messageEvent(m platform.Message) platform.Event {
	return platform.Event{
		ID: messageEventID(m.ID), CreatedAt: m.CreatedAt, Type: platform.EventMessageCreated,
		ConversationID: m.ConversationID, UserID: m.UserID, MessageID: m.ID,
		Status: platform.EventPending,
	}
}

// messageUsage is the count of a new message in the bot's usage, within
// its quota, with that of its message_created event when it has one, and
// with prepaid the bot's invocation that delivers it (markPrepaid).
func (s *Store) messageUsage(ctx context.Context, bot string, m platform.Message, deliver, prepaid bool) (types.TransactWriteItem, error) {
	who := UsageUserMessages
	if m.UserID == bot {
		who = UsageBotMessages
	}
	if prepaid {
		return s.countUsage(ctx, bot, UsageMessages, 1, true, who, UsageEvents, UsageInvocations)
	}
	if deliver && m.UserID != bot {
		return s.countUsage(ctx, bot, UsageMessages, 1, true, who, UsageEvents)
	}
	return s.countUsage(ctx, bot, UsageMessages, 1, true, who)
}

func (s *Store) checkAuthorIDs(bot string, m platform.Message) error {
	if !platform.HasPrefix(m.ConversationID, platform.PrefixConversation) {
		return platform.NotFound("conversation", m.ConversationID)
	}
	if m.UserID != bot && !platform.HasPrefix(m.UserID, platform.PrefixUser) {
		return platform.NotFound("user", m.UserID)
	}
	return nil
}

// msgWriteError names what a failed creation lacked.
func msgWriteError(err error, m platform.Message, counter int) error {
	switch i := failedAt(err); {
	case i < 0:
		return err
	case i == counter:
		return platform.NotFound("conversation", m.ConversationID)
	}
	return platform.Errorf(platform.ErrAlreadyExists, "message %q already exists", m.ID)
}

// getMsg reads a message record (one GetItem), for writes: their
// transactions require its conversation live.
func (s *Store) getMsg(ctx context.Context, bot, id string) (msgRecord, error) {
	return getLive(ctx, s, "message", platform.PrefixMessage, id, msgPK(bot, id), skMsg, msgFrom)
}

// getLiveMsg reads a message for a read, which is only there while its
// conversation is: a conversation being deleted (or deleted, with messages
// a crash left for the sweeper) takes its messages with it at once.
func (s *Store) getLiveMsg(ctx context.Context, bot, id string) (msgRecord, error) {
	m, err := s.getMsg(ctx, bot, id)
	if err != nil {
		return m, err
	}
	live, err := s.liveConversations(ctx, bot, []string{m.ConversationID})
	if err == nil && !live[m.ConversationID] {
		err = platform.NotFound("message", id)
	}
	return m, err
}

// liveConversations tells which of the conversations exist and are not
// being deleted (one GetItem, or one BatchGetItem per 100, projected on the
// deletion mark for one).
func (s *Store) liveConversations(ctx context.Context, bot string, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	seen := map[string]bool{}
	var keys []item
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			keys = append(keys, key(convPK(bot, id), skConv))
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	var items []item
	if len(keys) == 1 {
		res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &s.table, Key: keys[0], ConsistentRead: aws.Bool(true),
			ProjectionExpression:     aws.String("pk, #del"),
			ExpressionAttributeNames: map[string]string{"#del": attrDeleting},
		})
		if err != nil {
			return nil, err
		}
		if res.Item != nil {
			items = append(items, res.Item)
		}
	} else {
		got, err := s.batchGet(ctx, keys)
		if err != nil {
			return nil, err
		}
		items = got
	}
	prefix := convPK(bot, "")
	for _, it := range items {
		if _, deleting := it[attrDeleting]; !deleting {
			out[strings.TrimPrefix(getS(it, attrPK), prefix)] = true
		}
	}
	return out, nil
}

// MessageRecord reads a message of the bot without checking its
// conversation (one GetItem): for a reader that reads the conversation
// next anyway (the dispatcher: a conversation being deleted answers 404
// there).
func (s *Store) MessageRecord(ctx context.Context, bot, id string) (platform.Message, error) {
	m, err := s.getMsg(ctx, bot, id)
	return m.Message, err
}

// GetMessage reads a message of the bot and checks its conversation (two
// GetItem).
func (s *Store) GetMessage(ctx context.Context, bot, id string) (platform.Message, error) {
	m, err := s.getLiveMsg(ctx, bot, id)
	return m.Message, err
}

// UpdateMessage applies a tag patch (an empty value removes the tag) and,
// when payload is not nil, replaces the payload: the record conditional on
// the version read, its copy and the changed index entries, with the
// conversation required live, in one transaction retried on conflict.
func (s *Store) UpdateMessage(ctx context.Context, bot, id string, tags map[string]string, payload json.RawMessage) (platform.Message, error) {
	var out platform.Message
	err := optimistic(ctx, "message "+id, func() error {
		rec, err := s.getMsg(ctx, bot, id)
		if err != nil {
			return err
		}
		m := rec.Message
		m.Tags = chat.ApplyTags(rec.Tags, tags)
		if payload != nil {
			m.Payload = payload
		}
		if chat.SameTags(m.Tags, rec.Tags) && (payload == nil || jsonEqual(payload, rec.Payload)) {
			out = rec.Message
			return nil
		}
		if err := chat.BodyTags("tags", m.Tags); err != nil {
			return err
		}
		m.UpdatedAt = platform.Now()
		d, err := marshalDoc(m)
		if err != nil {
			return err
		}
		cpk := convPK(bot, m.ConversationID)
		w := []types.TransactWriteItem{
			{Update: &types.Update{
				Key:                       key(msgPK(bot, id), skMsg),
				UpdateExpression:          aws.String("SET #doc = :doc, #ver = :next"),
				ConditionExpression:       aws.String("#ver = :ver"),
				ExpressionAttributeNames:  map[string]string{"#doc": attrDoc, "#ver": attrVer},
				ExpressionAttributeValues: item{":doc": str(d), ":next": num(rec.ver + 1), ":ver": num(rec.ver)},
			}},
			liveCheck(cpk, skConv),
		}
		cp := key(cpk, msgCopySK(m))
		cp[attrDoc], cp[attrObject] = str(d), str(id)
		if rec.ev {
			cp[attrHasEvent] = rec.hasEventAttr()
		}
		w = append(w, put(cp))
		kept, err := s.keepMessagePayload(ctx, bot, rec, false)
		if err != nil {
			return err
		}
		w = append(w, kept...)
		for _, k := range sortedKeys(m.Tags) {
			switch old, ok := rec.Tags[k]; {
			case !ok:
				w = append(w, put(msgIndexEntry(bot, m, k)))
			case old != m.Tags[k]:
				w = append(w, rewrite(msgIndexEntry(bot, m, k)))
			}
		}
		for k := range rec.Tags {
			if _, ok := m.Tags[k]; !ok {
				w = append(w, del(cpk, msgIdxSK(id, k)))
			}
		}
		w = append(w, msgChanged(bot, m.ConversationID)) // message_carry.go
		err = s.txWrite(ctx, w)
		switch i := failedAt(err); {
		case i == 1:
			return platform.NotFound("message", id) // its conversation is being deleted
		case i >= 0:
			return errRetry
		}
		out = m
		return err
	})
	return out, err
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// DeleteMessage deletes a message (record, copy, index entries) and
// uncounts it in its conversation, in one transaction conditional on the
// version read (so the entries deleted are the message's current ones).
func (s *Store) DeleteMessage(ctx context.Context, bot, id string) error {
	return optimistic(ctx, "message "+id, func() error {
		rec, err := s.getMsg(ctx, bot, id)
		if err != nil {
			return err
		}
		m := rec.Message
		cpk := convPK(bot, m.ConversationID)
		w := []types.TransactWriteItem{
			{Delete: &types.Delete{
				Key:                       key(msgPK(bot, id), skMsg),
				ConditionExpression:       aws.String("#ver = :ver"),
				ExpressionAttributeNames:  map[string]string{"#ver": attrVer},
				ExpressionAttributeValues: item{":ver": num(rec.ver)},
			}},
			countMessage(bot, m.ConversationID, -1),
			del(cpk, msgCopySK(m)),
		}
		for k := range m.Tags {
			w = append(w, del(cpk, msgIdxSK(id, k)))
		}
		w = append(w, msgChanged(bot, m.ConversationID)) // message_carry.go
		kept, err := s.keepMessagePayload(ctx, bot, rec, true)
		if err != nil {
			return err
		}
		w = append(w, kept...)
		err = s.txWrite(ctx, w)
		switch i := failedAt(err); {
		case i >= 0 && i == len(w)-len(kept) && len(kept) > 0:
			return errRetry // the event changed since read
		case i == 0:
			return errRetry
		case i == 1:
			return platform.NotFound("message", id) // or its conversation is being deleted
		}
		return err
	})
}

// MessageFilter selects ListMessages.
type MessageFilter struct {
	BotID          string
	ConversationID string
	Tags           map[string]string
	After, Before  string // creation time bounds, inclusive ("" = open)
}

func (f MessageFilter) accepts(m platform.Message) bool {
	if f.ConversationID != "" && m.ConversationID != f.ConversationID {
		return false
	}
	for k, v := range f.Tags {
		if m.Tags[k] != v {
			return false
		}
	}
	return (f.After == "" || m.CreatedAt >= f.After) && (f.Before == "" || m.CreatedAt <= f.Before)
}

// ListMessages lists messages, most recent first: a conversation's (its
// partition, strongly consistent), or through the index of a tag, or the
// bot's; creation-time bounds are part of the key condition.
func (s *Store) ListMessages(ctx context.Context, f MessageFilter, p Page) ([]platform.Message, map[string]string, error) {
	bot := f.BotID
	var sp span
	entries := false
	switch {
	case f.ConversationID != "":
		lo, hi := timeSpan(f.After, f.Before)
		if hi == "" {
			hi = "~"
		}
		sp = span{pk: convPK(bot, f.ConversationID), lo: skMsgCopy + lo, hi: skMsgCopy + hi, desc: true}
	case len(f.Tags) > 0:
		k := sortedKeys(f.Tags)[0]
		sp = span{index: GSI1, pk: idxGSI(bot, platform.TagsOfMessage, idxTag(k)), desc: true}
		sp.lo, sp.hi = valueSpan(f.Tags[k], f.After, f.Before)
		entries = true
	default:
		sp = listSpan(GSI1, bot, listMsgs, true)
		sp.lo, sp.hi = timeSpan(f.After, f.Before)
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, func(items []item) ([]*platform.Message, error) {
		return s.loadMsgs(ctx, bot, items, entries, f.ConversationID != "", f.accepts)
	})
	return out, startOf(next), err
}

// loadMsgs turns a batch of list items (messages or their copies, or
// entries pointing at messages, read in one BatchGetItem) into messages.
// inConversation: the items are of one conversation's partition, which the
// caller found live.
func (s *Store) loadMsgs(ctx context.Context, bot string, items []item, entries, inConversation bool, ok func(platform.Message) bool) ([]*platform.Message, error) {
	load := keep(func(it item) (platform.Message, bool, error) {
		m, live, err := msgFrom(it)
		return m.Message, live, err
	}, ok)
	if entries {
		load = viaEntries(ctx, s, func(id string) item { return key(msgPK(bot, id), skMsg) }, load)
	}
	out, err := load(items)
	if err != nil || inConversation {
		return out, err
	}
	// Messages of conversations being deleted are not listed.
	var convs []string
	for _, m := range out {
		if m != nil {
			convs = append(convs, m.ConversationID)
		}
	}
	live, err := s.liveConversations(ctx, bot, convs)
	if err != nil {
		return nil, err
	}
	for i, m := range out {
		if m != nil && !live[m.ConversationID] {
			out[i] = nil
		}
	}
	return out, nil
}

// MessageLookup is a getOrCreateMessage call: the message of the
// conversation whose discriminating tags (Keys) have the values of Tags;
// New is the message to create when there is none.
type MessageLookup struct {
	BotID string
	Tags  map[string]string
	Keys  []string
	New   platform.Message
	// Import: a message created has no runtime deliveries (importMessages).
	Import bool
	// AuthorLive is a user the caller read live (strongly consistent) or
	// created earlier in the same request (initializeIncomingMessage):
	// when it is New's author, the author check (checkAuthor) reads it
	// no second time. A deleteUser committing since is then as one
	// committing between checkAuthor's read and the write: the message
	// is as if written just before the deletion.
	AuthorLive string
}

func (l MessageLookup) matches(m platform.Message) bool {
	return m.ConversationID == l.New.ConversationID && chat.Matches(m.Tags, l.Tags, l.Keys)
}

// GetOrCreateMessage returns the message of the conversation matching l,
// creating (and counting) l.New when there is none; concurrent calls agree
// on one (see GetOrCreateConversation). A message found gets l's tags.
func (s *Store) GetOrCreateMessage(ctx context.Context, l MessageLookup) (platform.Message, bool, error) {
	bot, convID := l.BotID, l.New.ConversationID
	if err := s.checkAuthorIDs(bot, l.New); err != nil {
		return platform.Message{}, false, err
	}
	hash := claimHash([]string{"message", convID}, l.Tags, l.Keys)
	var (
		out     platform.Message
		created bool
		// onRecord: the conversation has no counter item (one from
		// before them): the message is counted on its record, as
		// createMessage counts it.
		onRecord bool
	)
	err := optimistic(ctx, "the message", func() error {
		found, stale, err := s.claimed(ctx, bot, "msg", hash, claimCheck(func(id string) (platform.Message, error) {
			return s.GetMessage(ctx, bot, id)
		}, l.matches, &out))
		if err != nil || found {
			return err
		}
		m, ok, err := s.findMessage(ctx, l)
		if err != nil {
			return err
		}
		var w []types.TransactWriteItem
		counter := -1
		if ok {
			w = []types.TransactWriteItem{mustExist(msgPK(bot, m.ID), skMsg), liveCheck(convPK(bot, convID), skConv)}
		} else {
			m = l.New
			if w, err = msgWrites(bot, m); err != nil {
				return err
			}
			if m.UserID != l.AuthorLive {
				if err := s.checkAuthor(ctx, bot, m.UserID); err != nil {
					return err
				}
			}
			counter = len(w)
			if onRecord {
				w = append(w, countMessage(bot, convID, 1))
			} else {
				// As createMessage: on the counter item, not the record,
				// whose every change rewrites its two list entries.
				w = append(w, countNew(bot, convID))
			}
		}
		claim := len(w)
		w = append(w, claimWrites(bot, "msg", hash, stale, convPK(bot, convID), m.ID)...)
		if !ok && !l.Import {
			rt, dlv, err := messageDeliveries(bot, m)
			if err != nil {
				return err
			}
			w = append(w, rt...)
			if dlv != "" {
				markHasEvent(w, dlv)
			}
			// Its delivery reads no message (message_carry.go).
			if err := carryMessage(rt, m); err != nil {
				return err
			}
		}
		prepaid := !ok && !l.Import && m.UserID != bot && s.Prepays()
		quotaAt := -1
		if !ok {
			quota, err := s.messageUsage(ctx, bot, m, !l.Import, prepaid)
			if err != nil {
				return err
			}
			if prepaid {
				markPrepaid(w, quota)
			}
			quotaAt = len(w)
			w = append(w, quota)
		}
		// Every write of w is conditional on the conversation being live
		// (the counter's or the record's condition, or liveCheck): no
		// re-read of the bot after it (usage.go).
		if err := s.txWrite(guardedByConversation(ctx), w); err != nil {
			i := failedAt(err)
			switch {
			case i < 0:
				return err
			case i == quotaAt:
				return s.quotaError(UsageMessages)
			case ok && i == 1:
				return platform.NotFound("conversation", convID)
			case !ok && i == counter && !onRecord:
				// No counter item: a conversation from before them
				// (counted on its record), or one missing or being
				// deleted (its record says).
				if _, cerr := s.getConv(ctx, bot, convID); cerr != nil {
					if platform.TypeOf(cerr) == platform.ErrResourceNotFound {
						return platform.NotFound("conversation", convID)
					}
					return cerr
				}
				onRecord = true
				return errRetry
			case i >= claim || ok:
				return errRetry // the claim moved, or the message found was deleted
			}
			return msgWriteError(err, m, counter)
		}
		out, created = m, !ok
		if created {
			s.notifyOutbox()
		}
		return nil
	})
	if err != nil || created {
		return out, created, err
	}
	if !chat.SameTags(chat.ApplyTags(out.Tags, l.Tags), out.Tags) {
		out, err = s.UpdateMessage(ctx, bot, out.ID, l.Tags, nil)
	}
	return out, false, err
}

func (s *Store) findMessage(ctx context.Context, l MessageLookup) (platform.Message, bool, error) {
	bot := l.BotID
	sp := span{pk: convPK(bot, l.New.ConversationID), lo: skMsgCopy, hi: skMsgCopy + "~", desc: true}
	entries := false
	for _, k := range l.Keys {
		if v := l.Tags[k]; v != "" {
			sp = span{index: GSI1, pk: idxGSI(bot, platform.TagsOfMessage, idxTag(k)), desc: true}
			sp.lo, sp.hi = valueSpan(v, "", "")
			entries = true
			break
		}
	}
	found, _, err := collect(ctx, s, sp, "", 1, 1<<30, func(items []item) ([]*platform.Message, error) {
		if entries { // skip entries of other conversations before reading records
			kept := make([]item, 0, len(items))
			idx := make([]int, 0, len(items))
			for i, it := range items {
				if getS(it, attrConvID) == l.New.ConversationID {
					kept, idx = append(kept, it), append(idx, i)
				}
			}
			got, err := s.loadMsgs(ctx, bot, kept, true, true, l.matches)
			if err != nil {
				return nil, err
			}
			out := make([]*platform.Message, len(items))
			for j, i := range idx {
				out[i] = got[j]
			}
			return out, nil
		}
		return s.loadMsgs(ctx, bot, items, false, true, l.matches)
	})
	if err != nil || len(found) == 0 {
		return platform.Message{}, false, err
	}
	return found[0], true, nil
}
