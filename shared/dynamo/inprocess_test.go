package dynamo_test

import (
	"testing"
)

// The store's calls to the local platform's embedded DynamoDB take the
// in-process path (shared/localdynamo/inprocess.go): every item call of
// a conversation and a user created, none over HTTP. (The other tests of
// this package use the same client, so they run over that path too.)
func TestStoreCallsRunInProcess(t *testing.T) {
	stores, env := embeddedStores(t)
	s := stores("inprocess")
	d := env.Platform.Dynamo
	if d == nil {
		t.Fatal("no embedded DynamoDB")
	}
	items := func() int64 {
		n := int64(0)
		for op, c := range d.Calls() {
			switch op {
			case "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem", "TransactGetItems", "TransactWriteItems":
				n += c
			}
		}
		return n
	}
	in0, all0 := d.InProcessCalls(), items()
	newChatConversation(t, s, "bot_1")
	newChatUser(t, s, "bot_1")
	in, all := d.InProcessCalls()-in0, items()-all0
	if all == 0 || in != all {
		t.Errorf("%d item calls in-process of %d, want all", in, all)
	}
}
