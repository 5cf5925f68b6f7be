// Package hitl is the built-in `hitl` integration (shared/builtin,
// docs/hitl.md): the hub's interface hitl 2.1.0 (actions createUser,
// startHitl, stopHitl; events hitlAssigned, hitlStopped; channel hitl),
// with its sessions kept in the store, and the desk that the agent API
// and the console's inbox use to answer them.
//
// Everything a session exchanges lives in the bot, as Botpress's contract
// has it (../shared/runtime/hitl.md): the downstream conversation (channel
// hitl, the integration's), the end user's downstream user (createUser),
// the agents' users (tag agentId), the bot's relayed messages (outgoing,
// payload.userId = the downstream user) and the agents' replies (incoming,
// written by the integration as the agent's user, so the bot relays them).
// The session record adds what the desk needs: status, assignee, title,
// description, the history given at start, notes, unread counts.
package hitl

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/hubstd"
	"github.com/botforge/platform/shared/platform"
)

// Name and Version of the integration; the interface it implements.
const (
	Name             = "hitl"
	Version          = "1.0.0"
	InterfaceName    = "hitl"
	InterfaceVersion = "2.1.0"
	// Channel is the downstream conversations' channel.
	Channel = "hitl"
	// maxHistory bounds the messageHistory kept with a session (the
	// newest are kept).
	maxHistory = 200
	// maxHistoryBytes bounds the history's JSON (a record is at most
	// 350 KB, notes included).
	maxHistoryBytes = 150 << 10
	// maxNotes bounds a session's notes.
	maxNotes = 200
)

// Store is where sessions are kept (dynamo.Store).
type Store interface {
	StartHitlSession(ctx context.Context, h platform.HitlSession) (platform.HitlSession, bool, error)
	GetHitlSession(ctx context.Context, bot, id string) (platform.HitlSession, error)
	UpdateHitlSession(ctx context.Context, bot, id string, change func(h *platform.HitlSession) error) (platform.HitlSession, error)
	ListHitlSessions(ctx context.Context, ws string, limit int) ([]platform.HitlSession, error)
}

// Integration is the hitl integration.
type Integration struct {
	Store Store
	// Hub carries the inbox's live updates (signal.go); nil: none.
	Hub Hub
}

var (
	_ builtin.Actor  = (*Integration)(nil)
	_ builtin.Sender = (*Integration)(nil)
)

// New returns the integration over store.
func New(store Store) *Integration { return &Integration{Store: store} }

// Definition publishes the interface's actions, events, channel and
// entity with the interface's own schemas (shared/hubstd), the entity
// reference resolved, and the tags the integration writes.
func (*Integration) Definition() platform.Integration {
	iface, entity, _ := hubstd.Interface(InterfaceName, InterfaceVersion, "hitlSession")
	resolve := func(in map[string]json.RawMessage) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for name, raw := range in {
			var a any
			if json.Unmarshal(raw, &a) != nil {
				continue
			}
			out[name], _ = json.Marshal(hubstd.ResolveRefs(a, map[string]any{"hitlSession": entity}))
		}
		return out
	}
	channels := map[string]json.RawMessage{}
	for name, raw := range iface.Channels {
		var ch map[string]any
		if json.Unmarshal(raw, &ch) != nil {
			continue
		}
		ch["title"] = "HITL"
		ch["conversation"] = map[string]any{"tags": map[string]any{}, "creation": map[string]any{"enabled": false, "requiredTags": []string{}}}
		ch["message"] = map[string]any{"tags": map[string]any{}}
		channels[name], _ = json.Marshal(ch)
	}
	names := func(m map[string]json.RawMessage) map[string]any {
		out := map[string]any{}
		for k := range m {
			out[k] = map[string]any{"name": k}
		}
		return out
	}
	ref, _ := json.Marshal(map[string]any{
		"id": hubstd.InterfaceID(InterfaceName, InterfaceVersion), "name": InterfaceName, "version": InterfaceVersion,
		"entities": map[string]any{"hitlSession": map[string]any{"name": "hitlSession"}},
		"actions":  names(iface.Actions), "events": names(iface.Events), "channels": names(iface.Channels),
	})
	return platform.Integration{
		Name: Name, Version: Version, Title: "Human in the loop",
		Description: "Hand a conversation to a person: the platform's own inbox (console) and agent API answer the sessions the bot starts (interface hitl).",
		Actions:     resolve(iface.Actions),
		Events:      resolve(iface.Events),
		Channels:    channels,
		Entities:    map[string]json.RawMessage{"hitlSession": iface.Entities["hitlSession"]},
		Interfaces:  map[string]json.RawMessage{InterfaceName: ref},
		User: json.RawMessage(`{"tags":{"email":{"title":"End user's email (createUser)"},"agentId":{"title":"The agent's account id (a workspace member)"}},` +
			`"creation":{"enabled":false,"requiredTags":[]}}`),
	}
}

