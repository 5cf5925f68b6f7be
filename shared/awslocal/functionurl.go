package awslocal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
)

// A Lambda function URL (a function's FunctionUrlConfig): each served on
// a listener of its own, as each URL is a host of its own on AWS. A
// request becomes the function URL event (payload format 2.0); the answer
// is the function's response, whole when the invocation ends (BUFFERED),
// or passed on as the function posts it (RESPONSE_STREAM: the JSON
// prelude {statusCode, headers, cookies}, 8 NUL bytes, then the body, as
// aws-lambda-go's lambdaurl writes it), chunk by chunk.

// integrationResponse is the content type of a streamed answer that
// starts with the HTTP prelude.
const integrationResponse = "application/vnd.awslambda.http-integration-response"

// maxPrelude bounds the prelude of a streamed answer (status, headers and
// cookies).
const maxPrelude = 1 << 20

// invoker is what a function URL needs of its function.
type invoker interface {
	invokeSync(ctx context.Context, payload []byte) invokeResult
	enqueue(ctx context.Context, inv *invocation) error
}

// throttled is a function URL's answer to an invocation Lambda throttles
// (the function at its reserved concurrency, or the account's pool
// exhausted): 429 with the URL's own error body; the function never runs,
// so this is not the platform's error shape.
func throttled(w http.ResponseWriter) {
	urlError(w, http.StatusTooManyRequests, "Rate Exceeded.")
}

// functionURL serves one function's URL.
type functionURL struct {
	fn     *Function
	invoke invoker
}

