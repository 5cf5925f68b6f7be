// Package httpapi is the platform's HTTP layer: one route table per API area
// (admin.go, chat.go, tables.go, files.go), authentication and authorization
// of every call, request decoding and validation, pagination tokens, and the
// mapping of domain errors to the reference API's error shape and statuses.
// Handlers are plain net/http: the same ones run in Lambda and locally.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/console"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/openapi"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/signin"
)

// Config is what the handlers need.
type Config struct {
	Store *dynamo.Store
	// ChatStreamURL is the public base of the Chat API's streams when
	// another host serves them (PLATFORM_CHAT_STREAM_URL; on AWS the
	// stack's ChatStreamUrl): the built-in integrations' clients are
	// pointed there (builtin.Install.StreamURL). Empty: this API.
	ChatStreamURL string
	// PagingKey signs nextTokens; every instance serving the API must share it.
	PagingKey []byte
	// Invite, when set, receives the first personal access token of an
	// account created by an invitation (createWorkspaceMember). Locally it
	// writes the token to a file; in AWS it is nil and the invited person
	// gets a token from an operator (scripts/issue-token).
	Invite func(ctx context.Context, email, token string) error
	// Files holds file contents (Files API).
	Files platform.FileStorage
	// Scheduler manages recurring-event schedules (bots' recurringEvents).
	Scheduler platform.Scheduler
	// Logs writes and queries bot and integration logs.
	Logs platform.LogStore
	// Outbound makes the calls to integrations (registration); nil: a
	// client refusing private and loopback addresses (delivery.Client).
	Outbound *http.Client
	// Code runs deployed code: calls to a bot or integration with code and
	// no url go to it (locally the worker manager; nil: none, and such
	// calls fail saying so).
	Code platform.CodeRunner
	// OnDelivery, when set, receives the result of every call made to an
	// integration (registration, unregistration).
	OnDelivery delivery.Observer
	// TableFiles stores table exports as files and reads import files
	// (Files API); nil: exportTable and importTable are not available.
	TableFiles platform.TableFiles
	// BackgroundJobs: the process outlives its requests (the local
	// platform), so table jobs (large duplicates) continue in goroutines.
	// In Lambda they continue when getTableJobs is called (docs/tables.md).
	BackgroundJobs bool
	// CompleteOnRead: no object-created notification reaches this
	// deployment (the local platform over an external S3, S3_ENDPOINT), so
	// getFile completes a pending upload whose object has arrived.
	CompleteOnRead bool
	// Sweeper finishes deletions left pending (a deleted bot's data, a
	// deletion interrupted by a crash). With BackgroundJobs it is kicked
	// and runs in the caller's loop (the local platform runs Loop); without,
	// deleteBot runs it before answering. nil: one over Store and Files.
	Sweeper *dynamo.Sweeper
	// MaxBodyBytes caps request bodies (default 1 MiB); larger ones get 413.
	MaxBodyBytes int64
	// LLM is the gateway of the cognitive API (/v2/cognitive/*) to the
	// operator's LLM providers; nil answers that none is configured.
	LLM *llm.Gateway
	// Semantic embeds indexed passages and ranks searchFiles by vector
	// similarity as well (docs/files.md); nil: lexical search only.
	Semantic *files.Semantic
	// OnUsage, when set, receives the DynamoDB usage of every API call.
	OnUsage func(op string, u *dynamo.Usage)
	Logger  *slog.Logger
	// Builtins are the integrations served in-process (shared/builtin);
	// nil: none. New gives them the in-process Chat API.
	Builtins *builtin.Registry
	// Series keeps the metrics over time for the console's health page
	// (metrics.go); nil: not kept here (AWS).
	Series *metrics.Series
	// Backups are the local platform's backups (backups.go); nil: none
	// kept here (AWS).
	Backups platform.Backups
	// ClientIP finds each request's client address, the one every
	// per-address limit counts (zero: the socket's peer, no proxy trusted).
	ClientIP clientip.Resolver
	// SignIn configures people's sign-in (shared/signin: passwords,
	// single sign-on, sessions, invitation links; docs/signin.md).
	SignIn signin.Config
}

