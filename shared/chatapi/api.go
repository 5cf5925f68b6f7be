package chatapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/platform"
)

// req is one Chat API request of an installation.
type req struct {
	ci  *Integration
	in  builtin.Install
	cfg config
	r   *http.Request
	ctx context.Context
	w   http.ResponseWriter

	key  string // the x-user-key
	fid  string // the user's Chat API id
	user platform.User
}

// ServeWebhook serves the Chat API below the installation's webhook URL.
func (ci *Integration) ServeWebhook(w http.ResponseWriter, r *http.Request, in builtin.Install, path string) {
	q := &req{ci: ci, in: in, cfg: configOf(in), r: r, ctx: r.Context(), w: w}
	if origin := r.Header.Get("Origin"); origin != "" {
		w.Header().Add("Vary", "Origin")
		ok := allowOrigin(q.cfg, origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if !ok {
				builtin.WriteError(w, platform.Forbidden("origin %q is not allowed to call this Chat API (the installation's configuration allowedOrigins)", origin))
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "x-user-key, content-type, accept, cache-control, last-event-id")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if ok {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		}
	}
	out, status, err := q.route(path)
	if err != nil {
		builtin.WriteError(w, err)
		return
	}
	if out == nil { // a stream: answered
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

// route dispatches one operation; a nil answer without error is a stream
// that answered itself.
func (q *req) route(path string) (any, int, error) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range seg {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, 0, platform.Invalid("invalid path segment %q", s)
		}
		seg[i] = u
	}
	m := q.r.Method
	n := len(seg)
	is := func(method string, parts ...string) bool {
		if method != m || len(parts) != n {
			return false
		}
		for i, p := range parts {
			if p != "*" && p != seg[i] {
				return false
			}
		}
		return true
	}
	ok := func(v any, err error) (any, int, error) { return v, http.StatusOK, err }
	created := func(v any, err error) (any, int, error) { return v, http.StatusCreated, err }
	if is("GET", "hello") {
		return map[string]any{}, http.StatusOK, nil
	}
	// Users: the two that make a user do not need one.
	if is("POST", "users") {
		if err := q.limit(); err != nil {
			return nil, 0, err
		}
		if err := q.countCreation(); err != nil {
			return nil, 0, err
		}
		return created(q.createUser())
	}
	if err := q.authenticate(); err != nil {
		return nil, 0, err
	}
	if err := q.limit(); err != nil {
		return nil, 0, err
	}
	switch {
	case is("POST", "users", "get-or-create"):
		return created(q.getOrCreateUser())
	case is("GET", "users", "me"):
		return ok(q.getMe())
	case is("PUT", "users", "me"):
		return ok(q.updateMe())
	case is("DELETE", "users", "me"):
		return ok(q.deleteMe())

	case is("POST", "conversations"):
		return created(q.createConversation())
	case is("POST", "conversations", "get-or-create"):
		return created(q.getOrCreateConversation())
	case is("GET", "conversations"):
		return ok(q.listConversations())
	case is("GET", "conversations", "*"):
		return ok(q.getConversation(seg[1]))
	case is("DELETE", "conversations", "*"):
		return ok(q.deleteConversation(seg[1]))
	case is("GET", "conversations", "*", "listen") && isWebSocket(q.r):
		return nil, 0, q.listenWebSocket(seg[1])
	case is("GET", "conversations", "*", "listen"):
		return nil, 0, q.listen(seg[1])
	case is("GET", "conversations", "*", "messages"):
		return ok(q.listMessages(seg[1]))
	case is("POST", "conversations", "*", "participants"):
		return ok(q.addParticipant(seg[1]))
	case is("GET", "conversations", "*", "participants"):
		return ok(q.listParticipants(seg[1]))
	case is("GET", "conversations", "*", "participants", "*"):
		return ok(q.getParticipant(seg[1], seg[3]))
	case is("DELETE", "conversations", "*", "participants", "*"):
		return ok(q.removeParticipant(seg[1], seg[3]))

	case is("POST", "messages"):
		return created(q.createMessage())
	case is("GET", "messages", "*"):
		return ok(q.getMessage(seg[1]))
	case is("DELETE", "messages", "*"):
		return ok(q.deleteMessage(seg[1]))

	case is("POST", "events"):
		return created(q.createEvent())
	case is("GET", "events", "*"):
		return ok(q.getEvent(seg[1]))
	}
	return nil, 0, platform.Errorf(platform.ErrMethodNotFound, "no operation %s %s in the Chat API", m, path)
}

// call calls the platform's Chat API as the installation.
func (q *req) call(method, path string, body, out any) error {
	if q.in.API == nil {
		return errors.New("the platform's Chat API is not served in this process")
	}
	return q.in.API.Call(q.ctx, q.in, method, path, body, out)
}

// decode reads the JSON body into v (unknown fields refused), within MaxBody.
func (q *req) decode(v any) error {
	b, err := io.ReadAll(io.LimitReader(q.r.Body, MaxBody+1))
	if err != nil {
		return platform.Invalid("could not read the request body: %v", err)
	}
	if len(b) > MaxBody {
		return platform.Errorf(platform.ErrPayloadTooLarge, "a request body may not exceed %d bytes", MaxBody)
	}
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

// limit takes a token of the caller's rate (by key, else by address).
func (q *req) limit() error {
	if q.key != "" {
		if !q.ci.allow(q.in.Instance.WebhookID + "\x00" + q.key) {
			return platform.Errorf(platform.ErrRateLimited, "too many requests for this user key (the limit per user key): at most %g a second (bursts of %d)", RatePerSecond, Burst)
		}
		return nil
	}
	addr := clientip.Of(q.r)
	if !q.ci.allow(q.in.Instance.WebhookID + "\x00addr:" + addr) {
		return platform.Errorf(platform.ErrRateLimited, "too many requests from your address (%s) (the limit per address): at most %g a second (bursts of %d)", addr, RatePerSecond, Burst)
	}
	return nil
}

// countCreation counts an anonymous user's creation against the address's
// and the installation's MaxUsersPerAddress and MaxUsers per UsersWindow,
// across the platform (Limits).
func (q *req) countCreation() error {
	if q.ci.Limits == nil {
		return nil
	}
	wh, addr := q.in.Instance.WebhookID, clientip.Of(q.r)
	every := UsersWindow.String()
	perAddr, all := or(q.cfg.Limits.UsersPerAddress, MaxUsersPerAddress), or(q.cfg.Limits.Users, MaxUsers)
	return builtin.OnFreshStack(func() error {
		return q.ci.Limits.Count(q.ctx, UsersWindow,
			platform.Scope{Key: "users/addr/" + wh + "/" + addr, Max: perAddr,
				Refusal: fmt.Sprintf("too many users created from your address (%s) (the limit per address): at most %d every %s", addr, perAddr, every)},
			platform.Scope{Key: "users/install/" + wh, Max: all,
				Refusal: fmt.Sprintf("too many users created on this Chat API (the limit per installation): at most %d every %s", all, every)})
	})
}

// authenticate checks x-user-key and finds its user (not created here:
// getOrCreateUser does that).
func (q *req) authenticate() error {
	q.key = strings.TrimSpace(q.r.Header.Get("x-user-key"))
	if q.key == "" && isWebSocket(q.r) {
		// A WebSocket from a browser cannot send headers: the client puts
		// the key in the query string.
		q.key = strings.TrimSpace(q.r.URL.Query().Get("x-user-key"))
	}
	if q.key == "" {
		return platform.Errorf(platform.ErrUnauthorized, "missing x-user-key: connect with a user key")
	}
	id, err := verifyKey(signingKey(q.in, q.cfg), q.key)
	if err != nil {
		return err
	}
	q.fid = id
	return nil
}

// me finds the caller's user: 404 when it does not exist (deleted, or
// never created: getOrCreateUser creates it).
func (q *req) me() error {
	u, err := q.userByFid(q.fid)
	if err != nil {
		return err
	}
	q.user = u
	return nil
}

func (q *req) cacheKey(id string) string { return q.in.Instance.WebhookID + "\x00" + id }

// userByFid finds the installation's user whose Chat API id is fid.
func (q *req) userByFid(fid string) (platform.User, error) {
	if id, ok := q.ci.users.Load(q.cacheKey(fid)); ok {
		var out struct {
			User platform.User `json:"user"`
		}
		err := q.call("GET", "/v1/chat/users/"+id, nil, &out)
		if err == nil && out.User.Tags["fid"] == fid {
			return out.User, nil
		}
		q.ci.users.Delete(q.cacheKey(fid))
	}
	var out struct {
		Users []platform.User `json:"users"`
	}
	if err := q.call("GET", "/v1/chat/users?tags%5Bfid%5D="+url.QueryEscape(fid), nil, &out); err != nil {
		return platform.User{}, err
	}
	if len(out.Users) == 0 {
		return platform.User{}, platform.NotFound("user", fid)
	}
	q.remember(out.Users[0])
	return out.Users[0], nil
}

func (q *req) remember(u platform.User) {
	if fid := u.Tags["fid"]; fid != "" {
		q.ci.users.Store(q.cacheKey(fid), u.ID)
		q.ci.fids.Store(q.cacheKey(u.ID), fid)
	}
}

// fidOf is the Chat API id of platform user id (the bot's own id stays).
func (q *req) fidOf(id string) string {
	if id == q.in.Bot.ID {
		return id
	}
	if f, ok := q.ci.fids.Load(q.cacheKey(id)); ok {
		return f
	}
	var out struct {
		User platform.User `json:"user"`
	}
	if err := q.call("GET", "/v1/chat/users/"+id, nil, &out); err == nil && out.User.Tags["fid"] != "" {
		q.remember(out.User)
		return out.User.Tags["fid"]
	}
	return id
}

// chatUser is a user as the Chat API answers it.
func chatUser(u platform.User) map[string]any {
	out := map[string]any{"id": u.Tags["fid"], "createdAt": u.CreatedAt, "updatedAt": u.UpdatedAt}
	if u.Name != "" {
		out["name"] = u.Name
	}
	if u.PictureURL != "" {
		out["pictureUrl"] = u.PictureURL
	}
	if p := u.Tags["profile"]; p != "" {
		out["profile"] = p
	}
	return out
}

type userInput struct {
	ID         *string `json:"id"`
	Name       *string `json:"name"`
	PictureURL *string `json:"pictureUrl"`
	Profile    *string `json:"profile"`
}

func (u userInput) check() error {
	if u.Profile != nil && len(*u.Profile) > 1000 {
		return platform.Invalid("invalid body: field \"profile\": at most 1000 characters")
	}
	return nil
}

// platformUser is the body of the platform's user operations.
func (u userInput) platformUser(fid string) map[string]any {
	tags := map[string]string{"fid": fid}
	if u.Profile != nil && *u.Profile != "" {
		tags["profile"] = *u.Profile
	}
	b := map[string]any{"tags": tags}
	if u.Name != nil {
		b["name"] = *u.Name
	}
	if u.PictureURL != nil {
		b["pictureUrl"] = *u.PictureURL
	}
	return b
}

func (q *req) createUser() (any, error) {
	if q.cfg.personal() {
		return nil, platform.Forbidden("this Chat API is in personal mode: clients sign their own user keys (connect with encryptionKey and userId); POST /users is refused")
	}
	var in userInput
	if err := q.decode(&in); err != nil {
		return nil, err
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	fid := ""
	if in.ID != nil {
		if err := checkID(`invalid body: field "id"`, *in.ID); err != nil {
			return nil, err
		}
		fid = *in.ID
		if _, err := q.userByFid(fid); err == nil {
			return nil, platform.Errorf(platform.ErrAlreadyExists, "user %q already exists", fid)
		} else if platform.TypeOf(err) != platform.ErrResourceNotFound {
			return nil, err
		}
	} else {
		fid = platform.NewUnguessableID(platform.PrefixUser)
	}
	b := in.platformUser(fid)
	b["discriminateByTags"] = []string{"fid"}
	var out struct {
		User platform.User `json:"user"`
	}
	if err := q.call("POST", "/v1/chat/users/get-or-create", b, &out); err != nil {
		return nil, err
	}
	q.remember(out.User)
	return map[string]any{"user": chatUser(out.User), "key": signKey(signingKey(q.in, q.cfg), fid)}, nil
}

// userBodyWithoutID decodes and checks a user body of the key's own user,
// in which an id has no place (why says so in the error).
func (q *req) userBodyWithoutID(why string) (userInput, error) {
	var in userInput
	if err := q.decode(&in); err != nil {
		return in, err
	}
	if in.ID != nil {
		return in, platform.Invalid("invalid body: field \"id\": %s", why)
	}
	return in, in.check()
}

func (q *req) getOrCreateUser() (any, error) {
	in, err := q.userBodyWithoutID("the user is the key's")
	if err != nil {
		return nil, err
	}
	u, err := q.userByFid(q.fid)
	if err == nil {
		return map[string]any{"user": chatUser(u)}, nil
	}
	// Not found (or not even searchable): a new user, whose id (the
	// key's) must keep the rule.
	if bad := checkID("the user key's id", q.fid); bad != nil {
		return nil, bad
	}
	if platform.TypeOf(err) != platform.ErrResourceNotFound {
		return nil, err
	}
	b := in.platformUser(q.fid)
	b["discriminateByTags"] = []string{"fid"}
	var out struct {
		User platform.User `json:"user"`
	}
	if err := q.call("POST", "/v1/chat/users/get-or-create", b, &out); err != nil {
		return nil, err
	}
	q.remember(out.User)
	return map[string]any{"user": chatUser(out.User)}, nil
}

func (q *req) getMe() (any, error) {
	if err := q.me(); err != nil {
		return nil, err
	}
	return map[string]any{"user": chatUser(q.user)}, nil
}

func (q *req) updateMe() (any, error) {
	in, err := q.userBodyWithoutID("a user's id cannot change")
	if err != nil {
		return nil, err
	}
	if err := q.me(); err != nil {
		return nil, err
	}
	b := in.platformUser(q.fid)
	if in.Profile == nil {
		delete(b, "tags") // unchanged
	}
	var out struct {
		User platform.User `json:"user"`
	}
	if err := q.call("PUT", "/v1/chat/users/"+q.user.ID, b, &out); err != nil {
		return nil, err
	}
	return map[string]any{"user": chatUser(out.User)}, nil
}

func (q *req) deleteMe() (any, error) {
	if err := q.me(); err != nil {
		return nil, err
	}
	if err := q.call("DELETE", "/v1/chat/users/"+q.user.ID, nil, nil); err != nil {
		return nil, err
	}
	q.ci.users.Delete(q.cacheKey(q.fid))
	q.ci.fids.Delete(q.cacheKey(q.user.ID))
	return map[string]any{}, nil
}
