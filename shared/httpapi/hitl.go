package httpapi

import (
	"encoding/json"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/hitl"
	"github.com/botforge/platform/shared/platform"
)

// The agent API of humans in the loop (docs/hitl.md): the sessions of the
// built-in hitl integration across a workspace's bots, for its members
// only (a personal access token: a bot's or an integration's key is
// refused, another workspace's member finds nothing). Reading needs the
// viewer role; answering (assign, reply, note, close) the installation's
// hitl.AgentRole. Every write is audited naming the member (audit.go).

func (s *server) hitlRoutes() []route {
	agent := hitl.AgentRole()
	const base = "/v1/admin/workspaces/{id}/hitl/sessions"
	r := func(pattern, op string, role platform.Role, h func(*call, *hitlCall) (any, error)) route {
		return route{pattern: pattern, op: op, scope: scopeWorkspacePath, role: role, ownBody: true, handle: func(c *call) (any, error) {
			if c.principal.Kind != platform.PrincipalAccount {
				return nil, platform.Forbidden("the agent API needs a workspace member's personal access token")
			}
			hc := &hitlCall{}
			if c.PathValue("bot") != "" {
				var err error
				if hc, err = s.hitlSession(c); err != nil {
					return nil, err
				}
			}
			return h(c, hc)
		}}
	}
	return []route{
		r("GET "+base, "listHitlSessions", platform.RoleViewer, s.listHitlSessions),
		r("GET "+base+"/{bot}/{conv}", "getHitlSession", platform.RoleViewer, s.getHitlSession),
		r("POST "+base+"/{bot}/{conv}/assign", "assignHitlSession", agent, s.assignHitlSession),
		r("POST "+base+"/{bot}/{conv}/messages", "replyHitlSession", agent, s.replyHitlSession),
		r("POST "+base+"/{bot}/{conv}/notes", "noteHitlSession", agent, s.noteHitlSession),
		r("POST "+base+"/{bot}/{conv}/close", "closeHitlSession", agent, s.closeHitlSession),
		s.hitlTicketRoute(), // the inbox's live updates (hitl_stream.go)
	}
}

// hitlCall is the session a call is about, with its installation.
type hitlCall struct {
	in      builtin.Install
	desk    *hitl.Integration
	session platform.HitlSession
}

// hitlSession resolves the path's bot (of the workspace), its session and
// the installation the session belongs to.
func (s *server) hitlSession(c *call) (*hitlCall, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("bot"))
	if err != nil {
		return nil, err
	}
	conv := c.PathValue("conv")
	hs, err := s.hitlStore().GetHitlSession(c.ctx, b.ID, conv)
	if err != nil {
		return nil, err
	}
	if hs.WorkspaceID != c.workspaceID {
		return nil, platform.NotFound("hitl session", conv)
	}
	inst, ok := b.Installs[hs.Alias]
	if !ok {
		return nil, platform.Errorf(platform.ErrRelationConflict, "the bot no longer has the hitl installation %q of session %q", hs.Alias, conv)
	}
	rec, err := s.Store.GetIntegration(c.ctx, inst.IntegrationID)
	if err != nil {
		return nil, err
	}
	bi, ok := s.builtinOf(rec.Integration)
	desk, isHitl := bi.(*hitl.Integration)
	if !ok || !isHitl {
		return nil, platform.Errorf(platform.ErrRelationConflict, "installation %q of bot %q is not the built-in hitl integration", hs.Alias, b.ID)
	}
	return &hitlCall{in: s.builtinInstall(b.Bot, inst, rec.Integration, webhookBase(c)), desk: desk, session: hs}, nil
}

func (s *server) hitlStore() hitl.Store { return s.Store }

func (c *call) agent() hitl.Agent {
	return hitl.Agent{AccountID: c.principal.AccountID, Email: c.member.Email}
}

// sessionView is a session as an agent sees it: its unread count for the
// caller added, the history left to the transcript.
func sessionView(h platform.HitlSession, account string) map[string]any {
	b, _ := json.Marshal(h)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	delete(m, "messageHistory")
	delete(m, "readBy")
	m["unread"] = hitl.Unread(h, account)
	return m
}

