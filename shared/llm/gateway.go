package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

// Gateway forwards cognitive calls to the operator's providers. A nil
// *Gateway, or one without providers, answers every call with the error
// naming the setting to make (ErrNotConfigured).
type Gateway struct {
	cfg    Config
	client *http.Client
	// now is the clock (tests).
	now func() time.Time

	mu     sync.Mutex
	lists  map[string]modelList // provider name -> its models
	wantMC map[string]bool      // provider:model -> refuses max_tokens
}

type modelList struct {
	ids     []string
	fetched time.Time
}

// modelListTTL: how long a provider's GET /models answer is used.
const modelListTTL = time.Minute

// New returns the gateway of cfg; client nil: a plain http.Client (the
// operator's endpoints may well be on loopback or a private network: they
// are the operator's, not a bot's).
func New(cfg Config, client *http.Client) (*Gateway, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Gateway{cfg: cfg, client: client, now: time.Now, lists: map[string]modelList{}, wantMC: map[string]bool{}}, nil
}

// ErrNotConfigured answers calls when the operator configured no provider.
var ErrNotConfigured = platform.Forbidden("no LLM provider is configured on this platform: the operator sets %s (an OpenAI-compatible base URL ending in /v1, e.g. http://127.0.0.1:11434/v1), or --llm-url locally (docs/llm.md)", EnvURL)

func (g *Gateway) configured() bool { return g != nil && g.cfg.Configured() }

// target is a resolved model: a provider and its upstream model id.
type target struct {
	p     *Provider
	model string
}

func (t target) id() string { return t.p.Name + ":" + t.model }

func (g *Gateway) provider(name string) *Provider {
	for i := range g.cfg.Providers {
		if g.cfg.Providers[i].Name == name {
			return &g.cfg.Providers[i]
		}
	}
	return nil
}

func isKnownProvider(name string) bool {
	for _, k := range KnownProviders {
		if k == name {
			return true
		}
	}
	return false
}

// Models lists the models of every provider (GET /v2/cognitive/models):
// "<provider>:<model>", with the client ids that resolve to each as aliases.
func (g *Gateway) Models(ctx context.Context) ([]Model, error) {
	if !g.configured() {
		return nil, ErrNotConfigured
	}
	def, err := g.defaultTarget(ctx)
	if err != nil {
		return nil, err
	}
	aliases := map[string][]string{}
	for _, a := range []string{"auto", "best", "fast"} {
		if _, mapped := g.cfg.Models[a]; !mapped {
			aliases[def.id()] = append(aliases[def.id()], a)
		}
	}
	for k, v := range g.cfg.Models {
		t := g.mapped(v)
		aliases[t.id()] = append(aliases[t.id()], k)
	}
	var out []Model
	for i := range g.cfg.Providers {
		p := &g.cfg.Providers[i]
		ids, err := g.list(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, m := range ids {
			t := target{p, m}
			as := aliases[t.id()]
			slices.Sort(as)
			tags := []string{"general-purpose"}
			if t.id() == def.id() {
				tags = append(tags, "recommended")
			}
			if reasoningModel(m) {
				tags = append(tags, "reasoning")
			}
			out = append(out, Model{
				ID: t.id(), Name: m, Description: fmt.Sprintf("%s, served by the operator's provider %q", m, p.Name),
				Aliases: as, Tags: tags, Lifecycle: "production",
				Input:        ModelLimits{MaxTokens: p.InputMaxTokens},
				Output:       ModelLimits{MaxTokens: p.OutputMaxTokens},
				Capabilities: Capabilities{SupportsImages: true},
			})
		}
	}
	return out, nil
}

// list answers a provider's model ids, from its GET /models (kept a
// minute; a stale list is used when the provider cannot answer).
func (g *Gateway) list(ctx context.Context, p *Provider) ([]string, error) {
	g.mu.Lock()
	l, ok := g.lists[p.Name]
	g.mu.Unlock()
	if ok && g.now().Sub(l.fetched) < modelListTTL {
		return l.ids, nil
	}
	res, err := g.do(ctx, p, http.MethodGet, "/models", nil)
	if err != nil {
		if ok {
			return l.ids, nil
		}
		return nil, err
	}
	defer res.Body.Close()
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 8<<20)).Decode(&body); err != nil {
		return nil, platform.Errorf(platform.ErrBadGateway, "LLM provider %q: GET /models answered something that is not a model list: %v", p.Name, err)
	}
	ids := make([]string, 0, len(body.Data))
	for _, d := range body.Data {
		if d.ID != "" {
			ids = append(ids, d.ID)
		}
	}
	g.mu.Lock()
	g.lists[p.Name] = modelList{ids: ids, fetched: g.now()}
	g.mu.Unlock()
	return ids, nil
}

