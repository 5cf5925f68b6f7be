package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/llm/llmtest"
)

// cognitiveFixture is a platform whose LLM provider is a fake upstream,
// with a bot calling the cognitive API.
type cognitiveFixture struct {
	*fixture
	up  *llmtest.Upstream
	bot string
}

// newCognitiveFixture starts a fake provider listing models and a platform
// configured with it and env (PLATFORM_LLM_* besides the URL).
func newCognitiveFixture(t *testing.T, env map[string]string, models ...string) *cognitiveFixture {
	up := llmtest.New(models...)
	t.Cleanup(up.Close)
	t.Setenv("PLATFORM_LLM_URL", up.BaseURL())
	for k, v := range env {
		t.Setenv(k, v)
	}
	f := newFixture(t)
	return &cognitiveFixture{fixture: f, up: up, bot: f.createBot(f.AdminToken, nil)}
}

func (f *cognitiveFixture) gen(body any) apitest.Response {
	f.T.Helper()
	return f.Do(apitest.Req{Method: "POST", Path: "/v2/cognitive/generate-text", Token: f.AdminToken, Body: body, Headers: map[string]string{"x-bot-id": f.bot}})
}

func num(v any) float64 { f, _ := v.(float64); return f }

func TestCognitiveGenerateTextMapsRequestAndAnswer(t *testing.T) {
	f := newCognitiveFixture(t, nil, "llama3", "qwen")
	f.up.ToolCall("call_1", "lookup", `{"city":"Paris"}`)
	f.up.Reply(func(llmtest.Body) any { return "let me look" })
	r := f.gen(map[string]any{
		"model":          "openai:gpt-4o",
		"systemPrompt":   "be brief",
		"temperature":    0.2,
		"maxTokens":      100,
		"stopSequences":  "END",
		"responseFormat": "json",
		"messages": []any{
			map[string]any{"role": "system", "content": "you are a bot"},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "what is this?"},
				map[string]any{"type": "image", "url": "https://example.com/cat.png", "mimeType": "image/png"},
			}},
			map[string]any{"role": "assistant", "type": "tool_calls", "content": nil, "toolCalls": []any{
				map[string]any{"id": "call_0", "type": "function", "function": map[string]any{"name": "lookup", "arguments": map[string]any{"city": "Rome"}}},
			}},
			map[string]any{"role": "user", "type": "tool_result", "toolResultCallId": "call_0", "content": "sunny"},
		},
		"tools":       []any{map[string]any{"name": "lookup", "description": "weather", "parameters": map[string]any{"type": "object"}}},
		"toolControl": map[string]any{"mode": "specific", "toolName": "lookup", "parallel": false},
		"meta":        map[string]any{"promptSource": "test"},
		"userId":      "ignored",
	})
	f.Check(r, 200, "")
	got := f.up.Last()
	if got.Path != "/v1/chat/completions" {
		t.Fatalf("upstream path %q", got.Path)
	}
	b := got.Body
	want := map[string]any{
		"model": "llama3", "temperature": 0.2, "max_tokens": 100.0, "stop": []any{"END"},
		"response_format":     map[string]any{"type": "json_object"},
		"tool_choice":         map[string]any{"type": "function", "function": map[string]any{"name": "lookup"}},
		"parallel_tool_calls": false,
		"tools":               []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "description": "weather", "parameters": map[string]any{"type": "object"}}}},
		"messages": []any{
			map[string]any{"role": "system", "content": "be brief"},
			map[string]any{"role": "system", "content": "you are a bot"},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "what is this?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/cat.png"}},
			}},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
				map[string]any{"id": "call_0", "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"city":"Rome"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
		},
	}
	for k, v := range want {
		if !reflect.DeepEqual(b[k], v) {
			t.Errorf("upstream %s = %#v, want %#v", k, b[k], v)
		}
	}
	for _, k := range []string{"stream", "max_completion_tokens", "reasoning_effort", "meta", "userId"} {
		if _, ok := b[k]; ok {
			t.Errorf("upstream got %s: %v", k, b[k])
		}
	}
	if r.Str("output") != "let me look" {
		t.Errorf("output %q", r.Str("output"))
	}
	calls := r.List("toolCalls")
	if len(calls) != 1 || !reflect.DeepEqual(calls[0], map[string]any{"id": "call_1", "name": "lookup", "input": map[string]any{"city": "Paris"}}) {
		t.Errorf("toolCalls %v", calls)
	}
	md, _ := r.Body["metadata"].(map[string]any)
	usage, _ := md["usage"].(map[string]any)
	if md["provider"] != "openai" || md["model"] != "openai:llama3" || md["stopReason"] != "tool_calls" || num(usage["inputTokens"]) == 0 || num(usage["outputTokens"]) != 3 || md["cost"] != 0.0 {
		t.Errorf("metadata %v", md)
	}
}

