// Package llmtest is a fake OpenAI-compatible provider for tests: GET
// /v1/models and POST /v1/chat/completions (plain and streamed), recording
// every request it receives so a test can assert what the gateway sent.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Upstream is a running fake provider.
type Upstream struct {
	*httptest.Server
	// Models are listed by GET /v1/models, in this order.
	Models []string
	// APIKey, when set, must be the bearer token of every request.
	APIKey string

	mu       sync.Mutex
	requests []Recorded
	fail     []int          // statuses of the next answers, in order
	delay    time.Duration  // before each chat answer
	reply    func(Body) any // the answer's message content; nil: echo
	finish   string
	calls    []any // tool calls of the next answer
	refuseMT bool  // refuse max_tokens (as OpenAI's reasoning models)
}

// Recorded is one request the fake received.
type Recorded struct {
	Method, Path  string
	Authorization string
	Body          Body
}

// Body is a decoded JSON request body.
type Body map[string]any

// New starts a fake provider listing models; its base URL (ending in /v1)
// is URL()+"/v1".
func New(models ...string) *Upstream {
	u := &Upstream{Models: models, finish: "stop"}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

// BaseURL is the provider's base URL, as PLATFORM_LLM_URL takes it.
func (u *Upstream) BaseURL() string { return u.URL + "/v1" }

// Requests returns the chat requests received so far (GET /models left out).
func (u *Upstream) Requests() []Recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []Recorded
	for _, r := range u.requests {
		if r.Method == http.MethodPost {
			out = append(out, r)
		}
	}
	return out
}

// Last is the last chat request received.
func (u *Upstream) Last() Recorded {
	rs := u.Requests()
	if len(rs) == 0 {
		return Recorded{}
	}
	return rs[len(rs)-1]
}

// FailNext makes the next len(statuses) chat answers these statuses.
func (u *Upstream) FailNext(statuses ...int) {
	u.mu.Lock()
	u.fail = append(u.fail, statuses...)
	u.mu.Unlock()
}

// Delay makes each chat answer wait d first.
func (u *Upstream) Delay(d time.Duration) {
	u.mu.Lock()
	u.delay = d
	u.mu.Unlock()
}

// Reply sets the content of the answers (nil: "echo: <last user text>").
func (u *Upstream) Reply(f func(Body) any) {
	u.mu.Lock()
	u.reply = f
	u.mu.Unlock()
}

// ToolCall makes the next answers call tool name with args (finish
// tool_calls).
func (u *Upstream) ToolCall(id, name, args string) {
	u.mu.Lock()
	u.calls = []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}
	u.finish = "tool_calls"
	u.mu.Unlock()
}

// RefuseMaxTokens makes the fake refuse max_tokens with OpenAI's message.
func (u *Upstream) RefuseMaxTokens() {
	u.mu.Lock()
	u.refuseMT = true
	u.mu.Unlock()
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body Body
	_ = json.Unmarshal(raw, &body)
	u.mu.Lock()
	u.requests = append(u.requests, Recorded{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Body: body})
	key := u.APIKey
	u.mu.Unlock()
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeErr(w, 401, "Incorrect API key provided")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		data := []any{}
		for _, m := range u.Models {
			data = append(data, map[string]any{"id": m, "object": "model", "owned_by": "test"})
		}
		writeJSON(w, 200, map[string]any{"object": "list", "data": data})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		u.chat(w, r, body)
	default:
		writeErr(w, 404, "no such route "+r.URL.Path)
	}
}

func (u *Upstream) chat(w http.ResponseWriter, r *http.Request, body Body) {
	u.mu.Lock()
	var status int
	if len(u.fail) > 0 {
		status, u.fail = u.fail[0], u.fail[1:]
	}
	delay, reply, finish, calls, refuseMT := u.delay, u.reply, u.finish, u.calls, u.refuseMT
	u.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 {
		writeErr(w, status, fmt.Sprintf("fake failure %d", status))
		return
	}
	if _, ok := body["max_tokens"]; ok && refuseMT {
		writeErr(w, 400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
		return
	}
	model, _ := body["model"].(string)
	var content any = "echo: " + lastUserText(body)
	if reply != nil {
		content = reply(body)
	}
	text, _ := content.(string)
	prompt := promptTokens(body)
	completion := len(strings.Fields(text))
	if stream, _ := body["stream"].(bool); stream {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := http.NewResponseController(w)
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			_ = fl.Flush()
		}
		words := strings.SplitAfter(text, " ")
		for _, wd := range words {
			if wd == "" {
				continue
			}
			send(map[string]any{"id": "chatcmpl-fake", "model": model, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": wd}, "finish_reason": nil}}})
		}
		delta := map[string]any{}
		if calls != nil {
			// As OpenAI streams them: the call's id and name first, its
			// arguments in pieces.
			c := calls[0].(map[string]any)
			f := c["function"].(map[string]any)
			args := f["arguments"].(string)
			half := len(args) / 2
			send(map[string]any{"id": "chatcmpl-fake", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": c["id"], "type": "function", "function": map[string]any{"name": f["name"], "arguments": args[:half]}}}}}}})
			delta = map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[half:]}}}}
		}
		send(map[string]any{"id": "chatcmpl-fake", "model": model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		if so, _ := body["stream_options"].(map[string]any); so["include_usage"] == true {
			send(map[string]any{"id": "chatcmpl-fake", "model": model, "choices": []any{}, "usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	msg := map[string]any{"role": "assistant", "content": content}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	writeJSON(w, 200, map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// lastUserText is the text of the last user message.
func lastUserText(b Body) string {
	msgs, _ := b["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] != "user" {
			continue
		}
		switch c := m["content"].(type) {
		case string:
			return c
		case []any:
			var parts []string
			for _, p := range c {
				pm, _ := p.(map[string]any)
				if t, ok := pm["text"].(string); ok {
					parts = append(parts, t)
				}
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

// promptTokens counts the words of the messages: a deterministic stand-in
// for a tokenizer.
func promptTokens(b Body) int {
	n := 0
	msgs, _ := b["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		if s, ok := mm["content"].(string); ok {
			n += len(strings.Fields(s))
		}
		n++
	}
	return n
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "fake_error"}})
}
