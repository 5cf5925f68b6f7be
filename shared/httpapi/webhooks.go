package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Webhook ingress (docs/runtime.md): the public address of an installation
// is <origin>/webhooks/<webhookId>, the webhookUrl its register call gets.
// Anything sent there, with any method, below it or not, is relayed to the
// installation's integration as webhook_received
//
//	{"req": {"method", "path", "query", "headers", "body"}}
//
// (path below the webhook id, "/" for none; query and body raw strings) and
// the integration's HTTP answer (status, headers, body) is relayed verbatim
// to the caller: providers' verification challenges and OAuth redirects
// depend on it. The webhook id is the secret: there is no token.
//
// The global OAuth redirect <origin>/webhooks/oauth/...?state=<webhookId>
// goes to the installation named by state, with req.path "/oauth/...".

// maxWebhookBody caps what a provider may post to a webhook.
const maxWebhookBody = 1 << 20

// webhookOp names webhook ingress in usage reports and delivery results.
const webhookOp = "webhook_received"

// webhookRoutes are the ingress patterns (served by the Chat function).
func (s *server) webhookRoutes() map[string]http.Handler {
	h := http.HandlerFunc(s.serveWebhook)
	return map[string]http.Handler{
		"/webhooks/{webhookId}":           h,
		"/webhooks/{webhookId}/{rest...}": h,
		"/webhooks/oauth/{rest...}":       h,
		// Integration-level webhooks (webhooks_identifier.go).
		"/webhooks/integration/global/{name}":           http.HandlerFunc(s.serveIntegrationWebhook),
		"/webhooks/integration/global/{name}/{rest...}": http.HandlerFunc(s.serveIntegrationWebhook),
		"/webhooks/integration/id/{id}":                 http.HandlerFunc(s.serveIntegrationWebhook),
		"/webhooks/integration/id/{id}/{rest...}":       http.HandlerFunc(s.serveIntegrationWebhook),
	}
}

func (s *server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	ctx, usage := dynamo.WithUsage(r.Context())
	r = r.WithContext(ctx)
	err := s.relayWebhook(w, r)
	if s.OnUsage != nil {
		s.OnUsage(webhookOp, usage)
	}
	if err != nil {
		s.writeError(w, r, err)
	}
}

// webhookTarget is the webhook id and the path below it that a request
// addresses.
func webhookTarget(r *http.Request) (id, path string, err error) {
	escaped := strings.TrimPrefix(r.URL.EscapedPath(), "/webhooks")
	if strings.HasPrefix(escaped, "/oauth/") {
		q := r.URL.Query()["state"]
		if len(q) != 1 || q[0] == "" {
			return "", "", platform.Invalid("an OAuth redirect needs the query parameter state=<webhookId>, once")
		}
		return q[0], escaped, nil
	}
	id = r.PathValue("webhookId")
	path = strings.TrimPrefix(escaped, "/")
	if i := strings.IndexByte(path, '/'); i >= 0 {
		path = path[i:]
	} else {
		path = "/"
	}
	return id, path, nil
}

// relayWebhook answers the request itself on success; an error is for the
// caller to write in the API's error shape.
func (s *server) relayWebhook(w http.ResponseWriter, r *http.Request) error {
	id, path, err := webhookTarget(r)
	if err != nil {
		return err
	}
	// On a goroutine of its own: a built-in integration may hold this
	// request for hours (a stream), and the store's calls would leave it
	// a deep stack (builtin.OnFreshStack).
	var (
		target dynamo.WebhookInstall
		rec    dynamo.IntegrationRecord
	)
	err = builtin.OnFreshStack(func() error {
		if target, err = s.Store.InstallByWebhook(r.Context(), id); err != nil {
			return err
		}
		if !target.Install.Enabled {
			return platform.Errorf(platform.ErrResourceNotFound, "webhook %q: the integration %q is disabled on its bot", id, target.Install.Alias)
		}
		rec, err = s.Store.GetIntegration(r.Context(), target.Install.IntegrationID)
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			return platform.Errorf(platform.ErrResourceNotFound, "webhook %q: its integration no longer exists", id)
		}
		return err
	})
	if err != nil {
		return err
	}
	if b, ok := s.builtinOf(rec.Integration); ok {
		return s.serveBuiltinWebhook(w, r, b, target, rec.Integration, path)
	}
	body, err := readWebhookBody(w, r)
	if err != nil {
		return err
	}
	return s.relayTo(w, r, target, rec.Integration, path, body, "webhook "+id)
}

// readWebhookBody reads a webhook request's body, within maxWebhookBody.
func readWebhookBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, platform.Errorf(platform.ErrPayloadTooLarge, "a webhook request body may not exceed %d bytes", maxWebhookBody)
		}
		return nil, platform.Invalid("could not read the request body: %v", err)
	}
	return body, nil
}

// headerIdentifier is the answer header by which an integration names its
// installation's identifier (the OAuth round trip): recorded as
// configureIntegration's identifier would be, and not relayed.
const headerIdentifier = "X-Bp-Integration-Identifier"

