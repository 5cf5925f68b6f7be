// Package tunnel is the local platform's stand-in for Botpress's tunnel
// service, so that `bp dev --tunnelUrl <platform url>` of the official CLI
// works unchanged (docs/runtime.md, "bp dev through the platform's tunnel").
//
// The protocol is the one of @bpinternal/tunnel 0.1.11, which the CLI uses:
//
//   - the CLI (the "tail") opens a WebSocket to /<tunnelId>, tunnelId
//     matching ^[\w|-]+$, and sends {"type":"hello"} every 5 s;
//   - every HTTP request to /<tunnelId>[/<rest>][?<query>] is sent to it as
//     {"type":"request","id","method","path","query"?,"headers"?,"body"?}
//     (path: /<rest>, "/" for none; query without "?");
//   - it answers {"type":"response","requestId","status","headers"?,"body"?},
//     relayed to the caller (status, headers, body);
//   - close codes: 4000 invalid tunnel id, 4001 id conflict, 4002 invalid
//     response payload.
//
// The bot url `bp dev` registers is <tunnelUrl>/<tunnelId>: the runtime's
// dispatcher delivers there like to any url, and its call comes back in
// through this package to the CLI, which forwards it to the bot on its
// machine.
package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
)

// Close codes of @bpinternal/tunnel (src/errors.ts), and the standard ones
// this server uses.
const (
	CloseInvalidTunnelID  websocket.StatusCode = 4000
	CloseTunnelIDConflict websocket.StatusCode = 4001
	CloseInvalidResponse  websocket.StatusCode = 4002
	// CloseTooManyTunnels: the server holds Options.MaxTunnels tails
	// already (1013, "try again later").
	CloseTooManyTunnels websocket.StatusCode = 1013
	// CloseIdle: the tail sent nothing (not even a hello) for IdleTimeout.
	CloseIdle websocket.StatusCode = websocket.StatusPolicyViolation
)

