package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tracing"
)

// The middlewares every deployment wraps around the API: the request log
// and CORS. The local platform wraps them around the API and the embedded
// S3; each Lambda function around its area (runtime.AreaHandler).

// requestInfo is what the request log learns while a request is handled.
type requestInfo struct {
	caller  string // principal kind, once authenticated
	errorID string // id of the error answered, if any
	op      string // the operation served, once routed (metrics)
}

type requestInfoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	i, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return i
}

// SetCaller records who made the request (a principal kind, or e.g. "s3"
// for a presigned URL) for the request log.
func SetCaller(ctx context.Context, kind string) {
	if i := infoOf(ctx); i != nil {
		i.caller = kind
	}
}

// SetOperation records the operation a request is served by, the op label
// of its metrics (shared/metrics).
func SetOperation(ctx context.Context, op string) {
	if i := infoOf(ctx); i != nil {
		i.op = op
	}
}

// operationOf names what served a request no route table names: the raw
// routes of the platform by their area.
func operationOf(info *requestInfo, r *http.Request) string {
	if info.op != "" {
		return info.op
	}
	p := r.URL.Path
	switch {
	case info.caller == "s3":
		return "s3"
	case strings.HasPrefix(p, "/webhooks/"):
		return "webhook"
	case p == "/" || strings.HasPrefix(p, "/console/"):
		return "console"
	case p == metrics.Path:
		return "metrics"
	case strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/"):
		return "unknown"
	}
	return "other" // a tunnel's requests, paths of no operation
}

// RequestIDHeader is the response header carrying the request's id, the
// one its log line shows.
const RequestIDHeader = "X-Request-Id"

// RequestLog logs one line per request: method, path (never the query:
// presigned URLs carry signatures there), status, duration, request id,
// caller kind ("anonymous" until a token is accepted) and, for an error,
// the error id of its body. Headers, and so tokens, are never logged.
func RequestLog(log *slog.Logger, h http.Handler) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{caller: "anonymous"}
		id := platform.NewID("req_")
		w.Header().Set(RequestIDHeader, id)
		// The request's trace (shared/tracing): continued from its
		// headers or begun here, named in the answer and on every log
		// line written with its context.
		tctx, span := tracing.StartRequest(r, "request")
		w.Header().Set(tracing.TraceIDHeader, tracing.TraceID(tctx))
		sw := &statusWriter{ResponseWriter: w}
		ctx := context.WithValue(tctx, requestInfoKey{}, info)
		defer func() {
			p := recover()
			status := sw.status
			switch {
			case status == 0 && p == nil:
				status = http.StatusOK // nothing written: net/http answers 200
			case p != nil && status == 0:
				status = 500
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
				slog.Float64("ms", float64(time.Since(start).Microseconds())/1000), slog.String("requestId", id),
				slog.String("caller", info.caller),
			}
			if info.errorID != "" {
				attrs = append(attrs, slog.String("errorId", info.errorID))
			}
			if p != nil {
				attrs = append(attrs, slog.Bool("aborted", true))
			}
			log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
			// The request's metrics, counted here once for every deployment.
			op := operationOf(info, r)
			span.SetName(op)
			span.End()
			metrics.Requests.Inc(op, metrics.StatusCode(status))
			if status >= 500 {
				metrics.RequestErrors.Inc(op)
			}
			metrics.RequestDuration.Since(start, op)
			if p != nil {
				panic(p)
			}
		}()
		h.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// statusWriter remembers the status written. Unwrap lets
// http.ResponseController reach the connection (deadlines, flushes).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// LocalOrigins are the origins the local platform allows by default: pages
// served from this machine, on any port.
const LocalOrigins = "http://localhost:*,http://127.0.0.1:*,http://[::1]:*"

// Origins is a set of allowed browser origins, parsed from a
// comma-separated list of exact origins ("https://app.example.com"), origins
// with any port ("http://localhost:*") or "*" (any origin).
type Origins struct {
	any   bool
	exact map[string]bool
	ports []string // "scheme://host:" prefixes of origins with any port
}

// ParseOrigins parses a comma-separated list of origins; empty: none.
func ParseOrigins(list string) (Origins, error) {
	o := Origins{exact: map[string]bool{}}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			continue
		case s == "*":
			o.any = true
			continue
		}
		u, err := url.Parse(strings.Replace(s, ":*", "", 1))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return o, platform.Invalid("origin %q: want scheme://host[:port], scheme://host:* or *", s)
		}
		if strings.HasSuffix(s, ":*") {
			o.ports = append(o.ports, strings.ToLower(strings.TrimSuffix(s, "*")))
		} else {
			o.exact[strings.ToLower(strings.TrimSuffix(s, "/"))] = true
		}
	}
	return o, nil
}

// Allows tells whether a browser page of origin may call the API.
func (o Origins) Allows(origin string) bool {
	origin = strings.ToLower(origin)
	if origin == "" || origin == "null" {
		return false
	}
	if o.any || o.exact[origin] {
		return true
	}
	for _, p := range o.ports {
		if port, ok := strings.CutPrefix(origin, p); ok && port != "" && strings.Trim(port, "0123456789") == "" {
			return true
		}
	}
	return false
}

// Empty tells whether no origin is allowed.
func (o Origins) Empty() bool { return !o.any && len(o.exact) == 0 && len(o.ports) == 0 }

// corsMethods are the methods of the API and of presigned upload URLs.
const corsMethods = "GET, HEAD, POST, PUT, DELETE"

// CORS lets browser pages of the allowed origins call h: it answers their
// preflight requests (204, or 403 in the error shape for an origin not
// allowed) and marks the answers to their requests. Tokens travel in the
// Authorization header, never in cookies: credentials are not allowed.
func CORS(allowed Origins, h http.Handler) http.Handler {
	if allowed.Empty() {
		return h
	}
	errs := newServer(Config{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || strings.HasPrefix(r.URL.Path, "/webhooks/") {
			// Webhooks answer browsers for themselves: a built-in
			// integration by its installation's configuration (the chat
			// integration's allowedOrigins), any other in its relayed answer.
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		ok := allowed.Allows(origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Add("Vary", "Access-Control-Request-Method")
			w.Header().Add("Vary", "Access-Control-Request-Headers")
			if !ok {
				errs.writeError(w, r, platform.Forbidden("origin %q is not allowed to call this API (allowed origins are configured: PLATFORM_CORS_ORIGINS)", origin))
				return
			}
			hd := w.Header()
			hd.Set("Access-Control-Allow-Origin", origin)
			hd.Set("Access-Control-Allow-Methods", corsMethods)
			// Joined: the Lambda adapter splits a header's value at commas.
			if req := strings.Join(r.Header.Values("Access-Control-Request-Headers"), ", "); req != "" && validHeaderList(req) {
				hd.Set("Access-Control-Allow-Headers", req)
			}
			hd.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if ok {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Expose-Headers", RequestIDHeader+", "+tracing.TraceIDHeader+", ETag")
		}
		h.ServeHTTP(w, r)
	})
}

// validHeaderList tells whether s is a comma-separated list of header
// names (token characters), as browsers send in
// Access-Control-Request-Headers; anything else is not echoed back.
func validHeaderList(s string) bool {
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("-_.,!#$%&'*+^`|~ ", c):
		default:
			return false
		}
	}
	return len(s) <= 1024
}
