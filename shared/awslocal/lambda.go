package awslocal

import (
	"bufio"
	"context"
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
// invocation goes to an idle instance, or a new one (a cold start) up to
// maxInstances per function. An invocation not answered within the
// function's Timeout kills its instance (as Lambda ends a timed-out
// sandbox) and fails with Lambda's "Task timed out".

// maxInstances bounds the concurrent instances of one function: this is
// one machine, not a region.
const maxInstances = 6

// invocation is one event for a function.
type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	done     chan invokeResult
	once     sync.Once
}

func (inv *invocation) finish(r invokeResult) {
	inv.once.Do(func() { inv.done <- r })
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

// Invoke runs one event through the function and waits for its answer.
func (l *lambdaFunction) Invoke(ctx context.Context, payload []byte) invokeResult {
	inv := &invocation{id: uuid.NewString(), payload: payload, done: make(chan invokeResult, 1)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return invokeResult{Err: errors.New("the stack is stopping")}
	}
	l.waiting++
	if l.waiting > l.idle && len(l.instances) < maxInstances {
		if err := l.spawnLocked(); err != nil {
			l.waiting--
			l.mu.Unlock()
			return invokeResult{Err: err}
		}
	}
	l.mu.Unlock()
	select {
	case l.queue <- inv:
	case <-ctx.Done():
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
		return invokeResult{Err: ctx.Err()}
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
		body, _ := io.ReadAll(io.LimitReader(r.Body, 7<<20))
		l.mu.Lock()
		cur := in.current
		if cur != nil && len(parts) == 2 && parts[0] == cur.id {
			in.current = nil
			if in.timer != nil {
				in.timer.Stop()
			}
			// Idle from its answer on: the next event waits for its next
			// poll rather than starting another instance (as Lambda
			// reuses a warm sandbox).
			in.idle = true
			l.idle++
		} else {
			cur = nil
		}
		l.mu.Unlock()
		if cur == nil {
			http.Error(w, `{"errorMessage":"no such invocation"}`, http.StatusBadRequest)
			return
		}
		switch {
		case parts[1] == "response" && len(body) > 6<<20:
			cur.finish(invokeResult{Payload: lambdaError("Function.ResponseSizeTooLarge", "Response payload size exceeded maximum allowed payload size (6291556 bytes)."), FunctionError: true})
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
