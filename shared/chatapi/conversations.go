package chatapi

import (
	"encoding/json"
	"net/url"
	"slices"

	"github.com/botforge/platform/shared/platform"
)

// Conversations are the bot's conversations of the installation, channel
// "channel", tagged fid (the Chat API id) and owner (the creator's Chat
// API id); a user reaches one only as a participant.

func chatConversation(c platform.Conversation) map[string]any {
	return map[string]any{"id": c.Tags["fid"], "createdAt": c.CreatedAt, "updatedAt": c.UpdatedAt}
}

// convByFid finds the installation's conversation whose Chat API id is fid.
func (q *req) convByFid(fid string) (platform.Conversation, error) {
	if id, ok := q.ci.convs.Load(q.cacheKey(fid)); ok {
		var out struct {
			Conversation platform.Conversation `json:"conversation"`
		}
		err := q.call("GET", "/v1/chat/conversations/"+id, nil, &out)
		if err == nil && out.Conversation.Tags["fid"] == fid && out.Conversation.Integration == q.in.Instance.Alias {
			return out.Conversation, nil
		}
		q.ci.convs.Delete(q.cacheKey(fid))
	}
	var out struct {
		Conversations []platform.Conversation `json:"conversations"`
	}
	if err := q.call("GET", "/v1/chat/conversations?tags%5Bfid%5D="+url.QueryEscape(fid)+"&integrationName="+url.QueryEscape(q.in.Instance.Alias), nil, &out); err != nil {
		return platform.Conversation{}, err
	}
	if len(out.Conversations) == 0 {
		return platform.Conversation{}, platform.NotFound("conversation", fid)
	}
	c := out.Conversations[0]
	q.ci.convs.Store(q.cacheKey(fid), c.ID)
	return c, nil
}

// isParticipant tells whether platform user uid takes part in conversation cid.
func (q *req) isParticipant(cid, uid string) (bool, error) {
	err := q.call("GET", "/v1/chat/conversations/"+cid+"/participants/"+uid, nil, nil)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return false, nil
	}
	return err == nil, err
}

// myConversation finds conversation fid for the caller, who must take part
// in it: another user's conversation is 403.
func (q *req) myConversation(fid string) (platform.Conversation, error) {
	if err := q.me(); err != nil {
		return platform.Conversation{}, err
	}
	c, err := q.convByFid(fid)
	if err != nil {
		return c, err
	}
	return c, q.mustTakePart(c)
}

func (q *req) mustTakePart(c platform.Conversation) error {
	in, err := q.isParticipant(c.ID, q.user.ID)
	if err != nil {
		return err
	}
	if !in {
		return platform.Forbidden("user %q is not a participant of conversation %q", q.fid, c.Tags["fid"])
	}
	return nil
}

// convOfRecord finds the conversation of a message or event by its
// platform id, for the caller: one of another installation or another
// conversation of the bot is 404, as if it did not exist.
func (q *req) convOfRecord(what, id, cid string) (platform.Conversation, error) {
	var out struct {
		Conversation platform.Conversation `json:"conversation"`
	}
	err := q.call("GET", "/v1/chat/conversations/"+cid, nil, &out)
	if platform.TypeOf(err) == platform.ErrResourceNotFound || (err == nil && (out.Conversation.Integration != q.in.Instance.Alias || out.Conversation.Tags["fid"] == "")) {
		return platform.Conversation{}, platform.NotFound(what, id)
	}
	if err != nil {
		return platform.Conversation{}, err
	}
	return out.Conversation, q.mustTakePart(out.Conversation)
}

func (q *req) newConversation(fid string) (platform.Conversation, error) {
	var out struct {
		Conversation platform.Conversation `json:"conversation"`
	}
	err := q.call("POST", "/v1/chat/conversations/get-or-create", map[string]any{
		"channel": "channel", "tags": map[string]string{"fid": fid, "owner": q.fid}, "discriminateByTags": []string{"fid"},
	}, &out)
	if err != nil {
		return out.Conversation, err
	}
	c := out.Conversation
	if c.Tags["owner"] != q.fid {
		// Made by someone else a moment ago.
		return c, q.mustTakePart(c)
	}
	if err := q.call("POST", "/v1/chat/conversations/"+c.ID+"/participants", map[string]any{"userId": q.user.ID}, nil); err != nil {
		return c, err
	}
	q.ci.convs.Store(q.cacheKey(fid), c.ID)
	return c, nil
}