// Options bound what tails and the requests through them may hold.
// Zero fields take the defaults below.
type Options struct {
	// Reserved are first path segments that are never tunnel ids: the
	// API's own prefixes (v1, webhooks, ...). A tail cannot take them, and
	// requests under them are never claimed.
	Reserved []string
	// MaxTunnels is how many tails may be connected at once (default 64).
	MaxTunnels int
	// MaxInFlight is how many requests may wait for one tail's answers at
	// once (default 256); more are answered 429.
	MaxInFlight int
	// MaxBodyBytes bounds a request body sent through a tunnel (default
	// 4 MiB); a larger one is answered 413.
	MaxBodyBytes int64
	// MaxMessageBytes bounds one message of a tail (default 16 MiB); a
	// larger one closes the tail (1009).
	MaxMessageBytes int64
	// Timeout is how long a request waits for its answer (default 60 s,
	// longer than any delivery's own timeout); then 504.
	Timeout time.Duration
	// IdleTimeout: a tail that sends nothing for this long is closed
	// (default 30 s; the CLI says hello every 5 s). It also drops a tail
	// whose connection died without a close.
	IdleTimeout time.Duration
	Logger      *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxTunnels <= 0 {
		o.MaxTunnels = 64
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 256
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 16 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// idPattern is the tunnel id of @bpinternal/tunnel (src/rooting.ts).
var idPattern = regexp.MustCompile(`^[\w|-]+$`)

// uuidPattern is the shape of the ids `bp dev` makes (uuid v4): a request
// to such an id is the tunnel's even while no tail is connected (the CLI
// reconnecting, or not yet started), so that it is answered 502, which the
// runtime retries, rather than the API's 405.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Server accepts tails and relays requests to them. Its zero value is not
// usable: call New.
type Server struct {
	opts     Options
	reserved map[string]bool
	mu       sync.Mutex
	tails    map[string]*tail
	closed   bool
}

// New returns a tunnel server.
func New(o Options) *Server {
	o = o.withDefaults()
	s := &Server{opts: o, reserved: map[string]bool{}, tails: map[string]*tail{}}
	for _, r := range o.Reserved {
		s.reserved[strings.ToLower(r)] = true
	}
	return s
}

// IsUpgrade tells whether r asks for a WebSocket.
func IsUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// firstSegment splits an escaped path /<first>[/<rest>] into its first
// segment (unescaped) and the rest ("/" when none).
func firstSegment(escaped string) (first, rest string, ok bool) {
	if !strings.HasPrefix(escaped, "/") {
		return "", "", false
	}
	seg, rest, found := strings.Cut(escaped[1:], "/")
	if found {
		rest = "/" + rest
	} else {
		rest = "/"
	}
	first, err := url.PathUnescape(seg)
	if err != nil {
		return "", "", false
	}
	return first, rest, true
}

// Claims tells whether r is the tunnel's: a WebSocket upgrade outside the
// reserved prefixes (a tail connecting; an invalid id is refused with
// close 4000), or a request to /<tunnelId>[/...] while that tail is
// connected, or for an id shaped like the ones `bp dev` makes. Anything
// else is left to the API.
func (s *Server) Claims(r *http.Request) bool {
	first, _, ok := firstSegment(r.URL.EscapedPath())
	if !ok || s.reserved[strings.ToLower(first)] {
		return false
	}
	if IsUpgrade(r) && r.Method == http.MethodGet {
		return true
	}
	if !idPattern.MatchString(first) {
		return false
	}
	if uuidPattern.MatchString(first) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tails[first] != nil
}

// Connected tells whether a tail holds the tunnel id.
func (s *Server) Connected(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tails[id] != nil
}

// ServeHTTP accepts a tail (a WebSocket upgrade) or relays a request to
// one. Call it for requests Claims accepts.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	httpapi.SetCaller(r.Context(), "tunnel")
	first, rest, _ := firstSegment(r.URL.EscapedPath())
	if IsUpgrade(r) && r.Method == http.MethodGet {
		if err := checkHandshake(r); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		s.acceptTail(w, r, first, rest)
		return
	}
	if err := s.relay(w, r, first, rest); err != nil {
		httpapi.WriteError(w, r, err)
	}
}

// checkHandshake refuses, in the API's error shape, the handshakes the
// WebSocket library would refuse in plain text: a malformed one, and one
// from a browser page of another origin (the CLI sends no Origin), which
// must not open tunnels from a developer's browser.
func checkHandshake(r *http.Request) error {
	if r.Header.Get("Sec-WebSocket-Version") != "13" || r.Header.Get("Sec-WebSocket-Key") == "" {
		return platform.Invalid("a WebSocket handshake needs Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return platform.Forbidden("a page of origin %q cannot open a tunnel", o)
		}
	}
	return nil
}

// Close closes every tail (1001, going away) and refuses new ones; the
// requests waiting for them are answered 502.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	tails := make([]*tail, 0, len(s.tails))
	for _, t := range s.tails {
		tails = append(tails, t)
	}
	s.mu.Unlock()
	for _, t := range tails {
		t.close(websocket.StatusGoingAway, "the platform is shutting down")
	}
	for _, t := range tails {
		<-t.done
	}
	return nil
}

// tail is one connected CLI.
type tail struct {
	id   string
	conn *websocket.Conn
	done chan struct{} // closed once the tail is gone

	mu      sync.Mutex
	pending map[string]chan response
	gone    bool
	once    sync.Once
}

// response is a tail's answer to one request.
type response struct {
	Status  int
	Headers map[string][]string
	Body    string
}

// acceptTail upgrades the connection and registers the tail under its id,
// then reads its messages until it leaves.
func (s *Server) acceptTail(w http.ResponseWriter, r *http.Request, id, rest string) {
	// The connection leaves HTTP: no deadline an earlier request or a
	// middleware left on it may cut the tunnel (the idle timeout below
	// bounds a silent tail instead).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the handshake's error itself
	}
	conn.SetReadLimit(s.opts.MaxMessageBytes)
	refuse := func(code websocket.StatusCode, reason string) {
		s.opts.Logger.Info("tunnel refused", "tunnelId", id, "code", int(code), "reason", reason)
		_ = conn.Close(code, shortReason(reason))
	}
	if rest != "/" || !idPattern.MatchString(id) || s.reserved[strings.ToLower(id)] {
		refuse(CloseInvalidTunnelID, "invalid tunnel id: the url must be /<tunnelId>, tunnelId matching ^[\\w|-]+$ and not a path of the API")
		return
	}
	t := &tail{id: id, conn: conn, done: make(chan struct{}), pending: map[string]chan response{}}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		refuse(websocket.StatusGoingAway, "the platform is shutting down")
		return
	case s.tails[id] != nil:
		s.mu.Unlock()
		refuse(CloseTunnelIDConflict, "tunnel id conflict: another client holds this tunnel id")
		return
	case len(s.tails) >= s.opts.MaxTunnels:
		s.mu.Unlock()
		refuse(CloseTooManyTunnels, fmt.Sprintf("too many tunnels: at most %d at once", s.opts.MaxTunnels))
		return
	}
	s.tails[id] = t
	s.mu.Unlock()
	s.opts.Logger.Info("tunnel connected", "tunnelId", id)

	code, reason := s.readTail(t)
	s.mu.Lock()
	if s.tails[id] == t {
		delete(s.tails, id)
	}
	s.mu.Unlock()
	t.close(code, reason)
	s.opts.Logger.Info("tunnel disconnected", "tunnelId", id, "code", int(code), "reason", reason)
}

