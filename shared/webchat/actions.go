package webchat

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
)

// The actions a bot calls on its webchat (`<alias>:<name>`): the typing
// indicator, and those of Botpress's own webchat integration (same names,
// inputs and outputs, so that a bot written for it works unchanged). Each
// but getUserData is a signal on the conversation's streams, which the
// component hands to its page (webchatVisibility, webchatConfig,
// customEvent emitter events).

// conversationInput is the input schema of an action on a conversation
// (its platform id, {{event.conversationId}} in a bot); extra is more
// properties, required ones listed in req.
func conversationInput(extra string, req ...string) string {
	props := `"conversationId":{"type":"string","minLength":1,"description":"The conversation id of the webchat instance. Usually {{event.conversationId}}"}`
	if extra != "" {
		props += "," + extra
	}
	required, _ := json.Marshal(append([]string{"conversationId"}, req...))
	return `{"type":"object","properties":{` + props + `},"required":` + string(required) + `}`
}

// actionDef is an action's definition from its schemas (JSON texts).
func actionDef(title, description, input, output string) json.RawMessage {
	d := map[string]any{"title": title,
		"input":  map[string]any{"schema": json.RawMessage(input)},
		"output": map[string]any{"schema": json.RawMessage(output)}}
	if description != "" {
		d["description"] = description
	}
	b, _ := json.Marshal(d)
	return b
}

const emptyObject = `{"type":"object","properties":{}}`