// urlError answers as a function URL answers its own errors.
func urlError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Requestid", uuid.NewString())
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"Message":%q}`, msg)
}

func (u *functionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u.fn.URL.AuthType != "NONE" {
		// AWS_IAM: only SigV4-signed requests of a principal allowed
		// lambda:InvokeFunctionUrl get through on AWS; no signature is
		// checked here, so every request is refused.
		urlError(w, http.StatusForbidden, "Forbidden")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInvokePayload+1))
	if err != nil {
		urlError(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > maxInvokePayload {
		urlError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	payload, err := json.Marshal(u.event(r, body))
	if err != nil || len(payload) > maxInvokePayload {
		urlError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	if u.fn.URL.Streaming() {
		u.stream(w, r, payload)
		return
	}
	u.buffered(w, r, payload)
}

// event is the function URL event of r (payload format 2.0).
func (u *functionURL) event(r *http.Request, body []byte) events.LambdaFunctionURLRequest {
	now := time.Now()
	ev := events.LambdaFunctionURLRequest{
		Version:        "2.0",
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: "anonymous", RequestID: uuid.NewString(), APIID: "local",
			DomainName: r.Host, DomainPrefix: strings.Split(r.Host, ".")[0],
			Time: now.UTC().Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, UserAgent: r.UserAgent(),
			},
		},
	}
	parts := eventPartsOf(r, body)
	ev.RequestContext.HTTP.SourceIP = parts.sourceIP
	ev.Headers, ev.Cookies, ev.QueryStringParameters = parts.headers, parts.cookies, parts.query
	ev.Body, ev.IsBase64Encoded = parts.body, parts.base64
	return ev
}

// buffered answers with the function's response once the invocation ends.
func (u *functionURL) buffered(w http.ResponseWriter, r *http.Request, payload []byte) {
	res := u.invoke.invokeSync(r.Context(), payload)
	switch {
	case errors.Is(res.Err, errThrottled):
		throttled(w)
		return
	case res.Err != nil && r.Context().Err() != nil:
		return // the client left
	case res.Err != nil || res.FunctionError:
		urlError(w, http.StatusBadGateway, "Internal Server Error")
		return
	}
	var out events.LambdaFunctionURLResponse
	var probe map[string]json.RawMessage
	if json.Unmarshal(res.Payload, &probe) != nil || probe["statusCode"] == nil {
		// Not the response shape: the answer itself is the body, as a
		// function URL takes it.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(res.Payload)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(res.Payload)
		return
	}
	if err := json.Unmarshal(res.Payload, &out); err != nil || out.StatusCode < 100 || out.StatusCode > 999 {
		urlError(w, http.StatusBadGateway, "Internal Server Error")
		return
	}
	b := []byte(out.Body)
	if out.IsBase64Encoded {
		var err error
		if b, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
			urlError(w, http.StatusBadGateway, "Internal Server Error")
			return
		}
	}
	setHeaders(w.Header(), out.Headers, out.Cookies)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(out.StatusCode)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func setHeaders(h http.Header, headers map[string]string, cookies []string) {
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Set(k, headers[k])
	}
	for _, c := range cookies {
		h.Add("Set-Cookie", c)
	}
}

// stream passes the function's answer on as it comes: the prelude's
// status, headers and cookies, then each chunk of the body flushed as it
// arrives. A failure once the body has begun (an error in the answer's
// trailers, the function's timeout, its process dying) cuts the response
// (no final chunk), so the client sees an error rather than a complete
// answer.
func (u *functionURL) stream(w http.ResponseWriter, r *http.Request, payload []byte) {
	inv := newInvocation(payload)
	inv.stream = make(chan *streamedAnswer)
	inv.gone = make(chan struct{})
	defer close(inv.gone)
	if err := u.invoke.enqueue(r.Context(), inv); err != nil {
		if errors.Is(err, errThrottled) {
			throttled(w)
			return
		}
		if r.Context().Err() == nil {
			urlError(w, http.StatusBadGateway, "Internal Server Error")
		}
		return
	}
	var a *streamedAnswer
	select {
	case a = <-inv.stream:
	case <-inv.done: // failed before it answered: an error, its timeout, its exit
		urlError(w, http.StatusBadGateway, "Internal Server Error")
		return
	case <-r.Context().Done():
		return
	}
	end := streamBroken
	defer func() { a.end(end) }()
	br := bufio.NewReaderSize(a.body, 32<<10)
	status := http.StatusOK
	var headers map[string]string
	var cookies []string
	if ct, _, _ := strings.Cut(a.contentType, ";"); strings.TrimSpace(ct) == integrationResponse {
		prelude, err := readPrelude(br)
		var p struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Cookies    []string          `json:"cookies"`
		}
		if err == nil {
			err = json.Unmarshal(prelude, &p)
		}
		if err != nil || (p.StatusCode != 0 && (p.StatusCode < 100 || p.StatusCode > 999)) {
			switch {
			case err == io.EOF: // the whole answer was read
				end = streamComplete
			case err == nil || errors.Is(err, errNoPrelude) || errors.As(err, new(*json.SyntaxError)) || errors.As(err, new(*json.UnmarshalTypeError)):
				end = streamClientGone // no valid answer: read no further
			}
			urlError(w, http.StatusBadGateway, "Internal Server Error")
			return
		}
		if p.StatusCode != 0 {
			status = p.StatusCode
		}
		headers, cookies = p.Headers, p.Cookies
	} else if a.contentType != "" {
		headers = map[string]string{"Content-Type": a.contentType}
	}
	setHeaders(w.Header(), headers, cookies)
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		end = streamClientGone
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := br.Read(buf)
		if n > 0 {
			if r.Context().Err() != nil {
				end = streamClientGone
				return
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				end = streamClientGone
				return
			}
			if rc.Flush() != nil {
				end = streamClientGone
				return
			}
		}
		if err == io.EOF {
			end = streamComplete
			if a.trailer.Get(trailerErrorType) != "" {
				a.end(end)
				panic(http.ErrAbortHandler)
			}
			return
		}
		if err != nil {
			a.end(streamBroken)
			panic(http.ErrAbortHandler)
		}
	}
}

var errNoPrelude = errors.New("no end of the prelude (8 NUL bytes)")

// readPrelude reads a streamed answer's prelude up to the 8 NUL bytes
// that end it.
func readPrelude(br *bufio.Reader) ([]byte, error) {
	var p []byte
	sep := make([]byte, 8)
	for len(p) <= maxPrelude {
		b, err := br.ReadByte()
		if err != nil {
			return nil, err
		}
		p = append(p, b)
		if len(p) >= 8 && bytes.Equal(p[len(p)-8:], sep) {
			return p[:len(p)-8], nil
		}
	}
	return nil, errNoPrelude
}
