package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// scope says what an operation acts within, and so what authorizes it.
type scope int

const (
	// scopeAccount: the calling account itself (personal access tokens only).
	scopeAccount scope = iota
	// scopeWorkspace: the workspace named by the x-workspace-id header.
	scopeWorkspace
	// scopeWorkspacePath: the workspace named by the path's {id}.
	scopeWorkspacePath
	// scopeBot: the bot named by the x-bot-id header (Chat, Tables, Files).
	scopeBot
	// scopeAnyone: any authenticated caller (the public hub); the
	// handler decides what a filter naming a bot or workspace may reveal.
	scopeAnyone
)

// route is one operation: its method and path, its reference operationId
// (which names its body schema), who may call it, and its handler.
type route struct {
	pattern string
	op      string
	scope   scope
	// role is the least workspace role the operation needs.
	role platform.Role
	// botSelf marks admin operations on the bot of path {id} that the bot's
	// own API key may call.
	botSelf bool
	// integrationSelf marks admin operations on the integration of path
	// {id} that the integration's own API key may call.
	integrationSelf bool
	// status is the success status (200 when zero).
	status int
	// ownBody: the operation is not in the reference (the cognitive API),
	// so its JSON body is read (size-checked, well-formed) but validated
	// by its handler, not against a reference schema.
	ownBody bool
	// signedAccess, when set, says whether a request without a token
	// carries its own authorization (a signed file url): it is then
	// served anonymous, and the handler checks that authorization.
	signedAccess func(*http.Request) bool
	// maxBody, when set, caps this operation's request body instead of
	// Config.MaxBodyBytes (e.g. 1000 table rows need more than 1 MiB).
	maxBody int64
	// only, when set, narrows the pattern: a request it refuses is an
	// unknown operation (405), as if the pattern did not match. It lets a
	// literal segment stand where ServeMux needs a wildcard (two patterns
	// that overlap without one being more specific cannot both be
	// registered).
	only   func(*http.Request) bool
	handle func(*call) (any, error)
}

// call is one authenticated, authorized API call being handled.
type call struct {
	*http.Request
	ctx       context.Context
	s         *server
	op        string
	principal platform.Principal
	body      []byte
	// Set by authorization for workspace and bot scopes.
	workspaceID string
	member      platform.Member // the caller's membership (account principals)
	role        platform.Role
	bot         dynamo.BotRecord // scopeBot
	// acting is the alias of the installation a Chat call made as an
	// integration acts for ("" for the bot's own calls): chat_acting.go.
	acting string
	// liveUser is a user this call read or wrote earlier (strongly
	// consistent): initializeIncomingMessage's, whose message then needs
	// no second read of its author (dynamo.MessageLookup.AuthorLive).
	liveUser string
}

func (s *server) handler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.only != nil && !rt.only(r) {
			w.Header().Set("Allow", "") // as the fallback's 405: no method has an operation here
			s.writeError(w, r, platform.Errorf(platform.ErrMethodNotFound, "no operation %s %s: the operation does not exist", r.Method, r.URL.Path))
			return
		}
		ctx, usage := dynamo.WithUsage(r.Context())
		c := &call{Request: r.WithContext(ctx), ctx: ctx, s: s, op: rt.op}
		out, err := s.serve(w, c, rt)
		if err == nil && rt.scope == scopeBot && usage.WroteUnguarded() {
			err = s.recheckBot(c)
		}
		if s.OnUsage != nil {
			s.OnUsage(rt.op, usage)
		}
		if rec, ok := auditedOutcome(out, err); ok {
			// audit.go: every committed Admin write, successful or failed
			// after its commit (its PutItem is counted apart from the
			// operation's own calls).
			actx, _ := dynamo.WithUsage(r.Context())
			s.audit(actx, c, rt, rec)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		status := rt.status
		if status == 0 {
			status = http.StatusOK
		}
		if out == nil {
			out = struct{}{}
		}
		writeJSON(w, status, out)
	})
}

func (s *server) serve(w http.ResponseWriter, c *call, rt route) (any, error) {
	SetOperation(c.ctx, rt.op) // the request's metrics are counted under it
	if rt.signedAccess != nil && c.Header.Get("Authorization") == "" && rt.signedAccess(c.Request) {
		SetCaller(c.ctx, "signed-url")
		return rt.handle(c) // no body: only GET and HEAD take this way
	}
	if err := s.authenticate(c); err != nil {
		return nil, err
	}
	if err := s.authorize(c, rt); err != nil {
		return nil, err
	}
	body, err := s.readBody(w, c.Request, rt.op, rt.maxBody, rt.ownBody)
	if err != nil {
		return nil, err
	}
	c.body = body
	if isChat(rt) && byIntegration(c) {
		if c.acting, err = actingAlias(c); err != nil {
			return nil, err
		}
	}
	// An integration sees its own tags without its alias (chat_tagview.go).
	if alias := tagAlias(c, rt); alias != "" {
		prefixRequest(c, alias)
		out, err := rt.handle(c)
		if err != nil || out == nil {
			return out, err
		}
		return unprefixAnswer(out, alias), nil
	}
	return rt.handle(c)
}

