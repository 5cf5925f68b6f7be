package webchat_test

import (
	"reflect"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestWebchatBlocs: as the Chat API (Botpress's chat integration), a
// bot's bloc ({type, payload} items) reaches the Webchat API's clients
// flat ({type, ...payload}), in message_created and in the message_updated
// of its feedback; a client's bloc, created or updated, is kept as the
// bot's.
func TestWebchatBlocs(t *testing.T) {
	s := newSite(t, map[string]any{})
	st, init := s.initialize("", "")
	key := str(init, "user", "userKey")
	conv := str(init, "conversation", "id")
	pConv := s.platformID("conversations", conv)
	botItems := []any{
		map[string]any{"type": "text", "payload": map[string]any{"text": "Hi"}},
		map[string]any{"type": "image", "payload": map[string]any{"imageUrl": "https://x.example/i.png"}},
	}
	flat := map[string]any{"type": "bloc", "items": []any{
		map[string]any{"type": "text", "text": "Hi"},
		map[string]any{"type": "image", "imageUrl": "https://x.example/i.png"},
	}}
	s.f.Check(s.f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: s.f.AdminToken, Headers: map[string]string{"x-bot-id": s.botID},
		Body: map[string]any{"conversationId": pConv, "userId": s.botID, "type": "bloc", "payload": map[string]any{"items": botItems}, "tags": map[string]string{}}}), 201, "")
	m := st.nextOf(t, "message_created")
	if !reflect.DeepEqual(m["payload"], flat) {
		t.Fatalf("the bot's bloc on the stream: %v, want %v", m["payload"], flat)
	}
	s.must("PUT", "/messages/"+m["id"].(string)+"/feedback", key, map[string]any{"value": "positive"}, 200)
	if up := st.nextOf(t, "message_updated"); !reflect.DeepEqual(up["payload"], flat) {
		t.Fatalf("message_updated of the bot's bloc: %v, want %v", up["payload"], flat)
	}

	// The client's bloc, updated: kept as the bot's, shown flat.
	mine := s.must("POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "bloc", "items": []any{map[string]any{"type": "text", "text": "a"}}}}, 201)["message"].(map[string]any)
	up := s.must("PUT", "/messages/"+mine["id"].(string), key, map[string]any{"payload": flat}, 200)["message"].(map[string]any)
	if !reflect.DeepEqual(up["payload"], flat) {
		t.Fatalf("updateMessage of a bloc: %v, want %v", up["payload"], flat)
	}
	stored := s.admin("GET", "/v1/chat/messages/"+mine["id"].(string), map[string]string{"x-bot-id": s.botID}, nil, 200).Body["message"].(map[string]any)
	if items := stored["payload"].(map[string]any)["items"]; !reflect.DeepEqual(items, botItems) {
		t.Fatalf("the updated bloc as the bot reads it: %v, want %v", items, botItems)
	}
}
