package dynamo

import (
	"context"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/platform"
)

const listConvs = "CONVS"

// convRecord is the item of a conversation with the version it was read at.
type convRecord struct {
	platform.Conversation
	ver int64
	// msgChanged: when a message of it was last updated or deleted
	// (message_carry.go); "" never.
	msgChanged string
}

func convFrom(it item) (convRecord, bool, error) {
	var c convRecord
	if err := decodeDoc(it, &c.Conversation); err != nil {
		return c, false, err
	}
	c.MessageCount = getN(it, attrMsgs)
	c.ver = getN(it, attrVer)
	if c.Tags == nil {
		c.Tags = map[string]string{}
	}
	if c.Properties == nil {
		c.Properties = map[string]string{}
	}
	_, deleting := it[attrDeleting]
	return c, !deleting, nil
}

// convIndex is a conversation's entries in the value indexes: its channel,
// its integration and each tag, by creation time (gsi1) and update time
// (gsi2). They live in the conversation's partition.
func convIndex(bot string, c platform.Conversation) []item {
	pk := convPK(bot, c.ID)
	entry := func(name, v string) item {
		it := key(pk, skIdx+name)
		if v != "" {
			it[attrValue] = str(v)
		}
		it[attrObject] = str(c.ID)
		gsi := idxGSI(bot, platform.TagsOfConversation, name)
		it[attrGSI1PK], it[attrGSI1SK] = str(gsi), str(idxKey(v, c.CreatedAt, c.ID))
		it[attrGSI2PK], it[attrGSI2SK] = str(gsi), str(idxKey(v, c.UpdatedAt, c.ID))
		return it
	}
	out := []item{entry(idxChannel, c.Channel), entry(idxIntegration, c.Integration)}
	for _, k := range sortedKeys(c.Tags) {
		out = append(out, entry(idxTag(k), c.Tags[k]))
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// convWrites are the writes creating conversation c: the record (which
// must be new) and its index entries.
func convWrites(bot string, c platform.Conversation) ([]types.TransactWriteItem, error) {
	c.MessageCount = 0
	it, err := chatItem(convPK(bot, c.ID), skConv, c)
	if err != nil {
		return nil, err
	}
	it[attrMsgs] = num(0)
	it[attrGSI1PK], it[attrGSI1SK] = str(botList(bot, listConvs)), str(timeKey(c.CreatedAt, c.ID))
	it[attrGSI2PK], it[attrGSI2SK] = str(botList(bot, listConvs)), str(timeKey(c.UpdatedAt, c.ID))
	n := key(convPK(bot, c.ID), skConvCount)
	n[attrMsgs] = num(0)
	out := []types.TransactWriteItem{putNew(it), put(n)}
	for _, e := range convIndex(bot, c) {
		out = append(out, put(e))
	}
	return out, nil
}

// CreateConversation stores a new conversation with its index entries, in
// one transaction.
func (s *Store) CreateConversation(ctx context.Context, bot string, c platform.Conversation) error {
	w, err := convWrites(bot, c)
	if err != nil {
		return err
	}
	err = s.txWrite(ctx, w)
	if failedAt(err) >= 0 {
		return platform.Errorf(platform.ErrAlreadyExists, "conversation %q already exists", c.ID)
	}
	return err
}

// skConvCount is a conversation's message counter item, in its
// partition: a new message counts there (ADD msgs 1), not on the
// conversation's record, whose every change rewrites its two list entries
// (gsi1 and gsi2 project the whole item). The record's own msgs, which
// conversations from before the counter item count on and deleteMessage
// uncounts on, is added to it: messageCount is their sum. It carries the
// deletion mark too (markDeleting), so counting a message on it needs the
// conversation live without a check of the record.
const skConvCount = "CONV#N"

// getConv reads a conversation with its counter item: one strongly
// consistent Query of the two items ("CONV" and "CONV#N" sort together).
func (s *Store) getConv(ctx context.Context, bot, id string) (convRecord, error) {
	if !platform.HasPrefix(id, platform.PrefixConversation) {
		return convRecord{}, platform.NotFound("conversation", id)
	}
	pk := convPK(bot, id)
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :a AND :b"),
		ExpressionAttributeValues: item{":pk": str(pk), ":a": str(skConv), ":b": str(skConvCount)},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return convRecord{}, err
	}
	var rec, counter item
	for _, it := range out.Items {
		switch getS(it, attrSK) {
		case skConv:
			rec = it
		case skConvCount:
			counter = it
		}
	}
	if rec == nil {
		return convRecord{}, platform.NotFound("conversation", id)
	}
	c, live, err := convFrom(rec)
	if err == nil && !live {
		err = platform.NotFound("conversation", id)
	}
	c.MessageCount += getN(counter, attrMsgs)
	c.msgChanged = getS(counter, attrMsgChanged)
	return c, err
}

// GetConversation reads a conversation of the bot (one GetItem).
func (s *Store) GetConversation(ctx context.Context, bot, id string) (platform.Conversation, error) {
	c, err := s.getConv(ctx, bot, id)
	return c.Conversation, err
}

// UpdateConversation applies a tag patch (an empty value removes the tag):
// the record, conditional on the version read, and its index entries (whose
// update-time keys move) in one transaction, retried on a concurrent change.
// Nothing is written when nothing changes.
func (s *Store) UpdateConversation(ctx context.Context, bot, id string, tags map[string]string) (platform.Conversation, error) {
	var out platform.Conversation
	err := optimistic(ctx, "conversation "+id, func() error {
		rec, err := s.getConv(ctx, bot, id)
		if err != nil {
			return err
		}
		c := rec.Conversation
		next := chat.ApplyTags(c.Tags, tags)
		if chat.SameTags(next, c.Tags) {
			out = c
			return nil
		}
		if err := chat.BodyTags("tags", next); err != nil {
			return err
		}
		old := c.Tags
		c.Tags, c.UpdatedAt = next, platform.Now()
		w, err := convUpdateWrites(bot, rec, c, old)
		if err != nil {
			return err
		}
		err = s.txWrite(ctx, w)
		if failedAt(err) >= 0 {
			return errRetry
		}
		out = c
		return err
	})
	return out, err
}

// convUpdateWrites are the writes of an update of rec to c: the record,
// conditional on the version read, and its index entries.
func convUpdateWrites(bot string, rec convRecord, c platform.Conversation, oldTags map[string]string) ([]types.TransactWriteItem, error) {
	c.MessageCount = 0
	pk := convPK(bot, c.ID)
	rw, err := versionedUpdate(pk, skConv, c.ID, rec.ver, c, c.UpdatedAt)
	if err != nil {
		return nil, err
	}
	fixed := []string{skIdx + idxChannel, skIdx + idxIntegration}
	return append([]types.TransactWriteItem{rw}, reindexWrites(pk, convIndex(bot, c), fixed, oldTags, c.Tags)...), nil
}

// DeleteConversation deletes a conversation and everything that belongs to
// it: its messages, participants (on both sides), states, index entries and
// claims, marking it first so that nothing is attached meanwhile (see
// deleteOwner). An interrupted deletion resumes when called again.
func (s *Store) DeleteConversation(ctx context.Context, bot, id string) error {
	return s.deleteOwner(ctx, deletionConversation, bot, id)
}

// convTwin names the item outside a conversation's partition that a child
// in it stands for: a message copy's message, a participant's participation.
func convTwin(bot, id string) func(sk, object string) item {
	return func(sk, object string) item {
		switch {
		case hasPrefix(sk, skMsgCopy):
			return key(msgPK(bot, object), skMsg) // the message by id
		case hasPrefix(sk, skPart):
			return key(userPK(bot, object), skPart+id) // the participation's twin
		}
		return nil
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// markDeleting sets the deletion mark on a conversation or user (which must
// exist; a mark already there is kept, so a deletion can be resumed) and, in
// the same transaction, the durable marker the sweeper resumes it from.
func (s *Store) markDeleting(ctx context.Context, kind deletionKind, bot, id, pk, sk string) error {
	mark := func(sk, cond string) types.TransactWriteItem {
		u := &types.Update{
			Key:                       key(pk, sk),
			UpdateExpression:          aws.String("SET #del = :t"),
			ExpressionAttributeNames:  map[string]string{"#del": attrDeleting},
			ExpressionAttributeValues: item{":t": &types.AttributeValueMemberBOOL{Value: true}},
		}
		if cond != "" {
			u.ConditionExpression = aws.String(cond)
		}
		return types.TransactWriteItem{Update: u}
	}
	w := []types.TransactWriteItem{mark(sk, "attribute_exists(pk)"), deletionMarker(kind, bot, id, nil)}
	if kind == deletionConversation {
		// Its message counter, which new messages count on (conditional
		// on no mark): marked with it (made, marked, when the
		// conversation is older than counter items; deleted with the
		// partition's other children).
		w = append(w, mark(skConvCount, ""))
	}
	return s.transact(ctx, w, func(int) error { return errGone })
}

// releaseClaims deletes the getOrCreate claims a deleted record held, each
// only while it still points at that record (a claim may have moved on to
// another record since).
func (s *Store) releaseClaims(ctx context.Context, bot string, backRefs []item) error {
	for _, b := range backRefs {
		kindHash := getS(b, attrSK)[len(skClaim):]
		_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 &s.table,
			Key:                       key("CLAIM#"+bot+"#"+kindHash, skClaimItem),
			ConditionExpression:       aws.String("#oid = :oid"),
			ExpressionAttributeNames:  map[string]string{"#oid": attrObject},
			ExpressionAttributeValues: item{":oid": str(getS(b, attrObject))},
		})
		if err != nil && !isConditionFailed(err) {
			return err
		}
	}
	return nil
}

// ConversationFilter selects and orders ListConversations.
type ConversationFilter struct {
	BotID         string
	ByUpdatedAt   bool // sort by update time (else creation time)
	Descending    bool
	Tags          map[string]string
	Participants  []string
	Integration   string
	Channel       string
	After, Before string // creation time bounds, inclusive, in the wire format ("" = open)
	MinMessages   *int64
	MaxMessages   *int64
}

func (f ConversationFilter) accepts(c platform.Conversation) bool {
	if f.Channel != "" && c.Channel != f.Channel {
		return false
	}
	if f.Integration != "" && c.Integration != f.Integration {
		return false
	}
	for k, v := range f.Tags {
		if c.Tags[k] != v {
			return false
		}
	}
	if f.After != "" && c.CreatedAt < f.After {
		return false
	}
	if f.Before != "" && c.CreatedAt > f.Before {
		return false
	}
	if f.MinMessages != nil && c.MessageCount < *f.MinMessages {
		return false
	}
	if f.MaxMessages != nil && c.MessageCount > *f.MaxMessages {
		return false
	}
	return true
}

// ListConversations lists a bot's conversations, one page. The index that
// serves it depends on the filters (see docs/chat.md): a participant (when
// sorting by creation time), else a tag, else the channel, else the
// integration, else the bot's list of conversations; the other filters are
// applied to the records read. The creation-time bounds are part of the key
// condition when the order is by creation time.
func (s *Store) ListConversations(ctx context.Context, f ConversationFilter, p Page) ([]platform.Conversation, map[string]string, error) {
	bot := f.BotID
	idx := GSI1
	if f.ByUpdatedAt {
		idx = GSI2
	}
	from, to := f.After, f.Before
	if f.ByUpdatedAt {
		from, to = "", "" // bounds on creation time, order by update time: filtered
	}
	sp := span{index: idx, desc: f.Descending}
	participants := f.Participants
	entries := true
	switch {
	case len(f.Participants) > 0 && !f.ByUpdatedAt:
		sp.pk = idxGSI(bot, platform.TagsOfConversation, idxParticipant)
		sp.lo, sp.hi = valueSpan(f.Participants[0], from, to)
		participants = f.Participants[1:]
	case len(f.Tags) > 0:
		k := sortedKeys(f.Tags)[0]
		sp.pk = idxGSI(bot, platform.TagsOfConversation, idxTag(k))
		sp.lo, sp.hi = valueSpan(f.Tags[k], from, to)
	case f.Channel != "":
		sp.pk = idxGSI(bot, platform.TagsOfConversation, idxChannel)
		sp.lo, sp.hi = valueSpan(f.Channel, from, to)
	case f.Integration != "":
		sp.pk = idxGSI(bot, platform.TagsOfConversation, idxIntegration)
		sp.lo, sp.hi = valueSpan(f.Integration, from, to)
	default:
		sp.pk = botList(bot, listConvs)
		sp.lo, sp.hi = timeSpan(from, to)
		entries = false
	}
	load := func(items []item) ([]*platform.Conversation, error) {
		return s.loadConvs(ctx, bot, items, entries, participants, f.accepts)
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, load)
	return out, startOf(next), err
}

// loadConvs turns a batch of list items into conversations: the items are
// the conversations themselves, or index entries (entries) whose
// conversations are read, in one BatchGetItem with the participant items
// that must exist for the conversation to be kept.
func (s *Store) loadConvs(ctx context.Context, bot string, items []item, entries bool, participants []string, ok func(platform.Conversation) bool) ([]*platform.Conversation, error) {
	out := make([]*platform.Conversation, len(items))
	if len(items) == 0 {
		return out, nil
	}
	ids := make([]string, len(items))
	var keys []item
	for i, it := range items {
		// Index entries and participants live in their conversation's
		// partition: the id is in the partition key.
		ids[i] = strings.TrimPrefix(getS(it, attrPK), convPK(bot, ""))
		if entries {
			keys = append(keys, key(convPK(bot, ids[i]), skConv))
		}
		keys = append(keys, key(convPK(bot, ids[i]), skConvCount)) // its message counter
		for _, u := range participants {
			keys = append(keys, key(convPK(bot, ids[i]), skPart+u))
		}
	}
	got, err := s.getMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		if entries {
			it = got[keyID(convPK(bot, ids[i]), skConv)]
			if it == nil {
				continue // deleted since indexed
			}
		}
		c, live, err := convFrom(it)
		if err != nil {
			return nil, err
		}
		c.MessageCount += getN(got[keyID(convPK(bot, ids[i]), skConvCount)], attrMsgs)
		if !live || !ok(c.Conversation) {
			continue
		}
		member := true
		for _, u := range participants {
			if got[keyID(convPK(bot, ids[i]), skPart+u)] == nil {
				member = false
			}
		}
		if member {
			out[i] = &c.Conversation
		}
	}
	return out, nil
}

