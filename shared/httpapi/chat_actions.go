package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/openapi"
	"github.com/botforge/platform/shared/platform"
)

// Runtime operations a bot or an integration calls synchronously
// (docs/runtime.md): callAction, configureIntegration and
// initializeIncomingMessage.

// callAction runs an action and answers its output:
//
//	POST /v1/chat/actions {"type": "<alias>:<action>" | "<action>", "input": {...}}
//
// "<alias>:<action>" goes to the bot's installation of that alias as
// action_triggered {type: <action>, input}; an unprefixed type goes to the
// bot's own url, the same operation. The callee's output comes back as
// {output, meta: {cached: false}} (the platform caches nothing). The call
// is bounded by the integration's maxExecutionTime and the bot's.
func (s *server) callAction(c *call) (any, error) {
	var in struct {
		Type  string          `json:"type"`
		Input json.RawMessage `json:"input"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	alias, action, toIntegration := strings.Cut(in.Type, ":")
	if !toIntegration {
		return s.callBotAction(c, in.Type, in.Input)
	}
	if alias == "" || action == "" {
		return nil, platform.Invalid("invalid body: field \"type\": %q is not <integration alias>:<action> or <action>", in.Type)
	}
	inst, ok := c.bot.Installs[alias]
	if !ok {
		return nil, platform.Errorf(platform.ErrResourceNotFound, "no integration is installed under the alias %q on bot %q", alias, c.bot.ID)
	}
	if !inst.Enabled {
		return nil, platform.Invalid("the integration %q is disabled on bot %q", alias, c.bot.ID)
	}
	rec, err := s.Store.GetIntegration(c.ctx, inst.IntegrationID)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return nil, platform.Errorf(platform.ErrResourceNotFound, "the integration installed as %q no longer exists", alias)
	}
	if err != nil {
		return nil, err
	}
	i := rec.Integration
	def, ok := i.Actions[action]
	if !ok {
		return nil, platform.Invalid("invalid body: field \"type\": integration %q (%s %s) has no action %q", alias, i.Name, i.Version, action)
	}
	if err := checkActionInput(def, in.Input); err != nil {
		return nil, err
	}
	if b, ok := s.builtinOf(i); ok {
		return s.runBuiltinAction(c, b, inst, i, action, in.Input)
	}
	// From here on, each call is recorded (listActionRuns), failed or not.
	started := time.Now()
	call := s.callFor(c, "action_triggered", c.bot.Bot, inst, i)
	if call.URL, err = s.codeTarget(c.ctx, i); err != nil {
		s.recordActionRun(c, alias, action, in.Input, nil, err, started, time.Since(started))
		return nil, err
	}
	call.Body = map[string]any{"type": action, "input": in.Input}
	call.Timeout = min(call.Timeout, delivery.BotTimeout(c.bot.Bot))
	res, err := s.sendToIntegration(c.ctx, call)
	if err != nil {
		s.recordActionRun(c, alias, action, in.Input, nil, err, started, time.Since(started))
		return nil, err
	}
	s.observe(c.ctx, "action_triggered", c.bot.Bot, i, alias, call.URL, res)
	out, err := actionAnswer(fmt.Sprintf("integration %q, action %q,", alias, action), res)
	s.recordActionRun(c, alias, action, in.Input, out, err, started, res.Duration)
	return out, err
}

// callBotAction sends an unprefixed action to the bot itself. A bot that
// declares actions is held to them (name and input schema); one that
// declares none gets every call and answers for itself.
func (s *server) callBotAction(c *call, action string, input json.RawMessage) (any, error) {
	b := c.bot.Bot
	if action == "" {
		return nil, platform.Invalid("invalid body: field \"type\": must not be empty")
	}
	if len(b.Actions) > 0 {
		def, ok := b.Actions[action]
		if !ok {
			return nil, platform.Invalid("invalid body: field \"type\": bot %q has no action %q (an integration's action is <alias>:<action>)", b.ID, action)
		}
		if err := checkActionInput(def, input); err != nil {
			return nil, err
		}
	}
	var err error
	if b.URL, err = platform.BotTarget(c.ctx, s.Code, b); err != nil {
		return nil, err
	}
	if b.URL == "" {
		return nil, platform.Errorf(platform.ErrBadGateway, "bot %q has no url to call its action %q on", b.ID, action)
	}
	req, err := delivery.BotRequest(b, "action_triggered", "action_triggered", map[string]any{"type": action, "input": input})
	if err != nil {
		return nil, err
	}
	// Within the API call: API Gateway ends it at 29 s.
	req.Timeout = min(req.Timeout, maxCallTimeout)
	res := delivery.Send(c.ctx, s.outbound(), req)
	if s.OnDelivery != nil {
		s.OnDelivery(c.ctx, delivery.Result{
			Kind: "action_triggered", BotID: b.ID, WorkspaceID: b.WorkspaceID, Name: action, URL: b.URL,
			Outcome: res.Outcome, StatusCode: res.StatusCode, Error: res.Err, Duration: res.Duration,
		})
	}
	return actionAnswer(fmt.Sprintf("bot %q, action %q,", b.ID, action), res)
}

// checkActionInput checks an action's input against the input schema of
// its definition ({input: {schema}}), when there is one.
func checkActionInput(def, input json.RawMessage) error {
	var d struct {
		Input struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"input"`
	}
	_ = json.Unmarshal(def, &d)
	return validateJSON("input", d.Input.Schema, input)
}

