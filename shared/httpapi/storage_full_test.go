package httpapi_test

import (
	"io"
	"net/http"
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

// TestDiskFullRefusesUploads: the embedded S3 keeps the same reserve as
// the embedded DynamoDB: below it, an upload to an upload URL is a 507
// saying the free space, the reserve and how to change it; once space is
// back, the upload goes through.
func TestDiskFullRefusesUploads(t *testing.T) {
	f := newFilesFixture(t)
	up := f.upsert(map[string]any{"key": "full.txt", "size": 5})
	f.Platform.S3.SetMinFreeBytes(1 << 62) // more than any disk has free
	req, _ := http.NewRequest("PUT", up.Str("file.uploadUrl"), strings.NewReader("hello"))
	req.Header.Set("Content-Type", up.Str("file.contentType"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 507 {
		t.Fatalf("upload on a full disk: %d %s", res.StatusCode, body)
	}
	for _, want := range []string{"InsufficientStorage", "MiB free", "MiB it keeps in reserve", "-disk-reserve-mib", "PLATFORM_LOCAL_DISK_RESERVE_MIB"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the 507 does not say %q: %s", want, body)
		}
	}
	f.Platform.S3.SetMinFreeBytes(0)
	if st := put(t, up.Str("file.uploadUrl"), up.Str("file.contentType"), []byte("hello")); st != 200 {
		t.Fatalf("upload once space is back: %d", st)
	}
}
