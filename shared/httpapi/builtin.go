package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Built-in integrations (shared/builtin, docs/builtin.md): their webhooks,
// actions and registrations are answered in-process, and they call the
// Chat API in-process as their installation (inProcessAPI).

// builtinOf answers the built-in implementation of integration version i.
func (s *server) builtinOf(i platform.Integration) (builtin.Integration, bool) {
	return s.Builtins.Of(i)
}

// builtinInstall is the view a built-in integration gets of one of its
// installations.
func (s *server) builtinInstall(b platform.Bot, in platform.IntegrationInstance, i platform.Integration, webhookBase string) builtin.Install {
	return builtin.Install{
		Bot: b, Instance: in, Integration: i,
		WebhookURL: strings.TrimSuffix(webhookBase, "/") + "/" + in.WebhookID,
		StreamURL:  s.ChatStreamURL,
		API:        s.Builtins.APIFor(),
	}
}

// serveBuiltinWebhook serves a webhook request of a built-in integration's
// installation in-process.
func (s *server) serveBuiltinWebhook(w http.ResponseWriter, r *http.Request, b builtin.Integration, target dynamo.WebhookInstall, i platform.Integration, path string) error {
	wh, ok := b.(builtin.Webhook)
	if !ok {
		return platform.Errorf(platform.ErrResourceNotFound, "webhook %q: the integration %q serves no webhook", target.Install.WebhookID, i.Name)
	}
	base := webhookBase(&call{Request: r})
	in := s.builtinInstall(target.Bot, target.Install, i, base)
	// Where the Files API's upload URLs point for this caller (a hosted
	// page's CSP names it: the bucket's host on AWS).
	in.FilesOrigin = func() string { return platform.UploadOrigin(platform.WithOrigin(r.Context(), origin(r)), s.Files) }
	wh.ServeWebhook(w, r, in, path)
	return nil
}

// runBuiltinAction answers callAction for a built-in integration.
func (s *server) runBuiltinAction(c *call, b builtin.Integration, inst platform.IntegrationInstance, i platform.Integration, action string, input json.RawMessage) (any, error) {
	actor, ok := b.(builtin.Actor)
	if !ok {
		return nil, platform.Invalid("invalid body: field \"type\": integration %q (%s %s) answers no action", inst.Alias, i.Name, i.Version)
	}
	if len(input) == 0 || isNull(input) {
		input = json.RawMessage(`{}`)
	}
	started := time.Now()
	out, err := actor.RunAction(c.ctx, s.builtinInstall(c.bot.Bot, inst, i, webhookBase(c)), action, input)
	if err == nil && (len(bytes.TrimSpace(out)) == 0 || isNull(out)) {
		out = json.RawMessage(`{}`)
	}
	if err == nil && bytes.TrimSpace(out)[0] != '{' {
		err = platform.Errorf(platform.ErrBadGateway, "integration %q, action %q, answered an output that is not an object", inst.Alias, action)
	}
	took := time.Since(started)
	var answer any
	if err == nil {
		answer = map[string]any{"output": out, "meta": map[string]bool{"cached": false}}
	}
	s.recordActionRun(c, inst.Alias, action, input, answer, err, started, took)
	if s.OnDelivery != nil {
		res := delivery.Result{Kind: "action_triggered", BotID: c.bot.ID, WorkspaceID: c.bot.WorkspaceID, IntegrationID: i.ID,
			Name: inst.Alias, Outcome: delivery.Delivered, StatusCode: 200, At: time.Now(), Duration: took}
		if err != nil {
			res.Outcome, res.StatusCode, res.Error = delivery.Failed, platform.StatusOf(err), err.Error()
		}
		s.OnDelivery(c.ctx, res)
	}
	return answer, err
}