// defaultTarget is the first listed model of the first provider (or what
// "best" is mapped to).
func (g *Gateway) defaultTarget(ctx context.Context) (target, error) {
	p := &g.cfg.Providers[0]
	ids, err := g.list(ctx, p)
	if err != nil {
		return target{}, err
	}
	if len(ids) == 0 {
		return target{}, platform.Errorf(platform.ErrBadGateway, "LLM provider %q lists no model (GET %s/models)", p.Name, p.URL)
	}
	return target{p, ids[0]}, nil
}

// mapped resolves an operator's mapping target: "<provider>:<model>" of a
// configured provider, or a model of the first provider.
func (g *Gateway) mapped(v string) target {
	if name, m, ok := strings.Cut(v, ":"); ok {
		if p := g.provider(name); p != nil {
			return target{p, m}
		}
	}
	return target{&g.cfg.Providers[0], v}
}

// resolve maps a client's model id to a provider's model.
func (g *Gateway) resolve(ctx context.Context, id string) (target, error) {
	if v, ok := g.cfg.Models[id]; ok {
		return g.mapped(v), nil
	}
	switch id {
	case "", "auto", "best", "fast":
		return g.defaultTarget(ctx)
	}
	name, m, hasPrefix := strings.Cut(id, ":")
	if hasPrefix {
		if p := g.provider(name); p != nil {
			ids, err := g.list(ctx, p)
			if err != nil {
				return target{}, err
			}
			for _, x := range ids {
				if x == m {
					return target{p, m}, nil
				}
			}
		}
		if isKnownProvider(name) {
			return g.defaultTarget(ctx)
		}
	} else {
		p := &g.cfg.Providers[0]
		ids, err := g.list(ctx, p)
		if err != nil {
			return target{}, err
		}
		for _, x := range ids {
			if x == id {
				return target{p, id}, nil
			}
		}
	}
	return target{}, platform.Invalid("unknown model %q: GET /v2/cognitive/models lists this platform's models (ids <provider>:<model>, and the aliases auto, best, fast)", id)
}

// prepare resolves the model and maps the request for the upstream.
func (g *Gateway) prepare(ctx context.Context, req *Request, stream bool) (target, *chatRequest, error) {
	if !g.configured() {
		return target{}, nil, ErrNotConfigured
	}
	if len(req.Messages) == 0 {
		return target{}, nil, platform.Invalid("messages: at least one message is required")
	}
	if req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 2) {
		return target{}, nil, platform.Invalid("temperature %v: between 0 and 2", *req.Temperature)
	}
	if req.MaxTokens != nil && *req.MaxTokens <= 0 {
		return target{}, nil, platform.Invalid("maxTokens %d: a positive number of tokens", *req.MaxTokens)
	}
	// The first model of the list is used; the others are the client's
	// fallbacks, checked so that a typo is not hidden behind a good one.
	var t target
	for i, id := range orDefault(req.Model) {
		ti, err := g.resolve(ctx, id)
		if err != nil {
			return target{}, nil, err
		}
		if i == 0 {
			t = ti
		}
	}
	max := req.MaxTokens
	if max != nil && *max > t.p.OutputMaxTokens {
		v := t.p.OutputMaxTokens
		max = &v
	}
	g.mu.Lock()
	mc := t.p.MaxCompletionTokens || g.wantMC[t.id()] || reasoningModel(t.model)
	g.mu.Unlock()
	cr, err := toChat(req, t.model, max, mc)
	if err != nil {
		return target{}, nil, err
	}
	if n := estimateTokens(cr); n > t.p.InputMaxTokens {
		return target{}, nil, platform.Invalid("the prompt (about %d tokens) exceeds the context of model %q (%d tokens)", n, t.id(), t.p.InputMaxTokens)
	}
	if stream {
		cr.Stream, cr.StreamOptions = true, &chatStreamOption{IncludeUsage: true}
	}
	return t, cr, nil
}