// readTail reads the tail's messages (hellos and answers) until it leaves
// or breaks the protocol, and says how to close it.
func (s *Server) readTail(t *tail) (websocket.StatusCode, string) {
	// A read whose context ends closes the connection at once, without a
	// close frame: silence is timed apart, and closes with a reason.
	idle := time.AfterFunc(s.opts.IdleTimeout, func() {
		t.close(CloseIdle, fmt.Sprintf("no message for %s (send a hello every few seconds)", s.opts.IdleTimeout))
	})
	defer idle.Stop()
	for {
		_, data, err := t.conn.Read(context.Background())
		if err != nil {
			if st := websocket.CloseStatus(err); st != -1 {
				return st, "" // the tail closed: the close is answered
			}
			if errors.Is(err, websocket.ErrMessageTooBig) {
				return websocket.StatusMessageTooBig, fmt.Sprintf("a message is larger than %d bytes", s.opts.MaxMessageBytes)
			}
			return websocket.StatusGoingAway, "connection lost"
		}
		idle.Reset(s.opts.IdleTimeout)
		requestID, res, hello, err := parseMessage(data)
		if err != nil {
			return CloseInvalidResponse, "invalid response payload: " + err.Error()
		}
		if hello {
			continue
		}
		t.answer(requestID, res)
	}
}