func TestCognitiveModelResolution(t *testing.T) {
	f := newCognitiveFixture(t, map[string]string{
		"PLATFORM_LLM_MODELS":            `{"fast":"small","anthropic:claude-sonnet-4":"big","openai:gpt-4o-mini":"openai:small"}`,
		"PLATFORM_LLM_OUTPUT_MAX_TOKENS": "500",
	}, "big", "small", "o3-mini")
	for _, tc := range []struct {
		model  any
		status int
		// upstream model, or a part of the error message
		want string
	}{
		{"best", 200, "big"},
		{"auto", 200, "big"},
		{nil, 200, "big"},
		{"fast", 200, "small"},
		{"openai:gpt-4o", 200, "big"}, // known prefix, not mapped: the default
		{"groq:llama-3.3-70b-versatile", 200, "big"},
		{"anthropic:claude-sonnet-4", 200, "big"}, // mapped
		{"openai:gpt-4o-mini", 200, "small"},
		{"openai:small", 200, "small"}, // a listed model of the provider
		{"small", 200, "small"},
		{[]any{"fast", "best"}, 200, "small"},
		{"acme:model", 400, `unknown model "acme:model"`},
		{"gpt-9", 400, `unknown model "gpt-9"`},
		{[]any{"best", "nope"}, 400, `unknown model "nope"`},
	} {
		body := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "maxTokens": 9999}
		if tc.model != nil {
			body["model"] = tc.model
		}
		n := len(f.up.Requests())
		r := f.gen(body)
		if r.Status != tc.status {
			t.Errorf("model %v: %d %s", tc.model, r.Status, r.Raw)
			continue
		}
		if tc.status != 200 {
			if !strings.Contains(r.Str("message"), tc.want) || r.Str("type") != "InvalidPayload" {
				t.Errorf("model %v: %s", tc.model, r.Raw)
			}
			if len(f.up.Requests()) != n {
				t.Errorf("model %v: the upstream was called", tc.model)
			}
			continue
		}
		got := f.up.Last().Body
		if got["model"] != tc.want || got["max_tokens"] != 500.0 {
			t.Errorf("model %v: upstream model %v max_tokens %v, want %s and 500 (lowered to the output limit)", tc.model, got["model"], got["max_tokens"], tc.want)
		}
	}

	// The list: <provider>:<model>, the aliases on their targets, limits.
	r := f.Do(apitest.Req{Method: "GET", Path: "/v2/cognitive/models", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.bot}})
	f.Check(r, 200, "")
	models := r.List("models")
	if len(models) != 3 {
		t.Fatalf("models: %s", r.Raw)
	}
	byID := map[string]map[string]any{}
	for _, m := range models {
		mm := m.(map[string]any)
		byID[mm["id"].(string)] = mm
	}
	if a := byID["openai:big"]["aliases"]; !reflect.DeepEqual(a, []any{"anthropic:claude-sonnet-4", "auto", "best"}) {
		t.Errorf("aliases of big: %v", a)
	}
	if a := byID["openai:small"]["aliases"]; !reflect.DeepEqual(a, []any{"fast", "openai:gpt-4o-mini"}) {
		t.Errorf("aliases of small: %v", a)
	}
	out, _ := byID["openai:small"]["output"].(map[string]any)
	in, _ := byID["openai:small"]["input"].(map[string]any)
	if num(out["maxTokens"]) != 500 || num(in["maxTokens"]) != 128000 || byID["openai:small"]["lifecycle"] != "production" {
		t.Errorf("limits of small: %v", byID["openai:small"])
	}
}

