package functions_test

// The functions' binaries, built as for Lambda (-tags lambda.norpc), run
// under a stand-in of the Lambda Runtime API with the sample events, against
// the embedded AWS services: their main.go and shared/runtime wiring, end to
// end. Each run also measures the function's cold-start initialisation: the
// time from process start to its first request for an event.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// functionNames are the directories of functions/ that are Lambda functions.
var functionNames = []string{"admin", "chat", "tables", "files", "scheduler", "upload-completion", "dispatcher", "sweeper", "teardown", "chatstream", "chatfanout"}

var built struct {
	once sync.Once
	dir  string
	err  error
	took time.Duration
}

// TestMain removes the functions built for the package's tests when they
// end: about 450 MB a run, which filled a developer's disk (113 runs'
// worth) when left in the temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// binaries builds every function for this machine, once per test binary,
// with the build tags of the Lambda build (Makefile's LAMBDA_BUILD).
func binaries(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "functions-bin-")
		if built.err != nil {
			return
		}
		args := []string{"build", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", built.dir + string(filepath.Separator)}
		exact := os.Getenv("LAMBDA_BUILD_EXACT") != ""
		if exact { // the Makefile's flags exactly (a build of its own: slower)
			args = append(args, "-trimpath")
		}
		for _, f := range functionNames {
			args = append(args, "./"+f)
		}
		start := time.Now()
		// By default the test's own build settings otherwise (cgo as the
		// test, no -trimpath): the packages come from the build cache.
		cmd := exec.Command("go", args...)
		if exact {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
		built.took = time.Since(start)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// invocation is one event handed to a function by the Runtime API stand-in.
type invocation struct {
	Init     time.Duration // process start to the first GET .../invocation/next
	Handle   time.Duration // the event handed over to the function's answer
	Response []byte        // the function's result, or
	Error    []byte        // the error it reported
	Output   string        // what the process wrote to stdout and stderr
}

// invoke runs the function's binary with env, hands it event through a
// stand-in of the Lambda Runtime API and returns what it answered.
func invoke(t *testing.T, name string, env map[string]string, event []byte) invocation {
	t.Helper()
	var (
		mu      sync.Mutex
		ready   time.Time
		served  bool
		result  = make(chan invocation, 1)
		started time.Time
		handed  time.Time
	)
	const reqID = "sample-invocation-1"
	api := http.NewServeMux()
	api.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if ready.IsZero() {
			ready = time.Now()
		}
		first := !served
		served = true
		mu.Unlock()
		if !first { // one event per run: hold the next poll until the end
			<-r.Context().Done()
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", reqID)
		// The longest Timeout of the stack's functions (the dispatcher
		// starts no pass with less than runtime.DispatchReserve left).
		w.Header().Set("Lambda-Runtime-Deadline-Ms", fmt.Sprint(time.Now().Add(5*time.Minute).UnixMilli()))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:bot-platform-"+name)
		w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000")
		mu.Lock()
		handed = time.Now()
		mu.Unlock()
		w.Write(event)
	})
	reply := func(isError bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			inv := invocation{Init: ready.Sub(started), Handle: time.Since(handed)}
			mu.Unlock()
			if isError {
				inv.Error = body
			} else {
				inv.Response = body
			}
			w.WriteHeader(http.StatusAccepted)
			select {
			case result <- inv:
			default:
			}
		}
	}
	api.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", reply(false))
	api.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", reply(true))
	api.HandleFunc("POST /2018-06-01/runtime/init/error", reply(true))
	srv := httptest.NewServer(api)
	defer srv.Close()

	cmd := exec.Command(filepath.Join(binaries(t), name))
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TZ=UTC",
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(srv.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=bot-platform-" + name, "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256", "_HANDLER=bootstrap",
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	mu.Lock()
	started = time.Now()
	mu.Unlock()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	select {
	case inv := <-result:
		_ = cmd.Process.Kill()
		<-exited // all its output copied
		stopped = true
		inv.Output = stderr.String()
		if len(inv.Error) > 0 {
			t.Logf("%s output:\n%s", name, inv.Output)
		}
		return inv
	case err := <-exited:
		t.Fatalf("%s exited before answering: %v\n%s", name, err, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not answer within 2 minutes\n%s", name, stderr.String())
	}
	return invocation{}
}

// TestFunctionBinaries runs each function's binary on its sample event.
func TestFunctionBinaries(t *testing.T) {
	s := newStandIns(t)
	binaries(t)
	t.Logf("built %d functions in %v", len(functionNames), built.took.Round(time.Millisecond))

	_, botID := s.bot(t)
	for _, tc := range apiEvents {
		t.Run(string(tc.area), func(t *testing.T) {
			ev := sampleEvent(t, string(tc.area)+"-request.json", map[string]string{"<TOKEN>": s.Token, "<BOT_ID>": botID})
			inv := invoke(t, string(tc.area), s.Env, ev)
			t.Logf("%s: initialisation %v, first event %v", tc.area, inv.Init.Round(time.Microsecond), inv.Handle.Round(time.Microsecond))
			if len(inv.Error) > 0 {
				t.Fatalf("error: %s", inv.Error)
			}
			var res struct {
				StatusCode int    `json:"statusCode"`
				Body       string `json:"body"`
			}
			if err := json.Unmarshal(inv.Response, &res); err != nil {
				t.Fatalf("response %s: %v", inv.Response, err)
			}
			checkAPIResponse(t, tc.op, tc.want, res.StatusCode, res.Body)
		})
	}

	// API Gateway's $default route (template.yaml's CatchAll): a path no
	// route takes reaches the files function, which answers the platform's
	// MethodNotFound, not a 404.
	t.Run("catch-all", func(t *testing.T) {
		var ev map[string]any
		if err := json.Unmarshal(sampleEvent(t, "files-request.json", map[string]string{"<TOKEN>": s.Token, "<BOT_ID>": botID}), &ev); err != nil {
			t.Fatal(err)
		}
		ev["routeKey"], ev["rawPath"], ev["rawQueryString"] = "$default", "/v2/nothing/here", ""
		rc := ev["requestContext"].(map[string]any)
		rc["routeKey"] = "$default"
		rc["http"].(map[string]any)["path"], rc["http"].(map[string]any)["method"] = "/v2/nothing/here", "POST"
		raw, _ := json.Marshal(ev)
		inv := invoke(t, "files", s.Env, raw)
		var res struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal(inv.Response, &res); err != nil || len(inv.Error) > 0 {
			t.Fatalf("response %s (%v), error %s", inv.Response, err, inv.Error)
		}
		var body struct {
			Code          int
			Type, Message string
		}
		if err := json.Unmarshal([]byte(res.Body), &body); err != nil || res.StatusCode != 405 || body.Code != 405 || body.Type != "MethodNotFound" ||
			!strings.Contains(body.Message, "the operation does not exist") {
			t.Fatalf("unknown path: %d %s", res.StatusCode, res.Body)
		}
	})

	t.Run("scheduler", func(t *testing.T) {
		botID, received := s.recurringBot(t)
		inv := invoke(t, "scheduler", s.Env, s.schedulerInput(t, botID, "ping", ""))
		t.Logf("scheduler: initialisation %v, first event %v", inv.Init.Round(time.Microsecond), inv.Handle.Round(time.Microsecond))
		if len(inv.Error) > 0 || string(inv.Response) != "null" {
			t.Fatalf("response %s, error %s", inv.Response, inv.Error)
		}
		// In Lambda, deliveries never reach private or loopback addresses:
		// the bot on this machine is refused and the failure recorded.
		if got := received.got(); len(got) != 0 {
			t.Fatalf("a bot on a loopback address received %v", got)
		}
		if n, reason := s.recurringState(t, botID, "ping"); n != 1 || reason == nil {
			t.Fatalf("failedAttempts %v, lastFailureReason %v; want the refused delivery recorded", n, reason)
		}
		if !s.Logs.wrote(s.Env["PLATFORM_BOT_LOG_GROUP"], botID) {
			t.Fatalf("the refused delivery was not logged to the bot log group: %v", s.Logs.groups())
		}
	})

	t.Run("dispatcher", func(t *testing.T) {
		botID, received := s.recurringBot(t)
		id := s.queueEvent(t, botID, "ping")
		ev := streamSample(t) // before the reset: the test's own calls are not the dispatcher's
		s.DynamoOps.reset()
		inv := invoke(t, "dispatcher", s.Env, ev)
		// A refused delivery: failed for good, the failure made a bot issue.
		checkDispatcherOps(t, s.DynamoOps.reset())
		t.Logf("dispatcher: initialisation %v, first event %v", inv.Init.Round(time.Microsecond), inv.Handle.Round(time.Microsecond))
		if len(inv.Error) > 0 || string(inv.Response) != "null" {
			t.Fatalf("response %s, error %s", inv.Response, inv.Error)
		}
		// In Lambda, deliveries never reach private or loopback addresses:
		// the bot on this machine is refused, for good (no retry could
		// reach it).
		if got := received.got(); len(got) != 0 {
			t.Fatalf("a bot on a loopback address received %v", got)
		}
		if st := s.eventStatus(t, botID, id); st != "failed" {
			t.Fatalf("event %s after a refused attempt, want failed", st)
		}
		if inv.Handle > 5*time.Second {
			t.Fatalf("the refused delivery took %s: it was retried", inv.Handle)
		}
		if !s.Logs.wrote(s.Env["PLATFORM_BOT_LOG_GROUP"], id) {
			t.Fatalf("the refused delivery was not logged to the bot log group: %v", s.Logs.groups())
		}
	})

	// A deletion deleteBot could not finish (S3 refused its deletes),
	// finished by the sweeper function on its schedule.
	t.Run("sweeper", func(t *testing.T) {
		ws, botID := s.bot(t)
		_, key := s.uploadedFile(t, botID, "hello, world")
		s.DenyS3Deletes.Store(true)
		s.deleteBot(t, ws, botID)
		s.DenyS3Deletes.Store(false)
		if !s.objectExists(t, key) || s.pending(t) != 1 {
			t.Fatalf("before the sweep: object %v, %d deletions pending; want the object and 1", s.objectExists(t, key), s.pending(t))
		}
		inv := invoke(t, "sweeper", s.Env, sampleEvent(t, "sweeper-schedule.json", nil))
		t.Logf("sweeper: initialisation %v, first event %v", inv.Init.Round(time.Microsecond), inv.Handle.Round(time.Microsecond))
		if len(inv.Error) > 0 || string(inv.Response) != "null" {
			t.Fatalf("response %s, error %s", inv.Response, inv.Error)
		}
		if s.objectExists(t, key) || s.pending(t) != 0 {
			t.Fatalf("after the sweep: object %v, %d deletions pending; want neither", s.objectExists(t, key), s.pending(t))
		}
	})
	// The Chat API's streams: the streaming function answers through
	// lambdaurl in Lambda's streaming mode (a JSON prelude with the status
	// and headers, 8 zero bytes, then the body as it is written).
	t.Run("chatstream", func(t *testing.T) {
		inv := invoke(t, "chatstream", s.Env, sampleEvent(t, "chatstream-url.json", nil))
		t.Logf("chatstream: initialisation %v, first event %v", inv.Init.Round(time.Microsecond), inv.Handle.Round(time.Microsecond))
		prelude, body, ok := bytes.Cut(inv.Response, make([]byte, 8))
		var head struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
		}
		if len(inv.Error) > 0 || !ok || json.Unmarshal(prelude, &head) != nil {
			t.Fatalf("response %q, error %s", inv.Response, inv.Error)
		}
		var e struct{ Code int }
		if head.StatusCode != 404 || json.Unmarshal(body, &e) != nil || e.Code != 404 {
			t.Fatalf("an unknown installation: %d %s", head.StatusCode, body)
		}
	})
	t.Run("chatfanout", func(t *testing.T) {
		inv := invoke(t, "chatfanout", s.Env, sampleEvent(t, "chatfanout-stream.json", nil))
		if len(inv.Error) > 0 || string(inv.Response) != "null" {
			t.Fatalf("response %s, error %s", inv.Response, inv.Error)
		}
	})

	t.Run("upload-completion", func(t *testing.T) {
		_, botID := s.bot(t)
		fileID, key := s.uploadedFile(t, botID, "hello, world")
		inv := invoke(t, "upload-completion", s.Env, uploadEvent(t, testBucket, key))
		t.Logf("upload-completion: initialisation %v, first event %v", inv.Init.Round(time.Microsecond), inv.Handle.Round(time.Microsecond))
		if len(inv.Error) > 0 || string(inv.Response) != "null" {
			t.Fatalf("response %s, error %s", inv.Response, inv.Error)
		}
		if st, size := s.fileStatus(t, botID, fileID); st != "upload_completed" || size != 12 {
			t.Fatalf("after the S3 event: status %s, size %v; want upload_completed, 12", st, size)
		}
	})
}

// TestColdStart reports each function's cold-start initialisation (process
// start to its first request for an event) in the test log: the median of
// COLD_START_RUNS runs (default 1), with the Makefile's exact build flags
// when LAMBDA_BUILD_EXACT is set (for this machine's architecture):
//
//	LAMBDA_BUILD_EXACT=1 COLD_START_RUNS=21 go test ./functions -run ColdStart -v
func TestColdStart(t *testing.T) {
	s := newStandIns(t)
	runs := 1
	if v := os.Getenv("COLD_START_RUNS"); v != "" {
		fmt.Sscan(v, &runs)
	}
	// An event each function rejects or ignores quickly: only the
	// initialisation is measured.
	noop := map[string][]byte{
		"scheduler":         []byte(`{}`),
		"upload-completion": []byte(`{"Records":[]}`),
		"dispatcher":        []byte(`{}`),
		"sweeper":           []byte(`{}`), // nothing pending: one Query
		"teardown":          []byte(`{}`), // not a CloudFormation request: refused
		"chatfanout":        []byte(`{"Records":[]}`),
		"chatstream":        sampleEvent(t, "chatstream-url.json", nil),
	}
	for _, name := range functionNames {
		ev, ok := noop[name]
		if !ok {
			ev = sampleEvent(t, name+"-request.json", map[string]string{"<TOKEN>": "bp_pat_invalid", "<BOT_ID>": "bot_x"})
		}
		var d []time.Duration
		for i := 0; i < runs; i++ {
			d = append(d, invoke(t, name, s.Env, ev).Init)
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%-18s initialisation: median %v (min %v, max %v, %d runs)", name, d[len(d)/2].Round(time.Microsecond),
			d[0].Round(time.Microsecond), d[len(d)-1].Round(time.Microsecond), runs)
	}
}

// TestFunctionRequestLogAndCORS: an API function logs each request as one
// JSON line on stdout (CloudWatch Logs), without the token, and answers
// the CORS preflights of the origins of PLATFORM_CORS_ORIGINS (the stack's
// CorsOrigins parameter).
func TestFunctionRequestLogAndCORS(t *testing.T) {
	s := newStandIns(t)
	_, botID := s.bot(t)
	ev := sampleEvent(t, "admin-request.json", map[string]string{"<TOKEN>": s.Token, "<BOT_ID>": botID})
	env := map[string]string{"PLATFORM_CORS_ORIGINS": "https://app.example.com"}
	for k, v := range s.Env {
		env[k] = v
	}
	inv := invoke(t, "admin", env, ev)
	var line map[string]any
	for _, l := range strings.Split(inv.Output, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			if line != nil {
				t.Fatalf("more than one request line:\n%s", inv.Output)
			}
			line = m
		}
	}
	if line == nil || line["method"] != "GET" || line["path"] != "/v1/admin/account/me" || line["status"] != float64(200) ||
		line["caller"] != "account" || line["requestId"] == nil || line["ms"] == nil {
		t.Fatalf("no JSON request line for the call:\n%s", inv.Output)
	}
	if strings.Contains(inv.Output, s.Token) {
		t.Fatalf("the token is in the log:\n%s", inv.Output)
	}

	var preflight map[string]any
	if err := json.Unmarshal(ev, &preflight); err != nil {
		t.Fatal(err)
	}
	preflight["headers"] = map[string]string{"origin": "https://app.example.com", "access-control-request-method": "PUT",
		"access-control-request-headers": "authorization,x-workspace-id", "host": "api.example.com"}
	preflight["requestContext"].(map[string]any)["http"].(map[string]any)["method"] = "OPTIONS"
	raw, _ := json.Marshal(preflight)
	inv = invoke(t, "admin", env, raw)
	var res struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(inv.Response, &res); err != nil {
		t.Fatalf("response %s: %v", inv.Response, err)
	}
	if res.StatusCode != 204 || res.Headers["Access-Control-Allow-Origin"] != "https://app.example.com" ||
		strings.ReplaceAll(res.Headers["Access-Control-Allow-Headers"], " ", "") != "authorization,x-workspace-id" {
		t.Fatalf("preflight: %s", inv.Response)
	}
}
