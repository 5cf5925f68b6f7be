package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/botforge/platform/shared/hitl"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/signin"
)

// The inbox's live updates (docs/hitl.md "Live updates"): a member asks
// the admin API for a short-lived ticket (stream-ticket), and opens the
// workspace's inbox stream with it where the Chat API's streams are
// served (locally this server; on AWS the streaming function's URL, whose
// origin is not the console's, so the console's cookie is not sent there
// and EventSource cannot send a header: the ticket, signed with the
// platform's PagingKey, is the credential). The stream carries only
// "session X changed" events: the console reads the session again through
// the agent API.

// HitlStreamKeepAlive is how often an idle inbox stream writes a comment
// (a client that left is noticed at the next write).
var HitlStreamKeepAlive = 15 * time.Second

const hitlStreamPath = "/v1/chat/hitl/workspaces/{id}/stream"

// hitlTicketRoute is the admin area's ticket operation (any member).
func (s *server) hitlTicketRoute() route {
	return route{pattern: "POST /v1/admin/workspaces/{id}/hitl/stream-ticket", op: "createHitlStreamTicket",
		scope: scopeWorkspacePath, role: platform.RoleViewer, ownBody: true, handle: s.createHitlStreamTicket}
}

// createHitlStreamTicket answers a ticket for the caller and the path's
// workspace, valid hitl.TicketTTL to open a stream, and the stream's URL
// (the stream host's when another host serves the streams), with
// served: true. When this platform does not serve the hitl integration
// (PLATFORM_BUILTINS without hitl) there is no inbox stream: the answer is
// {served: false, reason} (200, so that a browser logs no failed load) and
// the console polls the agent API instead.
func (s *server) createHitlStreamTicket(c *call) (any, error) {
	if c.principal.Kind != platform.PrincipalAccount {
		return nil, platform.Forbidden("the inbox stream needs a workspace member's credentials")
	}
	if s.hitlDesk() == nil {
		return map[string]any{"served": false,
			"reason": "this platform does not serve the hitl integration (PLATFORM_BUILTINS), so there is no inbox stream: poll the agent API"}, nil
	}
	// The credential that asks: the stream ends with it (hitl.Claims).
	cred := hitl.CredToken + c.principal.TokenID
	if c.Header.Get("Authorization") == "" && signin.HasCookie(c.Request) {
		cred = hitl.CredSession + c.principal.TokenID
	}
	exp := time.Now().Add(hitl.TicketTTL)
	t := hitl.Ticket(s.PagingKey, c.workspaceID, c.principal.AccountID, cred, exp)
	u := strings.TrimSuffix(s.ChatStreamURL, "/") + strings.Replace(hitlStreamPath, "{id}", url.PathEscape(c.workspaceID), 1) + "?ticket=" + url.QueryEscape(t)
	return map[string]any{"served": true, "ticket": t, "expiresAt": exp.UTC().Format(time.RFC3339), "url": u}, nil
}

// hitlDesk is the served hitl integration with its hub; nil: none.
func (s *server) hitlDesk() *hitl.Integration {
	if s.Builtins == nil {
		return nil
	}
	b, _ := s.Builtins.Named(hitl.Name)
	desk, ok := b.(*hitl.Integration)
	if !ok || desk.Hub == nil {
		return nil
	}
	return desk
}

// hitlStreamHolds checks that a ticket's member is still a member of ws
// and its credential still valid (a session not ended nor timed out, a
// token not revoked): at the stream's opening and every
// hitl.StreamCheckEvery while it is open.
func (s *server) hitlStreamHolds(ctx context.Context, ws string, t hitl.Claims) error {
	if _, ok, err := s.Store.GetMember(ctx, ws, t.Account); err != nil {
		return err
	} else if !ok {
		return platform.Forbidden("the stream ticket's member is no longer a member of workspace %q", ws)
	}
	switch {
	case strings.HasPrefix(t.Cred, hitl.CredSession) && s.signin != nil:
		id := strings.TrimPrefix(t.Cred, hitl.CredSession)
		ss, err := s.signin.ListSessions(ctx, t.Account, "")
		if err != nil {
			return err
		}
		for _, x := range ss {
			if x.ID == id {
				return nil
			}
		}
		return platform.Errorf(platform.ErrUnauthorized, "the sign-in session that asked for the stream ticket has ended: sign in again")
	case strings.HasPrefix(t.Cred, hitl.CredToken):
		id := strings.TrimPrefix(t.Cred, hitl.CredToken)
		pats, err := s.Store.ListPATs(ctx, t.Account)
		if err != nil {
			return err
		}
		for _, p := range pats {
			if p.ID == id {
				return nil
			}
		}
		return platform.Errorf(platform.ErrUnauthorized, "the personal access token that asked for the stream ticket is revoked")
	}
	return platform.Errorf(platform.ErrUnauthorized, "query parameter \"ticket\": the stream ticket names no credential")
}