// Area names a group of operations served by one Lambda function.
type Area string

const (
	AreaAdmin  Area = "admin"
	AreaChat   Area = "chat"
	AreaTables Area = "tables"
	AreaFiles  Area = "files"
)

// AllAreas lists every area, for the local server.
var AllAreas = []Area{AreaAdmin, AreaChat, AreaTables, AreaFiles}

// server holds the dependencies of the handlers.
type server struct {
	Config
	pager  pager
	signin *signin.Service // nil without a store
}

// New returns the handler of the given areas (one in Lambda, all locally).
func New(cfg Config, areas ...Area) http.Handler {
	s := newServer(cfg)
	if cfg.Builtins != nil {
		cfg.Builtins.SetAPI(newInProcessAPI(s))
	}
	mux := http.NewServeMux()
	for _, a := range areas {
		for _, rt := range s.routes(a) {
			mux.Handle(rt.pattern, s.handler(rt))
		}
		for _, rr := range s.rawRoutes(a) {
			mux.Handle(rr.pattern, s.rawHandler(rr))
		}
		if a == AreaAdmin {
			// Integrations' iconUrl and readmeUrl: no token (admin_code.go).
			mux.HandleFunc("GET /v1/admin/integrations/{id}/assets/{name}", s.serveAsset)
			mux.HandleFunc("GET /v1/admin/plugins/{id}/assets/{name}", s.servePluginAsset)
			// The web console: "/" and its assets, no token (the page
			// signs in and calls the API like any client; docs/console.md).
			for pattern, h := range console.RoutesWith(s.ChatStreamURL) { // the inbox stream's host may be another origin
				mux.Handle(pattern, h)
			}
			for pattern, h := range s.signinRawRoutes() { // signin.go
				mux.Handle(pattern, h)
			}
			// Without this, ServeMux would answer /console with a redirect
			// to /console/: it stays a path of no operation.
			mux.HandleFunc("/console", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Allow", "")
				s.writeError(w, r, platform.Errorf(platform.ErrMethodNotFound, "no operation %s %s: the operation does not exist", r.Method, r.URL.Path))
			})
		}
		if a == AreaChat {
			// The cognitive API's stream (cognitive.go).
			for _, sr := range s.cognitiveStreamRoutes() {
				mux.Handle(sr.pattern, s.streamHandler(sr))
			}
			for pattern, h := range s.hitlStreamRoutes() { // the inbox's live updates (hitl_stream.go)
				mux.Handle(pattern, h)
			}
			// Webhook ingress: no token, the webhook id is the secret (webhooks.go).
			for pattern, h := range s.webhookRoutes() {
				mux.Handle(pattern, h)
			}
		}
	}
	return cfg.ClientIP.Handler(s.fallback(mux))
}

func newServer(cfg Config) *server {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Sweeper == nil && cfg.Store != nil {
		cfg.Sweeper = &dynamo.Sweeper{Store: cfg.Store, Log: cfg.Logger}
		if cfg.Files != nil {
			cfg.Sweeper.Objects = cfg.Files
		}
	}
	if cfg.Sweeper != nil && cfg.Sweeper.Log == nil {
		cfg.Sweeper.Log = cfg.Logger
	}
	s := &server{Config: cfg, pager: pager{key: cfg.PagingKey}}
	if cfg.Store != nil {
		s.signin = signin.New(cfg.SignIn, cfg.Store, cfg.Store.Limiter(), s.auditSignIn, s.writeError)
	}
	return s
}

