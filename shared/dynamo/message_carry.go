package dynamo

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// A user's message travels in its message_created delivery (the outbox
// entry's Message), so the delivery does not read the message again: one
// read unit less per message (docs/data-model.md, "Items per message").
// The delivery still reads the conversation (one Query of CONV and
// CONV#N), and the conversation's counter item says when a message of the
// conversation was last updated or deleted (attrMsgChanged, set by
// updateMessage and deleteMessage in their transactions): when that may
// be after the message was written, the delivery reads the message as
// before (MessageRecord: a deleted message fails the event, an updated one
// is delivered as it is now).

// attrMsgChanged, on a conversation's counter item (CONV#N): when one of
// its messages was last updated or deleted (platform.Now of that write).
const attrMsgChanged = "mchg"

// carryMax bounds the size of an outbox entry carrying its message: the
// entry and its sweep-index entry (100 bytes more) stay under 1 KB, a
// write unit each, with room for the trace stamped at the write
// (stampTrace, 80) and a lease (AWS, 64) besides; a message that does not
// fit is read by its delivery.
const carryMax = 1024 - 100 - 80 - 64

// clockMargin covers the clocks of the processes that wrote a message and
// changed one (on AWS, different functions): a change stamped less than
// this before a message's creation counts as after it. Clocks synced to
// within clockMargin/2 of true time are enough: a change of message m
// happens after m's creation, so its stamp is at least m's creation stamp
// minus clockMargin.
const clockMargin = time.Minute

// carryMessage puts m in the outbox entry among w (the message's
// delivery), when it is small enough.
func carryMessage(w []types.TransactWriteItem, m platform.Message) error {
	// Without what the delivery holds anyway (its messageId and
	// conversationId) and an updatedAt equal to createdAt (a new
	// message's): the dispatcher puts them back.
	var fields map[string]json.RawMessage
	doc, err := json.Marshal(m)
	if err == nil {
		err = json.Unmarshal(doc, &fields)
	}
	if err != nil {
		return err
	}
	delete(fields, "id")
	delete(fields, "conversationId")
	if m.UpdatedAt == m.CreatedAt {
		delete(fields, "updatedAt")
	}
	if doc, err = json.Marshal(fields); err != nil || len(doc) > carryMax {
		return err
	}
	for _, t := range w {
		if t.Put == nil || !strings.HasPrefix(getS(t.Put.Item, attrPK), "OUTBOX#") {
			continue
		}
		var d platform.Delivery
		if err := json.Unmarshal([]byte(getS(t.Put.Item, attrDoc)), &d); err != nil {
			return err
		}
		if d.MessageID != m.ID {
			continue
		}
		d.Message = doc
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if entrySize(t.Put.Item)-len(getS(t.Put.Item, attrDoc))+len(b) > carryMax {
			return nil
		}
		t.Put.Item[attrDoc] = str(string(b))
	}
	return nil
}

// entrySize is an outbox entry's size as DynamoDB bills it (names and
// values; its values are strings and numbers).
func entrySize(it item) int {
	n := 0
	for k, v := range it {
		n += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)/2 + 1
		default:
			n += 64 // none such now: counted generously
		}
	}
	return n
}

// msgChanged stamps a change of one of conv's messages on its counter item
// (made if the conversation is older than counter items: messageCount
// adds its msgs, none; the caller's transaction checks the conversation).
func msgChanged(bot, conv string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(convPK(bot, conv), skConvCount),
		UpdateExpression:          aws.String("SET #c = :now"),
		ExpressionAttributeNames:  map[string]string{"#c": attrMsgChanged},
		ExpressionAttributeValues: item{":now": str(platform.Now())},
	}}
}

// DeliveryConversation is GetConversation for a message's delivery (the
// same Query), and whether a message of the conversation may have changed
// since createdAt (a message created then: its carried copy may be stale).
func (s *Store) DeliveryConversation(ctx context.Context, bot, id, createdAt string) (platform.Conversation, bool, error) {
	c, err := s.getConv(ctx, bot, id)
	if err != nil || c.msgChanged == "" {
		return c.Conversation, false, err
	}
	changed, err1 := time.Parse(platform.TimeFormat, c.msgChanged)
	created, err2 := time.Parse(platform.TimeFormat, createdAt)
	if err1 != nil || err2 != nil {
		return c.Conversation, true, nil
	}
	return c.Conversation, !changed.Before(created.Add(-clockMargin)), nil
}
