// Package worker runs deployed code on the local platform: one Node.js
// process per bot and per integration version deployed with code (bp
// deploy) and no url, started on demand, started again after it exits,
// stopped when idle. A worker runs the bundle as `bp dev` does
// (`require(bundle).default.start(port)`, or the bundle's `handler` behind
// a small HTTP server) on a loopback port; the platform then calls it like
// any bot or integration url. Its stdout and stderr become the bot's or
// the integration's logs. It implements platform.CodeRunner.
package worker

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Source is what workers need from the platform: the bundle's bytes, and
// a token scoped to the bot or integration the code acts as (never an
// account's), with a function revoking it when the worker stops.
type Source interface {
	Code(ctx context.Context, key string) ([]byte, error)
	BotToken(ctx context.Context, b platform.Bot) (token string, revoke func(), err error)
	IntegrationToken(ctx context.Context, i platform.Integration) (token string, revoke func(), err error)
}

// Defaults of a Manager.
const (
	DefaultIdle  = 10 * time.Minute
	DefaultStart = 30 * time.Second
	// failedStartHold: after a failed start, calls for the same code get
	// the same failure this long, so a bundle that throws at load is not
	// started again for every event.
	failedStartHold = 2 * time.Second
	// stderrTail is how much of a worker's last output a start failure
	// quotes.
	stderrTail = 1500
)

// Manager starts, restarts and stops workers.
type Manager struct {
	Dir    string // private directory of the workers' bundles (0700)
	Source Source
	Logs   platform.LogStore // nil: output dropped
	Log    *slog.Logger
	// APIURL is the platform's base URL as workers reach it (BP_API_URL).
	APIURL func() string
	// Node is the node executable ("": looked up on PATH at first use).
	Node string
	// Idle: a worker not asked for since is stopped (default 10 min).
	// It counts from the last call's start, so it must outlast the
	// longest call (a bot's maxExecutionTime); Start bounds a start.
	Idle, Start time.Duration
	// QueueWait bounds how long a call waits for a free slot of a worker
	// at its maxConcurrency (default 10 s); then it gets a retryable 503.
	QueueWait time.Duration

	mu      sync.Mutex
	workers map[string]*proc
	closed  bool
	stopJan chan struct{}
	janOnce sync.Once
	// launches numbers the workers started: each has a directory of its
	// own (see launch).
	launches atomic.Uint64
}

// ErrNoNode is why deployed code cannot run on a machine without Node.js.
var ErrNoNode = platform.Errorf(platform.ErrBadGateway, "deployed code cannot run: Node.js is not installed (no node on PATH)")

