package awslocal

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
)

// API Gateway's HTTP API limits: the request body (10 MB) and the
// integration's answer (30 s).
const (
	MaxRequestBody     = 10 << 20
	IntegrationTimeout = 30 * time.Second
	// Lambda's synchronous invocation payload limit (6 MB): an event
	// larger than that never reaches the function.
	maxInvokePayload = 6 << 20
)

// apiGateway turns HTTP requests into payload 2.0 events for the function
// the template's route names, and the function's answer back into HTTP.
type apiGateway struct {
	routes  []Route
	invoke  func(ctx context.Context, fn *Function, payload []byte) invokeResult
	timeout time.Duration
	// throttle is the default route throttling (throttle.go), nil for none.
	throttle *tokenBucket
}

func gatewayError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Apigw-Requestid", uuid.NewString()[:16])
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, msg)
}

// route picks the route of a request as an HTTP API does: an exact path
// first, then the greedy {proxy+} route with the longest prefix, then
// $default.
func (g *apiGateway) route(method, path string) (Route, string, bool) {
	var best Route
	bestLen := -1
	var proxy string
	var def *Route
	for i, r := range g.routes {
		if r.Method != "ANY" && r.Method != method {
			continue
		}
		if r.Path == "$default" {
			def = &g.routes[i]
			continue
		}
		if base, ok := strings.CutSuffix(r.Path, "/{proxy+}"); ok {
			if rest, ok := strings.CutPrefix(path, base+"/"); ok && rest != "" && len(base) > bestLen {
				best, bestLen, proxy = r, len(base), rest
			}
			continue
		}
		if r.Path == path {
			return r, "", true
		}
	}
	if bestLen >= 0 {
		return best, proxy, true
	}
	if def != nil {
		return *def, "", true
	}
	return Route{}, "", false
}

func textual(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/javascript" ||
		mt == "application/x-www-form-urlencoded"
}

func (g *apiGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, proxy, ok := g.route(r.Method, r.URL.Path)
	if !ok {
		gatewayError(w, http.StatusNotFound, "Not Found")
		return
	}
	if g.throttle != nil && !g.throttle.allow() {
		gatewayError(w, http.StatusTooManyRequests, "Too Many Requests")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBody+1))
	if err != nil {
		gatewayError(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > MaxRequestBody {
		gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	now := time.Now()
	reqID := uuid.NewString()
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       rt.Key(),
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: rt.Key(), AccountID: Account, Stage: "$default", RequestID: reqID, APIID: "local",
			DomainName: r.Host, DomainPrefix: strings.Split(r.Host, ".")[0],
			Time: now.UTC().Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, UserAgent: r.UserAgent(),
			},
		},
	}
	parts := eventPartsOf(r, body)
	ev.RequestContext.HTTP.SourceIP = parts.sourceIP
	ev.Headers, ev.Cookies, ev.QueryStringParameters = parts.headers, parts.cookies, parts.query
	ev.Body, ev.IsBase64Encoded = parts.body, parts.base64
	if r.ContentLength >= 0 && len(body) > 0 {
		ev.Headers["content-length"] = strconv.Itoa(len(body))
	}
	if proxy != "" {
		p, _ := url.PathUnescape(proxy)
		ev.PathParameters = map[string]string{"proxy": p}
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		gatewayError(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(payload) > maxInvokePayload {
		gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	timeout := g.timeout
	if timeout == 0 {
		timeout = IntegrationTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	res := g.invoke(ctx, rt.Function, payload)
	w.Header().Set("Apigw-Requestid", reqID[:16])
	switch {
	case errors.Is(res.Err, errThrottled):
		// A throttled Lambda integration: the function never ran.
		gatewayError(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	case errors.Is(res.Err, context.DeadlineExceeded):
		gatewayError(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	case res.Err != nil || res.FunctionError:
		gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	var out events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(res.Payload, &out); err != nil || out.StatusCode == 0 {
		gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	h := w.Header()
	keys := make([]string, 0, len(out.Headers))
	for k := range out.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Set(k, out.Headers[k])
	}
	for k, vs := range out.MultiValueHeaders {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for _, c := range out.Cookies {
		h.Add("Set-Cookie", c)
	}
	b := []byte(out.Body)
	if out.IsBase64Encoded {
		if b, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(out.StatusCode)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// eventParts are the parts of a payload format 2.0 event that API
// Gateway's HTTP API and function URLs take alike from a request.
type eventParts struct {
	sourceIP string
	headers  map[string]string // lower-cased, values joined with ","
	cookies  []string          // the Cookie header, split
	query    map[string]string // nil without a query string
	body     string            // base64 unless textual
	base64   bool
}

func eventPartsOf(r *http.Request, body []byte) eventParts {
	p := eventParts{headers: map[string]string{}}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		p.sourceIP = host
	}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "cookie" {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						p.cookies = append(p.cookies, c)
					}
				}
			}
			continue
		}
		p.headers[lk] = strings.Join(vs, ",")
	}
	p.headers["host"] = r.Host
	p.headers["x-forwarded-proto"] = "http"
	// As API Gateway and function URLs do: a request that names no X-Ray
	// trace gets a root of its own (no parent, no sampling decision).
	if p.headers["x-amzn-trace-id"] == "" {
		p.headers["x-amzn-trace-id"] = fmt.Sprintf("Root=1-%08x-%s", time.Now().Unix(), randomHex(12))
	}
	// As API Gateway and function URLs do: the peer they saw is appended
	// to what the client sent (shared/clientip reads the sourceIp, and
	// this header only behind trusted proxies).
	if p.sourceIP != "" {
		if f := p.headers["x-forwarded-for"]; f != "" {
			p.headers["x-forwarded-for"] = f + ", " + p.sourceIP
		} else {
			p.headers["x-forwarded-for"] = p.sourceIP
		}
	}
	if r.URL.RawQuery != "" {
		q, _ := url.ParseQuery(r.URL.RawQuery)
		p.query = map[string]string{}
		for k, vs := range q {
			p.query[k] = strings.Join(vs, ",")
		}
	}
	if len(body) > 0 {
		if textual(r.Header.Get("Content-Type")) {
			p.body = string(body)
		} else {
			p.body, p.base64 = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return p
}