// RunAction answers createUser, startHitl and stopHitl.
func (i *Integration) RunAction(ctx context.Context, in builtin.Install, action string, input json.RawMessage) (json.RawMessage, error) {
	if in.API == nil {
		return nil, platform.Errorf(platform.ErrBadGateway, "the platform's Chat API is not served in this process")
	}
	switch action {
	case "createUser":
		return i.createUser(ctx, in, input)
	case "startHitl":
		return i.startHitl(ctx, in, input)
	case "stopHitl":
		return i.stopHitl(ctx, in, input)
	}
	return nil, platform.Invalid("unknown action %q of the hitl integration", action)
}

// createUser makes the end user's downstream user: a new user of the
// integration, named, with its email as a tag.
func (i *Integration) createUser(ctx context.Context, in builtin.Install, input json.RawMessage) (json.RawMessage, error) {
	var a struct {
		Name       string `json:"name"`
		PictureURL string `json:"pictureUrl"`
		Email      string `json:"email"`
	}
	if err := json.Unmarshal(input, &a); err != nil {
		return nil, platform.Invalid("invalid input: %v", err)
	}
	body := map[string]any{"name": a.Name, "tags": map[string]string{}}
	if a.PictureURL != "" {
		body["pictureUrl"] = a.PictureURL
	}
	if a.Email != "" {
		body["tags"] = map[string]string{"email": a.Email}
	}
	var out struct {
		User platform.User `json:"user"`
	}
	if err := in.API.Call(ctx, in, "POST", "/v1/chat/users", body, &out); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"userId": out.User.ID})
}

// startHitl opens a session for the downstream user: a new conversation
// of channel hitl with the user as participant, and its record. A user
// with an open session gets that session's conversation: starting twice
// gives one session (the store's claim decides between concurrent starts,
// and the loser's conversation is deleted).
func (i *Integration) startHitl(ctx context.Context, in builtin.Install, input json.RawMessage) (json.RawMessage, error) {
	var a struct {
		UserID         string            `json:"userId"`
		Title          string            `json:"title"`
		Description    string            `json:"description"`
		MessageHistory []json.RawMessage `json:"messageHistory"`
	}
	if err := json.Unmarshal(input, &a); err != nil || a.UserID == "" {
		return nil, platform.Invalid("invalid input: field \"userId\" is required")
	}
	var u struct {
		User platform.User `json:"user"`
	}
	if err := in.API.Call(ctx, in, "GET", "/v1/chat/users/"+url.PathEscape(a.UserID), nil, &u); err != nil {
		return nil, err
	}
	var c struct {
		Conversation platform.Conversation `json:"conversation"`
	}
	if err := in.API.Call(ctx, in, "POST", "/v1/chat/conversations", map[string]any{"channel": Channel, "tags": map[string]string{}}, &c); err != nil {
		return nil, err
	}
	conv := c.Conversation.ID
	if err := in.API.Call(ctx, in, "POST", "/v1/chat/conversations/"+conv+"/participants", map[string]string{"userId": a.UserID}, nil); err != nil {
		return nil, err
	}
	hist := a.MessageHistory
	if len(hist) > maxHistory {
		hist = hist[len(hist)-maxHistory:]
	}
	// The record holds at most about maxHistoryBytes of it (the newest).
	for size := histSize(hist); size > maxHistoryBytes && len(hist) > 0; hist = hist[1:] {
		size -= len(hist[0]) + 1
	}
	if hist == nil {
		hist = []json.RawMessage{}
	}
	now := platform.Now()
	h := platform.HitlSession{ID: conv, WorkspaceID: in.Bot.WorkspaceID, BotID: in.Bot.ID, Alias: in.Instance.Alias,
		ConversationID: conv, UserID: a.UserID, UserName: u.User.Name, Status: platform.HitlWaiting,
		Title: a.Title, Description: a.Description, History: hist, Notes: []platform.HitlNote{},
		CreatedAt: now, UpdatedAt: now}
	got, created, err := i.Store.StartHitlSession(ctx, h)
	if err != nil {
		return nil, err
	}
	if !created {
		// The user's open session stands; this conversation is not one.
		_ = in.API.Call(ctx, in, "DELETE", "/v1/chat/conversations/"+conv, nil, nil)
	} else {
		i.changed(got, "started")
	}
	return json.Marshal(map[string]string{"conversationId": got.ConversationID})
}

