package awslocal

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// The Lambda service of the stack: each function of the template runs as
// processes of its binary under the Lambda Runtime API, as on AWS; an
// invocation goes to an idle instance, or a new one (a cold start), within
// the function's concurrency (concurrency.go: its reservation, or the
// account's unreserved pool), beyond which it is throttled. An invocation
// not answered within the function's Timeout kills its instance (as Lambda
// ends a timed-out sandbox) and fails with Lambda's "Task timed out".

// invocation is one event for a function.
type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	done     chan invokeResult
	once     sync.Once
	// stream, when set, is where the function's answer goes as it is
	// posted (a function URL's RESPONSE_STREAM): the Runtime API hands
	// over the body of its POST rather than reading it whole. gone is
	// closed when the caller no longer waits for it.
	stream chan *streamedAnswer
	gone   chan struct{}
	// release gives back the concurrent execution the invocation holds
	// (once: when it ends, or when no instance ever took it).
	release     func()
	releaseOnce sync.Once
}

func (inv *invocation) free() {
	inv.releaseOnce.Do(func() {
		if inv.release != nil {
			inv.release()
		}
	})
}

func newInvocation(payload []byte) *invocation {
	return &invocation{id: uuid.NewString(), payload: payload, done: make(chan invokeResult, 1)}
}

// streamedAnswer is the answer of a streaming invocation while the
// function posts it: its reader (the function URL) reads body as it
// arrives, and says with end how the reading ended.
type streamedAnswer struct {
	contentType string
	body        io.Reader
	// trailer holds the function's error (Lambda-Runtime-Function-Error-
	// Type and -Body) once body is read to its end.
	trailer http.Header
	ended   chan streamEnd
	once    sync.Once
}

// streamEnd is how the reader of a streamed answer stopped.
type streamEnd int

const (
	streamComplete   streamEnd = iota // the function's answer ended
	streamClientGone                  // the client left: the function's writes must fail
	streamBroken                      // the function's connection broke (killed, crashed)
)

func (a *streamedAnswer) end(e streamEnd) { a.once.Do(func() { a.ended <- e }) }

// Lambda's trailers of a failure in a streamed answer.
const (
	trailerErrorType = "Lambda-Runtime-Function-Error-Type"
	trailerErrorBody = "Lambda-Runtime-Function-Error-Body"
)

func (inv *invocation) finish(r invokeResult) {
	inv.once.Do(func() { inv.done <- r })
	inv.free()
}

// invokeResult is a function's answer: its response, or the error it
// reported (FunctionError set), or Err when it never answered.
type invokeResult struct {
	Payload       []byte
	FunctionError bool
	Err           error
}

// ColdStart is one instance's initialisation: process start to its first
// request for an event.
type ColdStart struct {
	Function string
	Took     time.Duration
}

// lambdaFunction runs one function's instances.
type lambdaFunction struct {
	fn      *Function
	binary  string
	env     []string
	runtime string // host:port of the stack's Runtime API
	output  func(fn *Function, line string)
	started func(ColdStart)
	// account is the account's concurrency the function's invocations
	// count against (nil: unbounded); inFlight is guarded by its lock.
	account  *account
	inFlight int

	queue chan *invocation

	mu        sync.Mutex
	instances map[int]*instance
	next      int
	idle      int // instances waiting for an event
	waiting   int // invocations not yet taken
	closed    bool
	wg        sync.WaitGroup
}

type instance struct {
	n       int
	cmd     *exec.Cmd
	start   time.Time
	polled  bool
	current *invocation
	idle    bool // answered, its next poll not yet made
	timer   *time.Timer
	exited  chan struct{}
}

// kill ends the instance's process group.
func (in *instance) kill() { _ = syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL) }

func newLambdaFunction(fn *Function, binary string, env []string, runtimeAddr string) *lambdaFunction {
	return &lambdaFunction{fn: fn, binary: binary, env: env, runtime: runtimeAddr,
		queue: make(chan *invocation), instances: map[int]*instance{}}
}

