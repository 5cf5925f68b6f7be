package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/llm/llmtest"
	"github.com/botforge/platform/shared/platform"
)

func (f *cognitiveFixture) llmCalls(token, query string) apitest.Response {
	f.T.Helper()
	return f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + f.bot + "/llm-calls" + query, Token: token, Headers: map[string]string{"x-workspace-id": f.ws}})
}

func TestLLMCallsRecorded(t *testing.T) {
	f := newCognitiveFixture(t, nil, "llama3")
	f.up.Reply(func(llmtest.Body) any { return "fine thanks" })
	before := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	msg := []any{map[string]any{"role": "user", "content": "how are you today"}}

	// Two calls naming conversation A, one naming none.
	var usages []map[string]any
	for _, meta := range []map[string]any{{"conversationId": "conv_A", "promptSource": "test:a"}, {"conversationId": "conv_A"}, nil} {
		r := f.Check(f.gen(map[string]any{"model": "openai:gpt-4o", "messages": msg, "meta": meta}), 200, "")
		usages = append(usages, r.Body["metadata"].(map[string]any)["usage"].(map[string]any))
	}
	// A streamed call naming conversation B, and a failing call.
	body, _ := json.Marshal(map[string]any{"model": "best", "messages": msg, "meta": map[string]any{"conversationId": "conv_B"}})
	req, _ := http.NewRequest("POST", f.URL+"/v2/cognitive/generate-text-stream", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	req.Header.Set("x-bot-id", f.bot)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	for sc := bufio.NewScanner(res.Body); sc.Scan(); {
	}
	res.Body.Close()
	f.Check(f.gen(map[string]any{"model": "nosuch", "messages": msg, "meta": map[string]any{"conversationId": "conv_A"}}), 400, "")

	r := f.Check(f.llmCalls(f.AdminToken, ""), 200, "")
	calls := r.List("calls")
	if len(calls) != 5 {
		t.Fatalf("5 calls recorded, got %s", r.Raw)
	}
	c := func(i int) map[string]any { return calls[i].(map[string]any) }
	// Newest first: the failed call, the stream, then the three.
	if c(0)["status"] != "error" || c(0)["error"] == "" || c(0)["model"] != "nosuch" || c(0)["conversationId"] != "conv_A" {
		t.Fatalf("failed call: %v", c(0))
	}
	if c(1)["operation"] != "generateTextStream" || c(1)["conversationId"] != "conv_B" || num(c(1)["outputTokens"]) == 0 || num(c(1)["inputTokens"]) == 0 {
		t.Fatalf("stream call: %v", c(1))
	}
	last := c(4)
	if last["operation"] != "generateText" || last["model"] != "openai:llama3" || last["status"] != "ok" || last["promptSource"] != "test:a" ||
		num(last["inputTokens"]) != num(usages[0]["inputTokens"]) || num(last["outputTokens"]) != num(usages[0]["outputTokens"]) || num(last["inputTokens"]) == 0 {
		t.Fatalf("first call %v, usage answered %v", last, usages[0])
	}
	if _, ok := last["latencyMs"].(float64); !ok || last["createdAt"] == "" || last["id"] == "" {
		t.Fatalf("latency, time, id: %v", last)
	}
	if c(2)["conversationId"] != nil {
		t.Fatalf("a call naming no conversation: %v", c(2))
	}

	// Filters: conversation, since, limit and paging.
	r = f.Check(f.llmCalls(f.AdminToken, "?conversationId=conv_A"), 200, "")
	if len(r.List("calls")) != 3 {
		t.Fatalf("conv_A: %s", r.Raw)
	}
	if r = f.Check(f.llmCalls(f.AdminToken, "?since="+url.QueryEscape(before)), 200, ""); len(r.List("calls")) != 5 {
		t.Fatalf("since before: %s", r.Raw)
	}
	if r = f.Check(f.llmCalls(f.AdminToken, "?since="+url.QueryEscape(time.Now().UTC().Add(time.Minute).Format(time.RFC3339))), 200, ""); len(r.List("calls")) != 0 {
		t.Fatalf("since later: %s", r.Raw)
	}
	seen := 0
	for next := ""; ; {
		r = f.Check(f.llmCalls(f.AdminToken, "?limit=2&nextToken="+url.QueryEscape(next)), 200, "")
		seen += len(r.List("calls"))
		if next = r.Str("meta.nextToken"); next == "" {
			break
		}
	}
	if seen != 5 {
		t.Fatalf("paged: %d calls", seen)
	}

	// Roles and tenancy: a viewer reads, the bot's own key reads its own
	// calls (not another bot's), another workspace does not.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	f.Check(f.llmCalls(viewer, ""), 200, "")
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": f.bot}), 200, "createBotApiKey").Str("value")
	if r := f.Check(f.llmCalls(key, ""), 200, ""); len(r.List("calls")) != 5 {
		t.Fatalf("the bot's key: %s", r.Raw)
	}
	otherBot := f.createBot(f.AdminToken, nil)
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + otherBot + "/llm-calls", Token: key, Headers: map[string]string{"x-workspace-id": f.ws}}); r.Status < 400 {
		t.Fatalf("a bot's key read another bot's calls: %d %s", r.Status, r.Raw)
	}
	other := newFixtureOn(f.fixture)
	rr := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + f.bot + "/llm-calls", Token: f.AdminToken, Headers: map[string]string{"x-workspace-id": other.ws}})
	f.Check(rr, 404, "")
	for _, bad := range []string{"?limit=0", "?limit=101", "?since=yesterday", "?nextToken=garbage"} {
		f.Check(f.llmCalls(f.AdminToken, bad), 400, "")
	}
}