// proc is one worker: a process serving one version of one code.
type proc struct {
	key     string
	codeKey string
	// version is what the worker runs: the code and the secrets given
	// to it; a change of either replaces the worker.
	version  string
	ready    chan struct{} // closed when started (or failed)
	url      string
	err      error // start failure
	failedAt time.Time
	cmd      *exec.Cmd
	exited   chan struct{}
	lastUsed time.Time
	revoke   func()
	dir      string
	// limit > 0: at most limit calls in flight (the integration's
	// maxConcurrency), through a limiter in front of the process.
	limit   int
	limiter *http.Server
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// BotURL is where the bot's deployed code answers (platform.CodeRunner).
func (m *Manager) BotURL(ctx context.Context, b platform.Bot) (string, error) {
	if b.CodeKey == "" {
		return "", platform.Errorf(platform.ErrBadGateway, "the bot's code was deployed by an earlier version of the platform: deploy it again")
	}
	return m.url(ctx, "bot-"+b.ID, b.CodeKey, versionOf(b.CodeKey, b.SecretValues), 0, platform.LogSource{Kind: platform.LogBot, ID: b.ID},
		func(ctx context.Context) (string, func(), map[string]string, error) {
			tok, revoke, err := m.Source.BotToken(ctx, b)
			return tok, revoke, secretsEnv(b.SecretValues), err
		})
}

// IntegrationURL is where the integration version's deployed code answers.
func (m *Manager) IntegrationURL(ctx context.Context, i platform.Integration) (string, error) {
	limit := 0
	if i.MaxConcurrency != nil && *i.MaxConcurrency > 0 {
		limit = int(min(*i.MaxConcurrency, 1<<20))
	}
	version := versionOf(i.CodeKey, i.SecretValues) + "#" + strconv.Itoa(limit)
	return m.url(ctx, "int-"+i.ID, i.CodeKey, version, limit, platform.LogSource{Kind: platform.LogIntegration, ID: i.ID},
		func(ctx context.Context) (string, func(), map[string]string, error) {
			tok, revoke, err := m.Source.IntegrationToken(ctx, i)
			env := secretsEnv(i.SecretValues)
			env["BP_INTEGRATION_ID"] = i.ID
			env["BP_WEBHOOK_URL"] = strings.TrimRight(m.apiURL(), "/") + "/webhooks"
			return tok, revoke, env, err
		})
}

// versionOf names what a worker runs: its code and its secrets.
func versionOf(codeKey string, secrets map[string]string) string {
	names := make([]string, 0, len(secrets))
	for k := range secrets {
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, k := range names {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(secrets[k]), secrets[k])
	}
	return codeKey + "#" + hex.EncodeToString(h.Sum(nil))
}

func secretsEnv(secrets map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range secrets {
		env["SECRET_"+k] = v
	}
	return env
}

func (m *Manager) apiURL() string {
	if m.APIURL == nil {
		return ""
	}
	return m.APIURL()
}

type prepare func(ctx context.Context) (token string, revoke func(), env map[string]string, err error)

// url answers the address of the worker of key running version, starting
// one (replacing another version's) when there is none alive.
func (m *Manager) url(ctx context.Context, key, codeKey, version string, limit int, src platform.LogSource, prep prepare) (string, error) {
	m.janOnce.Do(m.startJanitor)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return "", platform.Errorf(platform.ErrBadGateway, "the platform is shutting down")
	}
	if m.workers == nil {
		m.workers = map[string]*proc{}
	}
	p := m.workers[key]
	if p != nil {
		select {
		case <-p.ready:
			switch {
			case p.version != version:
				m.stopLocked(p)
				p = nil
			case p.err != nil && time.Since(p.failedAt) < failedStartHold:
				m.mu.Unlock()
				return "", p.err
			case p.err != nil || !p.alive():
				m.stopLocked(p) // exited (crashed): start it again
				p = nil
			}
		default:
			if p.version != version {
				m.stopLocked(p)
				p = nil
			}
		}
	}
	if p == nil {
		p = &proc{key: key, codeKey: codeKey, version: version, limit: limit, ready: make(chan struct{}), exited: make(chan struct{})}
		m.workers[key] = p
		go m.launch(p, src, prep)
	}
	p.lastUsed = time.Now()
	m.mu.Unlock()
	select {
	case <-p.ready:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if p.err != nil {
		return "", p.err
	}
	m.mu.Lock()
	p.lastUsed = time.Now()
	m.mu.Unlock()
	return p.url, nil
}

// launch starts p's process and waits until it takes connections, it
// exits, or the start timeout.
func (m *Manager) launch(p *proc, src platform.LogSource, prep prepare) {
	fail := func(err error) {
		m.mu.Lock()
		p.err, p.failedAt = err, time.Now()
		m.mu.Unlock()
		close(p.ready)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.startTimeout())
	defer cancel()
	node, err := m.node()
	if err != nil {
		close(p.exited)
		fail(err)
		return
	}
	code, err := m.Source.Code(ctx, p.codeKey)
	if err != nil {
		close(p.exited)
		fail(fmt.Errorf("read the deployed code: %w", err))
		return
	}
	token, revoke, env, err := prep(ctx)
	if err != nil {
		close(p.exited)
		fail(fmt.Errorf("a token for the deployed code: %w", err))
		return
	}
	p.revoke = revoke
	h := sha256.Sum256([]byte(p.version))
	// A directory of this start's own: a stopped worker of the same
	// version removes its directory when it has exited, which may be
	// after its successor started (an idle worker stopped, then asked
	// for again); in a shared directory that removal took the new
	// worker's files (TestWorkerLifecycle: "Cannot find module
	// .../shim.cjs", 3 runs in 40).
	p.dir = filepath.Join(m.Dir, p.key+"-"+hex.EncodeToString(h[:6])+"-"+strconv.FormatUint(m.launches.Add(1), 10))
	if err := writeBundle(p.dir, code); err != nil {
		close(p.exited)
		m.release(p)
		fail(err)
		return
	}
	port, err := freePort()
	if err != nil {
		close(p.exited)
		m.release(p)
		fail(err)
		return
	}
	cmd := exec.Command(node, filepath.Join(p.dir, shimFile), filepath.Join(p.dir, bundleFile))
	cmd.Dir = p.dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + p.dir, "TMPDIR=" + p.dir, "NODE_ENV=production",
		"PORT=" + strconv.Itoa(port), "BP_API_URL=" + m.apiURL(), "BP_TOKEN=" + token,
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if src.Kind == platform.LogBot {
		cmd.Env = append(cmd.Env, "BP_BOT_ID="+src.ID)
	}
	setProcAttrs(cmd)
	out := newLogSink(m, src)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		out.flush()
		close(p.exited)
		m.release(p)
		fail(fmt.Errorf("start node: %w", err))
		return
	}
	m.mu.Lock()
	p.cmd = cmd
	// Stopped while starting (a new deploy, Close): it goes at once.
	stale := m.closed || m.workers[p.key] != p
	m.mu.Unlock()
	if stale {
		killProc(cmd)
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); out.read(stdout, platform.LevelInfo) }()
	go func() { defer pipes.Done(); out.read(stderr, platform.LevelError) }()
	go func() {
		pipes.Wait()
		err := cmd.Wait()
		out.flush()
		m.logf(src, platform.LevelWarn, "deployed code exited (%v)", exitText(err))
		close(p.exited)
		m.release(p)
	}()
	p.url = "http://127.0.0.1:" + strconv.Itoa(port)
	m.logf(src, platform.LevelInfo, "deployed code starting (node, port %d)", port)
	if err := waitListening(ctx, p.url, p.exited); err != nil {
		killProc(cmd)
		<-p.exited
		fail(platform.Errorf(platform.ErrBadGateway, "deployed code failed to start: %v%s", err, out.tail()))
		return
	}
	if p.limit > 0 {
		u, err := m.startLimiter(p)
		if err != nil {
			killProc(cmd)
			<-p.exited
			fail(fmt.Errorf("deployed code's limiter: %w", err))
			return
		}
		m.mu.Lock()
		p.url = u
		m.mu.Unlock()
	}
	// Used from now: lastUsed was set when the start was asked for, and
	// a start longer than Idle (node loading on a busy machine) would
	// let the janitor stop the worker between ready and the caller's
	// own update, leaving the caller the address of a dead process
	// (TestWorkerLifecycle failed 3 times in 30 on it).
	m.mu.Lock()
	p.lastUsed = time.Now()
	m.mu.Unlock()
	close(p.ready)
}

