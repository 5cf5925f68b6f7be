// Package builtin holds the integrations the platform itself implements, in
// Go, and publishes in the public hub (docs/builtin.md): a bot installs one
// like any integration (updateBot with its id), but nothing runs elsewhere:
//
//   - requests to the installation's webhook URL (<base>/webhooks/<webhookId>/...)
//     are served in-process by the integration's Webhook handler, which may
//     answer anything (a stream included), not just one relayed answer;
//   - the bot's messages in a conversation of the installation are handed
//     to its Sender by the dispatcher instead of being sent to a url;
//   - callAction('<alias>:<action>') is answered by its Actor;
//   - register and unregister are answered in-process (the installation is
//     "registered" at once) by its Registrar, when it has one.
//
// A built-in integration reaches the platform's Chat API as its
// installation, in-process, through Install.API (the same handlers, checks
// and tag view as any integration's calls).
//
// The registry publishes each definition under the platform's own
// workspace (WorkspaceID, no members: nobody can change or delete it), with
// ids derived from name and version, so publishing is idempotent and every
// process (each Lambda function, the local platform) may do it at start.
package builtin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/oklog/ulid/v2"

	"github.com/botforge/platform/shared/platform"
)

// WorkspaceID is the platform's own workspace, owner of the built-in
// integrations.
var WorkspaceID = StableID(platform.PrefixWorkspace, "builtin-workspace")

// WorkspaceName is how the hub names the publisher (ownerWorkspace.name).
const WorkspaceName = "Platform"

// Integration is a built-in integration: its definition, and any of the
// capabilities below (Webhook, Sender, Actor, Registrar).
type Integration interface {
	// Definition is the published version: name, version, title,
	// description, configuration, channels, actions, events, states,
	// user, entities. Ids, dates, the workspace and the visibility are
	// the registry's. Change the version when the definition changes:
	// a published version is never rewritten.
	Definition() platform.Integration
}

// Webhook serves requests to an installation's webhook URL. path is the
// part below the webhook id ("/" for none, percent-encoding kept). The
// handler writes its answer itself (errors in the API's shape: WriteError).
type Webhook interface {
	ServeWebhook(w http.ResponseWriter, r *http.Request, in Install, path string)
}

// Sender receives the bot's messages in the installation's conversations
// (message_created). An error is a failed delivery: a *platform.Error of a
// client type (4xx) fails it for good, anything else is retried.
type Sender interface {
	SendMessage(ctx context.Context, in Install, m Outgoing) error
}

// Actor answers callAction('<alias>:<action>'), input already checked
// against the action's input schema. The output must be a JSON object; a
// *platform.Error is the call's error as is.
type Actor interface {
	RunAction(ctx context.Context, in Install, action string, input json.RawMessage) (json.RawMessage, error)
}

// Registrar is told of installations (register: installed, enabled or its
// configuration changed) and their end (unregister: removed or disabled).
// An error makes the installation registration_failed with its message.
type Registrar interface {
	Register(ctx context.Context, in Install) error
	Unregister(ctx context.Context, in Install) error
}

// Install is one installation of a built-in integration on a bot.
type Install struct {
	Bot         platform.Bot
	Instance    platform.IntegrationInstance // alias, webhook id, configuration
	Integration platform.Integration         // the installed version
	// WebhookURL is the installation's absolute webhook URL.
	WebhookURL string
	// StreamURL is the public base of the Chat API's streams when another
	// host than WebhookURL's serves them (on AWS the stack's ChatStreamUrl:
	// API Gateway cannot hold a stream): clients that listen use
	// <StreamURL>webhooks/<webhookId>. Empty: WebhookURL's host.
	StreamURL string
	// FilesOrigin answers the origin (scheme://host) of the Files API's
	// upload URLs for this request (on AWS the bucket's S3 host): a page
	// that uploads allows it in its CSP. Set for webhook requests (worked
	// out when called: it signs a URL); nil elsewhere.
	FilesOrigin func() string
	// API calls the Chat API as this installation (nil where no API is
	// served in-process, as in the dispatcher function on AWS).
	API API
}

// Outgoing is a bot's message to deliver: the message, its conversation
// and the bot as the message's user, as an integration's message_created
// has them (tags of the installation without its alias).
type Outgoing struct {
	Message      platform.Message
	Conversation platform.Conversation
	User         platform.User
}

// API is the platform's Chat API (and Files API) called in-process as an
// installation (x-bot-id, x-integration-alias and the installation's
// identity), addressed at the public origin of its webhook URL: the same
// handlers as over HTTP. body is marshalled to JSON (nil: none); a 2xx
// answer is unmarshalled into out (when not nil; a *[]byte gets the raw
// bytes); any other answer is the *platform.Error it carries.
type API interface {
	Call(ctx context.Context, in Install, method, path string, body, out any) error
	// Installation reads the installation as it is now: false when the
	// bot no longer has it under the same webhook id (removed, the bot
	// deleted), so a long-lived stream can tell it has to end.
	Installation(ctx context.Context, in Install) (platform.IntegrationInstance, bool, error)
}

// Registry is the set of built-in integrations of a process.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]Integration
	api    API
}

// NewRegistry returns a registry of the given integrations.
func NewRegistry(integrations ...Integration) *Registry {
	r := &Registry{byName: map[string]Integration{}}
	for _, i := range integrations {
		r.Add(i)
	}
	return r
}

// Add registers an integration (replacing one of the same name).
func (r *Registry) Add(i Integration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byName[i.Definition().Name] = i
}