// The records are a ring: however many calls, a bot keeps the newest
// MaxLLMCallsPerBot.
func TestLLMCallsBounded(t *testing.T) {
	f := newCognitiveFixture(t, nil, "llama3")
	n := platform.MaxLLMCallsPerBot + 7
	msg := []any{map[string]any{"role": "user", "content": "hi"}}
	for i := range n {
		f.Check(f.gen(map[string]any{"model": "best", "messages": msg, "meta": map[string]any{"conversationId": "c" + string(rune('a'+i%26))}}), 200, "")
	}
	var all []any
	for next := ""; ; {
		r := f.Check(f.llmCalls(f.AdminToken, "?limit=100&nextToken="+url.QueryEscape(next)), 200, "")
		all = append(all, r.List("calls")...)
		if next = r.Str("meta.nextToken"); next == "" {
			break
		}
	}
	if len(all) != platform.MaxLLMCallsPerBot {
		t.Fatalf("%d records after %d calls, want %d", len(all), n, platform.MaxLLMCallsPerBot)
	}
	// The newest is the last call made (conversation of i = n-1).
	if got, want := all[0].(map[string]any)["conversationId"], "c"+string(rune('a'+(n-1)%26)); got != want {
		t.Fatalf("newest record %v, want %s", got, want)
	}
}

// A call refused before the provider (the operator's token quota) is
// recorded too, with the refusal.
func TestLLMCallsRecordRefusals(t *testing.T) {
	f := newCognitiveFixture(t, map[string]string{"BP_QUOTA_LLM_TOKENS_PER_MONTH": "1"}, "llama3")
	msg := []any{map[string]any{"role": "user", "content": "spend a few tokens"}}
	f.Check(f.gen(map[string]any{"model": "best", "messages": msg}), 200, "")
	r := f.gen(map[string]any{"model": "best", "messages": msg, "meta": map[string]any{"conversationId": "conv_Q"}})
	f.Check(r, 403, "")
	calls := f.Check(f.llmCalls(f.AdminToken, "?conversationId=conv_Q"), 200, "").List("calls")
	if len(calls) != 1 {
		t.Fatalf("refused call recorded: %v", calls)
	}
	c := calls[0].(map[string]any)
	if c["status"] != "error" || !strings.Contains(c["error"].(string), r.Str("message")) || num(c["inputTokens"]) != 0 {
		t.Fatalf("refused call: %v (answered %s)", c, r.Raw)
	}
}
