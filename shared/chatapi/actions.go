package chatapi

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
)

// RunAction answers the bot's callAction('<alias>:sendEvent', {conversationId,
// payload}), Botpress's chat action: the payload reaches the conversation's
// clients as the signal event_created from the bot (isBot, the bot's id as
// userId, no id: the event is not stored, as on Botpress).
func (ci *Integration) RunAction(ctx context.Context, in builtin.Install, action string, input json.RawMessage) (json.RawMessage, error) {
	if action != "sendEvent" {
		return nil, platform.Invalid("the chat integration has no action %q", action)
	}
	var a struct {
		ConversationID string         `json:"conversationId"`
		Payload        map[string]any `json:"payload"`
	}
	if err := json.Unmarshal(input, &a); err != nil {
		return nil, platform.Invalid("invalid input: %v", err)
	}
	if a.Payload == nil {
		return nil, platform.Invalid("invalid input: field \"payload\": an object is required")
	}
	if in.API == nil {
		return nil, platform.Errorf(platform.ErrBadGateway, "the platform's Chat API is not served in this process")
	}
	var out struct {
		Conversation platform.Conversation `json:"conversation"`
	}
	if err := in.API.Call(ctx, in, "GET", "/v1/chat/conversations/"+url.PathEscape(a.ConversationID), nil, &out); err != nil {
		return nil, err
	}
	fid := out.Conversation.Tags["fid"]
	if fid == "" || out.Conversation.Integration != in.Instance.Alias {
		return nil, platform.Invalid("invalid input: field \"conversationId\": conversation %q is not a conversation of this Chat API", a.ConversationID)
	}
	ci.publish(out.Conversation.ID, "event_created", map[string]any{
		"id": nil, "createdAt": platform.Now(), "conversationId": fid, "userId": in.Bot.ID,
		"payload": a.Payload, "isBot": true,
	})
	return json.RawMessage(`{}`), nil
}