func TestCognitiveReasoningModels(t *testing.T) {
	f := newCognitiveFixture(t, nil, "o3-mini", "plain")
	msg := []any{map[string]any{"role": "user", "content": "think"}}
	f.Check(f.gen(map[string]any{"model": "openai:o3-mini", "messages": msg, "maxTokens": 50, "reasoningEffort": "high"}), 200, "")
	b := f.up.Last().Body
	if b["max_completion_tokens"] != 50.0 || b["max_tokens"] != nil || b["reasoning_effort"] != "high" {
		t.Errorf("reasoning model got %v", b)
	}
	// A model that does not reason gets no reasoning_effort; one that
	// refuses max_tokens gets max_completion_tokens on the retry, and from
	// then on.
	f.up.RefuseMaxTokens()
	f.Check(f.gen(map[string]any{"model": "openai:plain", "messages": msg, "maxTokens": 50, "reasoningEffort": "low"}), 200, "")
	rs := f.up.Requests()
	if b := rs[len(rs)-1].Body; b["max_completion_tokens"] != 50.0 || b["max_tokens"] != nil || b["reasoning_effort"] != nil {
		t.Errorf("after the refusal: %v", b)
	}
	f.Check(f.gen(map[string]any{"model": "openai:plain", "messages": msg, "maxTokens": 50}), 200, "")
	if len(f.up.Requests()) != len(rs)+1 {
		t.Errorf("the switch was not kept: %d requests", len(f.up.Requests())-len(rs))
	}
}

func TestCognitiveStream(t *testing.T) {
	f := newCognitiveFixture(t, nil, "llama3")
	f.up.Reply(func(llmtest.Body) any { return "one two three" })
	f.up.ToolCall("call_9", "save", `{"a":1,"b":"x"}`)
	body, _ := json.Marshal(map[string]any{"model": "best", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "count"}}})
	req, _ := http.NewRequest("POST", f.URL+"/v2/cognitive/generate-text-stream", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	req.Header.Set("x-bot-id", f.bot)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var text strings.Builder
	var last map[string]any
	sc := bufio.NewScanner(res.Body)
	lines := 0
	for sc.Scan() {
		var ch map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ch); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines++
		s, _ := ch["output"].(string)
		text.WriteString(s)
		if num(ch["created"]) == 0 {
			t.Errorf("chunk without created: %v", ch)
		}
		last = ch
	}
	if text.String() != "one two three" || lines != 4 {
		t.Errorf("streamed %q in %d lines", text.String(), lines)
	}
	md, _ := last["metadata"].(map[string]any)
	usage, _ := md["usage"].(map[string]any)
	if last["finished"] != true || md["stopReason"] != "tool_calls" || num(usage["outputTokens"]) != 3 || num(usage["inputTokens"]) == 0 {
		t.Errorf("last chunk %v", last)
	}
	if calls, _ := last["toolCalls"].([]any); len(calls) != 1 || !reflect.DeepEqual(calls[0], map[string]any{"id": "call_9", "name": "save", "input": map[string]any{"a": 1.0, "b": "x"}}) {
		t.Errorf("tool calls %v", last["toolCalls"])
	}
	up := f.up.Last().Body
	if up["stream"] != true || !reflect.DeepEqual(up["stream_options"], map[string]any{"include_usage": true}) {
		t.Errorf("upstream stream options: %v", up)
	}

	// An error before the first chunk is an error answer, not a stream.
	f.up.FailNext(400)
	r := f.Do(apitest.Req{Method: "POST", Path: "/v2/cognitive/generate-text-stream", Token: f.AdminToken, Body: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}}, Headers: map[string]string{"x-bot-id": f.bot}})
	if r.Status != 400 || !strings.Contains(r.Str("message"), "fake failure 400") {
		t.Errorf("stream refused upstream: %d %s", r.Status, r.Raw)
	}
}