// actionAnswer is callAction's answer from the callee's: its output (an
// object; {} when it sent none).
func actionAnswer(who string, res delivery.Response) (any, error) {
	if err := answerError(who, res, false); err != nil {
		return nil, err
	}
	var out struct {
		Output json.RawMessage `json:"output"`
	}
	if len(bytes.TrimSpace(res.Body)) > 0 {
		if err := json.Unmarshal(res.Body, &out); err != nil {
			return nil, platform.Errorf(platform.ErrBadGateway, "%s answered something that is not a JSON object: %s", who, calleeMessage(res.Body))
		}
	}
	output := out.Output
	if len(output) == 0 || isNull(output) {
		output = json.RawMessage(`{}`)
	}
	if output[0] != '{' {
		return nil, platform.Errorf(platform.ErrBadGateway, "%s answered an output that is not an object: %s", who, calleeMessage(output))
	}
	return map[string]any{"output": output, "meta": map[string]bool{"cached": false}}, nil
}

// actingInstall is the installation an integration's call acts for: the one
// its headers name (c.acting: x-integration-alias, else the one installation
// of x-integration-id), else the calling integration key's one installation.
func actingInstall(c *call) (platform.IntegrationInstance, error) {
	alias := c.acting
	if alias == "" && c.principal.IntegrationID != "" {
		switch aliases := installAliases(c.bot.Bot, c.principal.IntegrationID); len(aliases) {
		case 0:
		case 1:
			alias = aliases[0]
		default:
			return platform.IntegrationInstance{}, platform.Invalid("this integration is installed %d times on bot %q (as %s): send x-integration-alias naming the installation", len(aliases), c.bot.ID, strings.Join(aliases, ", "))
		}
	}
	if alias == "" {
		return platform.IntegrationInstance{}, platform.Invalid("this operation is an integration's: send x-integration-alias (or x-integration-id) naming its installation on the bot")
	}
	if in, ok := c.bot.Installs[alias]; ok {
		return in, nil
	}
	return platform.IntegrationInstance{}, platform.Errorf(platform.ErrResourceNotFound, "no integration is installed under the alias %q on bot %q", alias, c.bot.ID)
}