func orDefault(ids []string) []string {
	if len(ids) == 0 {
		return []string{"auto"}
	}
	return ids
}

// countCall counts a call made to the provider in the platform's metrics
// (docs/metrics.md): its result and how long the provider took.
func countCall(model string, start time.Time, err *error) {
	result := "ok"
	if *err != nil {
		result = "error"
	}
	metrics.LLMCalls.Inc(model, result)
	metrics.LLMLatency.Since(start, model)
}

// Generate makes one generate-text call.
func (g *Gateway) Generate(ctx context.Context, req *Request) (_ *Response, err error) {
	t, cr, err := g.prepare(ctx, req, false)
	if err != nil {
		return nil, err
	}
	start := g.now()
	defer countCall(t.id(), time.Now(), &err)
	res, err := g.complete(ctx, t, cr)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var body chatResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<20)).Decode(&body); err != nil {
		if timedOut(res.Body) {
			return nil, timeoutError(t, g.cfg.Timeout)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, platform.Errorf(platform.ErrBadGateway, "model %q answered something that is not a chat completion: %v", t.id(), err)
	}
	if len(body.Choices) == 0 {
		return nil, platform.Errorf(platform.ErrBadGateway, "model %q answered no choice", t.id())
	}
	ch := body.Choices[0]
	out := &Response{ToolCalls: toolCalls(ch.Message.ToolCalls), Reasoning: ch.Message.reasoning()}
	if ch.Message.Content != nil {
		out.Output = *ch.Message.Content
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	out.Metadata = Metadata{RequestID: body.ID, Provider: t.p.Name, Model: t.id(), StopReason: stopReason(finish),
		Latency: g.now().Sub(start).Milliseconds(), ReasoningEffort: cr.ReasoningEffort}
	if body.Usage != nil {
		out.Metadata.Usage = Usage{InputTokens: body.Usage.PromptTokens, OutputTokens: body.Usage.CompletionTokens}
	}
	return out, nil
}

// Stream makes one generate-text-stream call: emit receives the chunks in
// order, the last one finished and with the metadata. An error before the
// first chunk is the call's error (nothing was emitted); an error after it
// is returned too, and the caller cuts its answer short.
func (g *Gateway) Stream(ctx context.Context, req *Request, emit func(Chunk) error) (err error) {
	t, cr, err := g.prepare(ctx, req, true)
	if err != nil {
		return err
	}
	start := g.now()
	defer countCall(t.id(), time.Now(), &err)
	res, err := g.complete(ctx, t, cr)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	// The timeout bounds the wait for each piece of the stream, not the
	// whole of it: a long answer that keeps coming is not cut.
	if tb, ok := res.Body.(*timedBody); ok {
		tb.detach()
	}
	var stalled atomic.Bool
	idle := time.AfterFunc(g.cfg.Timeout, func() { stalled.Store(true); res.Body.Close() })
	defer idle.Stop()
	meta := Metadata{Provider: t.p.Name, Model: t.id(), ReasoningEffort: cr.ReasoningEffort}
	calls := map[int]*chatToolCall{}
	var order []int
	finish := ""
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		idle.Reset(g.cfg.Timeout)
		line := bytes.TrimSpace(sc.Bytes())
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // comments, event names, blank separators
		}
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) {
			break
		}
		var ev chatResponse
		if err := json.Unmarshal(data, &ev); err != nil {
			return platform.Errorf(platform.ErrBadGateway, "model %q streamed something that is not a chat completion chunk: %v", t.id(), err)
		}
		if meta.RequestID == "" {
			meta.RequestID = ev.ID
		}
		if ev.Usage != nil {
			meta.Usage = Usage{InputTokens: ev.Usage.PromptTokens, OutputTokens: ev.Usage.CompletionTokens}
		}
		for _, ch := range ev.Choices {
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finish = *ch.FinishReason
			}
			for _, tc := range ch.Delta.ToolCalls {
				i := len(order)
				if tc.Index != nil {
					i = *tc.Index
				}
				c, seen := calls[i]
				if !seen {
					c = &chatToolCall{}
					calls[i] = c
					order = append(order, i)
				}
				if tc.ID != "" {
					c.ID = tc.ID
				}
				c.Function.Name += tc.Function.Name
				c.Function.Arguments += tc.Function.Arguments
			}
			text, reasoning := "", ch.Delta.reasoning()
			if ch.Delta.Content != nil {
				text = *ch.Delta.Content
			}
			if text == "" && reasoning == "" {
				continue
			}
			if meta.TTFT == 0 {
				meta.TTFT = max(g.now().Sub(start).Milliseconds(), 1)
			}
			if err := emit(Chunk{Output: text, Reasoning: reasoning, Created: g.now().UnixMilli()}); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if stalled.Load() {
			return timeoutError(t, g.cfg.Timeout)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return platform.Errorf(platform.ErrBadGateway, "model %q: the stream broke: %v", t.id(), err)
	}
	meta.StopReason = stopReason(finish)
	meta.Latency = g.now().Sub(start).Milliseconds()
	var tcs []chatToolCall
	for _, i := range order {
		tcs = append(tcs, *calls[i])
	}
	return emit(Chunk{ToolCalls: toolCalls(tcs), Created: g.now().UnixMilli(), Finished: true, Metadata: &meta})
}