func TestCognitiveErrors(t *testing.T) {
	f := newCognitiveFixture(t, map[string]string{"PLATFORM_LLM_TIMEOUT": "300ms", "PLATFORM_LLM_INPUT_MAX_TOKENS": "1000"}, "llama3")
	hi := []any{map[string]any{"role": "user", "content": "hi"}}
	for _, tc := range []struct {
		name     string
		setup    func()
		body     any
		status   int
		typ      string
		message  string
		upstream int // chat requests the call made upstream
	}{
		{"retried until it works", func() { f.up.FailNext(503, 502) }, map[string]any{"messages": hi}, 200, "", "", 3},
		{"failing three times", func() { f.up.FailNext(500, 503, 502) }, map[string]any{"messages": hi}, 502, "BadGateway", "after 3 attempts", 3},
		{"rate limited", func() { f.up.FailNext(429, 429, 429) }, map[string]any{"messages": hi}, 429, "RateLimited", "429", 3},
		{"refused upstream", func() { f.up.FailNext(400) }, map[string]any{"messages": hi}, 400, "InvalidPayload", "fake failure 400", 1},
		{"credentials refused", func() { f.up.FailNext(401) }, map[string]any{"messages": hi}, 502, "BadGateway", "PLATFORM_LLM_API_KEY", 1},
		{"too slow", func() { f.up.Delay(3 * time.Second) }, map[string]any{"messages": hi}, 504, "OperationTimeout", "PLATFORM_LLM_TIMEOUT", 1},
		{"over the context", func() { f.up.Delay(0) }, map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("word ", 1000)}}}, 400, "InvalidPayload", "exceeds the context", 0},
		{"no messages", nil, map[string]any{"messages": []any{}}, 400, "InvalidPayload", "messages", 0},
		{"bad role", nil, map[string]any{"messages": []any{map[string]any{"role": "tool", "content": "x"}}}, 400, "InvalidPayload", `role "tool"`, 0},
		{"bad content", nil, map[string]any{"messages": []any{map[string]any{"role": "user", "content": 3}}}, 400, "InvalidPayload", "content", 0},
		{"bad format", nil, map[string]any{"messages": hi, "responseFormat": "xml"}, 400, "InvalidPayload", "responseFormat", 0},
		{"bad temperature", nil, map[string]any{"messages": hi, "temperature": 7}, 400, "InvalidPayload", "temperature", 0},
		{"audio", nil, map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "audio", "url": "https://x/a.mp3"}}}}}, 400, "InvalidPayload", "audio", 0},
		{"malformed JSON", nil, "{", 400, "InvalidPayload", "malformed", 0},
	} {
		if tc.setup != nil {
			tc.setup()
		}
		n := len(f.up.Requests())
		r := f.gen(tc.body)
		if r.Status != tc.status || (tc.typ != "" && r.Str("type") != tc.typ) || !strings.Contains(r.Str("message"), tc.message) {
			t.Errorf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
		if got := len(f.up.Requests()) - n; got != tc.upstream {
			t.Errorf("%s: %d upstream requests, want %d", tc.name, got, tc.upstream)
		}
	}
}