func (q *req) createConversation() (any, error) {
	var in struct {
		ID *string `json:"id"`
	}
	if err := q.decode(&in); err != nil {
		return nil, err
	}
	if err := q.me(); err != nil {
		return nil, err
	}
	fid := platform.NewUnguessableID(platform.PrefixConversation)
	if in.ID != nil {
		if err := checkID(`invalid body: field "id"`, *in.ID); err != nil {
			return nil, err
		}
		fid = *in.ID
		if _, err := q.convByFid(fid); err == nil {
			return nil, platform.Errorf(platform.ErrAlreadyExists, "conversation %q already exists", fid)
		} else if platform.TypeOf(err) != platform.ErrResourceNotFound {
			return nil, err
		}
	}
	c, err := q.newConversation(fid)
	if err != nil {
		return nil, err
	}
	return map[string]any{"conversation": chatConversation(c)}, nil
}

func (q *req) getOrCreateConversation() (any, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := q.decode(&in); err != nil {
		return nil, err
	}
	if in.ID == "" {
		return nil, checkID(`invalid body: field "id"`, in.ID)
	}
	if err := q.me(); err != nil {
		return nil, err
	}
	c, err := q.convByFid(in.ID)
	switch {
	case err == nil:
		if err := q.mustTakePart(c); err != nil {
			return nil, err
		}
	case platform.TypeOf(err) == platform.ErrResourceNotFound:
		// A new conversation: its id must keep the rule (an existing one
		// is found whatever its id, as on Botpress).
		if err := checkID(`invalid body: field "id"`, in.ID); err != nil {
			return nil, err
		}
		if c, err = q.newConversation(in.ID); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	return map[string]any{"conversation": chatConversation(c)}, nil
}

func (q *req) getConversation(fid string) (any, error) {
	c, err := q.myConversation(fid)
	if err != nil {
		return nil, err
	}
	return map[string]any{"conversation": chatConversation(c)}, nil
}

func (q *req) deleteConversation(fid string) (any, error) {
	c, err := q.myConversation(fid)
	if err != nil {
		return nil, err
	}
	if err := q.call("DELETE", "/v1/chat/conversations/"+c.ID, nil, nil); err != nil {
		return nil, err
	}
	q.ci.convs.Delete(q.cacheKey(fid))
	q.ci.Hub.CloseTopic(convTopic(c.ID))
	return map[string]any{}, nil
}

func (q *req) listConversations() (any, error) {
	if err := q.me(); err != nil {
		return nil, err
	}
	path := "/v1/chat/conversations?integrationName=" + url.QueryEscape(q.in.Instance.Alias) + "&participantIds=" + url.QueryEscape(q.user.ID)
	if t := q.r.URL.Query().Get("nextToken"); t != "" {
		path += "&nextToken=" + url.QueryEscape(t)
	}
	var out struct {
		Conversations []platform.Conversation `json:"conversations"`
		Meta          struct {
			NextToken string `json:"nextToken"`
		} `json:"meta"`
	}
	if err := q.call("GET", path, nil, &out); err != nil {
		return nil, err
	}
	list := make([]map[string]any, 0, len(out.Conversations))
	for _, c := range out.Conversations {
		if c.Tags["fid"] != "" {
			list = append(list, chatConversation(c))
		}
	}
	return map[string]any{"conversations": list, "meta": meta(out.Meta.NextToken)}, nil
}

func meta(next string) map[string]any {
	if next == "" {
		return map[string]any{}
	}
	return map[string]any{"nextToken": next}
}

// Participants.

func (q *req) addParticipant(fid string) (any, error) {
	var in struct {
		UserID string `json:"userId"`
	}
	if err := q.decode(&in); err != nil {
		return nil, err
	}
	if in.UserID == "" {
		return nil, platform.Invalid("invalid body: field \"userId\" is required")
	}
	c, err := q.myConversation(fid)
	if err != nil {
		return nil, err
	}
	u, err := q.userByFid(in.UserID)
	if err != nil {
		return nil, err
	}
	if err := q.call("POST", "/v1/chat/conversations/"+c.ID+"/participants", map[string]any{"userId": u.ID}, nil); err != nil {
		return nil, err
	}
	q.ci.publish(c.ID, "participant_added", map[string]any{"conversationId": fid, "participantId": in.UserID})
	return map[string]any{"participant": chatUser(u)}, nil
}

func (q *req) listParticipants(fid string) (any, error) {
	c, err := q.myConversation(fid)
	if err != nil {
		return nil, err
	}
	path := "/v1/chat/conversations/" + c.ID + "/participants"
	if t := q.r.URL.Query().Get("nextToken"); t != "" {
		path += "?nextToken=" + url.QueryEscape(t)
	}
	var out struct {
		Participants []platform.User `json:"participants"`
		Meta         struct {
			NextToken string `json:"nextToken"`
		} `json:"meta"`
	}
	if err := q.call("GET", path, nil, &out); err != nil {
		return nil, err
	}
	list := make([]map[string]any, 0, len(out.Participants))
	for _, u := range out.Participants {
		if u.Tags["fid"] != "" {
			list = append(list, chatUser(u))
		}
	}
	return map[string]any{"participants": list, "meta": meta(out.Meta.NextToken)}, nil
}

func (q *req) participant(fid, userFid string) (platform.Conversation, platform.User, error) {
	c, err := q.myConversation(fid)
	if err != nil {
		return c, platform.User{}, err
	}
	u, err := q.userByFid(userFid)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return c, u, platform.NotFound("participant", userFid)
	}
	return c, u, err
}

