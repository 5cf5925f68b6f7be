package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/vrl"
)

// Integration-level webhooks (docs/runtime.md): one URL for every
// installation of an integration, as providers that call one URL per app
// need (Meta, GitHub apps, HubSpot):
//
//	<origin>/webhooks/integration/global/<name>[/path]  a shared integration, by name
//	<origin>/webhooks/integration/id/<integrationId>[/path]  one version, any visibility
//
// The integration's identifier.extractScript (VRL) reads the identifier
// from the request {body, query, path, method, headers, secrets}; the
// request is relayed, as webhook_received, to the installation whose
// identifier (configureIntegration, or the x-bp-integration-identifier
// answer header) it is. With none, identifier.fallbackHandlerScript builds
// the answer ({status, headers, body}: Meta's hub.challenge); without one
// the answer is 404.

// integrationScripts are an integration definition's identifier scripts.
type integrationScripts struct {
	ExtractScript         string `json:"extractScript"`
	FallbackHandlerScript string `json:"fallbackHandlerScript"`
}

func scriptsOf(i platform.Integration) integrationScripts {
	var sc integrationScripts
	_ = json.Unmarshal(i.Identifier, &sc)
	return sc
}

func (s *server) serveIntegrationWebhook(w http.ResponseWriter, r *http.Request) {
	ctx, usage := dynamo.WithUsage(r.Context())
	r = r.WithContext(ctx)
	err := s.relayByIdentifier(w, r)
	if s.OnUsage != nil {
		s.OnUsage(webhookOp, usage)
	}
	if err != nil {
		s.writeError(w, r, err)
	}
}

func (s *server) relayByIdentifier(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var (
		rec dynamo.IntegrationRecord
		err error
	)
	if name := r.PathValue("name"); name != "" {
		rec, err = s.Store.PublicIntegrationByName(ctx, name, "latest")
	} else {
		rec, err = s.Store.GetIntegration(ctx, r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	i := rec.Integration
	sc := scriptsOf(i)
	if strings.TrimSpace(sc.ExtractScript) == "" {
		return platform.Errorf(platform.ErrResourceNotFound, "integration %q has no integration-level webhook (its definition has no identifier.extractScript)", i.Name)
	}
	body, err := readWebhookBody(w, r)
	if err != nil {
		return err
	}
	path := "/" + r.PathValue("rest")
	secrets := map[string]any{}
	for k, v := range i.SecretValues {
		secrets[k] = v
	}
	headers := map[string]any{}
	for k, v := range webhookHeaders(r.Header) {
		headers[k] = v
	}
	event := map[string]any{"body": string(body), "query": r.URL.RawQuery, "path": path, "method": r.Method, "headers": headers, "secrets": secrets}
	// A request the extractScript cannot read (a verification GET without
	// a body) names no installation: the fallback answers it, if any.
	identifier, extractErr := runIdentifierScript("extractScript", sc.ExtractScript, event)
	if extractErr != nil && platform.TypeOf(extractErr) != platform.ErrInvalidPayload {
		return extractErr // the script does not compile
	}
	if identifier != "" {
		found, err := s.Store.InstallsByIdentifier(ctx, dynamo.IdentityScope{WorkspaceID: i.WorkspaceID, Name: i.Name}, identifier)
		if err != nil {
			return err
		}
		for _, target := range found {
			if !target.Install.Enabled {
				continue
			}
			// The installation's own version answers (it may differ from
			// the one whose script read the identifier).
			irec, err := s.Store.GetIntegration(ctx, target.Install.IntegrationID)
			if platform.TypeOf(err) == platform.ErrResourceNotFound {
				continue
			}
			if err != nil {
				return err
			}
			return s.relayTo(w, r, target, irec.Integration, path, body, "integration webhook of "+i.Name)
		}
	}
	if strings.TrimSpace(sc.FallbackHandlerScript) == "" {
		if extractErr != nil {
			return extractErr
		}
		if identifier == "" {
			return platform.Errorf(platform.ErrResourceNotFound, "integration %q: this request names no installation (its extractScript found no identifier)", i.Name)
		}
		return platform.Errorf(platform.ErrResourceNotFound, "integration %q: no enabled installation has the identifier %q", i.Name, identifier)
	}
	return writeFallback(w, sc.FallbackHandlerScript, event)
}

// scriptError is the error of an integration's script that fails on a
// request: the request is what the script could not read (400).
func scriptError(name string, err error) error {
	return platform.Invalid("the integration's identifier.%s could not handle this request: %v", name, err)
}

// runIdentifierScript runs an extractScript: its value as a string ("" for
// null: no identifier).
func runIdentifierScript(name, src string, event map[string]any) (string, error) {
	v, err := runScript(name, src, event)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", scriptError(name, fmt.Errorf("it returned %T, not a string", v))
}

func runScript(name, src string, event map[string]any) (any, error) {
	p, err := vrl.Compile(src)
	if err != nil {
		return nil, platform.Errorf(platform.ErrBadGateway, "the integration's identifier.%s does not compile: %v", name, err)
	}
	v, err := p.Run(event)
	if err != nil {
		return nil, scriptError(name, err)
	}
	return v, nil
}

// writeFallback answers with what fallbackHandlerScript builds:
// {status?, headers?, body?}; a body that is not a string is sent as JSON.
func writeFallback(w http.ResponseWriter, src string, event map[string]any) error {
	v, err := runScript("fallbackHandlerScript", src, event)
	if err != nil {
		return err
	}
	out, ok := v.(map[string]any)
	if !ok {
		return scriptError("fallbackHandlerScript", fmt.Errorf("it returned %T, not an object {status, headers, body}", v))
	}
	status := 200
	switch st := out["status"].(type) {
	case nil:
	case int64:
		status = int(st)
	case float64:
		status = int(st)
	default:
		return scriptError("fallbackHandlerScript", fmt.Errorf("status is %T, not a number", st))
	}
	if status < 200 || status > 599 {
		return scriptError("fallbackHandlerScript", fmt.Errorf("status %d is not an HTTP status", status))
	}
	if hs, ok := out["headers"].(map[string]any); ok {
		for k, hv := range hs {
			if sv, ok := hv.(string); ok && !hopByHop[http.CanonicalHeaderKey(k)] {
				w.Header().Set(k, sv)
			}
		}
	}
	var body []byte
	switch b := out["body"].(type) {
	case nil:
	case string:
		body = []byte(b)
	default:
		if body, err = json.Marshal(b); err != nil {
			return scriptError("fallbackHandlerScript", err)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header()["Content-Type"] = nil
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return nil
}
