package awslocal

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// urlFunctions runs testdata/urlfn (built as the Lambda build builds) as
// functions under a Runtime API, each behind its function URL.
type urlFunctions struct {
	t      *testing.T
	binary string
	rt     string
	mu     sync.Mutex
	funcs  map[string]*lambdaFunction
	colds  map[string]int
}

func newURLFunctions(t *testing.T) *urlFunctions {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a Lambda function")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "./testdata/urlfn")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/urlfn: %v\n%s", err, out)
	}
	u := &urlFunctions{t: t, binary: bin, funcs: map[string]*lambdaFunction{}, colds: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
		u.mu.Lock()
		lf := u.funcs[parts[0]]
		u.mu.Unlock()
		if lf == nil || len(parts) < 3 {
			http.NotFound(w, r)
			return
		}
		var n int
		for _, c := range parts[1] {
			n = n*10 + int(c-'0')
		}
		lf.serveRuntime(w, r, n, "/"+parts[2])
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	u.rt = ln.Addr().String()
	return u
}

// add starts a function of that timeout behind a URL of that config and
// returns the URL.
func (u *urlFunctions) add(name string, timeout int, cfg FunctionURLConfig) (string, *lambdaFunction) {
	fn := &Function{LogicalID: name, Name: name, Timeout: timeout, URL: &cfg}
	lf := newLambdaFunction(fn, u.binary, []string{"PATH=" + os.Getenv("PATH")}, u.rt)
	lf.started = func(ColdStart) { u.mu.Lock(); u.colds[name]++; u.mu.Unlock() }
	u.mu.Lock()
	u.funcs[name] = lf
	u.mu.Unlock()
	srv := httptest.NewServer(&functionURL{fn: fn, invoke: lf})
	u.t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); lf.close() })
	return srv.URL, lf
}

func (u *urlFunctions) coldStarts(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.colds[name]
}

// readLine reads a line of the body within 10 s (a line held back until
// the invocation ends never comes: the function waits for the test).
func readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		s, err := br.ReadString('\n')
		if err != nil {
			s += " (" + err.Error() + ")"
		}
		got <- s
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no line of the body within 10 s while the function runs")
		return ""
	}
}