// complete posts cr to t's provider. A 400 refusing max_tokens switches
// the model to max_completion_tokens, once.
func (g *Gateway) complete(ctx context.Context, t target, cr *chatRequest) (*http.Response, error) {
	for switched := false; ; switched = true {
		body, err := json.Marshal(cr)
		if err != nil {
			return nil, err
		}
		res, err := g.do(ctx, t.p, http.MethodPost, "/chat/completions", body)
		if err == nil {
			return res, nil
		}
		var ue *upstreamError
		if !switched && errors.As(err, &ue) && ue.status == http.StatusBadRequest && cr.MaxTokens != nil &&
			strings.Contains(ue.message, "max_completion_tokens") {
			g.mu.Lock()
			g.wantMC[t.id()] = true
			g.mu.Unlock()
			cr.MaxCompletionTokens, cr.MaxTokens = cr.MaxTokens, nil
			continue
		}
		if errors.As(err, &ue) {
			return nil, ue.apiError(t)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errTimeout) {
			return nil, timeoutError(t, g.cfg.Timeout)
		}
		return nil, platform.Errorf(platform.ErrBadGateway, "model %q: its provider %q could not be reached after %d attempts: %v", t.id(), t.p.Name, MaxAttempts, err)
	}
}

func timeoutError(t target, d time.Duration) error {
	return platform.Errorf(platform.ErrOperationTimeout, "model %q did not answer within %s (%s)", t.id(), d, EnvTimeout)
}

var errTimeout = errors.New("upstream timeout")

// upstreamError is an answer of the provider that is not a success.
type upstreamError struct {
	provider string
	status   int
	message  string
	attempts int
}

func (e *upstreamError) Error() string {
	return fmt.Sprintf("LLM provider %q answered %d: %s", e.provider, e.status, e.message)
}