func (q *req) getParticipant(fid, userFid string) (any, error) {
	c, u, err := q.participant(fid, userFid)
	if err != nil {
		return nil, err
	}
	in, err := q.isParticipant(c.ID, u.ID)
	if err != nil {
		return nil, err
	}
	if !in {
		return nil, platform.NotFound("participant", userFid)
	}
	return map[string]any{"participant": chatUser(u)}, nil
}

// removeParticipant: as on Botpress, only the conversation's owner (its
// creator, tag owner) removes participants, and never itself (the
// conversation would be left without an owner who can read it). The
// removed user's streams of the conversation end at once, wherever they
// are held (a close of its member topic, relayed as any signal on AWS):
// it hears nothing more of it.
func (q *req) removeParticipant(fid, userFid string) (any, error) {
	c, u, err := q.participant(fid, userFid)
	if err != nil {
		return nil, err
	}
	if c.Tags["owner"] != q.fid {
		return nil, platform.Forbidden("only the owner of conversation %q removes its participants", fid)
	}
	if userFid == q.fid {
		return nil, platform.Invalid("the owner of conversation %q cannot remove itself from it", fid)
	}
	if err := q.call("DELETE", "/v1/chat/conversations/"+c.ID+"/participants/"+u.ID, nil, nil); err != nil {
		return nil, err
	}
	q.ci.Hub.CloseTopic(memberTopic(c.ID, u.ID))
	q.ci.publish(c.ID, "participant_removed", map[string]any{"conversationId": fid, "participantId": userFid})
	return map[string]any{}, nil
}

// Messages.

// chatMessage is a message as the Chat API answers it: its type inside
// its payload, ids as the client knows them.
func (q *req) chatMessage(m platform.Message, convFid string) map[string]any {
	return chatMessage(m, convFid, q.fidOf(m.UserID))
}

// ClientPayload is stored message m's payload as the Chat API's clients
// see it (its type inside, a bloc's items flat) and its metadata (nil:
// none). The webchat API shows messages the same way.
func ClientPayload(m platform.Message) (payload map[string]any, metadata any) {
	payload = map[string]any{}
	_ = json.Unmarshal(m.Payload, &payload)
	if md, ok := payload[metadataKey]; ok {
		metadata = md
		delete(payload, metadataKey)
	}
	if m.Type == "bloc" {
		payload["items"] = chatBlocItems(payload["items"])
	}
	payload["type"] = m.Type
	return payload, metadata
}

func chatMessage(m platform.Message, convFid, userFid string) map[string]any {
	payload, metadata := ClientPayload(m)
	out := map[string]any{"id": m.ID, "createdAt": m.CreatedAt, "payload": payload, "userId": userFid, "conversationId": convFid}
	if metadata != nil {
		out["metadata"] = metadata
	}
	return out
}

// A bloc's items are kept as Botpress keeps them, {type, payload: {...}}
// (what a bot writes and reads), and the Chat API shows them as its
// client's schema has them, {type, ...payload}, as Botpress's chat
// integration maps them (message-payload.ts) both ways.

// chatBlocItems is the client's view of a bloc's items. An item without a
// payload object is left as it is (a bloc stored in the client's shape
// before the mapping).
func chatBlocItems(v any) any {
	items, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		p, isObj := m["payload"].(map[string]any)
		if !ok || !isObj {
			out = append(out, it)
			continue
		}
		flat := make(map[string]any, len(p)+1)
		for k, x := range p {
			flat[k] = x
		}
		flat["type"] = m["type"]
		out = append(out, flat)
	}
	return out
}