// SetAPI gives the registry the in-process Chat API its installations
// call (httpapi.New sets it).
func (r *Registry) SetAPI(a API) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.api = a
}

// APIFor is the in-process Chat API (nil when none was set).
func (r *Registry) APIFor() API {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.api
}

// Of answers the built-in implementation of a stored integration version:
// one published by the platform's workspace under a registered name, at
// the id the registry gives that name and version.
func (r *Registry) Of(i platform.Integration) (Integration, bool) {
	if r == nil || i.WorkspaceID != WorkspaceID {
		return nil, false
	}
	r.mu.RLock()
	b, ok := r.byName[i.Name]
	r.mu.RUnlock()
	if !ok || i.ID != IntegrationID(i.Name, i.Version) {
		return nil, false
	}
	return b, true
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Publisher is what publishing writes (dynamo.Store).
type Publisher interface {
	EnsureWorkspace(ctx context.Context, w platform.Workspace) error
	CreateIntegration(ctx context.Context, i platform.Integration) error
	IntegrationByID(ctx context.Context, id string) (platform.Integration, error)
}

// Publish makes every registered integration public in the hub, under the
// platform's workspace: idempotent (conditional writes; a version already
// there is left as it is). A name another workspace published first
// cannot be taken: that is an error naming it, and the others are still
// published.
func (r *Registry) Publish(ctx context.Context, p Publisher) error {
	now := platform.Now()
	err := p.EnsureWorkspace(ctx, platform.Workspace{
		ID: WorkspaceID, Name: WorkspaceName, CreatedAt: now, UpdatedAt: now,
		BillingVersion: "v1", Plan: "community", SocialAccounts: []string{}, IsPublic: true,
		About: "The integrations built into this platform.",
	})
	if err != nil {
		return fmt.Errorf("built-in integrations: the platform's workspace: %w", err)
	}
	var errs []error
	for _, name := range r.Names() {
		r.mu.RLock()
		b := r.byName[name]
		r.mu.RUnlock()
		rec := Record(b, now)
		err := p.CreateIntegration(ctx, rec)
		if platform.TypeOf(err) == platform.ErrAlreadyExists {
			// Published before (by this process or another), or the
			// name is another workspace's: only the record tells.
			if _, gerr := p.IntegrationByID(ctx, rec.ID); gerr == nil {
				continue
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("built-in integration %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Record is the stored version of built-in b: its definition with the
// registry's id, the platform's workspace, public visibility and defaults
// for what the definition leaves empty.
func Record(b Integration, now string) platform.Integration {
	i := b.Definition()
	i.ID = IntegrationID(i.Name, i.Version)
	i.WorkspaceID = WorkspaceID
	i.CreatedAt, i.UpdatedAt = now, now
	i.Visibility, i.Public, i.Dev = platform.VisibilityPublic, true, false
	i.VerificationStatus, i.LifecycleStatus = platform.VerificationApproved, "published"
	i.URL = "" // served in-process
	// Nothing calls it over HTTP: a secret nobody needs, still random.
	i.SigningSecret = platform.NewSecret()
	if i.Title == "" {
		i.Title = i.Name
	}
	obj := func(v *json.RawMessage, def string) {
		if len(*v) == 0 {
			*v = json.RawMessage(def)
		}
	}
	obj(&i.Identifier, `{}`)
	obj(&i.Sandbox, `{}`)
	obj(&i.Configuration, `{"identifier":{"required":false},"schema":{}}`)
	obj(&i.User, `{"tags":{},"creation":{"enabled":false,"requiredTags":[]}}`)
	maps := []*map[string]json.RawMessage{&i.Interfaces, &i.Configurations, &i.Channels, &i.States, &i.Events, &i.Actions, &i.Entities}
	for _, m := range maps {
		if *m == nil {
			*m = map[string]json.RawMessage{}
		}
	}
	if i.Secrets == nil {
		i.Secrets = []string{}
	}
	return i
}

// IntegrationID is the id of built-in name at version: stable, so every
// process publishes the same record.
func IntegrationID(name, version string) string {
	return StableID(platform.PrefixIntegration, "builtin:"+name+"@"+version)
}

// StableID is an id of the platform's shape (prefix + 26 ULID characters)
// derived from seed.
func StableID(prefix, seed string) string {
	h := sha256.Sum256([]byte(seed))
	return prefix + ulid.MustNew(0, bytes.NewReader(h[:])).String()
}

// OnFreshStack runs f on a goroutine of its own and waits for it. A
// request held for hours (a stream) keeps the stack its goroutine grew to:
// calls that go deep (the store, the in-process API) run here instead, so
// the long-lived goroutine stays small (Go shrinks an idle stack only a
// half per collection).
func OnFreshStack(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return <-done
}

// ErrorBody is the API's error shape for err ({id, code, type, message}),
// with its status, for handlers that write their own answers.
func ErrorBody(err error) (int, map[string]any) {
	var pe *platform.Error
	if !errors.As(err, &pe) {
		// Not the platform's: no detail leaks to the caller.
		pe = &platform.Error{Type: platform.ErrInternal, Message: "an internal error occurred"}
	}
	return pe.Type.Status(), map[string]any{"id": platform.NewErrorID(), "code": pe.Type.Status(), "type": string(pe.Type), "message": pe.Message}
}

// WriteError writes err in the API's error shape.
func WriteError(w http.ResponseWriter, err error) {
	status, body := ErrorBody(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// Named answers the registered integration of that name (the hitl desk's
// inbox stream finds its hub there).
func (r *Registry) Named(name string) (Integration, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	b, ok := r.byName[name]
	return b, ok
}
