package webchat

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/platform"
)

// initialize is GET /initialize[?conversationId=]: the user (the key's,
// or a new one when there is no key), the conversation (the one asked
// for, got or created; else a new one), then the conversation's stream
// whose first event is `init` {conversation, messages, participants,
// user + userKey}, followed by every signal, as the component expects.
func (q *req) initialize() error {
	key := q.key()
	var u struct {
		User map[string]any `json:"user"`
		Key  string         `json:"key"`
	}
	if key == "" {
		if err := q.chat("POST", "/users", "", map[string]any{}, &u); err != nil {
			return err
		}
		key = u.Key
	} else if err := q.chat("POST", "/users/get-or-create", key, map[string]any{}, &u); err != nil {
		return err
	}
	var c struct {
		Conversation map[string]any `json:"conversation"`
	}
	if id := q.r.URL.Query().Get("conversationId"); id != "" {
		err := q.chat("GET", "/conversations/"+url.PathEscape(id), key, nil, &c)
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			err = q.chat("POST", "/conversations/get-or-create", key, map[string]any{"id": id}, &c)
		}
		if err != nil {
			return err
		}
	} else if err := q.chat("POST", "/conversations", key, map[string]any{}, &c); err != nil {
		return err
	}
	convID, _ := c.Conversation["id"].(string)
	var ms struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := q.chat("GET", "/conversations/"+url.PathEscape(convID)+"/messages", key, nil, &ms); err != nil {
		return err
	}
	var ps struct {
		Participants []map[string]any `json:"participants"`
	}
	if err := q.chat("GET", "/conversations/"+url.PathEscape(convID)+"/participants", key, nil, &ps); err != nil {
		return err
	}
	if ms.Messages == nil {
		ms.Messages = []map[string]any{}
	}
	if ps.Participants == nil {
		ps.Participants = []map[string]any{}
	}
	user := map[string]any{"userKey": key}
	for k, v := range u.User {
		user[k] = v
	}
	init := frame("init", map[string]any{"conversation": c.Conversation, "messages": ms.Messages, "participants": ps.Participants, "user": user})

	// The stream itself is the Chat API's listen (limits, keep-alive,
	// pings, installation checks), its first event the init.
	path := "/conversations/" + url.PathEscape(convID) + "/listen"
	r := q.r.Clone(q.ctx)
	r.URL = &url.URL{Path: path}
	r.Header.Set("x-user-key", key)
	r.Header.Del("Upgrade") // the Webchat API streams over SSE only
	q.wi.chat.ServeWebhook(&initWriter{ResponseWriter: q.w, first: init}, r, q.in, path)
	return nil
}

// initWriter writes the init event right after a stream's 200 header.
type initWriter struct {
	http.ResponseWriter
	first []byte
}

func (w *initWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK && w.first != nil {
		_, _ = w.ResponseWriter.Write(w.first)
		w.first = nil
	}
}

// Unwrap lets http.ResponseController flush and lift the write deadline.
func (w *initWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// createEvent is the Chat API's createEvent; for the component's
// conversation_started it adds payload.data.status.isInitial: true when
// the conversation has no message yet (the component then tells the page
// a conversation started).
func (q *req) createEvent() (any, int, error) {
	b, err := q.body()
	if err != nil {
		return nil, 0, err
	}
	var in map[string]any
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, 0, platform.Invalid("invalid body: %v", err)
	}
	payload, _ := in["payload"].(map[string]any)
	convID, _ := in["conversationId"].(string)
	started := payload != nil && payload["type"] == "conversation_started" && convID != ""
	initial := false
	if started {
		var ms struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := q.chat("GET", "/conversations/"+url.PathEscape(convID)+"/messages", q.key(), nil, &ms); err != nil {
			return nil, 0, err
		}
		initial = len(ms.Messages) == 0
	}
	var out struct {
		Event map[string]any `json:"event"`
	}
	if err := q.chat("POST", "/events", q.key(), in, &out); err != nil {
		return nil, 0, err
	}
	if started {
		p, _ := out.Event["payload"].(map[string]any)
		if p == nil {
			p = map[string]any{}
			out.Event["payload"] = p
		}
		d, _ := p["data"].(map[string]any)
		if d == nil {
			d = map[string]any{}
			p["data"] = d
		}
		d["status"] = map[string]any{"isInitial": initial}
	}
	return out, http.StatusCreated, nil
}