// configureIntegration records what an integration says of its
// installation: its identifier (shown on the bot's integrations; null
// clears it) and the schedule on which it wants register() called again
// (the runtime's dispatcher calls it, docs/runtime.md). sandboxIdentifiers
// is accepted and ignored.
func (s *server) configureIntegration(c *call) (any, error) {
	var in struct {
		Identifier           json.RawMessage `json:"identifier"`
		ScheduleRegisterCall *string         `json:"scheduleRegisterCall"`
		SandboxIdentifiers   json.RawMessage `json:"sandboxIdentifiers"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	inst, err := actingInstall(c)
	if err != nil {
		return nil, err
	}
	var identifier *string
	if len(in.Identifier) > 0 {
		id := ""
		if !isNull(in.Identifier) {
			if err := json.Unmarshal(in.Identifier, &id); err != nil {
				return nil, platform.Invalid("invalid body: field \"identifier\": must be a string or null")
			}
		}
		identifier = &id
	}
	// The identifier's scope (one read of the integration) only when an
	// identifier is given: a schedule alone needs none.
	var scope dynamo.IdentityScope
	if identifier != nil {
		if scope, err = s.identityScope(c.ctx, inst); err != nil {
			return nil, err
		}
		if *identifier != "" {
			if err := s.mayIdentify(c, scope); err != nil {
				return nil, err
			}
		}
	}
	webhookURL := webhookBase(c) + "/" + inst.WebhookID
	err = s.Store.ConfigureInstall(c.ctx, c.bot.ID, inst.Alias, inst.WebhookID, scope, identifier, in.ScheduleRegisterCall, webhookURL)
	return struct{}{}, err
}

// mayIdentify refuses an identifier set by a caller who is not the
// integration: an identifier routes the integration's global webhook
// (a provider's calls for a page, an app installation) to the bot, so a
// bot's developer acting as an integration published by another workspace
// (a personal access token or the bot's key with x-integration-alias, as
// bp dev calls) could claim another tenant's identifier. The integration's
// own API key (its deployed code's token), or a developer of the workspace
// that publishes it, may.
func (s *server) mayIdentify(c *call, scope dynamo.IdentityScope) error {
	p := c.principal
	switch {
	case p.Kind == platform.PrincipalIntegration:
		return nil // actingInstall held it to its own installation
	case p.Kind == platform.PrincipalBot && c.bot.WorkspaceID == scope.WorkspaceID:
		return nil
	case p.Kind == platform.PrincipalAccount:
		m, ok, err := s.Store.GetMember(c.ctx, scope.WorkspaceID, p.AccountID)
		if err != nil {
			return err
		}
		if ok && m.Role.AtLeast(platform.RoleDeveloper) {
			return nil
		}
	}
	return platform.Forbidden("only the integration itself (its API key) or a developer of the workspace that publishes it may set an installation's identifier: it routes the integration's webhooks")
}

// identityScope is the integration an installation's identifier belongs
// to (its publisher and name: the integration-level webhook's scope).
func (s *server) identityScope(ctx context.Context, inst platform.IntegrationInstance) (dynamo.IdentityScope, error) {
	rec, err := s.Store.GetIntegration(ctx, inst.IntegrationID)
	if err != nil {
		return dynamo.IdentityScope{}, err
	}
	return dynamo.IdentityScope{WorkspaceID: rec.Integration.WorkspaceID, Name: rec.Integration.Name}, nil
}

// initializeIncomingMessage gets or creates, in one call, the user and the
// conversation of an incoming message and, when given, the message: each
// body read and checked as its own operation's (getOrCreateUser,
// getOrCreateConversation, getOrCreateMessage), so it behaves as those
// calls in sequence would, with two differences. Every body is checked
// before anything is written: a refused conversation or message leaves no
// user or conversation behind. And the user and the conversation, which
// do not depend on each other, are got or created at once (the webhook's
// critical path: docs/runtime.md). userId / conversationId name existing
// ones.
func (s *server) initializeIncomingMessage(c *call) (any, error) {
	var in struct {
		UserID         string          `json:"userId"`
		User           json.RawMessage `json:"user"`
		ConversationID string          `json:"conversationId"`
		Conversation   json.RawMessage `json:"conversation"`
		Message        json.RawMessage `json:"message"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if (in.UserID == "") == (len(in.User) == 0) {
		return nil, platform.Invalid("invalid body: give exactly one of \"userId\" and \"user\"")
	}
	if (in.ConversationID == "") == (len(in.Conversation) == 0) {
		return nil, platform.Invalid("invalid body: give exactly one of \"conversationId\" and \"conversation\"")
	}
	// Every body checked first, nothing written yet.
	var (
		user func() (platform.User, error)
		conv func() (platform.Conversation, error)
		msg  *dynamo.MessageLookup
	)
	if in.UserID != "" {
		user = func() (platform.User, error) { return s.Store.GetUser(c.ctx, c.bot.ID, in.UserID) }
	} else {
		sub, err := subCall(c, "getOrCreateUser", in.User, "user")
		if err != nil {
			return nil, err
		}
		l, err := userLookup(sub)
		if err != nil {
			return nil, err
		}
		user = func() (platform.User, error) {
			u, _, err := s.Store.GetOrCreateUser(c.ctx, l)
			return u, err
		}
	}
	if in.ConversationID != "" {
		conv = func() (platform.Conversation, error) {
			return s.Store.GetConversation(c.ctx, c.bot.ID, in.ConversationID)
		}
	} else {
		sub, err := subCall(c, "getOrCreateConversation", in.Conversation, "conversation")
		if err != nil {
			return nil, err
		}
		l, err := s.conversationLookup(sub)
		if err != nil {
			return nil, err
		}
		conv = func() (platform.Conversation, error) {
			cv, _, err := s.Store.GetOrCreateConversation(c.ctx, l)
			return cv, err
		}
	}
	if len(in.Message) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(in.Message, &m); err != nil || m == nil {
			return nil, platform.Invalid("invalid body: field \"message\": must be an object")
		}
		// Its author and conversation are the ones got above: checked
		// with stand-ins until then.
		m["userId"], _ = json.Marshal(platform.NewID(platform.PrefixUser))
		m["conversationId"], _ = json.Marshal(platform.NewID(platform.PrefixConversation))
		raw, _ := json.Marshal(m)
		sub, err := subCall(c, "getOrCreateMessage", raw, "message")
		if err != nil {
			return nil, err
		}
		l, err := messageLookup(sub)
		if err != nil {
			return nil, err
		}
		msg = &l
	}
	var (
		u       platform.User
		cv      platform.Conversation
		convErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		// A panic here would end the process: the request's recovery
		// is on the handler's goroutine.
		defer func() {
			if p := recover(); p != nil {
				convErr = fmt.Errorf("getting the conversation: panic: %v", p)
			}
		}()
		cv, convErr = conv()
	}()
	u, userErr := user()
	<-done
	if userErr != nil {
		return nil, userErr
	}
	if convErr != nil {
		return nil, convErr
	}
	out := map[string]any{"user": u, "conversation": cv}
	if msg != nil {
		msg.New.UserID, msg.New.ConversationID = u.ID, cv.ID
		// The user was read (or created) live above: the message's
		// author check need not read it again.
		msg.AuthorLive = u.ID
		m, _, err := s.Store.GetOrCreateMessage(c.ctx, *msg)
		if err != nil {
			return nil, err
		}
		out["message"] = m
	}
	return out, nil
}