// stopHitl closes the session (the bot ended it: /end, a timeout, its own
// stopHitl); closing a closed session does nothing.
func (i *Integration) stopHitl(ctx context.Context, in builtin.Install, input json.RawMessage) (json.RawMessage, error) {
	var a struct {
		ConversationID string `json:"conversationId"`
	}
	if err := json.Unmarshal(input, &a); err != nil || a.ConversationID == "" {
		return nil, platform.Invalid("invalid input: field \"conversationId\" is required")
	}
	h, err := i.Store.UpdateHitlSession(ctx, in.Bot.ID, a.ConversationID, func(h *platform.HitlSession) error {
		if h.Status == platform.HitlClosed {
			return errNothing
		}
		closeSession(h, "bot")
		return nil
	})
	if err != nil && err != errNothing {
		return nil, err
	}
	if err == nil {
		i.changed(h, "closed")
	}
	return json.RawMessage(`{}`), nil
}

func histSize(h []json.RawMessage) int {
	n := 0
	for _, m := range h {
		n += len(m) + 1
	}
	return n
}

var errNothing = platform.Errorf(platform.ErrInternal, "nothing to change")

func closeSession(h *platform.HitlSession, by string) {
	now := platform.Now()
	h.Status, h.ClosedBy, h.ClosedAt, h.UpdatedAt = platform.HitlClosed, by, now, now
}

// SendMessage takes the bot's messages in a downstream conversation: the
// message itself stays in the bot's conversation (the transcript reads
// it there); the session counts the end user's relayed messages (unread).
func (i *Integration) SendMessage(ctx context.Context, in builtin.Install, m builtin.Outgoing) error {
	var p struct {
		UserID string `json:"userId"`
	}
	_ = json.Unmarshal(m.Message.Payload, &p)
	h, err := i.Store.UpdateHitlSession(ctx, in.Bot.ID, m.Conversation.ID, func(h *platform.HitlSession) error {
		if p.UserID != "" && p.UserID == h.UserID {
			h.UserMessages++
		}
		h.UpdatedAt = platform.Now()
		return nil
	})
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return nil // a conversation of the channel that is no session: nothing to track
	}
	if err == nil {
		i.changed(h, "message")
	}
	return err
}

// AgentRole is the least workspace role that may answer sessions (assign,
// reply, note, close): PLATFORM_HITL_AGENT_ROLE, default developer. A
// viewer reads at most: "viewer" (or any unknown value) is the default.
func AgentRole() platform.Role {
	r := platform.Role(strings.TrimSpace(os.Getenv("PLATFORM_HITL_AGENT_ROLE")))
	if !r.Valid() || r == platform.RoleViewer {
		return platform.RoleDeveloper
	}
	return r
}
