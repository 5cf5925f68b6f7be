package lambdarunner

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// request is an invocation's payload (entry.cjs reads it).
type request struct {
	Version string            `json:"version"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   string            `json:"query"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// response is the entry's answer.
type response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// maxRequestPayload is Lambda's limit of a synchronous invocation's
// payload (6 MB).
const maxRequestPayload = 6 << 20

// Transport is next, except that a request to Host invokes the function
// its path names: /<function>/<version>.
func (r *Runner) Transport(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(req *http.Request) (*http.Response, error) {
		if req.URL.Host != Host {
			return next.RoundTrip(req)
		}
		return r.invoke(req)
	})
}

// Client is a copy of c whose transport invokes functions (Transport).
func (r *Runner) Client(c *http.Client) *http.Client {
	out := *c
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out.Transport = r.Transport(next)
	return &out
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (r *Runner) invoke(req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) != 3 || parts[0] == "" || !strings.HasPrefix(parts[0], r.Prefix) ||
		!hmac.Equal([]byte(parts[2]), []byte(r.seal(parts[0], parts[1]))) {
		// Not issued by this runner (e.g. a url a user set): invoke nothing.
		return nil, fmt.Errorf("not an address of deployed code: %s", req.URL.Host)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	in := request{Version: parts[1], Method: req.Method, Path: "/", Headers: map[string]string{}, Body: string(body)}
	for k, vs := range req.Header {
		// The SDK reads lower-cased names; a repeated header: the last wins.
		in.Headers[strings.ToLower(k)] = vs[len(vs)-1]
	}
	payload, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if len(payload) > maxRequestPayload {
		return nil, fmt.Errorf("the request (%d bytes) is larger than a Lambda invocation takes", len(payload))
	}
	out, err := r.Lambda.Invoke(req.Context(), &lambda.InvokeInput{FunctionName: aws.String(parts[0]), Payload: payload})
	if err != nil {
		var throttled *types.TooManyRequestsException
		if errors.As(err, &throttled) {
			// Its concurrency is used up: a retryable answer (503: callers
			// take a 4xx as the code's final word), as a local worker at its
			// maxConcurrency gives.
			return answer(req, http.StatusServiceUnavailable, "the deployed code is at its concurrency limit: retry later"), nil
		}
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return answer(req, http.StatusServiceUnavailable, "the deployed code has no function (being deployed, or its deployment failed: deploy it again)"), nil
		}
		if req.Context().Err() != nil {
			// The deadline came while the function ran: as a worker that
			// took the request and did not answer.
			wrote(req)
			return nil, req.Context().Err()
		}
		return nil, fmt.Errorf("invoke %s: %w", parts[0], err)
	}
	// The function ran (or began to).
	wrote(req)
	if out.FunctionError != nil {
		// The code crashed, threw out of the entry or timed out: what a
		// worker that exits or hangs mid-call gives, no answer.
		var fe struct {
			ErrorType    string `json:"errorType"`
			ErrorMessage string `json:"errorMessage"`
		}
		_ = json.Unmarshal(out.Payload, &fe)
		msg := fe.ErrorMessage
		if msg == "" {
			msg = aws.ToString(out.FunctionError)
		}
		return nil, fmt.Errorf("the deployed code failed: %s", msg)
	}
	var res response
	if err := json.Unmarshal(out.Payload, &res); err != nil || res.Status < 100 || res.Status > 599 {
		return nil, fmt.Errorf("the deployed code's function answered an invalid payload")
	}
	h := http.Header{}
	for k, v := range res.Headers {
		h.Set(k, v)
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", res.Status, http.StatusText(res.Status)), StatusCode: res.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(strings.NewReader(res.Body)), ContentLength: int64(len(res.Body)), Request: req,
	}, nil
}

// wrote tells the caller's trace that the request reached the code
// (delivery.Send then reports a missing answer as "sent, then ...").
func wrote(req *http.Request) {
	if t := httptrace.ContextClientTrace(req.Context()); t != nil && t.WroteRequest != nil {
		t.WroteRequest(httptrace.WroteRequestInfo{})
	}
}

func answer(req *http.Request, status int, msg string) *http.Response {
	b, _ := json.Marshal(map[string]any{"id": "err_lambda", "code": status, "type": "ServiceUnavailable", "message": msg})
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req,
	}
}