// myMessage is a message the caller may see (the Chat API checks that
// they take part in its conversation), and the caller's id.
func (q *req) myMessage(id string) (map[string]any, string, error) {
	var m struct {
		Message map[string]any `json:"message"`
	}
	if err := q.chat("GET", "/messages/"+url.PathEscape(id), q.key(), nil, &m); err != nil {
		return nil, "", err
	}
	var me struct {
		User map[string]any `json:"user"`
	}
	if err := q.chat("GET", "/users/me", q.key(), nil, &me); err != nil {
		return nil, "", err
	}
	uid, _ := me.User["id"].(string)
	return m.Message, uid, nil
}

// platformMessage reads the stored message (its conversation, payload, tags).
func (q *req) platformMessage(id string) (platform.Message, error) {
	var out struct {
		Message platform.Message `json:"message"`
	}
	err := q.in.API.Call(q.ctx, q.in, "GET", "/v1/chat/messages/"+url.PathEscape(id), nil, &out)
	return out.Message, err
}

// updateMessage is PUT /messages/{id} {payload?, metadata?}: the caller's
// own message only; signal message_updated.
func (q *req) updateMessage(id string) (any, error) {
	b, err := q.body()
	if err != nil {
		return nil, err
	}
	var in struct {
		Payload  map[string]any  `json:"payload"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := decodeStrict(b, &in); err != nil {
		return nil, err
	}
	msg, uid, err := q.myMessage(id)
	if err != nil {
		return nil, err
	}
	if msg["userId"] != uid {
		return nil, platform.Forbidden("message %q is not yours: only its author may update it", id)
	}
	stored, err := q.platformMessage(id)
	if err != nil {
		return nil, err
	}
	payload := map[string]any{}
	_ = json.Unmarshal(stored.Payload, &payload)
	if in.Payload != nil {
		if t, ok := in.Payload["type"].(string); ok && t != stored.Type {
			return nil, platform.Invalid("invalid body: field \"payload.type\": a message's type cannot change (it is %q)", stored.Type)
		}
		md, hasMD := payload["metadata"]
		payload = map[string]any{}
		for k, v := range in.Payload {
			if k != "type" {
				payload[k] = v
			}
		}
		if hasMD {
			payload["metadata"] = md
		}
		if stored.Type == "bloc" {
			payload["items"] = chatapi.BotBlocItems(payload["items"])
		}
	}
	if len(in.Metadata) > 0 && string(in.Metadata) != "null" {
		payload["metadata"] = in.Metadata
	}
	var out struct {
		Message platform.Message `json:"message"`
	}
	if err := q.in.API.Call(q.ctx, q.in, "PUT", "/v1/chat/messages/"+url.PathEscape(id), map[string]any{"payload": payload, "tags": map[string]string{}}, &out); err != nil {
		return nil, err
	}
	updated := webchatMessage(out.Message, msg)
	q.wi.chat.Hub.Publish("conv:"+out.Message.ConversationID, frame("message_updated", updated))
	return map[string]any{"message": updated}, nil
}

// webchatMessage is stored message m as the Chat API showed it (prev: its
// ids as the client knows them), with its feedback.
func webchatMessage(m platform.Message, prev map[string]any) map[string]any {
	payload, md := chatapi.ClientPayload(m)
	out := map[string]any{"id": m.ID, "createdAt": m.CreatedAt, "conversationId": prev["conversationId"], "userId": prev["userId"]}
	if md != nil {
		out["metadata"] = md
	}
	out["payload"] = payload
	if v := m.Tags["feedback"]; v != "" {
		fb := map[string]any{"value": v}
		if c := m.Tags["feedbackComment"]; c != "" {
			fb["comment"] = c
		}
		out["feedback"] = fb
	}
	return out
}

// feedback is PUT|DELETE /messages/{id}/feedback {value, comment?}: a
// participant's thumbs up or down on a message (kept in its tags
// feedback and feedbackComment, which the bot sees); signal
// message_updated.
func (q *req) feedback(id string, add bool) (any, error) {
	tags := map[string]string{"feedback": "", "feedbackComment": ""}
	if add {
		b, err := q.body()
		if err != nil {
			return nil, err
		}
		var in struct {
			Value   string `json:"value"`
			Comment string `json:"comment"`
		}
		if err := decodeStrict(b, &in); err != nil {
			return nil, err
		}
		if in.Value != "positive" && in.Value != "negative" {
			return nil, platform.Invalid("invalid body: field \"value\": \"positive\" or \"negative\"")
		}
		if len(in.Comment) > 1000 {
			return nil, platform.Invalid("invalid body: field \"comment\": at most 1000 characters")
		}
		tags["feedback"], tags["feedbackComment"] = in.Value, strings.TrimSpace(in.Comment)
	}
	msg, _, err := q.myMessage(id)
	if err != nil {
		return nil, err
	}
	var out struct {
		Message platform.Message `json:"message"`
	}
	if err := q.in.API.Call(q.ctx, q.in, "PUT", "/v1/chat/messages/"+url.PathEscape(id), map[string]any{"tags": tags}, &out); err != nil {
		return nil, err
	}
	q.wi.chat.Hub.Publish("conv:"+out.Message.ConversationID, frame("message_updated", webchatMessage(out.Message, msg)))
	return map[string]any{}, nil
}

// createFile is POST /files: a file record of the bot in the platform's
// file storage, public content, and the presigned URL the browser PUTs
// it to. The key is the user's (webchat/<user id>/<key>), whatever the
// client's tags say.
func (q *req) createFile() (any, error) {
	b, err := q.body()
	if err != nil {
		return nil, err
	}
	var in struct {
		Size           json.Number       `json:"size"`
		Key            string            `json:"key"`
		ContentType    string            `json:"contentType"`
		AccessPolicies []string          `json:"accessPolicies"`
		Index          bool              `json:"index"`
		Tags           map[string]string `json:"tags"`
		ExpiresAt      string            `json:"expiresAt"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, platform.Invalid("invalid body: %v", err)
	}
	size, err := in.Size.Int64()
	if err != nil || size < 0 {
		return nil, platform.Invalid("invalid body: field \"size\": a number of bytes is required")
	}
	if size > MaxFileSize {
		return nil, platform.Errorf(platform.ErrPayloadTooLarge, "a file may not exceed %d bytes", MaxFileSize)
	}
	name := in.Key[strings.LastIndexByte(in.Key, '/')+1:]
	if name == "" || len(name) > 200 {
		return nil, platform.Invalid("invalid body: field \"key\": a file name of 1 to 200 characters is required")
	}
	var me struct {
		User map[string]any `json:"user"`
	}
	if err := q.chat("GET", "/users/me", q.key(), nil, &me); err != nil {
		return nil, err
	}
	uid, _ := me.User["id"].(string)
	body := map[string]any{
		"key": "webchat/" + uid + "/" + name, "size": size, "index": false,
		"accessPolicies": []string{"public_content"},
		"tags":           map[string]string{"source": "webchat", "webchatUser": uid},
	}
	if in.ContentType != "" {
		body["contentType"] = in.ContentType
	}
	if in.ExpiresAt != "" {
		body["expiresAt"] = in.ExpiresAt
	}
	var out struct {
		File map[string]any `json:"file"`
	}
	// The component PUTs with x-amz-tagging: public=true: the URL signs it.
	ctx := platform.WithUploadTagging(q.ctx, "public=true")
	if err := q.in.API.Call(ctx, q.in, "PUT", "/v1/files", body, &out); err != nil {
		return nil, err
	}
	id, _ := out.File["id"].(string)
	out.File["url"] = fileLink(q.in, id)
	return out, nil
}
