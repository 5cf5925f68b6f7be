package delivery_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/delivery"
)

func TestSignAndVerify(t *testing.T) {
	secret := strings.Repeat("ab12", 16)
	body := []byte(`{"event":{"id":"evt_1"}}`)
	now := time.Now()
	sig := delivery.Sign(secret, body, now)
	ts, hash, ok := strings.Cut(sig, ",")
	if !ok || len(hash) != 43 || ts == "" {
		t.Fatalf("signature shape %q: want <ms>,<43 base64url chars>", sig)
	}
	if !delivery.Verify(secret, body, sig, now, 5*time.Minute) {
		t.Fatal("a good signature does not verify")
	}
	for name, tc := range map[string]struct {
		secret string
		body   []byte
		header string
		now    time.Time
	}{
		"other secret": {strings.Repeat("cd34", 16), body, sig, now},
		"other body":   {secret, []byte(`{}`), sig, now},
		"too old":      {secret, body, sig, now.Add(6 * time.Minute)},
		"garbage":      {secret, body, "nope", now},
		"no hash":      {secret, body, ts + ",", now},
	} {
		if delivery.Verify(tc.secret, tc.body, tc.header, tc.now, 5*time.Minute) {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestSendOutcomes(t *testing.T) {
	secret := strings.Repeat("0f", 32)
	var gotSig, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotSig, gotBody = r.Header.Get(delivery.SignatureHeader), string(b)
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"fine":true}`))
		case "/fail":
			w.WriteHeader(500)
			w.Write([]byte("boom"))
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()
	// A port nothing listens on: the request is never sent.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()

	client := delivery.Client(true)
	send := func(url string, timeout time.Duration) delivery.Response {
		return delivery.Send(context.Background(), client, delivery.Request{URL: url, Secret: secret, Body: []byte(`{"a":1}`), Timeout: timeout})
	}
	r := send(srv.URL+"/ok", time.Second)
	if r.Outcome != delivery.Delivered || r.StatusCode != 200 || string(r.Body) != `{"fine":true}` {
		t.Fatalf("ok: %+v", r)
	}
	if gotBody != `{"a":1}` || !delivery.Verify(secret, []byte(gotBody), gotSig, time.Now(), time.Minute) {
		t.Fatalf("the receiver cannot verify the signature %q of %q", gotSig, gotBody)
	}
	if r := send(srv.URL+"/fail", time.Second); r.Outcome != delivery.Failed || r.StatusCode != 500 || !strings.Contains(r.Err, "500: boom") {
		t.Fatalf("fail: %+v", r)
	}
	if r := send(srv.URL+"/redirect", time.Second); r.Outcome != delivery.Failed || r.StatusCode != 302 {
		t.Fatalf("redirect: %+v", r)
	}
	start := time.Now()
	r = send(srv.URL+"/hang", 200*time.Millisecond)
	if r.Outcome != delivery.OutcomeUnknown || !strings.Contains(r.Err, "sent, then no answer within 200ms") {
		t.Fatalf("hang: %+v", r)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the timeout did not bound the call: %s", time.Since(start))
	}
	if r := send(closed, time.Second); r.Outcome != delivery.Failed || !strings.Contains(r.Err, "not sent") {
		t.Fatalf("refused connection: %+v", r)
	}
	if r := send("ftp://example.com", time.Second); r.Outcome != delivery.Failed {
		t.Fatalf("bad scheme: %+v", r)
	}
	// The production client does not reach private or loopback addresses.
	r = delivery.Send(context.Background(), delivery.Client(false), delivery.Request{URL: srv.URL + "/ok", Secret: secret, Body: []byte(`{}`)})
	if r.Outcome != delivery.Failed || !strings.Contains(r.Err, "not allowed") {
		t.Fatalf("loopback with the production client: %+v", r)
	}
}

// TestFailureReason: a failed answer's reason is the message of an error
// in the API's shape, else the start of the answer; the error the code
// logged meanwhile (X-Bp-Logged-Error) stands first when the answer is
// only the SDK's generic message, and is added otherwise.
func TestFailureReason(t *testing.T) {
	generic := `{"id":"err_1","code":400,"type":"Runtime","message":"An unexpected error occurred in the integration. Bot owners: Check logs for more informations."}`
	for _, tc := range []struct {
		name, body, logged, want string
	}{
		{"plain answer", "down for maintenance", "", "answered 400: down for maintenance"},
		{"error shape", `{"id":"err_1","code":400,"type":"Runtime","message":"Telegram said: 401 Unauthorized"}`, "", "answered 400: Telegram said: 401 Unauthorized"},
		{"generic, nothing logged", generic, "", "answered 400: An unexpected error occurred in the integration. Bot owners: Check logs for more informations."},
		{"generic, cause logged", generic, "Error%3A%20getaddrinfo%20ENOTFOUND%20api.telegram.org",
			`answered 400: Error: getaddrinfo ENOTFOUND api.telegram.org (logged by the code, which answered "An unexpected error occurred in the integration.")`},
		{"own message and a logged line", `{"message":"refused"}`, "warn%3A%20x", "answered 400: refused (logged by the code: warn: x)"},
		{"empty answer", "", "", "answered 400"},
		{"the SDK server's failure", `{"error":"Missing configuration header"}`, "", "answered 400: Missing configuration header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.logged != "" {
					w.Header().Set(delivery.LoggedErrorHeader, tc.logged)
				}
				w.WriteHeader(400)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			res := delivery.Send(context.Background(), srv.Client(), delivery.Request{URL: srv.URL, Secret: "s", Body: []byte("{}")})
			if res.Outcome != delivery.Failed || res.Err != tc.want {
				t.Fatalf("%s %q, want %q", res.Outcome, res.Err, tc.want)
			}
		})
	}
}