func (s *server) routes(a Area) []route {
	switch a {
	case AreaAdmin:
		return slices.Concat(s.adminRoutes(), s.referenceAdminRoutes(),
			s.hitlRoutes(),
			s.signinRoutes(),
			s.metricsRoutes(),
			s.assistantRoutes(),
			s.backupRoutes(),
		)
	case AreaChat:
		// The cognitive API (bots' LLM calls) is served with Chat: the
		// same bot-scoped callers, the same function on AWS.
		return append(append(s.chatRoutes(), s.referenceChatRoutes()...), s.cognitiveRoutes()...)
	case AreaTables:
		return s.tablesRoutes()
	case AreaFiles:
		return s.filesRoutes()
	}
	return nil
}

// fallback answers requests no route matches in the API's error shape. It
// also refuses paths that are not canonical: ServeMux would answer them
// with a redirect to the cleaned path (an HTML body, and a different
// operation for /v1/files/../admin/...).
func (s *server) fallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !CanonicalPath(r.URL.EscapedPath()) {
			s.writeError(w, r, platform.Invalid(`path %q has an empty, "." or ".." segment; percent-encode an id or file key "." or ".." (%%2E, %%2E%%2E)`, r.URL.EscapedPath()))
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		// A 405 carries Allow (RFC 9110): the path's methods, or none.
		w.Header().Set("Allow", rec.header.Get("Allow"))
		if rec.status == http.StatusMethodNotAllowed {
			s.writeError(w, r, platform.Errorf(platform.ErrMethodNotFound, "no operation %s %s: the operation does not exist (this path takes %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
			return
		}
		// No operation has this path: MethodNotFound ("the requested
		// method does not exist"), not ResourceNotFound, which says an
		// operation ran and found no such resource.
		s.writeError(w, r, platform.Errorf(platform.ErrMethodNotFound, "no operation %s %s: the operation does not exist", r.Method, r.URL.Path))
	})
}

// CanonicalPath tells whether an (escaped) URL path is one ServeMux routes
// as it is: absolute, without empty, "." or ".." segments.
func CanonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// apiError is the error body of the reference API.
type apiError struct {
	ID      string `json:"id"`
	Code    int    `json:"code"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := apiError{ID: platform.NewErrorID()}
	var pe *platform.Error
	if errors.As(err, &pe) {
		e.Type, e.Message = string(pe.Type), pe.Message
	} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		e.Type, e.Message = string(platform.ErrInternal), "the request was cancelled or timed out"
	} else {
		e.Type, e.Message = string(platform.ErrInternal), "an internal error occurred (error id "+e.ID+")"
		s.Logger.Error("internal error", "errorId", e.ID, "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if i := infoOf(r.Context()); i != nil {
		i.errorID = e.ID
	}
	e.Code = platform.ErrorType(e.Type).Status()
	if e.Code == 0 {
		e.Code = 500
	}
	writeJSON(w, e.Code, e)
}

// WriteError answers err in the API's error shape with its status, for
// handlers outside the route tables (the local platform's tunnel,
// shared/tunnel).
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	(&server{Config: Config{Logger: slog.Default()}}).writeError(w, r, err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"code":500,"type":"Internal","message":"response encoding failed","id":"err_encoding"}`, 500)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// readBody reads, size-checks, parses and validates the JSON body of op.
// An empty body counts as {} so that missing required fields are named.
func (s *server) readBody(w http.ResponseWriter, r *http.Request, op string, limit int64, own bool) ([]byte, error) {
	if !own && !openapi.HasBody(op) {
		return nil, nil
	}
	if limit <= 0 {
		limit = s.MaxBodyBytes
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.Contains(strings.ToLower(ct), "json") {
		return nil, platform.Errorf(platform.ErrUnsupportedMedia, "content type %q is not supported: send application/json", ct)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, platform.Errorf(platform.ErrPayloadTooLarge, "request body exceeds %d bytes", limit)
		}
		return nil, platform.Invalid("could not read request body: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, platform.Invalid("malformed JSON body: %v", err)
	}
	if dec.More() {
		return nil, platform.Invalid("malformed JSON body: unexpected data after the JSON value")
	}
	if err := openapi.ValidateBody(op, v); err != nil {
		return nil, err
	}
	return raw, nil
}
