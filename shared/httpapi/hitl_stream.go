package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/botforge/platform/shared/hitl"
	"github.com/botforge/platform/shared/platform"
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
// (the stream host's when another host serves the streams).
func (s *server) createHitlStreamTicket(c *call) (any, error) {
	if c.principal.Kind != platform.PrincipalAccount {
		return nil, platform.Forbidden("the inbox stream needs a workspace member's credentials")
	}
	exp := time.Now().Add(hitl.TicketTTL)
	t := hitl.Ticket(s.PagingKey, c.workspaceID, c.principal.AccountID, exp)
	u := strings.TrimSuffix(s.ChatStreamURL, "/") + strings.Replace(hitlStreamPath, "{id}", url.PathEscape(c.workspaceID), 1) + "?ticket=" + url.QueryEscape(t)
	return map[string]any{"ticket": t, "expiresAt": exp.UTC().Format(time.RFC3339), "url": u}, nil
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
	account, err := hitl.CheckTicket(s.PagingKey, r.URL.Query().Get("ticket"), ws, time.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Store == nil {
		s.writeError(w, r, platform.Errorf(platform.ErrInternal, "no store"))
		return
	}
	if _, ok, err := s.Store.GetMember(r.Context(), ws, account); err != nil {
		s.writeError(w, r, err)
		return
	} else if !ok {
		s.writeError(w, r, platform.Forbidden("the stream ticket's member is no longer a member of workspace %q", ws))
		return
	}
	b, _ := s.Builtins.Named(hitl.Name)
	desk, ok := b.(*hitl.Integration)
	if !ok || desk.Hub == nil {
		s.writeError(w, r, platform.Errorf(platform.ErrMethodNotFound, "the hitl integration is not served here: no inbox stream"))
		return
	}
	sub := desk.Hub.Subscribe(hitl.Topic(ws))
	defer sub.Close()

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
		}
	}
}