// listHitlSessions lists the workspace's sessions, newest first; status
// keeps one status (waiting, assigned, closed) or "mine" (assigned to
// the caller).
func (s *server) listHitlSessions(c *call, _ *hitlCall) (any, error) {
	status, err := c.query().oneOf("status", "", platform.HitlWaiting, platform.HitlAssigned, platform.HitlClosed, "mine")
	if err != nil {
		return nil, err
	}
	all, err := s.Store.ListHitlSessions(c.ctx, c.workspaceID, 0)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	counts := map[string]int{}
	unread := 0
	// A deleted bot's sessions (not purged: docs/hitl.md) or a bot moved
	// to another workspace are not listed.
	live := map[string]bool{}
	for _, h := range all {
		if _, seen := live[h.BotID]; !seen {
			b, err := s.Store.GetBot(c.ctx, h.BotID)
			if err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
				return nil, err
			}
			live[h.BotID] = err == nil && b.WorkspaceID == c.workspaceID
		}
		if !live[h.BotID] {
			continue
		}
		counts[h.Status]++
		if h.Status == platform.HitlAssigned && h.AssigneeID == c.principal.AccountID {
			counts["mine"]++
		}
		if h.Status != platform.HitlClosed {
			unread += hitl.Unread(h, c.principal.AccountID)
		}
		switch {
		case status == "":
		case status == "mine" && (h.Status != platform.HitlAssigned || h.AssigneeID != c.principal.AccountID):
			continue
		case status != "mine" && h.Status != status:
			continue
		}
		out = append(out, sessionView(h, c.principal.AccountID))
	}
	return map[string]any{"sessions": out, "meta": map[string]any{"counts": counts, "unread": unread, "accountId": c.principal.AccountID,
		// The least role that answers here (PLATFORM_HITL_AGENT_ROLE): the
		// console turns reply, assign, note and close off below it.
		"agentRole": hitl.AgentRole()}}, nil
}

// getHitlSession answers the session, its notes and its transcript (the
// history given at start, then the session's messages), and marks it read
// for the caller.
func (s *server) getHitlSession(c *call, hc *hitlCall) (any, error) {
	h, err := hc.desk.MarkRead(c.ctx, hc.in.Bot.ID, hc.session.ID, c.principal.AccountID)
	if err != nil {
		return nil, err
	}
	tr, err := hitl.Transcript(c.ctx, hc.in, h)
	if err != nil {
		return nil, err
	}
	v := sessionView(h, c.principal.AccountID)
	return map[string]any{"session": v, "transcript": tr}, nil
}

// assignHitlSession assigns the session to the caller, or to the member
// of accountId (who must be able to answer).
func (s *server) assignHitlSession(c *call, hc *hitlCall) (any, error) {
	var in struct {
		AccountID string `json:"accountId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	a := c.agent()
	if in.AccountID != "" && in.AccountID != a.AccountID {
		m, ok, err := s.Store.GetMember(c.ctx, c.workspaceID, in.AccountID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, platform.Invalid("invalid body: field \"accountId\": %q is not a member of this workspace", in.AccountID)
		}
		if !m.Role.AtLeast(hitl.AgentRole()) {
			return nil, platform.Invalid("invalid body: field \"accountId\": %q has the %s role; answering sessions needs %s or above", in.AccountID, m.Role, hitl.AgentRole())
		}
		a = hitl.Agent{AccountID: in.AccountID, Email: m.Email}
	}
	h, err := hc.desk.Assign(c.ctx, hc.in, hc.session.ID, a)
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": sessionView(h, c.principal.AccountID)}, nil
}

// replyHitlSession writes the caller's message to the end user.
func (s *server) replyHitlSession(c *call, hc *hitlCall) (any, error) {
	var in struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	switch in.Type {
	case "text", "image", "audio", "video", "file", "bloc":
	default:
		return nil, platform.Invalid("invalid body: field \"type\" must be one of text, image, audio, video, file, bloc")
	}
	if p := strings.TrimSpace(string(in.Payload)); !strings.HasPrefix(p, "{") {
		return nil, platform.Invalid("invalid body: field \"payload\": an object is required")
	}
	m, err := hc.desk.Reply(c.ctx, hc.in, hc.session.ID, c.agent(), in.Type, in.Payload)
	if err != nil {
		return nil, err
	}
	return map[string]any{"message": m}, nil
}

// noteHitlSession adds an internal note (never sent to the bot).
func (s *server) noteHitlSession(c *call, hc *hitlCall) (any, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Text) == "" || len(in.Text) > 4000 {
		return nil, platform.Invalid("invalid body: field \"text\": 1 to 4000 characters are required")
	}
	h, err := hc.desk.Note(c.ctx, hc.in.Bot.ID, hc.session.ID, c.agent(), in.Text)
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": sessionView(h, c.principal.AccountID)}, nil
}

// closeHitlSession closes the session and gives the conversation back to
// the bot (hitlStopped).
func (s *server) closeHitlSession(c *call, hc *hitlCall) (any, error) {
	h, err := hc.desk.Close(c.ctx, hc.in, hc.session.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": sessionView(h, c.principal.AccountID)}, nil
}