// startLimiter puts a loopback proxy in front of p's process letting at
// most p.limit calls in flight (an integration's maxConcurrency): a call
// beyond waits for a slot up to QueueWait, then gets 503 in the API's
// error shape (callers retry a 5xx; a 4xx would be the code's final
// word). A call the process drops unanswered is dropped unanswered here
// too, as without the limiter.
func (m *Manager) startLimiter(p *proc) (string, error) {
	target, err := url.Parse(p.url)
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	wait := m.QueueWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) }
	slots := make(chan struct{}, p.limit)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				proxy.ServeHTTP(w, r)
			case <-t.C:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, `{"id":"err_worker","code":503,"type":"ServiceUnavailable","message":"the integration is at its maxConcurrency (%d calls in flight) for %s: retry later"}`, p.limit, wait)
			case <-r.Context().Done():
			}
		})}
	go func() { _ = srv.Serve(l) }()
	m.mu.Lock()
	p.limiter = srv
	m.mu.Unlock()
	return "http://" + l.Addr().String(), nil
}

// release revokes p's token and removes its files (once).
func (m *Manager) release(p *proc) {
	m.mu.Lock()
	revoke := p.revoke
	p.revoke = nil
	limiter := p.limiter
	p.limiter = nil
	m.mu.Unlock()
	if limiter != nil {
		_ = limiter.Close()
	}
	if revoke != nil {
		revoke()
	}
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (m *Manager) startTimeout() time.Duration {
	if m.Start > 0 {
		return m.Start
	}
	return DefaultStart
}

func (m *Manager) node() (string, error) {
	if m.Node != "" {
		if _, err := os.Stat(m.Node); err != nil {
			return "", ErrNoNode
		}
		return m.Node, nil
	}
	p, err := exec.LookPath("node")
	if err != nil {
		return "", ErrNoNode
	}
	return p, nil
}

// NodeAvailable reports whether workers can run here, and why not.
func (m *Manager) NodeAvailable() error {
	_, err := m.node()
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until url answers HTTP (any status: the SDK of some
// versions has no /health), the process exits, or ctx ends.
func waitListening(ctx context.Context, url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	for delay := 10 * time.Millisecond; ; delay = min(delay*2, 200*time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("it exited while loading")
		case <-ctx.Done():
			return errors.New("it did not listen within the start timeout")
		case <-time.After(delay):
		}
	}
}

// stopLocked stops p (m.mu held); its exit releases it.
func (m *Manager) stopLocked(p *proc) {
	if m.workers[p.key] == p {
		delete(m.workers, p.key)
	}
	if p.cmd != nil && p.alive() {
		killProc(p.cmd)
	}
}

func (m *Manager) startJanitor() {
	m.stopJan = make(chan struct{})
	idle := m.Idle
	if idle <= 0 {
		idle = DefaultIdle
	}
	go func() {
		t := time.NewTicker(max(idle/4, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-m.stopJan:
				return
			case <-t.C:
			}
			m.mu.Lock()
			for _, p := range m.workers {
				select {
				case <-p.ready:
					if time.Since(p.lastUsed) > idle {
						m.stopLocked(p)
					}
				default:
				}
			}
			m.mu.Unlock()
		}
	}()
}

// Running lists the keys of the workers alive (tests, diagnostics).
func (m *Manager) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, p := range m.workers {
		if p.cmd != nil && p.alive() {
			out = append(out, k)
		}
	}
	return out
}

// Close stops every worker and waits for them to exit.
func (m *Manager) Close() error {
	m.janOnce.Do(func() {})
	m.mu.Lock()
	if m.stopJan != nil && !m.closed {
		close(m.stopJan)
	}
	m.closed = true
	var all []*proc
	for _, p := range m.workers {
		all = append(all, p)
		m.stopLocked(p)
	}
	m.mu.Unlock()
	for _, p := range all {
		select {
		case <-p.ready:
		case <-time.After(m.startTimeout()):
		}
		m.mu.Lock()
		cmd := p.cmd
		m.mu.Unlock()
		if cmd != nil {
			killProc(cmd)
			<-p.exited
		}
	}
	return nil
}

// logSink turns a worker's output into log lines of its bot or
// integration, written in batches (each write of the log store is durable,
// so one per line would hold a chatty worker back).
type logSink struct {
	m     *Manager
	src   platform.LogSource
	mu    sync.Mutex
	last  []string // the last lines, for a start failure's reason
	lines chan platform.LogLine
	done  chan struct{}
}

func newLogSink(m *Manager, src platform.LogSource) *logSink {
	s := &logSink{m: m, src: src, lines: make(chan platform.LogLine, 1024), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for l := range s.lines {
			batch := []platform.LogLine{l}
		drain:
			for len(batch) < 256 {
				select {
				case l, ok := <-s.lines:
					if !ok {
						break drain
					}
					batch = append(batch, l)
				default:
					break drain
				}
			}
			s.m.write(batch...)
		}
	}()
	return s
}

func (s *logSink) read(r io.Reader, level string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		s.mu.Lock()
		s.last = append(s.last, line)
		if len(s.last) > 20 {
			s.last = s.last[1:]
		}
		s.mu.Unlock()
		s.lines <- platform.LogLine{Source: s.src, Level: level, Message: line, Time: time.Now()}
	}
	_, _ = io.Copy(io.Discard, r)
}

// flush writes what is left, once both pipes are read to their end.
func (s *logSink) flush() {
	close(s.lines)
	<-s.done
}

// tail is the end of the worker's output, to quote in a failure.
func (s *logSink) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.last) == 0 {
		return ""
	}
	t := strings.Join(s.last, "\n")
	if len(t) > stderrTail {
		t = "…" + t[len(t)-stderrTail:]
	}
	return ": " + t
}

func (m *Manager) write(lines ...platform.LogLine) {
	if m.Logs == nil || len(lines) == 0 {
		return
	}
	if err := m.Logs.Write(context.Background(), lines...); err != nil && m.Log != nil {
		m.Log.Warn("worker log lines not written", "source", lines[0].Source.ID, "err", err)
	}
}

func (m *Manager) logf(src platform.LogSource, level, format string, args ...any) {
	m.write(platform.LogLine{Source: src, Level: level, Message: fmt.Sprintf(format, args...)})
}