// runBuiltinOperation runs a register or unregister of a built-in
// integration in-process and records it in the ledger as any call is;
// handled is false for an integration that is not built in.
func (s *server) runBuiltinOperation(ctx context.Context, ic integrationCall) (op platform.Operation, res delivery.Response, handled bool, err error) {
	op = ic.op
	rec, gerr := s.Store.GetIntegration(ctx, ic.call.IntegrationID)
	if gerr != nil {
		return op, res, false, nil
	}
	b, ok := s.builtinOf(rec.Integration)
	if !ok {
		return op, res, false, nil
	}
	if op, err = s.Store.StartOperation(ctx, op.ID); err != nil {
		return op, delivery.Response{Outcome: delivery.Failed, Err: err.Error()}, true, err
	}
	bot := platform.Bot{ID: ic.call.BotID}
	if br, err := s.Store.GetBot(ctx, ic.call.BotID); err == nil {
		bot = br.Bot
	}
	inst := platform.IntegrationInstance{
		Alias: ic.call.Alias, IntegrationID: ic.call.IntegrationID, WebhookID: ic.call.WebhookID,
		ConfigurationType: ic.call.ConfigurationType, Configuration: ic.call.Configuration,
		Enabled: ic.op.Type == platform.OperationRegister,
	}
	if cur, ok := bot.Installs[ic.call.Alias]; ok && cur.WebhookID == inst.WebhookID {
		inst = cur
	}
	var webhookURL string
	if m, ok := ic.call.Body.(map[string]any); ok {
		webhookURL, _ = m["webhookUrl"].(string)
	}
	in := builtin.Install{Bot: bot, Instance: inst, Integration: rec.Integration, WebhookURL: webhookURL, API: s.Builtins.APIFor()}
	started := time.Now()
	var runErr error
	if reg, ok := b.(builtin.Registrar); ok {
		if ic.op.Type == platform.OperationRegister {
			runErr = reg.Register(ctx, in)
		} else {
			runErr = reg.Unregister(ctx, in)
		}
	}
	res = delivery.Response{Outcome: delivery.Delivered, StatusCode: 200, Body: []byte(`{}`), Duration: time.Since(started)}
	status, opErr := platform.OperationSucceeded, (*platform.OperationError)(nil)
	var result json.RawMessage = res.Body
	if runErr != nil {
		res = delivery.Response{Outcome: delivery.Failed, StatusCode: platform.StatusOf(runErr), Err: runErr.Error(), Duration: res.Duration}
		status, opErr, result = platform.OperationFailed, &platform.OperationError{Message: runErr.Error(), StatusCode: res.StatusCode}, nil
	}
	op, err = s.Store.FinishOperation(ctx, op.ID, status, result, opErr)
	return op, res, true, err
}

// inProcessAPI is the Chat API as a built-in integration's installation
// calls it: a request through the Chat area's own route table, authorized
// as the installed integration (principalKey carries who calls; no header
// can set it), so every check, the tag view and the events are those of a
// call over HTTP.
type inProcessAPI struct {
	s       *server
	handler http.Handler
}

type principalKey struct{}

func newInProcessAPI(s *server) *inProcessAPI {
	mux := http.NewServeMux()
	// The Chat area, and the Files area for the uploads of end users
	// (the webchat integration's POST /files and its file links).
	for _, a := range []Area{AreaChat, AreaFiles} {
		for _, rt := range s.routes(a) {
			mux.Handle(rt.pattern, s.handler(rt))
		}
		for _, rr := range s.rawRoutes(a) {
			mux.Handle(rr.pattern, s.rawHandler(rr))
		}
	}
	return &inProcessAPI{s: s, handler: mux}
}

func (a *inProcessAPI) Call(ctx context.Context, in builtin.Install, method, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	p := platform.Principal{Kind: platform.PrincipalIntegration, IntegrationID: in.Integration.ID, WorkspaceID: in.Integration.WorkspaceID}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, principalKey{}, p), method, path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-bot-id", in.Bot.ID)
	req.Header.Set("x-integration-alias", in.Instance.Alias)
	req.Header.Set("x-integration-id", in.Integration.ID)
	// Addressed at the platform's public origin (the installation's
	// webhook URL's), so the URLs it answers (a presigned upload) are too.
	if u, err := url.Parse(in.WebhookURL); err == nil && u.Host != "" {
		req.Host = u.Host
		req.Header.Set("X-Forwarded-Proto", u.Scheme)
	}
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, req)
	if rec.Code/100 != 2 {
		var e apiError
		if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Type == "" {
			return fmt.Errorf("in-process %s %s: status %d: %s", method, path, rec.Code, rec.Body.String())
		}
		return &platform.Error{Type: platform.ErrorType(e.Type), Message: e.Message}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok { // raw bytes (a file's content)
		*raw = rec.Body.Bytes()
		return nil
	}
	return json.Unmarshal(rec.Body.Bytes(), out)
}

func (a *inProcessAPI) Installation(ctx context.Context, in builtin.Install) (platform.IntegrationInstance, bool, error) {
	t, err := a.s.Store.InstallByWebhook(ctx, in.Instance.WebhookID)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return platform.IntegrationInstance{}, false, nil
	}
	if err != nil {
		return platform.IntegrationInstance{}, false, err
	}
	if t.Bot.ID != in.Bot.ID || t.Install.Alias != in.Instance.Alias {
		return platform.IntegrationInstance{}, false, nil
	}
	return t.Install, true, nil
}

// inProcessPrincipal is the principal of an in-process call, if it is one.
func inProcessPrincipal(ctx context.Context) (platform.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(platform.Principal)
	return p, ok
}