func actionDefinitions() map[string]json.RawMessage {
	typing := conversationInput(`"messageId":{"type":"string"},"timeout":{"type":"number"}`)
	jsonString := func(what string) string {
		return `{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(maxJSONInput) + `,"description":"` + what + `"}`
	}
	return map[string]json.RawMessage{
		"startTypingIndicator": actionDef("Start typing indicator", "", typing, `{"type":"object"}`),
		"stopTypingIndicator":  actionDef("Stop typing indicator", "", typing, `{"type":"object"}`),
		"getUserData": actionDef("Get User Data",
			`Get the user's information that was provided when the webchat is initialized with the property "userData" (the component's updateUser({data}))`,
			`{"type":"object","properties":{"userId":{"type":"string","minLength":1,"description":"The ID of the user. Usually you can access it using {{event.userId}}"}},"required":["userId"]}`,
			`{"type":"object","properties":{"userData":{"type":"object","additionalProperties":{"type":"string"}}}}`),
		"showWebchat":   actionDef("Show Webchat", "Show the webchat widget", conversationInput(""), emptyObject),
		"hideWebchat":   actionDef("Hide Webchat", "Hide the webchat widget", conversationInput(""), emptyObject),
		"toggleWebchat": actionDef("Toggle Webchat", "Toggle the visibility of the webchat widget", conversationInput(""), emptyObject),
		"configWebchat": actionDef("Configure Webchat", "Update the webchat configuration during a conversation",
			conversationInput(`"config":`+jsonString("A JSON string representing the new configuration (an object)"), "config"), emptyObject),
		"getOrCreateUser": actionDef("Get or Create User", "A webchat user standing for someone else in a conversation (a human agent of the hitl plugin): the end user sees its name and picture on the messages the bot writes as it.",
			`{"type":"object","properties":{"name":{"type":"string","maxLength":200},"pictureUrl":{"type":"string","maxLength":2000},"email":{"type":"string","maxLength":320},`+
				`"user":{"type":"object","properties":{"id":{"type":"string","minLength":1,"description":"The id of the user it stands for (the hitl plugin: the agent's downstream user)"},"conversationId":{"type":"string","minLength":1,"description":"The webchat conversation it takes part in"}},"required":["id","conversationId"]}},"required":["user"]}`,
			`{"type":"object","properties":{"userId":{"type":"string"}},"required":["userId"]}`),
		"customEvent": actionDef("Send Custom Event", "Send a custom event (any JSON) to the webchat; the page handles it (the component's customEvent event).",
			conversationInput(`"event":`+jsonString("An event as JSON to send to the webchat instance"), "event"), emptyObject),
	}
}

// maxJSONInput caps the JSON of configWebchat's config and customEvent's
// event: they travel whole on every stream of the conversation.
const maxJSONInput = 16 << 10

// RunAction answers the integration's actions. The signal ones check the
// conversation (a webchat conversation of this bot) and publish on its
// streams; nothing is stored.
func (wi *Integration) RunAction(ctx context.Context, in builtin.Install, action string, input json.RawMessage) (json.RawMessage, error) {
	if in.API == nil {
		return nil, platform.Errorf(platform.ErrBadGateway, "the platform's Chat API is not served in this process")
	}
	if action == "getUserData" {
		return getUserData(ctx, in, input)
	}
	if action == "getOrCreateUser" {
		return getOrCreateUser(ctx, in, input)
	}
	var a struct {
		ConversationID string          `json:"conversationId"`
		Config         json.RawMessage `json:"config"`
		Event          json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(input, &a); err != nil || a.ConversationID == "" {
		return nil, platform.Invalid("invalid input: field \"conversationId\" is required")
	}
	var signal string
	data := map[string]any{}
	switch action {
	case "startTypingIndicator":
		signal = "typing_started"
	case "stopTypingIndicator":
		signal = "typing_stopped"
	case "showWebchat", "hideWebchat", "toggleWebchat":
		signal = "webchat_visibility"
		data["visibility"] = strings.TrimSuffix(action, "Webchat") // show, hide, toggle
	case "configWebchat":
		signal = "webchat_config"
		v, err := jsonField("config", a.Config)
		if err != nil {
			return nil, err
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, platform.Invalid("invalid input: field \"config\": must be a JSON object, as a string")
		}
		data["config"] = v
	case "customEvent":
		signal = "custom"
		v, err := jsonField("event", a.Event)
		if err != nil {
			return nil, err
		}
		data["event"] = v
	default:
		return nil, platform.Invalid("unknown action %q of the webchat integration", action)
	}
	var out struct {
		Conversation platform.Conversation `json:"conversation"`
	}
	if err := in.API.Call(ctx, in, "GET", "/v1/chat/conversations/"+url.PathEscape(a.ConversationID), nil, &out); err != nil {
		return nil, err
	}
	fid := out.Conversation.Tags["fid"]
	if fid == "" {
		return nil, platform.Invalid("conversation %q is not a webchat conversation", a.ConversationID)
	}
	data["conversationId"] = fid
	wi.chat.Hub.Publish("conv:"+out.Conversation.ID, frame(signal, data))
	return json.RawMessage(`{}`), nil
}

// jsonField decodes an action's input field that holds JSON in a string
// (as Botpress's actions take it: a Studio card gives text).
func jsonField(name string, raw json.RawMessage) (any, error) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || strings.TrimSpace(s) == "" {
		return nil, platform.Invalid("invalid input: field %q is required: a JSON text (a string)", name)
	}
	if len(s) > maxJSONInput {
		return nil, platform.Errorf(platform.ErrPayloadTooLarge, "invalid input: field %q: at most %d bytes of JSON", name, maxJSONInput)
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		msg := "trailing data"
		if err != nil {
			msg = err.Error()
		}
		return nil, platform.Invalid("invalid input: field %q is not valid JSON: %s", name, msg)
	}
	return v, nil
}

// getUserData answers the userData the component gave for a user of this
// installation (PUT /users/me {userData}), kept in the user's tag
// userData: {} when none was given.
func getUserData(ctx context.Context, in builtin.Install, input json.RawMessage) (json.RawMessage, error) {
	var a struct {
		UserID string `json:"userId"`
	}
	if err := json.Unmarshal(input, &a); err != nil || a.UserID == "" {
		return nil, platform.Invalid("invalid input: field \"userId\" is required")
	}
	var out struct {
		User platform.User `json:"user"`
	}
	if err := in.API.Call(ctx, in, "GET", "/v1/chat/users/"+url.PathEscape(a.UserID), nil, &out); err != nil {
		return nil, err
	}
	if out.User.Tags["fid"] == "" {
		return nil, platform.Invalid("user %q is not a user of this webchat", a.UserID)
	}
	data := map[string]string{}
	if s := out.User.Tags[userDataTag]; s != "" {
		_ = json.Unmarshal([]byte(s), &data) // written by setUserData only
	}
	b, _ := json.Marshal(map[string]any{"userData": data})
	return b, nil
}

// frame is a signal as one SSE event, in the Chat API stream's format.
func frame(typ string, data any) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	return append(append([]byte("event: message\ndata: "), b...), "\n\n"...)
}

// agentFidPrefix begins the Chat API id of a user standing for another
// (getOrCreateUser): one per user it stands for, in every conversation.
const agentFidPrefix = "agent-"

// getOrCreateUser is Botpress's webchat action that the hitl plugin calls
// (input {name?, pictureUrl?, email?, user: {id, conversationId}} ->
// {userId}): a webchat user standing for user.id (the agent), named and
// pictured as given, made a participant of the webchat conversation, so
// the messages the bot writes as it show the agent's name and picture.
func getOrCreateUser(ctx context.Context, in builtin.Install, input json.RawMessage) (json.RawMessage, error) {
	var a struct {
		Name       string `json:"name"`
		PictureURL string `json:"pictureUrl"`
		User       struct {
			ID             string `json:"id"`
			ConversationID string `json:"conversationId"`
		} `json:"user"`
	}
	if err := json.Unmarshal(input, &a); err != nil || a.User.ID == "" || a.User.ConversationID == "" {
		return nil, platform.Invalid("invalid input: fields \"user.id\" and \"user.conversationId\" are required")
	}
	var c struct {
		Conversation platform.Conversation `json:"conversation"`
	}
	if err := in.API.Call(ctx, in, "GET", "/v1/chat/conversations/"+url.PathEscape(a.User.ConversationID), nil, &c); err != nil {
		return nil, err
	}
	if c.Conversation.Tags["fid"] == "" {
		return nil, platform.Invalid("conversation %q is not a webchat conversation", a.User.ConversationID)
	}
	body := map[string]any{"tags": map[string]string{"fid": agentFidPrefix + a.User.ID}, "discriminateByTags": []string{"fid"}}
	if a.Name != "" {
		body["name"] = a.Name
	}
	if a.PictureURL != "" {
		body["pictureUrl"] = a.PictureURL
	}
	var u struct {
		User platform.User `json:"user"`
	}
	if err := in.API.Call(ctx, in, "POST", "/v1/chat/users/get-or-create", body, &u); err != nil {
		return nil, err
	}
	// A name or picture changed since: the latest given is shown.
	if (a.Name != "" && a.Name != u.User.Name) || (a.PictureURL != "" && a.PictureURL != u.User.PictureURL) {
		patch := map[string]any{"tags": map[string]string{}}
		if a.Name != "" {
			patch["name"] = a.Name
		}
		if a.PictureURL != "" {
			patch["pictureUrl"] = a.PictureURL
		}
		if err := in.API.Call(ctx, in, "PUT", "/v1/chat/users/"+url.PathEscape(u.User.ID), patch, nil); err != nil {
			return nil, err
		}
	}
	if err := in.API.Call(ctx, in, "POST", "/v1/chat/conversations/"+url.PathEscape(c.Conversation.ID)+"/participants", map[string]string{"userId": u.User.ID}, nil); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"userId": u.User.ID})
}