// relayTo sends a webhook request to installation target of integration i
// as webhook_received and writes the integration's answer verbatim.
func (s *server) relayTo(w http.ResponseWriter, r *http.Request, target dynamo.WebhookInstall, i platform.Integration, path string, body []byte, what string) error {
	call := s.callFor(&call{Request: r}, webhookOp, target.Bot, target.Install, i)
	var err error
	if call.URL, err = s.codeTarget(r.Context(), i); err != nil {
		return err
	}
	call.Body = map[string]any{"req": map[string]any{
		"method": r.Method, "path": path, "query": r.URL.RawQuery,
		"headers": webhookHeaders(r.Header), "body": string(body),
	}}
	res, err := s.sendToIntegration(r.Context(), call)
	if err != nil {
		return err
	}
	s.observe(r.Context(), webhookOp, target.Bot, i, target.Install.Alias, call.URL, res)
	if err := answerError(fmt.Sprintf("integration %q (%s)", target.Install.Alias, what), res, true); err != nil {
		return err
	}
	if ids := res.Header.Values(headerIdentifier); len(ids) == 1 && res.StatusCode/100 != 5 {
		scope := dynamo.IdentityScope{WorkspaceID: i.WorkspaceID, Name: i.Name}
		if err := s.Store.ConfigureInstall(r.Context(), target.Bot.ID, target.Install.Alias, target.Install.WebhookID, scope, &ids[0], nil, ""); err != nil {
			// The integration has acted: its answer still goes back.
			s.Logger.Warn("recording an installation's identifier", "bot", target.Bot.ID, "alias", target.Install.Alias, "err", err)
		}
	}
	res.Header.Del(headerIdentifier)
	res.Header.Del(delivery.LoggedErrorHeader) // the platform's, not the provider's
	for k, vs := range res.Header {
		if hopByHop[http.CanonicalHeaderKey(k)] {
			continue
		}
		w.Header()[k] = vs
	}
	if _, typed := res.Header["Content-Type"]; !typed {
		// Verbatim: no Content-Type guessed from the body (net/http would).
		w.Header()["Content-Type"] = nil
	}
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(res.Body)
	return nil
}

// hopByHop are headers of one connection, not of the message: neither
// relayed to the integration nor back to the caller. Content-Length is
// set anew for the relayed body.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true,
	"Upgrade": true, "Content-Length": true,
}

// webhookHeaders are a request's headers as the SDK's req.headers: lower-case
// names, repeated values joined with ", ".
func webhookHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		if hopByHop[http.CanonicalHeaderKey(k)] {
			continue
		}
		out[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	return out
}

// sendToIntegration sends one call to an integration (no ledger: webhook
// relays and actions are answered to their caller, not recorded).
func (s *server) sendToIntegration(ctx context.Context, call delivery.IntegrationCall) (delivery.Response, error) {
	if call.URL == "" {
		return delivery.Response{}, platform.Errorf(platform.ErrBadGateway, "integration %q has no url to call", call.Alias)
	}
	req, err := call.Request()
	if err != nil {
		return delivery.Response{}, err
	}
	return delivery.Send(ctx, s.outbound(), req), nil
}

func (s *server) outbound() *http.Client {
	if s.Outbound != nil {
		return s.Outbound
	}
	return delivery.Client(false)
}

// answerError is the caller's error for a call's answer, nil when it is an
// answer to pass on. With relayAny every HTTP answer is passed on (webhook
// ingress relays the integration's 4xx and 5xx too); otherwise only 2xx, a
// 4xx being the callee's refusal (Runtime, with its message) and anything
// else a failure.
func answerError(who string, res delivery.Response, relayAny bool) error {
	switch {
	case res.StatusCode == 0 && res.Outcome == delivery.OutcomeUnknown:
		return platform.Errorf(platform.ErrOperationTimeout, "%s did not answer: %s", who, res.Err)
	case res.StatusCode == 0:
		return platform.Errorf(platform.ErrBadGateway, "%s could not be called: %s", who, res.Err)
	case res.Truncated:
		return platform.Errorf(platform.ErrBadGateway, "%s answered more than %d bytes", who, delivery.MaxResponseBytes)
	case res.StatusCode < 200 || res.StatusCode > 599:
		return platform.Errorf(platform.ErrBadGateway, "%s answered the invalid status %d", who, res.StatusCode)
	case relayAny || res.StatusCode/100 == 2:
		return nil
	case res.StatusCode/100 == 4:
		return platform.Errorf(platform.ErrRuntime, "%s refused the call (%d): %s", who, res.StatusCode, answerReason(res))
	}
	return platform.Errorf(platform.ErrBadGateway, "%s failed (%d): %s", who, res.StatusCode, answerReason(res))
}

// answerReason is the message of an error answer with the error the
// callee's code logged meanwhile (delivery.LoggedErrorHeader), else the
// start of the answer.
func answerReason(res delivery.Response) string {
	if r := delivery.AnswerReason(res); r != "" {
		return r
	}
	return calleeMessage(res.Body)
}

// calleeMessage is the message of an SDK error answer ({"message": ...}),
// else the start of the answer.
func calleeMessage(b []byte) string {
	var e struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil {
		if e.Message != "" {
			return e.Message
		}
		if e.Error != "" {
			return e.Error
		}
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		s = "(no message)"
	}
	return s
}

// observe reports a call to the delivery observer (integration logs).
func (s *server) observe(ctx context.Context, kind string, b platform.Bot, i platform.Integration, alias, url string, res delivery.Response) {
	if s.OnDelivery == nil {
		return
	}
	s.OnDelivery(ctx, delivery.Result{
		Kind: kind, BotID: b.ID, WorkspaceID: b.WorkspaceID, IntegrationID: i.ID, Name: alias, URL: url,
		Outcome: res.Outcome, StatusCode: res.StatusCode, Error: res.Err, At: time.Now(), Duration: res.Duration,
	})
}
