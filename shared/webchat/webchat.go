// Package webchat is the built-in `webchat` integration (shared/builtin):
// the Webchat API that the official @botpress/webchat 4.5.2 component and
// @botpress/webchat-client 0.7.3 speak, with apiUrl = <public base>/webhooks
// and clientId = the installation's webhook id (docs/webchat-api.md).
//
// The Webchat API is the Chat API (shared/chatapi) plus a few operations:
// the /initialize stream (first event `init`, then every signal),
// conversation_started with isInitial, PUT /messages/{id}, message
// feedback, the user's data (PUT /users/me {userData}), the signals of the
// bot's actions (actions.go: typing, visibility, configuration, custom
// events), POST /users/key (x-admin-secret),
// POST /files (a presigned upload to the platform's file storage) and
// POST /p (metrics, accepted and dropped). Everything the two APIs share is
// served by a chatapi.Integration of its own over the same listener hub:
// the same users, keys, limits, streams and checks.
package webchat

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/platform"
)

// Name and Version of the published integration, and ComponentVersion,
// the @botpress/webchat whose Webchat API it serves (and whose build the
// page vendors). Version changes with the definition (a published version
// is never rewritten, docs/builtin.md): 4.5.2 had the typing actions only;
// 4.6.0 adds the actions of Botpress's webchat integration and the user's
// userData tag; 4.7.0 the custom event's shape of the chat integration
// 0.6.0 ({userId, conversationId, payload}) and the limits of the
// configuration (chatapi.LimitsSchema); 4.8.0 the hitl plugin's
// getOrCreateUser (an agent's name and picture). Installations of 4.5.2 keep
// working (served by name) with its actions until the bot moves on.
const (
	Name             = "webchat"
	Version          = "4.8.0"
	ComponentVersion = "4.5.2"
)

// MaxFileSize caps a file an end user uploads (POST /files).
const MaxFileSize = 10 << 20

// Integration is the webchat integration.
type Integration struct {
	chat *chatapi.Integration
}

// New returns the webchat integration over hub (shared with the chat
// integration's streams; nil: a hub of its own) and the platform's shared
// limits (the chat integration's: the same counts).
func New(hub chatapi.Hub, limits platform.SharedLimits) *Integration {
	return &Integration{chat: chatapi.New(hub, limits)}
}

// Definition is the published version: the chat integration's channel and
// user (the userData tag added), its own configuration (adminSecret added)
// and its actions (actions.go).
func (wi *Integration) Definition() platform.Integration {
	d := wi.chat.Definition()
	d.Name, d.Version, d.Title = Name, Version, "Webchat"
	d.Description = "The Webchat API of @botpress/webchat, served by the platform, and a hosted page with the official webchat component."
	d.Configuration = json.RawMessage(`{"identifier":{"required":false},"schema":{"type":"object","properties":{` +
		`"encryptionKey":{"type":"string","minLength":1,"description":"Personal mode: the clients sign their own user keys (HS256) with this key, and POST /users is refused."},` +
		`"adminSecret":{"type":"string","minLength":16,"description":"The secret of x-admin-secret: POST /users/key makes a key for any user id. Keep it on your servers."},` +
		`"allowedOrigins":{"type":"array","items":{"type":"string"},"description":"Browser origins (scheme://host[:port]) allowed to call this installation's Webchat API; none: only the platform's hosted page."},` +
		chatapi.LimitsSchema +
		`},"additionalProperties":false}}`)
	// Feedback on a message is kept in its tags (the bot reads them).
	var ch map[string]any
	if json.Unmarshal(d.Channels["channel"], &ch) == nil {
		ch["message"] = map[string]any{"tags": map[string]any{
			"feedback":        map[string]any{"title": "End user's feedback (positive or negative)"},
			"feedbackComment": map[string]any{"title": "End user's feedback comment"},
		}}
		if b, err := json.Marshal(ch); err == nil {
			d.Channels = map[string]json.RawMessage{"channel": b}
		}
	}
	d.User = json.RawMessage(`{"tags":{"fid":{"title":"Chat API id"},"profile":{"title":"Profile"},"userData":{"title":"User data (JSON) given by the webchat component"}},"creation":{"enabled":false,"requiredTags":[]}}`)
	d.Actions = actionDefinitions()
	return d
}

// config is the part of an installation's configuration the webchat
// reads itself (the rest is the Chat API's).
type config struct {
	AdminSecret    string   `json:"adminSecret"`
	AllowedOrigins []string `json:"allowedOrigins"`
}

func configOf(in builtin.Install) config {
	var c config
	_ = json.Unmarshal(in.Instance.Configuration, &c)
	return c
}

// Register has nothing to set up (the Chat API's keys need nothing stored).
func (wi *Integration) Register(ctx context.Context, in builtin.Install) error {
	return wi.chat.Register(ctx, in)
}

// Unregister closes the installation's streams held by this process.
func (wi *Integration) Unregister(ctx context.Context, in builtin.Install) error {
	return wi.chat.Unregister(ctx, in)
}

// SendMessage hands the bot's message to the conversation's listeners.
func (wi *Integration) SendMessage(ctx context.Context, in builtin.Install, m builtin.Outgoing) error {
	return wi.chat.SendMessage(ctx, in, m)
}