// apiError maps an upstream refusal to the platform's error: the
// provider's 4xx about the request is the caller's 400 (a context
// overflow, a model refusing a parameter), its credentials refused or its
// failures a 502, its rate limit a 429.
func (e *upstreamError) apiError(t target) error {
	switch {
	case e.status == http.StatusTooManyRequests:
		return platform.Errorf(platform.ErrRateLimited, "model %q: the provider %q is rate limiting (429 after %d attempts): %s", t.id(), e.provider, e.attempts, e.message)
	case e.status == http.StatusUnauthorized || e.status == http.StatusForbidden:
		return platform.Errorf(platform.ErrBadGateway, "model %q: the provider %q refused the platform's credentials (%d; the operator checks %s): %s", t.id(), e.provider, e.status, EnvAPIKey, e.message)
	case e.status >= 400 && e.status < 500:
		return platform.Invalid("model %q refused the request (%d): %s", t.id(), e.status, e.message)
	}
	return platform.Errorf(platform.ErrBadGateway, "model %q: the provider %q failed (%d after %d attempts): %s", t.id(), e.provider, e.status, e.attempts, e.message)
}

// retryable statuses: the provider may answer the same request later.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do calls the provider with at most MaxAttempts attempts: a connection
// failure or a retryable status is tried again after a short backoff; a
// timeout is not (it would triple the wait).
func (g *Gateway) do(ctx context.Context, p *Provider, method, path string, body []byte) (*http.Response, error) {
	var last error
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		if attempt > 1 {
			wait := time.Duration(50*(1<<(2*(attempt-2)))) * time.Millisecond // 50 ms, 200 ms
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
		res, err := g.attempt(ctx, p, method, path, body)
		if err != nil {
			if errors.Is(err, errTimeout) || ctx.Err() != nil {
				return nil, err
			}
			last = err
			continue
		}
		if res.StatusCode < 300 {
			return res, nil
		}
		msg := upstreamMessage(res)
		last = &upstreamError{provider: p.Name, status: res.StatusCode, message: msg, attempts: attempt}
		if !retryable(res.StatusCode) {
			return nil, last
		}
	}
	return nil, last
}

// attempt is one request; its answer must come within the timeout: the
// headers, and (Generate) the whole body. A stream detaches the body from
// that timer and bounds each piece on its own (Stream).
func (g *Gateway) attempt(ctx context.Context, p *Provider, method, path string, body []byte) (*http.Response, error) {
	actx, cancel := context.WithCancel(ctx)
	tb := &timedBody{cancel: cancel}
	tb.timer = time.AfterFunc(g.cfg.Timeout, func() { tb.fired.Store(true); cancel() })
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, p.URL+path, rd)
	if err != nil {
		tb.timer.Stop()
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.APIKey)
	}
	res, err := g.client.Do(req)
	if err != nil {
		tb.timer.Stop()
		cancel()
		if tb.fired.Load() && ctx.Err() == nil {
			return nil, errTimeout
		}
		return nil, err
	}
	tb.ReadCloser = res.Body
	res.Body = tb
	return res, nil
}

// timedBody is an answer's body under its attempt's timer.
type timedBody struct {
	io.ReadCloser
	timer  *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func (b *timedBody) Close() error {
	err := b.ReadCloser.Close()
	b.timer.Stop()
	b.cancel()
	return err
}

// detach stops the timer: the caller bounds the reads itself.
func (b *timedBody) detach() { b.timer.Stop() }

// timedOut tells whether a body's read failed because the timer fired.
func timedOut(body io.ReadCloser) bool {
	tb, ok := body.(*timedBody)
	return ok && tb.fired.Load()
}

// upstreamMessage reads an error answer's message: OpenAI's
// {"error":{"message"}} or the start of the body.
func upstreamMessage(res *http.Response) string {
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			return clip(obj.Message)
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return clip(s)
		}
	}
	if s := strings.TrimSpace(string(raw)); s != "" {
		return clip(s)
	}
	return http.StatusText(res.StatusCode)
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// DefaultProvider is the name of the first provider ("" when none).
func (g *Gateway) DefaultProvider() string {
	if !g.configured() {
		return ""
	}
	return g.cfg.Providers[0].Name
}
