// Package delivery makes the platform's outgoing calls: events delivered to
// a bot's url and operations sent to an integration's url. Every call is an
// HTTP POST signed with the receiver's signing secret (SignatureHeader),
// bounded by a timeout, and classified by what the caller can know of its
// outcome: delivered, failed (not sent, or refused), or outcome_unknown
// (sent, then no answer: the receiver may or may not have acted).
package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/botforge/platform/shared/tracing"
)

// SignatureHeader carries the signature of a delivery:
//
//	X-BP-Signature: <t>,<sig>
//
// where t is the sending time in Unix milliseconds and sig is the unpadded
// base64url HMAC-SHA256 of "<t>.<body>" keyed with the signing secret
// decoded as base64url (the scheme of Botpress's
// @bpinternal/signature-verification, so its verifier works unchanged).
// Receivers should reject signatures older than five minutes.
const SignatureHeader = "X-BP-Signature"

// Sign returns the SignatureHeader value of body sent at t.
func Sign(secret string, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.UnixMilli(), 10)
	m := hmac.New(sha256.New, secretKey(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return ts + "," + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// secretKey is the HMAC key of a signing secret: its base64url decoding.
// Platform secrets are hex, which always decodes; anything else is used as
// raw bytes.
func secretKey(secret string) []byte {
	s := strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(secret), "=")
	if k, err := base64.RawURLEncoding.DecodeString(s); err == nil {
		return k
	}
	return []byte(secret)
}

// Verify checks a SignatureHeader value against body: the signature must
// match and be at most maxAge old (or early).
func Verify(secret string, body []byte, header string, now time.Time, maxAge time.Duration) bool {
	ts, sig, ok := strings.Cut(header, ",")
	if !ok {
		return false
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	t := time.UnixMilli(ms)
	if d := now.Sub(t); d > maxAge || d < -maxAge {
		return false
	}
	want := Sign(secret, body, t)
	_, wantSig, _ := strings.Cut(want, ",")
	for _, s := range strings.Split(sig, ",") {
		if hmac.Equal([]byte(s), []byte(wantSig)) {
			return true
		}
	}
	return false
}

// Outcome is what the sender knows of a call's effect.
type Outcome string

const (
	// Delivered: the receiver answered 2xx.
	Delivered Outcome = "delivered"
	// Failed: the request was not sent (bad url, refused connection), or the
	// receiver answered with an error status.
	Failed Outcome = "failed"
	// OutcomeUnknown: the request was sent, then the answer never came
	// (timeout, connection lost). Never retried blindly.
	OutcomeUnknown Outcome = "outcome_unknown"
)

// Request is one signed POST.
type Request struct {
	URL     string
	Secret  string
	Body    []byte
	Header  http.Header
	Timeout time.Duration
}

// Response is what a call got back.
type Response struct {
	Outcome    Outcome
	StatusCode int
	Body       []byte // at most MaxResponseBytes
	Err        string // why it failed or is unknown
	Duration   time.Duration

	// Header is the answer's headers; Truncated tells that its body was
	// longer than MaxResponseBytes (Body holds the start).
	Header    http.Header
	Truncated bool
	// Final tells a failure no retry can change (the url's address is one
	// deliveries may not reach).
	Final bool
}

// MaxResponseBytes caps how much of an answer is read.
const MaxResponseBytes = 64 << 10

// DefaultTimeout bounds a call when the request sets none.
const DefaultTimeout = 10 * time.Second

// Client is an HTTP client for deliveries: no redirects followed (a
// redirect is an answer, recorded as such) and, unless allowPrivate, no
// connection to loopback, link-local or private addresses, so a bot or
// integration url cannot reach into the platform's own network.
func Client(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if !allowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
				ip.IsPrivate() || ip.IsUnspecified() || ip.IsMulticast() {
				return &notAllowedError{host: host}
			}
			return nil
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = nil
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// notAllowedError refuses a connection to an address deliveries may not
// reach: no retry can succeed.
type notAllowedError struct{ host string }

func (e *notAllowedError) Error() string {
	return fmt.Sprintf("address %s is not allowed for deliveries", e.host)
}

// Send posts r, signed, and reports its outcome. It never retries.
func Send(ctx context.Context, client *http.Client, r Request) Response {
	start := time.Now()
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := func(o Outcome, status int, body []byte, msg string) Response {
		return Response{Outcome: o, StatusCode: status, Body: body, Err: msg, Duration: time.Since(start)}
	}
	if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
		return res(Failed, 0, nil, fmt.Sprintf("the url %q is not an http(s) url", r.URL))
	}
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return res(Failed, 0, nil, "invalid url: "+err.Error())
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "botforge-platform")
	// The trace of the call (traceparent, X-Amzn-Trace-Id): the bot's or
	// integration's code may carry it on into its own calls.
	tracing.Inject(ctx, req.Header)
	req.Header.Set(SignatureHeader, Sign(r.Secret, r.Body, time.Now()))
	resp, err := client.Do(req)
	if err != nil {
		why := err.Error()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("no answer within %s", timeout)
		}
		if wrote.Load() {
			return res(OutcomeUnknown, 0, nil, "sent, then "+why)
		}
		out := res(Failed, 0, nil, "not sent: "+why)
		var na *notAllowedError
		out.Final = errors.As(err, &na)
		return out
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	truncated := len(body) > MaxResponseBytes
	if truncated {
		body = body[:MaxResponseBytes]
	}
	res = func(o Outcome, status int, body []byte, msg string) Response {
		return Response{Outcome: o, StatusCode: status, Body: body, Err: msg, Duration: time.Since(start),
			Header: resp.Header, Truncated: truncated}
	}
	if err != nil {
		// The status line came: the receiver acted on the request, whatever
		// the body would have said.
		if resp.StatusCode/100 == 2 {
			return res(Delivered, resp.StatusCode, body, "")
		}
		return res(Failed, resp.StatusCode, body, fmt.Sprintf("answered %d (body unreadable: %v)", resp.StatusCode, err))
	}
	if resp.StatusCode/100 != 2 {
		return res(Failed, resp.StatusCode, body, fmt.Sprintf("answered %d%s", resp.StatusCode, failureOf(body, resp.Header)))
	}
	return res(Delivered, resp.StatusCode, body, "")
}

// snippet is a short quote of an error answer for failure reasons.
// LoggedErrorHeader carries, on an answer of code the platform runs (the
// local worker's shim, the Lambda entry), the first line the code wrote to
// console.error while handling that request (URL-encoded). The SDK answers
// an exception it did not expect with a generic message ("An unexpected
// error occurred in the integration. …") and logs the cause
// (console.error), so without it a failed registration would say nothing
// of why (e.g. "getaddrinfo ENOTFOUND api.telegram.org"). It is the
// platform's: never relayed to a webhook's caller.
const LoggedErrorHeader = "X-Bp-Logged-Error"

// sdkGenericError starts the SDK's answer to an exception it did not
// expect (SDK 0.10 and 7: "An unexpected error occurred in the
// integration." / "... in the bot.").
const sdkGenericError = "An unexpected error occurred in the "

// failureOf says why an answer is a failure: the message of an error
// answer in the API's shape ({"message": ...}) or the start of the answer,
// and the error the code logged meanwhile (LoggedErrorHeader), which
// stands first when the answer is only the SDK's generic message.
func failureOf(body []byte, h http.Header) string {
	msg := snippet(body)
	var e struct {
		Message string `json:"message"`
		Error   string `json:"error"` // the SDK server's own failures
	}
	if json.Unmarshal(body, &e) == nil {
		if m := strings.TrimSpace(e.Message); m != "" {
			msg = ": " + cut(m, 300)
		} else if m := strings.TrimSpace(e.Error); m != "" {
			msg = ": " + cut(m, 300)
		}
	}
	logged, _ := url.PathUnescape(h.Get(LoggedErrorHeader))
	logged = cut(strings.TrimSpace(logged), 500)
	switch {
	case logged == "":
		return msg
	case strings.HasPrefix(e.Message, sdkGenericError):
		generic, _, _ := strings.Cut(e.Message, ".")
		return fmt.Sprintf(": %s (logged by the code, which answered %q)", logged, generic+".")
	}
	return fmt.Sprintf("%s (logged by the code: %s)", msg, logged)
}

// AnswerReason is why an error answer failed, as Send's Err says it after
// "answered <status>: ": its message, with the error the code logged
// (LoggedErrorHeader). For callers that word the status themselves.
func AnswerReason(res Response) string {
	return strings.TrimPrefix(failureOf(res.Body, res.Header), ": ")
}

// cut shortens s to at most n bytes (on a rune boundary), marked "…".
func cut(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return ": " + s
}

// Result is one delivery or integration call as observers see it: the hook
// for logs and bot issues.
type Result struct {
	Kind          string // "recurring_event", "register", "unregister", ...
	BotID         string
	WorkspaceID   string
	IntegrationID string
	// Name is the recurring event's name or the integration's alias.
	Name        string
	EventID     string
	EventType   string
	OperationID string
	URL         string
	Outcome     Outcome
	StatusCode  int
	Error       string
	At          time.Time
	Duration    time.Duration
}

// Observer receives every Result. It must not block for long.
type Observer func(ctx context.Context, r Result)
