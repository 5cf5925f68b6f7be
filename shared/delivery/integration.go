package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Headers of a call to an integration, as the Botpress SDK's integration
// handler reads them.
const (
	HeaderBotUserID         = "x-bot-user-id"
	HeaderIntegrationID     = "x-integration-id"
	HeaderIntegrationAlias  = "x-integration-alias"
	HeaderWebhookID         = "x-webhook-id"
	HeaderConfigurationType = "x-bp-configuration-type"
)

// IntegrationCall is one operation sent to an integration on behalf of a
// bot's instance of it.
type IntegrationCall struct {
	Operation         string // SDK operation: register, unregister, action_triggered, ...
	URL, Secret       string // the integration's url and signing secret
	BotID             string
	Alias             string
	IntegrationID     string
	WebhookID         string
	ConfigurationType *string
	Configuration     json.RawMessage
	Body              any
	Timeout           time.Duration
	// NoURL says why URL is empty when the platform knows better than "no
	// url" (deployed code that cannot run).
	NoURL string
}

// Request is the signed POST of the call.
func (c IntegrationCall) Request() (Request, error) {
	body, err := json.Marshal(c.Body)
	if err != nil {
		return Request{}, err
	}
	cfg := c.Configuration
	if len(cfg) == 0 || string(cfg) == "null" {
		cfg = json.RawMessage(`{}`)
	}
	h := http.Header{}
	h.Set(HeaderBotID, c.BotID)
	// The bot's own user in its conversations; the platform uses the bot id.
	h.Set(HeaderBotUserID, c.BotID)
	h.Set(HeaderIntegrationID, c.IntegrationID)
	h.Set(HeaderIntegrationAlias, c.Alias)
	h.Set(HeaderWebhookID, c.WebhookID)
	h.Set(HeaderOperation, c.Operation)
	h.Set(HeaderType, c.Operation)
	if c.ConfigurationType != nil {
		h.Set(HeaderConfigurationType, *c.ConfigurationType)
	}
	h.Set(HeaderConfiguration, base64.StdEncoding.EncodeToString(cfg))
	return Request{URL: c.URL, Secret: c.Secret, Body: body, Header: h, Timeout: c.Timeout}, nil
}

// Ledger is where operations are persisted (dynamo.Store).
type Ledger interface {
	StartOperation(ctx context.Context, id string) (platform.Operation, error)
	FinishOperation(ctx context.Context, id, status string, result json.RawMessage, e *platform.OperationError) (platform.Operation, error)
}

// RunOperation sends a pending operation's call, once, and records how it
// ended: succeeded (2xx, with the answer as result), failed (not sent, or
// refused, with the error), or outcome_unknown (sent, no answer). It is
// never retried. The error is the ledger's, if it failed to record.
func RunOperation(ctx context.Context, ledger Ledger, client *http.Client, op platform.Operation, call IntegrationCall) (platform.Operation, Response, error) {
	// The call must be recorded even when the request that started it goes
	// away: from here on, only the call's own timeout applies.
	ctx = context.WithoutCancel(ctx)
	req, err := call.Request()
	if err != nil {
		return op, Response{Outcome: Failed, Err: err.Error()}, err
	}
	if call.URL == "" {
		res := Response{Outcome: Failed, Err: "the integration has no url to call"}
		if call.NoURL != "" {
			res.Err = call.NoURL
		}
		op, err := ledger.FinishOperation(ctx, op.ID, platform.OperationFailed, nil, &platform.OperationError{Message: res.Err})
		return op, res, err
	}
	if op, err = ledger.StartOperation(ctx, op.ID); err != nil {
		return op, Response{Outcome: Failed, Err: err.Error()}, err
	}
	if client == nil {
		client = Client(false)
	}
	res := Send(ctx, client, req)
	var (
		status string
		result json.RawMessage
		opErr  *platform.OperationError
	)
	switch res.Outcome {
	case Delivered:
		status = platform.OperationSucceeded
		result = asJSON(res.Body)
	case Failed:
		status = platform.OperationFailed
		opErr = &platform.OperationError{Message: res.Err, StatusCode: res.StatusCode}
	default:
		status = platform.OperationOutcomeUnknown
		opErr = &platform.OperationError{Message: res.Err}
	}
	op, err = ledger.FinishOperation(ctx, op.ID, status, result, opErr)
	return op, res, err
}

// RegistrationStatus is the installation status a register() operation
// leaves, with its reason.
func RegistrationStatus(op platform.Operation, res Response) (string, *string) {
	switch res.Outcome {
	case Failed:
		r := "registration failed: " + res.Err
		return platform.InstallRegistrationFailed, &r
	case OutcomeUnknown:
		// Left pending: nobody knows whether the integration registered;
		// an operator reconciles the operation.
		r := "registration outcome unknown (operation " + op.ID + "): " + res.Err
		return platform.InstallRegistrationPending, &r
	}
	return platform.InstallRegistered, nil
}

// asJSON is an answer as a JSON result: itself when it is JSON, else a
// JSON string; nothing for an empty answer.
func asJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}