func TestCognitiveUnconfigured(t *testing.T) {
	t.Setenv("PLATFORM_LLM_URL", "")
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	for _, rq := range []apitest.Req{
		{Method: "POST", Path: "/v2/cognitive/generate-text", Body: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}},
		{Method: "POST", Path: "/v2/cognitive/generate-text-stream", Body: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}},
		{Method: "GET", Path: "/v2/cognitive/models"},
	} {
		rq.Token, rq.Headers = f.AdminToken, map[string]string{"x-bot-id": bot}
		r := f.Do(rq)
		if r.Status != 403 || !strings.Contains(r.Str("message"), "PLATFORM_LLM_URL") {
			t.Errorf("%s %s unconfigured: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
	}
}

func TestCognitiveCallers(t *testing.T) {
	f := newCognitiveFixture(t, nil, "llama3")
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": f.bot}), 200, "createBotApiKey").Str("value")
	other := f.createBot(f.AdminToken, nil)
	// A developer of another workspace only.
	outsiderToken, _ := newFixtureOn(f.fixture).invite("outsider@example.com", "developer")
	viewer, _ := f.invite("viewer@example.com", "viewer")
	body := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	for _, tc := range []struct {
		name   string
		token  string
		bot    string
		status int
	}{
		{"the bot's own key", key, f.bot, 200},
		{"a member", f.AdminToken, f.bot, 200},
		{"no token", "", f.bot, 401},
		{"no bot header", f.AdminToken, "", 400},
		{"the bot's key on another bot", key, other, 404},
		{"a viewer", viewer, f.bot, 403},
		{"another workspace's member", outsiderToken, f.bot, 404},
	} {
		h := map[string]string{}
		if tc.bot != "" {
			h["x-bot-id"] = tc.bot
		}
		n := len(f.up.Requests())
		r := f.Do(apitest.Req{Method: "POST", Path: "/v2/cognitive/generate-text", Token: tc.token, Body: body, Headers: h})
		if r.Status != tc.status {
			t.Errorf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
		if called := len(f.up.Requests()) > n; called != (tc.status == 200) {
			t.Errorf("%s: upstream called %v", tc.name, called)
		}
	}
}

// TestCognitiveUsageAndQuota: each call's tokens are counted for the bot
// (getBotAnalytics' LLM figures), streamed ones too, and past the
// operator's token quota a call is refused before the provider is called.
func TestCognitiveUsageAndQuota(t *testing.T) {
	f := newCognitiveFixture(t, map[string]string{"BP_QUOTA_LLM_TOKENS_PER_MONTH": "12"}, "llama3")
	msg := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "one two"}}}
	r := f.Check(f.gen(msg), 200, "")
	md := r.Body["metadata"].(map[string]any)["usage"].(map[string]any)
	in, out := num(md["inputTokens"]), num(md["outputTokens"]) // 3 and 3 from the fake
	if in+out == 0 || in+out >= 12 {
		t.Fatalf("usage %v", md)
	}
	// A streamed call counts as well.
	res, err := http.DefaultClient.Do(func() *http.Request {
		b, _ := json.Marshal(msg)
		req, _ := http.NewRequest("POST", f.URL+"/v2/cognitive/generate-text-stream", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+f.AdminToken)
		req.Header.Set("x-bot-id", f.bot)
		return req
	}())
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, res)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()

	day := time.Now().UTC().Format(time.DateOnly)
	a := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/"+f.bot+"/analytics?startDate="+day+"&endDate="+day, nil), 200, "getBotAnalytics")
	llm := a.List("records")[0].(map[string]any)["llm"].(map[string]any)
	if num(llm["calls"]) != 2 || num(llm["inputTokens"]) != 2*in || num(llm["outputTokens"]) != 2*out {
		t.Fatalf("analytics llm %v, want 2 calls, %v in, %v out", llm, 2*in, 2*out)
	}
	// 2 calls used 2*(in+out) = 12 tokens: the quota is reached.
	n := len(f.up.Requests())
	for _, path := range []string{"/v2/cognitive/generate-text", "/v2/cognitive/generate-text-stream"} {
		r := f.Do(apitest.Req{Method: "POST", Path: path, Token: f.AdminToken, Body: msg, Headers: map[string]string{"x-bot-id": f.bot}})
		if r.Status != 403 || r.Str("type") != "QuotaExceeded" || !strings.Contains(r.Str("message"), "LLM tokens") {
			t.Errorf("%s past the quota: %d %s", path, r.Status, r.Raw)
		}
	}
	if len(f.up.Requests()) != n {
		t.Errorf("the provider was called past the quota")
	}
	// Another bot of the workspace has its own quota.
	other := f.createBot(f.AdminToken, nil)
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v2/cognitive/generate-text", Token: f.AdminToken, Body: msg, Headers: map[string]string{"x-bot-id": other}}), 200, "")
}