// subCall is the call that op's handler would get with body, as if sent by
// the same caller: body checked against op's schema, its errors named as
// field of the caller's body.
func subCall(c *call, op string, body json.RawMessage, field string) (*call, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, platform.Invalid("invalid body: field %q: %v", field, err)
	}
	if err := openapi.ValidateBody(op, v); err != nil {
		var pe *platform.Error
		if errors.As(err, &pe) {
			return nil, platform.Invalid("invalid body: field %q: %s", field, pe.Message)
		}
		return nil, err
	}
	sub := *c
	sub.op, sub.body = op, body
	return &sub, nil
}

// checkActingInstall holds an integration API key to its own installations:
// the x-integration-id and x-integration-alias it sends (naming the
// installation it acts for, as the SDK does on every call) must be its
// integration's and an alias under which the bot installed it.
func checkActingInstall(c *call, b platform.Bot, integrationID string) error {
	if id := strings.TrimSpace(c.Header.Get("x-integration-id")); id != "" && id != integrationID {
		return platform.Forbidden("x-integration-id %q is not the integration of this API key", id)
	}
	if alias := strings.TrimSpace(c.Header.Get("x-integration-alias")); alias != "" {
		if in, ok := b.Installs[alias]; !ok || in.IntegrationID != integrationID {
			return platform.Forbidden("x-integration-alias %q is not an installation of this API key's integration on bot %q", alias, b.ID)
		}
	}
	return nil
}