func TestFunctionURLStreaming(t *testing.T) {
	u := newURLFunctions(t)
	streamURL, lf := u.add("stream", 30, FunctionURLConfig{AuthType: "NONE", InvokeMode: "RESPONSE_STREAM"})
	hangURL, _ := u.add("hang", 1, FunctionURLConfig{AuthType: "NONE", InvokeMode: "RESPONSE_STREAM"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	get := func(ctx context.Context, url string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("the first bytes before the invocation ends, with the prelude's status, headers and cookies", func(t *testing.T) {
		release := filepath.Join(t.TempDir(), "release")
		res := get(ctx, streamURL+"/stream?release="+release)
		defer res.Body.Close()
		if res.StatusCode != http.StatusCreated || res.Header.Get("X-Test") != "yes" {
			t.Fatalf("status %d, headers %v", res.StatusCode, res.Header)
		}
		if c := res.Header.Values("Set-Cookie"); len(c) != 2 || c[0] != "a=1" || c[1] != "b=2; Path=/" {
			t.Errorf("cookies %q", c)
		}
		br := bufio.NewReader(res.Body)
		// The function is still running: it ends only once release exists.
		if l := readLine(t, br); l != "first\n" {
			t.Fatalf("first line %q", l)
		}
		if err := os.WriteFile(release, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "second\n" {
			t.Fatalf("rest %q, %v", rest, err)
		}
	})

	t.Run("a failure mid-stream cuts the response", func(t *testing.T) {
		res := get(ctx, streamURL+"/error")
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || string(b) != "partial\n" || err == nil {
			t.Fatalf("status %d, body %q, err %v: want the body cut after partial", res.StatusCode, b, err)
		}
	})

	t.Run("a client that leaves ends the function's stream; the instance takes the next event", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "marker")
		cctx, ccancel := context.WithCancel(ctx)
		res := get(cctx, streamURL+"/disconnect?marker="+marker)
		if l := readLine(t, bufio.NewReader(res.Body)); l != "tick\n" {
			t.Fatalf("first line %q", l)
		}
		ccancel()
		res.Body.Close()
		deadline := time.Now().Add(15 * time.Second)
		var got []byte
		for {
			var err error
			if got, err = os.ReadFile(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the function's writes did not fail within 15 s of the client leaving")
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("the function's write failed: %s", got)
		before := u.coldStarts("stream")
		r := lf.Invoke(ctx, []byte(`{"rawPath":"/plain","requestContext":{"http":{"method":"GET"}}}`))
		if r.Err != nil || r.FunctionError || string(r.Payload) != `{"hello":"world"}` {
			t.Fatalf("next event: %+v %s", r, r.Payload)
		}
		if n := u.coldStarts("stream"); n != before {
			t.Errorf("cold starts %d -> %d: the instance should have stayed", before, n)
		}
	})

	t.Run("the function's timeout cuts the stream", func(t *testing.T) {
		start := time.Now()
		res := get(ctx, hangURL+"/hang")
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		if l := readLine(t, br); l != "first\n" {
			t.Fatalf("first line %q", l)
		}
		_, err := io.ReadAll(br)
		if err == nil || ctx.Err() != nil {
			t.Fatalf("the stream ended with %v (test context: %v): want it cut at the timeout", err, ctx.Err())
		}
		if took := time.Since(start); took < time.Second {
			t.Errorf("cut after %v, before the function's timeout (1 s)", took)
		}
		res2 := get(ctx, hangURL+"/hang") // a new instance answers
		defer res2.Body.Close()
		if l := readLine(t, bufio.NewReader(res2.Body)); l != "first\n" {
			t.Fatalf("after the timeout: %q", l)
		}
	})
}

func TestFunctionURLBuffered(t *testing.T) {
	u := newURLFunctions(t)
	url, _ := u.add("buffered", 10, FunctionURLConfig{AuthType: "NONE", InvokeMode: "BUFFERED"})
	iamURL, _ := u.add("iam", 10, FunctionURLConfig{AuthType: "AWS_IAM", InvokeMode: "BUFFERED"})
	for _, tc := range []struct {
		name, method, url, body string
		header                  http.Header
		status                  int
		wantBody                string
		wantHeader              map[string]string
		check                   func(t *testing.T, body []byte)
	}{
		{name: "the response's status, headers, cookies and base64 body", method: "GET", url: url + "/x?q=1", status: 202,
			wantBody: "all at the end q=1", wantHeader: map[string]string{"X-Test": "yes", "Set-Cookie": "c=3"}},
		{name: "an answer not of the response's shape is the JSON body", method: "GET", url: url + "/plain", status: 200,
			wantBody: `{"hello":"world"}`, wantHeader: map[string]string{"Content-Type": "application/json"}},
		{name: "the event: payload 2.0, lower-cased headers, cookies, query, binary body in base64", method: "POST",
			url: url + "/echo?a=1&b=2", body: "\x00\x01bin", status: 200,
			header: http.Header{"X-Custom": {"v"}, "Cookie": {"k1=v1; k2=v2"}, "Content-Type": {"application/octet-stream"}},
			check: func(t *testing.T, body []byte) {
				var ev events.LambdaFunctionURLRequest
				if err := json.Unmarshal(body, &ev); err != nil {
					t.Fatal(err)
				}
				b, _ := base64.StdEncoding.DecodeString(ev.Body)
				if ev.Version != "2.0" || ev.RawPath != "/echo" || ev.RawQueryString != "a=1&b=2" || ev.Headers["x-custom"] != "v" ||
					len(ev.Cookies) != 2 || ev.Cookies[1] != "k2=v2" || !ev.IsBase64Encoded || string(b) != "\x00\x01bin" ||
					ev.RequestContext.HTTP.Method != "POST" || ev.QueryStringParameters["b"] != "2" {
					t.Errorf("event %s", body)
				}
			}},
		{name: "AWS_IAM: an unsigned request is refused", method: "GET", url: iamURL + "/x", status: 403, wantBody: `{"Message":"Forbidden"}`},
		{name: "a request over 6 MB", method: "POST", url: url + "/x", body: strings.Repeat("a", maxInvokePayload+1), status: 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header[k] = v
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil || res.StatusCode != tc.status {
				t.Fatalf("status %d (want %d), %v: %s", res.StatusCode, tc.status, err, b)
			}
			if tc.wantBody != "" && string(b) != tc.wantBody {
				t.Errorf("body %q, want %q", b, tc.wantBody)
			}
			for k, v := range tc.wantHeader {
				if res.Header.Get(k) != v {
					t.Errorf("header %s: %q, want %q", k, res.Header.Get(k), v)
				}
			}
			if tc.check != nil {
				tc.check(t, b)
			}
		})
	}
}