// Invoke runs one event through the function and waits for its answer,
// as an event source mapping, EventBridge or an asynchronous invocation
// does: a throttled invocation is tried again (backing off up to a second)
// until it runs or ctx ends.
func (l *lambdaFunction) Invoke(ctx context.Context, payload []byte) invokeResult {
	wait := 20 * time.Millisecond
	for {
		r := l.invokeSync(ctx, payload)
		if !errors.Is(r.Err, errThrottled) {
			return r
		}
		select {
		case <-ctx.Done():
			return invokeResult{Err: ctx.Err()}
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// invokeSync is a synchronous invocation (API Gateway's, a function URL's):
// a throttled one fails at once with errThrottled.
func (l *lambdaFunction) invokeSync(ctx context.Context, payload []byte) invokeResult {
	inv := newInvocation(payload)
	if err := l.enqueue(ctx, inv); err != nil {
		return invokeResult{Err: err}
	}
	select {
	case r := <-inv.done:
		return r
	case <-ctx.Done():
		// The caller gives up (API Gateway's 30 s); the instance goes on
		// until its own timeout, as in Lambda.
		return invokeResult{Err: ctx.Err()}
	}
}

// enqueue hands inv to an idle instance, or a new one, once one takes it;
// errThrottled when the function is at its concurrency. The instances of
// a function are as many as its invocations in flight at most (the
// concurrency bounds the processes of this machine too).
func (l *lambdaFunction) enqueue(ctx context.Context, inv *invocation) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errors.New("the stack is stopping")
	}
	l.mu.Unlock()
	if a := l.account; a != nil {
		if err := a.acquire(l); err != nil {
			return err
		}
		inv.release = func() { a.release(l) }
	}
	l.mu.Lock()
	l.waiting++
	if l.waiting > l.idle {
		if err := l.spawnLocked(); err != nil {
			l.waiting--
			l.mu.Unlock()
			inv.free()
			return err
		}
	}
	l.mu.Unlock()
	select {
	case l.queue <- inv:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
		inv.free()
		return ctx.Err()
	}
}

// answered ends inv on its instance: the instance is idle from now on,
// its next poll takes the next event rather than another instance
// starting (as Lambda reuses a warm sandbox). False when inv is no longer
// the instance's (it timed out, the instance exited).
func (l *lambdaFunction) answered(in *instance, inv *invocation) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in.current != inv || l.instances[in.n] != in {
		return false
	}
	in.current = nil
	if in.timer != nil {
		in.timer.Stop()
	}
	in.idle = true
	l.idle++
	return true
}

func (l *lambdaFunction) spawnLocked() error {
	l.next++
	n := l.next
	cmd := exec.Command(l.binary)
	cmd.Env = append(append([]string(nil), l.env...),
		"AWS_LAMBDA_RUNTIME_API="+l.runtime+"/"+l.fn.LogicalID+"/"+strconv.Itoa(n),
		"AWS_LAMBDA_LOG_STREAM_NAME="+time.Now().UTC().Format("2006/01/02")+"/[$LATEST]"+strings.ReplaceAll(uuid.NewString(), "-", ""),
	)
	// The instances die with the stack, even a killed one (kill -9).
	// In a process group of their own, killed whole (a timed-out
	// instance's children included, as Lambda ends the sandbox).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	in := &instance{n: n, cmd: cmd, start: time.Now(), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", l.fn.Name, err)
	}
	l.instances[n] = in
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if l.output != nil {
				l.output(l.fn, sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, out)
		err := cmd.Wait()
		l.mu.Lock()
		delete(l.instances, n)
		cur := in.current
		if in.idle {
			in.idle = false
			l.idle--
		}
		if in.timer != nil {
			in.timer.Stop()
		}
		l.mu.Unlock()
		close(in.exited)
		if cur != nil {
			msg := fmt.Sprintf("Runtime exited with error: %v", err)
			cur.finish(invokeResult{Payload: lambdaError("Runtime.ExitError", msg), FunctionError: true})
		}
	}()
	return nil
}

// lambdaError is the payload of a failed invocation.
func lambdaError(typ, msg string) []byte {
	return []byte(fmt.Sprintf(`{"errorType":%q,"errorMessage":%q}`, typ, msg))
}