// recheckBot follows a bot-scoped call that wrote (one GetItem): if the bot was
// deleted meanwhile (the call read it before deleteBot, and wrote after),
// what it stored is left to the deletion's sweep (dynamo.RecheckBot), which
// runs again, and the call answers that the bot is not found.
func (s *server) recheckBot(c *call) error {
	ctx := context.WithoutCancel(c.ctx) // what was written must be handed over
	gone, err := s.Store.RecheckBot(ctx, c.bot.ID)
	if err != nil {
		return err
	}
	if !gone {
		return nil
	}
	s.sweep(&call{ctx: ctx}, c.bot.ID)
	return platform.NotFound("bot", c.bot.ID)
}

func (s *server) authenticate(c *call) error {
	if p, ok := inProcessPrincipal(c.ctx); ok {
		// A built-in integration's call, made in-process (builtin.go).
		c.principal = p
		SetCaller(c.ctx, string(p.Kind))
		return nil
	}
	// A browser's session cookie, with its CSRF token (signin.go).
	if p, ok, err := s.sessionAuth(c); ok || err != nil {
		c.principal = p
		SetCaller(c.ctx, "session")
		return err
	}
	h := c.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return platform.Errorf(platform.ErrUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
	}
	p, found, err := s.Store.Authenticate(c.ctx, strings.TrimSpace(token))
	if err != nil {
		return err
	}
	if !found {
		return platform.Errorf(platform.ErrUnauthorized, "invalid or revoked token")
	}
	c.principal = p
	SetCaller(c.ctx, string(p.Kind))
	return nil
}

var errBotKeyScope = platform.Forbidden("a bot API key can only act on its own bot")

var errIntegrationKeyScope = platform.Forbidden("an integration API key can only read and update its own integration")

func (s *server) authorize(c *call, rt route) error {
	p := c.principal
	switch rt.scope {
	case scopeAccount:
		if p.Kind != platform.PrincipalAccount {
			return platform.Forbidden("this operation needs a personal access token")
		}
		return nil
	case scopeAnyone:
		return nil
	case scopeWorkspace, scopeWorkspacePath:
		ws := c.Header.Get("x-workspace-id")
		if rt.scope == scopeWorkspacePath {
			ws = c.PathValue("id")
		}
		// A bot's or integration's own key belongs to one workspace: on
		// the operations it may call on itself the header is implied (the
		// SDK's client, e.g. getBot for @botpress/cognitive, sends none).
		if ws == "" && ((p.Kind == platform.PrincipalBot && rt.botSelf) || (p.Kind == platform.PrincipalIntegration && rt.integrationSelf)) {
			ws = p.WorkspaceID
		}
		if ws == "" {
			return platform.Invalid("the x-workspace-id header is required")
		}
		c.workspaceID = ws
		if p.Kind == platform.PrincipalBot {
			if !rt.botSelf {
				return errBotKeyScope
			}
			if c.PathValue("id") != p.BotID {
				// The same answer for any other id, existing or not (no
				// oracle); a 403, as Botpress answers it: @botpress/cognitive
				// asks getBot for "undefined" and takes a 403 (only) as "look
				// for the default integrations".
				return errBotKeyScope
			}
			if ws != p.WorkspaceID {
				return platform.NotFound("bot", c.PathValue("id"))
			}
			c.role = platform.RoleDeveloper
			return checkRole(c.role, rt.role)
		}
		if p.Kind == platform.PrincipalIntegration {
			if !rt.integrationSelf {
				return errIntegrationKeyScope
			}
			if c.PathValue("id") != p.IntegrationID || ws != p.WorkspaceID {
				return platform.NotFound("integration", c.PathValue("id"))
			}
			c.role = platform.RoleDeveloper
			return checkRole(c.role, rt.role)
		}
		return s.authorizeMember(c, ws, rt.role, func() error { return platform.NotFound("workspace", ws) })
	case scopeBot:
		id := c.Header.Get("x-bot-id")
		if id == "" {
			return platform.Invalid("the x-bot-id header is required")
		}
		if p.Kind == platform.PrincipalBot && id != p.BotID {
			return platform.NotFound("bot", id)
		}
		read := s.Store.FreshBot
		if cachedBotOps[rt.op] {
			read = s.Store.CachedBot
		}
		err := s.authorizeBot(c, rt, id, read)
		if err != nil && cachedBotOps[rt.op] {
			// A cached bot that refuses is read again: what grants (an
			// installation, a move) is seen at once, only what takes
			// away within authcache.TTL (dynamo/authz_cache.go).
			err = s.authorizeBot(c, rt, id, s.Store.FreshBot)
		}
		return err
	}
	return fmt.Errorf("route %s: unknown scope", rt.pattern)
}

