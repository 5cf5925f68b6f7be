package hitl

import (
	"context"
	"encoding/json"
	"net/url"
	"sort"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
)

// The desk: what an agent (a workspace member) does with a session,
// through the agent API (httpapi, docs/hitl.md) and the console's inbox.
// The caller has checked the member's role and that the session's bot is
// in the member's workspace; in is the session's installation.

// Agent is the member acting.
type Agent struct {
	AccountID string
	Email     string
}

// name is how the end user sees the agent (the part of the email before @).
func (a Agent) name() string {
	if n, _, ok := strings.Cut(a.Email, "@"); ok && n != "" {
		return n
	}
	if a.Email != "" {
		return a.Email
	}
	return "Agent"
}

// errClosed answers any change of a closed session but a note.
func errClosed(id string) error {
	return platform.Errorf(platform.ErrRelationConflict, "hitl session %q is closed: it takes no reply, assignment or closing", id)
}

// agentUser is the agent's user in the bot (tag agentId), made once.
func agentUser(ctx context.Context, in builtin.Install, a Agent) (string, error) {
	var out struct {
		User platform.User `json:"user"`
	}
	err := in.API.Call(ctx, in, "POST", "/v1/chat/users/get-or-create", map[string]any{
		"tags": map[string]string{"agentId": a.AccountID}, "discriminateByTags": []string{"agentId"}, "name": a.name(),
	}, &out)
	return out.User.ID, err
}

// Assign gives the session to agent a (to oneself or to another member),
// and tells the bot (hitlAssigned with the agent's user).
func (i *Integration) Assign(ctx context.Context, in builtin.Install, id string, a Agent) (platform.HitlSession, error) {
	h, err := i.Store.GetHitlSession(ctx, in.Bot.ID, id)
	if err != nil {
		return h, err
	}
	if h.Status == platform.HitlClosed {
		return h, errClosed(id)
	}
	uid, err := agentUser(ctx, in, a)
	if err != nil {
		return h, err
	}
	h, err = i.Store.UpdateHitlSession(ctx, in.Bot.ID, id, func(h *platform.HitlSession) error {
		if h.Status == platform.HitlClosed {
			return errClosed(id)
		}
		h.Status, h.AssigneeID, h.AssigneeEmail, h.AgentUserID = platform.HitlAssigned, a.AccountID, a.Email, uid
		h.UpdatedAt = platform.Now()
		return nil
	})
	if err != nil {
		return h, err
	}
	i.changed(h, "assigned")
	err = in.API.Call(ctx, in, "POST", "/v1/chat/events", map[string]any{"type": "hitlAssigned", "conversationId": id,
		"payload": map[string]string{"conversationId": id, "userId": uid}}, nil)
	return h, err
}

// Reply is agent a's message (text, image, audio, video, file, bloc):
// an incoming message of the agent's user in the downstream conversation,
// which the bot relays to the end user. The first reply of a waiting
// session assigns it to its author (as the plugin does on its side).
func (i *Integration) Reply(ctx context.Context, in builtin.Install, id string, a Agent, typ string, payload json.RawMessage) (platform.Message, error) {
	var m platform.Message
	h, err := i.Store.GetHitlSession(ctx, in.Bot.ID, id)
	if err != nil {
		return m, err
	}
	if h.Status == platform.HitlClosed {
		return m, errClosed(id)
	}
	uid, err := agentUser(ctx, in, a)
	if err != nil {
		return m, err
	}
	if h.Status == platform.HitlWaiting {
		if _, err := i.Store.UpdateHitlSession(ctx, in.Bot.ID, id, func(h *platform.HitlSession) error {
			if h.Status != platform.HitlWaiting {
				return errNothing
			}
			h.Status, h.AssigneeID, h.AssigneeEmail, h.AgentUserID = platform.HitlAssigned, a.AccountID, a.Email, uid
			h.UpdatedAt = platform.Now()
			return nil
		}); err != nil && err != errNothing {
			return m, err
		}
	}
	var out struct {
		Message platform.Message `json:"message"`
	}
	err = in.API.Call(ctx, in, "POST", "/v1/chat/messages", map[string]any{"conversationId": id, "userId": uid,
		"type": typ, "payload": payload, "tags": map[string]string{}}, &out)
	if err == nil {
		i.changed(h, "reply")
	}
	return out.Message, err
}

// Note adds an internal note (agents only: nothing reaches the bot).
func (i *Integration) Note(ctx context.Context, bot, id string, a Agent, text string) (platform.HitlSession, error) {
	h, err := i.Store.UpdateHitlSession(ctx, bot, id, func(h *platform.HitlSession) error {
		if len(h.Notes) >= maxNotes {
			return platform.Errorf(platform.ErrLimitExceeded, "hitl session %q has %d notes: no more may be added", id, maxNotes)
		}
		now := platform.Now()
		h.Notes = append(h.Notes, platform.HitlNote{ID: platform.NewID("note_"), AuthorID: a.AccountID, AuthorEmail: a.Email, Text: text, CreatedAt: now})
		h.UpdatedAt = now
		return nil
	})
	if err == nil {
		i.changed(h, "note")
	}
	return h, err
}