// BotBlocItems is the bot's view of the items of a client's bloc (the
// webchat's updateMessage keeps them so too).
func BotBlocItems(v any) any {
	items, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			out = append(out, it)
			continue
		}
		p := make(map[string]any, len(m))
		for k, x := range m {
			if k != "type" {
				p[k] = x
			}
		}
		out = append(out, map[string]any{"type": m["type"], "payload": p})
	}
	return out
}

// metadataKey keeps a message's Chat API metadata inside its payload.
const metadataKey = "metadata"

func (q *req) createMessage() (any, error) {
	var in struct {
		Payload        map[string]any  `json:"payload"`
		ConversationID string          `json:"conversationId"`
		Metadata       json.RawMessage `json:"metadata"`
	}
	if err := q.decode(&in); err != nil {
		return nil, err
	}
	typ, _ := in.Payload["type"].(string)
	if !validType(typ) {
		return nil, platform.Invalid("invalid body: field \"payload.type\": one of %v", messageTypes)
	}
	if err := checkPayload(typ, in.Payload); err != nil {
		return nil, err
	}
	if in.ConversationID == "" {
		return nil, platform.Invalid("invalid body: field \"conversationId\" is required")
	}
	c, err := q.myConversation(in.ConversationID)
	if err != nil {
		return nil, err
	}
	payload := map[string]any{}
	for k, v := range in.Payload {
		if k != "type" {
			payload[k] = v
		}
	}
	if typ == "bloc" {
		payload["items"] = BotBlocItems(payload["items"])
	}
	if len(in.Metadata) > 0 && string(in.Metadata) != "null" {
		payload[metadataKey] = in.Metadata
	}
	var out struct {
		Message platform.Message `json:"message"`
	}
	err = q.call("POST", "/v1/chat/messages", map[string]any{
		"conversationId": c.ID, "userId": q.user.ID, "type": typ, "payload": payload, "tags": map[string]string{},
	}, &out)
	if err != nil {
		return nil, err
	}
	cm := chatMessage(out.Message, in.ConversationID, q.fid)
	q.ci.publish(c.ID, "message_created", withBot(cm, false))
	return map[string]any{"message": cm}, nil
}

func withBot(m map[string]any, isBot bool) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out["isBot"] = isBot
	return out
}

func validType(t string) bool {
	for _, m := range messageTypes {
		if m == t {
			return true
		}
	}
	return false
}