// parseMessage reads a tail's message: a hello or an answer
// (@bpinternal/tunnel's headSchema; unknown fields are ignored, header
// values may be a string, a number or a list of strings).
func parseMessage(data []byte) (requestID string, res response, hello bool, err error) {
	var m struct {
		Type      *string                    `json:"type"`
		RequestID *string                    `json:"requestId"`
		Status    *float64                   `json:"status"`
		Headers   map[string]json.RawMessage `json:"headers"`
		Body      *string                    `json:"body"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", res, false, errors.New("not a JSON object of the tunnel protocol")
	}
	if m.Type != nil && *m.Type == "hello" {
		return "", res, true, nil
	}
	if m.Type != nil && *m.Type != "response" {
		return "", res, false, fmt.Errorf("type %q is neither hello nor response", *m.Type)
	}
	if m.RequestID == nil || m.Status == nil {
		return "", res, false, errors.New("an answer needs requestId (string) and status (number)")
	}
	res.Status = int(*m.Status)
	if float64(res.Status) != *m.Status {
		return "", res, false, errors.New("status must be an integer")
	}
	res.Headers = map[string][]string{}
	for k, raw := range m.Headers {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", res, false, fmt.Errorf("header %q", k)
		}
		switch v := v.(type) {
		case nil:
		case string:
			res.Headers[k] = []string{v}
		case float64:
			res.Headers[k] = []string{fmt.Sprint(v)}
		case []any:
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					return "", res, false, fmt.Errorf("header %q: a list of strings expected", k)
				}
				res.Headers[k] = append(res.Headers[k], s)
			}
		default:
			return "", res, false, fmt.Errorf("header %q: a string or a list of strings expected", k)
		}
	}
	if m.Body != nil {
		res.Body = *m.Body
	}
	return *m.RequestID, res, false, nil
}

// answer hands an answer to the request waiting for it; an answer to no
// waiting request (late, after its timeout, or unknown) is dropped.
func (t *tail) answer(requestID string, res response) {
	t.mu.Lock()
	ch := t.pending[requestID]
	delete(t.pending, requestID)
	t.mu.Unlock()
	if ch != nil {
		ch <- res // buffered: never blocks
	}
}

// close closes the connection once and wakes every waiting request.
func (t *tail) close(code websocket.StatusCode, reason string) {
	t.once.Do(func() {
		t.mu.Lock()
		t.gone = true
		t.mu.Unlock()
		_ = t.conn.Close(code, shortReason(reason))
		close(t.done)
	})
}

// wait registers a request id, bounded by max in flight.
func (t *tail) wait(id string, max int) (chan response, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return nil, errGone(t.id)
	}
	if len(t.pending) >= max {
		return nil, platform.Errorf(platform.ErrRateLimited, "tunnel %q has %d requests waiting for its client already; try again later", t.id, max)
	}
	ch := make(chan response, 1)
	t.pending[id] = ch
	return ch, nil
}

func (t *tail) forget(id string) {
	t.mu.Lock()
	delete(t.pending, id)
	t.mu.Unlock()
}

// shortReason fits a close reason in a close frame (at most 123 bytes).
func shortReason(s string) string {
	for len(s) > 123 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

func errGone(id string) error {
	return platform.Errorf(platform.ErrBadGateway, "no client is connected to tunnel %q (is `bp dev` running?)", id)
}

// request is the message sent to a tail.
type request struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Method  string         `json:"method"`
	Path    string         `json:"path"`
	Query   string         `json:"query,omitempty"`
	Headers map[string]any `json:"headers,omitempty"`
	Body    *string        `json:"body,omitempty"`
}

// hopHeaders are the headers of one connection, never relayed (RFC 9110
// 7.6.1), with Content-Length, which the receiving side computes.
var hopHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-authenticate": true, "proxy-authorization": true,
	"proxy-connection": true, "te": true, "trailer": true, "transfer-encoding": true, "upgrade": true,
	"content-length": true,
}

func relayable(h http.Header, name string) bool {
	n := strings.ToLower(name)
	if hopHeaders[n] {
		return false
	}
	return !headerHasToken(h, "Connection", n)
}

// validName tells whether a header name is an RFC 9110 token: anything
// else from a tail is left out rather than mangled on the wire.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validValue tells whether a header value holds no control character
// (CR and LF would split it into other headers).
func validValue(v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// relay sends r to the tail of id and writes its answer.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, id, rest string) error {
	s.mu.Lock()
	t := s.tails[id]
	s.mu.Unlock()
	if t == nil {
		return errGone(id)
	}
	var body *string
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBodyBytes+1))
		if err != nil {
			return platform.Invalid("the request body could not be read: %v", err)
		}
		if int64(len(b)) > s.opts.MaxBodyBytes {
			return platform.Errorf(platform.ErrPayloadTooLarge, "the request body is larger than the %d bytes a tunnel carries", s.opts.MaxBodyBytes)
		}
		if !utf8.Valid(b) {
			return platform.Errorf(platform.ErrUnsupportedMedia, "the request body is not UTF-8 text: the tunnel protocol carries text bodies only")
		}
		if len(b) > 0 {
			str := string(b)
			body = &str
		}
	}
	msg := request{Type: "request", ID: platform.NewID("treq_"),
		Method: r.Method, Path: rest, Query: r.URL.RawQuery, Body: body, Headers: map[string]any{}}
	for k, vs := range r.Header {
		if !relayable(r.Header, k) {
			continue
		}
		if len(vs) == 1 {
			msg.Headers[strings.ToLower(k)] = vs[0]
		} else {
			msg.Headers[strings.ToLower(k)] = vs
		}
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ch, err := t.wait(msg.ID, s.opts.MaxInFlight)
	if err != nil {
		return err
	}
	defer t.forget(msg.ID)
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	if err := t.conn.Write(ctx, websocket.MessageText, data); err != nil {
		t.close(websocket.StatusGoingAway, "write failed")
		return platform.Errorf(platform.ErrBadGateway, "the request could not be sent through tunnel %q: %v", id, err)
	}
	var res response
	select {
	case res = <-ch:
	case <-t.done:
		return platform.Errorf(platform.ErrBadGateway, "the client of tunnel %q left before answering", id)
	case <-ctx.Done():
		if r.Context().Err() != nil {
			return r.Context().Err() // the caller left: no one reads the answer
		}
		return platform.Errorf(platform.ErrOperationTimeout, "no answer through tunnel %q within %s", id, s.opts.Timeout)
	}
	if res.Status < 200 || res.Status > 599 {
		return platform.Errorf(platform.ErrBadGateway, "the client of tunnel %q answered status %d, outside 200..599", id, res.Status)
	}
	for k, vs := range res.Headers {
		if !relayable(http.Header{}, k) || !validName(k) {
			continue
		}
		for _, v := range vs {
			if validValue(v) {
				w.Header().Add(k, v)
			}
		}
	}
	w.WriteHeader(res.Status)
	_, _ = io.WriteString(w, res.Body)
	return nil
}
