package httpapi_test

import (
	"testing"

	"github.com/botforge/platform/shared/localdynamo"
)

// TestLocalDeliveryTakesNoLease: over its embedded DynamoDB the local
// dispatcher is the only one (dispatch.Dispatcher.Exclusive): a message's
// delivery writes its outbox shard twice (the entry, put in the message's
// transaction: 2 units; its removal: 1), no lease in between (an fsync
// less before each delivery, on the reply's path).
func TestLocalDeliveryTakesNoLease(t *testing.T) {
	f := newRuntimeFixture(t, func(r received) (int, string) { return 200, "{}" })
	conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{}}, 200).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	defer ddb.CountUnits(false)
	f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201)
	eventually(t, "the event is processed", func() bool {
		evs := f.as(false, "GET", "/v1/chat/events?type=message_created", nil, 200).List("events")
		return len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed"
	})
	shard := localdynamo.Partition{Table: f.Platform.Env.Table, Key: "OUTBOX#" + f.botID + "#" + conv}
	eventually(t, "the entry is removed", func() bool { return ddb.Usage().Partitions[shard].Write >= 3 })
	if w := ddb.Usage().Partitions[shard].Write; w != 3 {
		t.Fatalf("the conversation's outbox shard took %.1f write units for one delivery, want 3 (put in a transaction, delete; no lease)", w)
	}
}