// checkPayload checks the fields each message type requires (the
// client's schema), so a bot never gets a message it cannot read.
func checkPayload(typ string, p map[string]any) error {
	need := map[string][]string{
		"text": {"text"}, "markdown": {"markdown"}, "image": {"imageUrl"}, "audio": {"audioUrl"},
		"video": {"videoUrl"}, "file": {"fileUrl"}, "card": {"title"}, "choice": {"text"}, "dropdown": {"text"},
	}[typ]
	for _, f := range need {
		if s, ok := p[f].(string); !ok || s == "" {
			return platform.Invalid("invalid body: field \"payload.%s\": a non-empty string is required for a %s message", f, typ)
		}
	}
	switch typ {
	case "location":
		_, lat := p["latitude"].(float64)
		_, lon := p["longitude"].(float64)
		if !lat || !lon {
			return platform.Invalid("invalid body: a location message needs numbers \"payload.latitude\" and \"payload.longitude\"")
		}
	case "carousel", "bloc":
		items, ok := p["items"].([]any)
		if !ok {
			return platform.Invalid("invalid body: field \"payload.items\": an array is required for a %s message", typ)
		}
		if typ == "bloc" {
			for i, it := range items {
				if err := checkBlocItem(i, it); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// blocItemTypes are the item types of a bloc (the client's schema).
var blocItemTypes = []string{"text", "markdown", "image", "audio", "video", "file", "location"}

// checkBlocItem checks item i of a client's bloc as the client's schema
// has it ({type, ...fields}), so that the bot gets items it can read.
func checkBlocItem(i int, it any) error {
	m, _ := it.(map[string]any) // nil when not an object: no type
	typ, _ := m["type"].(string)
	if slices.Contains(blocItemTypes, typ) && checkPayload(typ, m) == nil {
		return nil
	}
	return platform.Invalid("invalid body: field \"payload.items[%d]\": a bloc's item is one of %v with its required fields ({\"type\": \"text\", \"text\": \"...\"})", i, blocItemTypes)
}

func (q *req) messageRecord(id string) (platform.Message, platform.Conversation, error) {
	if err := q.me(); err != nil {
		return platform.Message{}, platform.Conversation{}, err
	}
	var out struct {
		Message platform.Message `json:"message"`
	}
	err := q.call("GET", "/v1/chat/messages/"+url.PathEscape(id), nil, &out)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return out.Message, platform.Conversation{}, platform.NotFound("message", id)
	}
	if err != nil {
		return out.Message, platform.Conversation{}, err
	}
	c, err := q.convOfRecord("message", id, out.Message.ConversationID)
	return out.Message, c, err
}

func (q *req) getMessage(id string) (any, error) {
	m, c, err := q.messageRecord(id)
	if err != nil {
		return nil, err
	}
	return map[string]any{"message": q.chatMessage(m, c.Tags["fid"])}, nil
}

func (q *req) deleteMessage(id string) (any, error) {
	m, c, err := q.messageRecord(id)
	if err != nil {
		return nil, err
	}
	if err := q.call("DELETE", "/v1/chat/messages/"+m.ID, nil, nil); err != nil {
		return nil, err
	}
	q.ci.publish(c.ID, "message_deleted", map[string]any{"id": m.ID, "conversationId": c.Tags["fid"], "userId": q.fidOf(m.UserID)})
	return map[string]any{}, nil
}

func (q *req) listMessages(fid string) (any, error) {
	c, err := q.myConversation(fid)
	if err != nil {
		return nil, err
	}
	path := "/v1/chat/messages?conversationId=" + c.ID
	if t := q.r.URL.Query().Get("nextToken"); t != "" {
		path += "&nextToken=" + url.QueryEscape(t)
	}
	var out struct {
		Messages []platform.Message `json:"messages"`
		Meta     struct {
			NextToken string `json:"nextToken"`
		} `json:"meta"`
	}
	if err := q.call("GET", path, nil, &out); err != nil {
		return nil, err
	}
	list := make([]map[string]any, 0, len(out.Messages))
	for _, m := range out.Messages {
		list = append(list, q.chatMessage(m, fid))
	}
	return map[string]any{"messages": list, "meta": meta(out.Meta.NextToken)}, nil
}

// Events: custom events of the client (type "custom", the bot gets
// "<alias>:custom" whose payload is {userId, conversationId, payload}, the
// bot's ids of the user and the conversation and the client's payload, as
// Botpress's chat integration sends it; the client sees its payload).

func (q *req) createEvent() (any, error) {
	var in struct {
		Payload        map[string]any `json:"payload"`
		ConversationID string         `json:"conversationId"`
	}
	if err := q.decode(&in); err != nil {
		return nil, err
	}
	if in.Payload == nil {
		return nil, platform.Invalid("invalid body: field \"payload\": an object is required")
	}
	if in.ConversationID == "" {
		return nil, platform.Invalid("invalid body: field \"conversationId\" is required")
	}
	c, err := q.myConversation(in.ConversationID)
	if err != nil {
		return nil, err
	}
	var out struct {
		Event platform.Event `json:"event"`
	}
	wrapped := map[string]any{"userId": q.user.ID, "conversationId": c.ID, "payload": in.Payload}
	if err := q.call("POST", "/v1/chat/events", map[string]any{"type": "custom", "payload": wrapped, "conversationId": c.ID, "userId": q.user.ID}, &out); err != nil {
		return nil, err
	}
	ev := chatEvent(out.Event, in.ConversationID, q.fid)
	q.ci.publish(c.ID, "event_created", withBot(ev, false))
	return map[string]any{"event": ev}, nil
}

func chatEvent(e platform.Event, convFid, userFid string) map[string]any {
	payload := map[string]any{}
	_ = json.Unmarshal(e.Payload, &payload)
	// The client's payload inside the event's (an event stored before
	// 0.6.0 is the client's payload itself).
	if inner, ok := payload["payload"].(map[string]any); ok && payload["conversationId"] == e.ConversationID {
		payload = inner
	}
	return map[string]any{"id": e.ID, "createdAt": e.CreatedAt, "payload": payload, "conversationId": convFid, "userId": userFid}
}

func (q *req) getEvent(id string) (any, error) {
	if err := q.me(); err != nil {
		return nil, err
	}
	var out struct {
		Event platform.Event `json:"event"`
	}
	err := q.call("GET", "/v1/chat/events/"+url.PathEscape(id), nil, &out)
	if platform.TypeOf(err) == platform.ErrResourceNotFound || (err == nil && out.Event.ConversationID == "") {
		return nil, platform.NotFound("event", id)
	}
	if err != nil {
		return nil, err
	}
	c, err := q.convOfRecord("event", id, out.Event.ConversationID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"event": chatEvent(out.Event, c.Tags["fid"], q.fidOf(out.Event.UserID))}, nil
}