// Close ends the session from the desk and gives the conversation back to
// the bot (hitlStopped). The event is written first: a close that fails
// after it is retried (the session still open), and the bot takes a
// second hitlStopped for an inactive session as nothing; the other order
// could leave a closed session whose bot was never told.
func (i *Integration) Close(ctx context.Context, in builtin.Install, id string) (platform.HitlSession, error) {
	h, err := i.Store.GetHitlSession(ctx, in.Bot.ID, id)
	if err != nil {
		return h, err
	}
	if h.Status == platform.HitlClosed {
		return h, errClosed(id)
	}
	if err := in.API.Call(ctx, in, "POST", "/v1/chat/events", map[string]any{"type": "hitlStopped", "conversationId": id,
		"payload": map[string]string{"conversationId": id}}, nil); err != nil {
		return h, err
	}
	h, err = i.Store.UpdateHitlSession(ctx, in.Bot.ID, id, func(h *platform.HitlSession) error {
		if h.Status == platform.HitlClosed {
			return errNothing // closed meanwhile (another agent, the bot)
		}
		closeSession(h, "agent")
		return nil
	})
	if err == errNothing {
		return i.Store.GetHitlSession(ctx, in.Bot.ID, id)
	}
	if err == nil {
		i.changed(h, "closed")
	}
	return h, err
}

// MarkRead records that member account has seen every relayed message.
func (i *Integration) MarkRead(ctx context.Context, bot, id, account string) (platform.HitlSession, error) {
	h, err := i.Store.UpdateHitlSession(ctx, bot, id, func(h *platform.HitlSession) error {
		if h.ReadBy[account] == h.UserMessages {
			return errNothing
		}
		if h.ReadBy == nil {
			h.ReadBy = map[string]int{}
		}
		h.ReadBy[account] = h.UserMessages
		return nil
	})
	if err == errNothing {
		return i.Store.GetHitlSession(ctx, bot, id)
	}
	return h, err
}

// Unread is how many of the end user's messages member account has not seen.
func Unread(h platform.HitlSession, account string) int {
	if n := h.UserMessages - h.ReadBy[account]; n > 0 {
		return n
	}
	return 0
}

// Entry is one line of a transcript.
type Entry struct {
	ID        string `json:"id"`
	CreatedAt string `json:"createdAt"`
	// Role: "user" (the end user), "agent", "bot" (before the handover,
	// or the bot's own lines in the session).
	Role string `json:"role"`
	// Before marks what happened before the handover (messageHistory).
	Before  bool            `json:"before,omitempty"`
	UserID  string          `json:"userId,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// maxTranscript bounds the session's messages a transcript reads.
const maxTranscript = 1000

// Transcript is the history given at start, then the session's messages
// oldest first: the end user's relayed ones, the agents' replies, the
// bot's own lines.
func Transcript(ctx context.Context, in builtin.Install, h platform.HitlSession) ([]Entry, error) {
	out := make([]Entry, 0, len(h.History))
	for k, raw := range h.History {
		var x struct {
			Source struct {
				Type   string `json:"type"`
				UserID string `json:"userId"`
			} `json:"source"`
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(raw, &x) != nil {
			continue
		}
		role := "bot"
		if x.Source.Type == "user" {
			role = "user"
		}
		out = append(out, Entry{ID: "history-" + itoa(k), CreatedAt: h.CreatedAt, Role: role, Before: true, UserID: x.Source.UserID, Type: x.Type, Payload: x.Payload})
	}
	var msgs []platform.Message
	next := ""
	for len(msgs) < maxTranscript {
		path := "/v1/chat/messages?conversationId=" + url.QueryEscape(h.ConversationID)
		if next != "" {
			path += "&nextToken=" + url.QueryEscape(next)
		}
		var page struct {
			Messages []platform.Message `json:"messages"`
			Meta     struct {
				NextToken string `json:"nextToken"`
			} `json:"meta"`
		}
		if err := in.API.Call(ctx, in, "GET", path, nil, &page); err != nil {
			return nil, err
		}
		msgs = append(msgs, page.Messages...)
		if next = page.Meta.NextToken; next == "" {
			break
		}
	}
	sort.SliceStable(msgs, func(a, b int) bool {
		if msgs[a].CreatedAt != msgs[b].CreatedAt {
			return msgs[a].CreatedAt < msgs[b].CreatedAt
		}
		return msgs[a].ID < msgs[b].ID
	})
	for _, m := range msgs {
		e := Entry{ID: m.ID, CreatedAt: m.CreatedAt, UserID: m.UserID, Type: m.Type, Payload: m.Payload}
		var p struct {
			UserID string `json:"userId"`
		}
		_ = json.Unmarshal(m.Payload, &p)
		switch {
		case m.Direction == "incoming":
			e.Role = "agent"
		case p.UserID != "" && p.UserID == h.UserID:
			e.Role, e.UserID = "user", h.UserID
		default:
			e.Role = "bot"
		}
		out = append(out, e)
	}
	return out, nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