// ServeWebhook serves the Webchat API below the installation's webhook URL.
func (wi *Integration) ServeWebhook(w http.ResponseWriter, r *http.Request, in builtin.Install, path string) {
	q := &req{wi: wi, in: in, cfg: configOf(in), w: w, r: r, ctx: r.Context()}
	if !q.cors() {
		return
	}
	if in.API == nil {
		builtin.WriteError(w, platform.Errorf(platform.ErrBadGateway, "the platform's Chat API is not served in this process"))
		return
	}
	if q.servePage(path) {
		return
	}
	seg := strings.Split(strings.Trim(path, "/"), "/")
	m := r.Method
	var out any
	status := http.StatusOK
	var err error
	switch {
	case m == "GET" && path0(seg, "initialize"):
		err = q.initialize()
		if err == nil {
			return // the stream answered
		}
	case m == "POST" && path0(seg, "events"):
		out, status, err = q.createEvent()
	case m == "PUT" && len(seg) == 2 && seg[0] == "messages":
		out, err = q.updateMessage(seg[1])
	case m == "PUT" && len(seg) == 3 && seg[0] == "messages" && seg[2] == "feedback":
		out, err = q.feedback(seg[1], true)
	case m == "DELETE" && len(seg) == 3 && seg[0] == "messages" && seg[2] == "feedback":
		out, err = q.feedback(seg[1], false)
	case m == "GET" && len(seg) == 2 && seg[0] == "users" && seg[1] == "me":
		out, err = q.getMe()
	case m == "PUT" && len(seg) == 2 && seg[0] == "users" && seg[1] == "me":
		out, err = q.updateMe()
	case m == "POST" && len(seg) == 2 && seg[0] == "users" && seg[1] == "key":
		out, err = q.userKey()
	case m == "POST" && path0(seg, "files"):
		out, err = q.createFile()
		status = http.StatusCreated
	case m == "GET" && len(seg) == 3 && seg[0] == "files":
		if err = q.serveFile(seg[1], seg[2]); err == nil {
			return
		}
	case m == "POST" && path0(seg, "p"):
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, chatapi.MaxBody))
		out = map[string]any{}
	default:
		wi.chat.ServeWebhook(w, r, in, path)
		return
	}
	if err != nil {
		builtin.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

func path0(seg []string, name string) bool { return len(seg) == 1 && seg[0] == name }

// req is one Webchat API request of an installation.
type req struct {
	wi  *Integration
	in  builtin.Install
	cfg config
	w   http.ResponseWriter
	r   *http.Request
	ctx context.Context
}

// cors answers a preflight (false: answered) and allows the origins of
// the configuration. The client sends `timeout` and `x-admin-secret` too.
func (q *req) cors() bool {
	origin := q.r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	q.w.Header().Add("Vary", "Origin")
	ok := false
	for _, o := range q.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			ok = true
		}
	}
	if q.r.Method == http.MethodOptions && q.r.Header.Get("Access-Control-Request-Method") != "" {
		if !ok {
			builtin.WriteError(q.w, platform.Forbidden("origin %q is not allowed to call this Webchat API (the installation's configuration allowedOrigins)", origin))
			return false
		}
		h := q.w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "x-user-key, x-admin-secret, timeout, content-type, accept, cache-control, last-event-id")
		h.Set("Access-Control-Max-Age", "600")
		q.w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}

// chat runs one Chat API operation of the installation in-process, as the
// caller with key (the Chat API's checks, limits and shapes), and decodes
// its answer into out; an error answer is its *platform.Error.
func (q *req) chat(method, path, key string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequestWithContext(q.ctx, method, "/"+strings.TrimPrefix(path, "/"), rd)
	if err != nil {
		return err
	}
	// The caller's address (shared/clientip) rides on q.ctx.
	r.RemoteAddr = q.r.RemoteAddr
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set("x-user-key", key)
	}
	rec := httptest.NewRecorder()
	q.wi.chat.ServeWebhook(rec, r, q.in, r.URL.Path)
	if rec.Code/100 != 2 {
		var e struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Type == "" {
			return platform.Errorf(platform.ErrInternal, "Chat API %s %s: status %d", method, path, rec.Code)
		}
		return &platform.Error{Type: platform.ErrorType(e.Type), Message: e.Message}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(rec.Body.Bytes(), out)
}

func (q *req) key() string { return strings.TrimSpace(q.r.Header.Get("x-user-key")) }

// body reads the request body within the Chat API's limit.
func (q *req) body() ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(q.r.Body, chatapi.MaxBody+1))
	if err != nil {
		return nil, platform.Invalid("could not read the request body: %v", err)
	}
	if len(b) > chatapi.MaxBody {
		return nil, platform.Errorf(platform.ErrPayloadTooLarge, "a request body may not exceed %d bytes", chatapi.MaxBody)
	}
	return b, nil
}

func decodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return platform.Invalid("invalid body: %v", err)
	}
	return nil
}

// userKey is POST /users/key: a key for any user id, for the holder of
// the installation's adminSecret (a site that signs its users in).
func (q *req) userKey() (any, error) {
	given := q.r.Header.Get("x-admin-secret")
	if q.cfg.AdminSecret == "" {
		return nil, platform.Forbidden("this webchat has no adminSecret in its configuration: POST /users/key is refused")
	}
	if given == "" || subtle.ConstantTimeCompare([]byte(given), []byte(q.cfg.AdminSecret)) != 1 {
		return nil, platform.Errorf(platform.ErrUnauthorized, "invalid or missing x-admin-secret")
	}
	b, err := q.body()
	if err != nil {
		return nil, err
	}
	var in struct {
		ID        string   `json:"id"`
		ExpiresAt *float64 `json:"expiresAt"` // milliseconds since the epoch
	}
	if err := decodeStrict(b, &in); err != nil {
		return nil, err
	}
	var exp time.Time
	if in.ExpiresAt != nil {
		exp = time.UnixMilli(int64(*in.ExpiresAt))
		if !exp.After(time.Now()) {
			return nil, platform.Invalid("invalid body: field \"expiresAt\": must be in the future (milliseconds since 1970)")
		}
	}
	key, err := chatapi.SignUserKey(q.in, in.ID, exp)
	if err != nil {
		return nil, err
	}
	return map[string]any{"key": key}, nil
}