// serveRuntime serves one instance's Runtime API requests: rest is the
// path after /<function>/<n>.
func (l *lambdaFunction) serveRuntime(w http.ResponseWriter, r *http.Request, n int, rest string) {
	l.mu.Lock()
	in := l.instances[n]
	l.mu.Unlock()
	if in == nil {
		http.Error(w, "no such instance", http.StatusGone)
		return
	}
	switch {
	case r.Method == http.MethodGet && rest == "/2018-06-01/runtime/invocation/next":
		l.mu.Lock()
		if !in.polled {
			in.polled = true
			if l.started != nil {
				l.started(ColdStart{Function: l.fn.LogicalID, Took: time.Since(in.start)})
			}
		}
		in.current = nil
		if !in.idle { // counted idle already when it answered
			l.idle++
		}
		in.idle = false
		l.mu.Unlock()
		var inv *invocation
		select {
		case inv = <-l.queue:
		case <-r.Context().Done():
		case <-in.exited:
		}
		l.mu.Lock()
		l.idle--
		if inv != nil {
			l.waiting--
			in.current = inv
		}
		l.mu.Unlock()
		if inv == nil {
			return
		}
		inv.deadline = time.Now().Add(time.Duration(l.fn.Timeout) * time.Second)
		l.mu.Lock()
		in.timer = time.AfterFunc(time.Until(inv.deadline), func() {
			inv.finish(invokeResult{Payload: lambdaError("Sandbox.Timedout", fmt.Sprintf("Task timed out after %d.00 seconds", l.fn.Timeout)), FunctionError: true})
			in.kill()
		})
		l.mu.Unlock()
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", l.fn.ARN)
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-"+strconv.FormatInt(time.Now().Unix(), 16)+"-000000000000000000000000;Sampled=0")
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(inv.payload)
	case r.Method == http.MethodPost && strings.HasPrefix(rest, "/2018-06-01/runtime/invocation/"):
		parts := strings.Split(strings.TrimPrefix(rest, "/2018-06-01/runtime/invocation/"), "/")
		l.mu.Lock()
		cur := in.current
		l.mu.Unlock()
		if cur == nil || len(parts) != 2 || parts[0] != cur.id || (parts[1] != "response" && parts[1] != "error") {
			http.Error(w, `{"errorMessage":"no such invocation"}`, http.StatusBadRequest)
			return
		}
		if parts[1] == "response" && cur.stream != nil {
			l.streamAnswer(w, r, in, cur)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 7<<20))
		if !l.answered(in, cur) {
			http.Error(w, `{"errorMessage":"no such invocation"}`, http.StatusBadRequest)
			return
		}
		switch {
		case parts[1] == "response" && len(body) > 6<<20:
			cur.finish(invokeResult{Payload: lambdaError("Function.ResponseSizeTooLarge", "Response payload size exceeded maximum allowed payload size (6291556 bytes)."), FunctionError: true})
		case parts[1] == "response" && r.Trailer.Get(trailerErrorType) != "":
			// A streamed answer (a runtime's chunked POST) that failed.
			cur.finish(invokeResult{Payload: trailerError(r.Trailer), FunctionError: true})
		case parts[1] == "response":
			cur.finish(invokeResult{Payload: body})
		default:
			cur.finish(invokeResult{Payload: body, FunctionError: true})
		}
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodPost && rest == "/2018-06-01/runtime/init/error":
		body, _ := io.ReadAll(r.Body)
		if l.output != nil {
			l.output(l.fn, "INIT_ERROR "+string(body))
		}
		w.WriteHeader(http.StatusAccepted)
		in.kill()
	default:
		http.Error(w, "unknown runtime API call", http.StatusNotFound)
	}
}

// streamAnswer hands the body of a streaming invocation's answer to its
// reader as the function posts it, and ends the POST as the reading ended:
// 202 once it was read whole; when the client left, 202 at once and the
// connection closed, so the function's runtime stops sending (its
// writes fail from then on: aws-lambda-go closes the response's pipe) and
// the instance takes its next event.
func (l *lambdaFunction) streamAnswer(w http.ResponseWriter, r *http.Request, in *instance, inv *invocation) {
	a := &streamedAnswer{contentType: r.Header.Get("Content-Type"), body: r.Body, trailer: r.Trailer, ended: make(chan streamEnd, 1)}
	var end streamEnd
	select {
	case inv.stream <- a:
		end = <-a.ended
	case <-inv.gone:
		end = streamClientGone
	case <-in.exited:
		return
	}
	switch end {
	case streamBroken:
		return // the instance is dying: its exit or its timeout ends inv
	case streamComplete:
		if l.answered(in, inv) {
			if r.Trailer.Get(trailerErrorType) != "" {
				inv.finish(invokeResult{Payload: trailerError(r.Trailer), FunctionError: true})
			} else {
				inv.finish(invokeResult{})
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if l.answered(in, inv) {
		inv.finish(invokeResult{Err: errClientGone})
	}
	// The body is not read to its end: answer on the raw connection and
	// close it (net/http would otherwise read on, waiting for the rest).
	conn, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_, _ = bw.WriteString("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	_ = bw.Flush()
	_ = conn.Close()
}

// errClientGone ends an invocation whose streamed answer's client left.
var errClientGone = errors.New("the client closed the connection")

// trailerError is the payload of a failure a streamed answer's trailers
// tell (the body is the error's JSON, base64).
func trailerError(t http.Header) []byte {
	if b, err := base64.StdEncoding.DecodeString(t.Get(trailerErrorBody)); err == nil && json.Valid(b) {
		return b
	}
	return lambdaError(t.Get(trailerErrorType), "the function failed while streaming its answer")
}

// close stops every instance.
func (l *lambdaFunction) close() {
	l.mu.Lock()
	l.closed = true
	for _, in := range l.instances {
		in.kill()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
