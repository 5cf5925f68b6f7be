package awslocal

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The bucket's CORS configuration (template.yaml's FilesBucket
// CorsConfiguration), answered as S3 answers it: a browser that PUTs to a
// presigned URL from a page of another origin (the hosted webchat page,
// served where the streams are) first sends a preflight, which carries no
// credentials, so S3 answers it from the bucket's rules alone, not from
// any role; without a matching rule the browser refuses the upload.
//
// S3's evaluation ("Appendix: OPTIONS object" and PutBucketCors in the S3
// API reference): the first rule whose AllowedOrigins match the request's
// Origin (one "*" wildcard per entry), whose AllowedMethods hold the
// method (the preflight's Access-Control-Request-Method), and, for a
// preflight, whose AllowedHeaders match every header of
// Access-Control-Request-Headers. A preflight with no matching rule, or to
// a bucket without CORS, is 403 without CORS headers; an actual request
// with an Origin gets the matching rule's headers, or none.

// corsRule is one CorsRules entry of an AWS::S3::Bucket.
type corsRule struct {
	AllowedOrigins, AllowedMethods, AllowedHeaders, ExposedHeaders []string
	MaxAge                                                         int
}

// readBucketCORS reads the CorsConfiguration of the bucket resource id (nil:
// none).
func (t *Template) readBucketCORS(id string) ([]corsRule, error) {
	cfg, _ := t.props(id)["CorsConfiguration"].(map[string]any)
	if cfg == nil {
		return nil, nil
	}
	rules, _ := cfg["CorsRules"].([]any)
	var out []corsRule
	list := func(m map[string]any, k string) ([]string, error) {
		raw, _ := m[k].([]any)
		var s []string
		for _, v := range raw {
			x, err := t.str(v)
			if err != nil {
				return nil, fmt.Errorf("CorsRules %s: %w", k, err)
			}
			s = append(s, x)
		}
		return s, nil
	}
	for _, r := range rules {
		m, _ := r.(map[string]any)
		if m == nil {
			return nil, fmt.Errorf("CorsRules: a rule is not an object")
		}
		var c corsRule
		var err error
		if c.AllowedOrigins, err = list(m, "AllowedOrigins"); err != nil {
			return nil, err
		}
		if c.AllowedMethods, err = list(m, "AllowedMethods"); err != nil {
			return nil, err
		}
		if c.AllowedHeaders, err = list(m, "AllowedHeaders"); err != nil {
			return nil, err
		}
		if c.ExposedHeaders, err = list(m, "ExposedHeaders"); err != nil {
			return nil, err
		}
		if v, ok := m["MaxAge"]; ok {
			s, err := t.str(v)
			if err != nil {
				return nil, fmt.Errorf("CorsRules MaxAge: %w", err)
			}
			if c.MaxAge, err = strconv.Atoi(s); err != nil {
				return nil, fmt.Errorf("CorsRules MaxAge %q: %w", s, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// wildMatch: pattern with at most one "*" (any run of characters) against
// s, case-insensitively when fold.
func wildMatch(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	before, after, wild := strings.Cut(pattern, "*")
	if !wild {
		return pattern == s
	}
	return len(s) >= len(before)+len(after) && strings.HasPrefix(s, before) && strings.HasSuffix(s, after)
}

func anyMatch(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if wildMatch(p, s, fold) {
			return true
		}
	}
	return false
}

// match is the first rule allowing origin, method and every header of
// headers (nil: none).
func matchCORS(rules []corsRule, origin, method string, headers []string) *corsRule {
	for i := range rules {
		r := &rules[i]
		if !anyMatch(r.AllowedOrigins, origin, false) {
			continue
		}
		ok := false
		for _, m := range r.AllowedMethods {
			ok = ok || m == method
		}
		for _, h := range headers {
			ok = ok && anyMatch(r.AllowedHeaders, h, true)
		}
		if ok {
			return r
		}
	}
	return nil
}

// allowOrigin is the Access-Control-Allow-Origin S3 answers for r: "*"
// when the rule allows any origin, else the request's.
func (r *corsRule) allowOrigin(origin string) string {
	for _, o := range r.AllowedOrigins {
		if o == "*" {
			return "*"
		}
	}
	return origin
}

// requestedHeaders splits Access-Control-Request-Headers.
func requestedHeaders(v string) []string {
	var out []string
	for _, h := range strings.Split(v, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, strings.ToLower(h))
		}
	}
	return out
}

// isPreflight: an OPTIONS with Origin and Access-Control-Request-Method.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// servePreflight answers a CORS preflight to an S3 bucket of the stack
// from its rules (cors by bucket name).
func servePreflight(w http.ResponseWriter, r *http.Request, cors map[string][]corsRule) {
	bucket, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	rules, ok := cors[bucket]
	origin, method := r.Header.Get("Origin"), r.Header.Get("Access-Control-Request-Method")
	headers := requestedHeaders(r.Header.Get("Access-Control-Request-Headers"))
	h := w.Header()
	h.Set("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
	if !ok || len(rules) == 0 {
		corsForbidden(w, "CORS is not enabled for this bucket.")
		return
	}
	rule := matchCORS(rules, origin, method, headers)
	if rule == nil {
		corsForbidden(w, "This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.")
		return
	}
	h.Set("Access-Control-Allow-Origin", rule.allowOrigin(origin))
	h.Set("Access-Control-Allow-Methods", strings.Join(rule.AllowedMethods, ", "))
	if len(headers) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
	}
	if len(rule.ExposedHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(rule.ExposedHeaders, ", "))
	}
	if rule.MaxAge > 0 {
		h.Set("Access-Control-Max-Age", strconv.Itoa(rule.MaxAge))
	}
	w.WriteHeader(http.StatusOK)
}

// corsForbidden is S3's 403 to a refused preflight (code CORSResponse).
func corsForbidden(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessForbidden</Code><Message>CORSResponse: %s</Message></Error>", msg)
}

// corsWriter sets, on an actual request's answer, the CORS headers of the
// rule matching the request (none when no rule matches), replacing what
// the S3 stand-in set (it allows any origin).
type corsWriter struct {
	http.ResponseWriter
	rule   *corsRule
	origin string
	wrote  bool
}

func (w *corsWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		h := w.Header()
		for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
			"Access-Control-Expose-Headers", "Access-Control-Max-Age", "Access-Control-Allow-Credentials"} {
			h.Del(k)
		}
		h.Add("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
		if w.rule != nil {
			h.Set("Access-Control-Allow-Origin", w.rule.allowOrigin(w.origin))
			h.Set("Access-Control-Allow-Methods", strings.Join(w.rule.AllowedMethods, ", "))
			if len(w.rule.ExposedHeaders) > 0 {
				h.Set("Access-Control-Expose-Headers", strings.Join(w.rule.ExposedHeaders, ", "))
			}
			if w.rule.MaxAge > 0 {
				h.Set("Access-Control-Max-Age", strconv.Itoa(w.rule.MaxAge))
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *corsWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// withCORS wraps w for an actual S3 request r carrying an Origin.
func withCORS(w http.ResponseWriter, r *http.Request, cors map[string][]corsRule) http.ResponseWriter {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return w
	}
	bucket, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return &corsWriter{ResponseWriter: w, rule: matchCORS(cors[bucket], origin, r.Method, nil), origin: origin}
}