// holdHitlStream takes the stream's slots across the platform (the
// store's shared limits, as the Chat API's streams): one of the member's
// hitl.MaxStreamsPerMember in the workspace and of the workspace's
// hitl.MaxStreamsPerWorkspace; the refusal (429) says which.
func (s *server) holdHitlStream(ctx context.Context, ws, account string) (func(), error) {
	perMember, perWS := int64(hitl.MaxStreamsPerMember), int64(hitl.MaxStreamsPerWorkspace)
	return s.Store.Limiter().Hold(ctx,
		platform.Scope{Key: "streams/hitl/member/" + ws + "/" + account, Max: perMember,
			Refusal: fmt.Sprintf("you already hold %d inbox streams of workspace %q (the limit per member): close a console tab first", perMember, ws)},
		platform.Scope{Key: "streams/hitl/ws/" + ws, Max: perWS,
			Refusal: fmt.Sprintf("workspace %q already holds %d inbox streams (the limit per workspace): try again later", ws, perWS)})
}

// hitlStreamRoutes are the chat area's raw stream route.
func (s *server) hitlStreamRoutes() map[string]http.Handler {
	return map[string]http.Handler{"GET " + hitlStreamPath: http.HandlerFunc(s.hitlStream)}
}

// hitlStream holds workspace {id}'s inbox stream until the client leaves
// (or the stream host's invocation ends: the console opens another).
func (s *server) hitlStream(w http.ResponseWriter, r *http.Request) {
	// No cookie is read: any origin may open it with a ticket.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	ws := r.PathValue("id")
	t, err := hitl.CheckTicket(s.PagingKey, r.URL.Query().Get("ticket"), ws, time.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Store == nil {
		s.writeError(w, r, platform.Errorf(platform.ErrInternal, "no store"))
		return
	}
	if err := s.hitlStreamHolds(r.Context(), ws, t); err != nil {
		s.writeError(w, r, err)
		return
	}
	desk := s.hitlDesk()
	if desk == nil {
		s.writeError(w, r, platform.Errorf(platform.ErrMethodNotFound, "the hitl integration is not served here: no inbox stream"))
		return
	}
	release, err := s.holdHitlStream(r.Context(), ws, t.Account)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	sub := desk.Hub.Subscribe(hitl.Topic(ws))
	defer sub.Close()
	metrics.OpenStreams.Inc("inbox")
	defer metrics.OpenStreams.Dec("inbox")

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // the server's write timeout is for answers
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// retry: the browser reopens a dropped stream after 2 s (the ticket
	// in its URL has expired by then on a long stream: the console asks
	// for another when it sees the error).
	if !write([]byte("retry: 2000\n: connected\n\n")) {
		return
	}
	keep := time.NewTicker(HitlStreamKeepAlive)
	defer keep.Stop()
	// The member removed, the session ended, the token revoked: the
	// stream ends at the next check (the console's next ticket is refused).
	check := time.NewTicker(hitl.StreamCheckEvery)
	defer check.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case f, ok := <-sub.C:
			if !ok {
				return // dropped: too slow
			}
			if !write(f) {
				return
			}
		case <-keep.C:
			if !write([]byte(": ka\n\n")) {
				return
			}
		case <-check.C:
			if err := s.hitlStreamHolds(r.Context(), ws, t); err != nil {
				if platform.TypeOf(err) == platform.ErrInternal || r.Context().Err() != nil {
					continue // the store failed: not a reason to cut it
				}
				return
			}
		}
	}
}
