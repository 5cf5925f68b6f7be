package httpapi_test

import (
	"strings"
	"testing"
)

// When the local platform's disk is full, writes answer 507 in the error
// shape with the reason, reads of acknowledged data go on, and writes
// resume by themselves once space is back (nothing to restart).
func TestDiskFullRefusesWritesKeepsReads(t *testing.T) {
	f := newChatFixture(t)
	id := f.call("POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201, "createConversation").Str("conversation.id")

	f.Platform.Dynamo.SetMinFreeBytes(1 << 62) // more than any disk has free
	r := f.call("POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 507, "")
	if r.Str("type") != "InsufficientStorage" {
		t.Fatalf("write on a full disk: %s", r.Raw)
	}
	// The free space, the reserve and how to change it (the words of a
	// refused start, shared/local).
	for _, want := range []string{"MiB free", "MiB it keeps in reserve", "-disk-reserve-mib", "PLATFORM_LOCAL_DISK_RESERVE_MIB"} {
		if !strings.Contains(r.Str("message"), want) {
			t.Errorf("the 507 does not say %q: %s", want, r.Raw)
		}
	}
	f.call("POST", "/v1/chat/messages", map[string]any{"conversationId": id, "userId": f.bot, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 507, "")
	f.call("GET", "/v1/chat/conversations/"+id, nil, 200, "getConversation")
	f.call("GET", "/v1/chat/conversations", nil, 200, "listConversations")

	f.Platform.Dynamo.SetMinFreeBytes(0)
	f.call("POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201, "createConversation")
}