// cachedBotOps are the bot-scoped operations authorized with the bot as
// this process read it in the last authcache.TTL (dynamo.Store.CachedBot):
// the Chat operations a conversation's messages go through, which use
// only the bot's id, workspace and installations. The others (actions,
// states, integrations, files, tables, exports) read it on every call.
var cachedBotOps = map[string]bool{
	"createMessage": true, "getOrCreateMessage": true, "getMessage": true, "listMessages": true,
	"updateMessage": true, "deleteMessage": true,
	"createEvent": true, "getEvent": true, "listEvents": true,
	"createUser": true, "getUser": true, "getOrCreateUser": true, "listUsers": true, "updateUser": true,
	"getConversation": true, "getOrCreateConversation": true, "listConversations": true, "updateConversation": true,
	"listParticipants": true, "addParticipant": true, "getParticipant": true,
	// getOrCreateUser, getOrCreateConversation and getOrCreateMessage in
	// one call (chat_actions.go): authorized as each of them would be.
	"initializeIncomingMessage": true,
}

// authorizeBot authorizes a bot-scoped call on bot id, read by read.
func (s *server) authorizeBot(c *call, rt route, id string, read func(context.Context, string) (dynamo.BotRecord, error)) error {
	p := c.principal
	bot, err := read(c.ctx, id)
	if err != nil {
		return err
	}
	c.bot, c.workspaceID = bot, bot.WorkspaceID
	switch p.Kind {
	case platform.PrincipalBot:
		c.role = platform.RoleDeveloper
		return checkRole(c.role, rt.role)
	case platform.PrincipalIntegration:
		// An integration acts for the bots that installed it, and only those.
		if _, installed := bot.Install(p.IntegrationID); !installed {
			return platform.NotFound("bot", id)
		}
		if err := checkActingInstall(c, bot.Bot, p.IntegrationID); err != nil {
			return err
		}
		c.role = platform.RoleDeveloper
		return checkRole(c.role, rt.role)
	}
	return s.authorizeMember(c, bot.WorkspaceID, rt.role, func() error { return platform.NotFound("bot", id) })
}

// authorizeMember checks the calling account's membership and role; a
// non-member gets notFound, as if the resource did not exist. The
// membership is the one this process read in the last authcache.TTL
// (dynamo.Store.CachedMember); one that refuses is read again.
func (s *server) authorizeMember(c *call, ws string, need platform.Role, notFound func() error) error {
	if !platform.HasPrefix(ws, platform.PrefixWorkspace) {
		return notFound()
	}
	m, ok, err := s.Store.CachedMember(c.ctx, ws, c.principal.AccountID)
	if err == nil && (!ok || checkRole(m.Role, need) != nil) {
		m, ok, err = s.Store.FreshMember(c.ctx, ws, c.principal.AccountID)
	}
	if err != nil {
		return err
	}
	if !ok {
		return notFound()
	}
	c.member, c.role = m, m.Role
	return checkRole(m.Role, need)
}

func checkRole(have, need platform.Role) error {
	if need == "" || have.AtLeast(need) {
		return nil
	}
	return platform.Forbidden("this operation needs the %s role or above; yours is %s", need, have)
}

// decode unmarshals the validated body into v, refusing fields v lacks.
func (c *call) decode(v any) error {
	if c.body == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return platform.Invalid("invalid body: field %q: expected %s", te.Field, te.Type)
		}
		return platform.Invalid("invalid body: %v", err)
	}
	return nil
}

// queryParams checks that the query holds only known parameters, each once
// unless repeatable, and returns it.
func (c *call) query() queryValues { return queryValues{c.URL.Query()} }

type queryValues struct{ v map[string][]string }

func (q queryValues) str(name string) (string, error) {
	vs := q.v[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", platform.Invalid("query parameter %q must be given once", name)
}

func (q queryValues) boolean(name string) (*bool, error) {
	s, err := q.str(name)
	if err != nil || s == "" {
		return nil, err
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return nil, platform.Invalid("query parameter %q must be true or false", name)
	}
	return &b, nil
}

func (q queryValues) oneOf(name, def string, allowed ...string) (string, error) {
	s, err := q.str(name)
	if err != nil || s == "" {
		return def, err
	}
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	return "", platform.Invalid("query parameter %q must be one of %s", name, strings.Join(allowed, ", "))
}

// object reads a map parameter as the official client encodes it
// (name.key=value, or name[key]=value).
func (q queryValues) object(name string) map[string]string {
	out := map[string]string{}
	for k, vs := range q.v {
		var sub string
		switch {
		case strings.HasPrefix(k, name+"."):
			sub = k[len(name)+1:]
		case strings.HasPrefix(k, name+"[") && strings.HasSuffix(k, "]"):
			sub = k[len(name)+1 : len(k)-1]
		default:
			continue
		}
		if len(vs) > 0 {
			out[sub] = vs[len(vs)-1]
		}
	}
	return out
}