// ConversationLookup is a getOrCreateConversation call: the conversation of
// the channel and integration whose discriminating tags (Keys) have the
// values of Tags.
type ConversationLookup struct {
	BotID       string
	Channel     string
	Integration string
	Tags        map[string]string // as passed: an empty value removes the tag
	Keys        []string
}

func (l ConversationLookup) matches(c platform.Conversation) bool {
	return c.Channel == l.Channel && c.Integration == l.Integration && chat.Matches(c.Tags, l.Tags, l.Keys)
}

// GetOrCreateConversation returns the conversation matching l, creating it
// when there is none, and applies l's tags to a conversation it finds.
//
// Concurrent calls looking for the same thing must agree on one
// conversation: each looks the claim item of (channel, integration,
// discriminating tags) up first, and a call that finds no (valid) claim
// searches for a matching conversation, then claims the one it found or the
// one it creates, in the transaction that creates it, under the condition
// that the claim is still as it was read. A call losing that race starts
// over and finds the winner's claim.
func (s *Store) GetOrCreateConversation(ctx context.Context, l ConversationLookup) (platform.Conversation, bool, error) {
	bot := l.BotID
	hash := claimHash([]string{"conversation", l.Integration, l.Channel}, l.Tags, l.Keys)
	var (
		out     platform.Conversation
		created bool
	)
	err := optimistic(ctx, "the conversation", func() error {
		found, stale, err := s.claimed(ctx, bot, "conv", hash, claimCheck(func(id string) (platform.Conversation, error) {
			return s.GetConversation(ctx, bot, id)
		}, l.matches, &out))
		if err != nil || found {
			return err
		}
		c, ok, err := s.findConversation(ctx, l)
		if err != nil {
			return err
		}
		var w []types.TransactWriteItem
		if ok {
			w = []types.TransactWriteItem{liveCheck(convPK(bot, c.ID), skConv)}
		} else {
			c = chat.NewConversation(l.Channel, l.Integration, l.Tags)
			if w, err = convWrites(bot, c); err != nil {
				return err
			}
		}
		w = append(w, claimWrites(bot, "conv", hash, stale, convPK(bot, c.ID), c.ID)...)
		if err := s.txWrite(ctx, w); err != nil {
			if failedAt(err) >= 0 {
				return errRetry // the claim moved, or the conversation found is being deleted
			}
			return err
		}
		out, created = c, !ok
		return nil
	})
	if err != nil || created {
		return out, created, err
	}
	if !chat.SameTags(chat.ApplyTags(out.Tags, l.Tags), out.Tags) {
		out, err = s.UpdateConversation(ctx, bot, out.ID, l.Tags)
	}
	return out, false, err
}

// findConversation searches the conversations matching l, most recent
// first, through the index of a discriminating tag (or of the channel).
func (s *Store) findConversation(ctx context.Context, l ConversationLookup) (platform.Conversation, bool, error) {
	sp := span{index: GSI1, desc: true}
	sp.pk = idxGSI(l.BotID, platform.TagsOfConversation, idxChannel)
	sp.lo, sp.hi = valueSpan(l.Channel, "", "")
	for _, k := range l.Keys {
		if v := l.Tags[k]; v != "" {
			sp.pk = idxGSI(l.BotID, platform.TagsOfConversation, idxTag(k))
			sp.lo, sp.hi = valueSpan(v, "", "")
			break
		}
	}
	found, _, err := collect(ctx, s, sp, "", 1, 1<<30, func(items []item) ([]*platform.Conversation, error) {
		return s.loadConvs(ctx, l.BotID, items, true, nil, l.matches)
	})
	if err != nil || len(found) == 0 {
		return platform.Conversation{}, false, err
	}
	return found[0], true, nil
}
