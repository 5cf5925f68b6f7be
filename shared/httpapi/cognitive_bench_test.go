package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sort"
	"testing"
	"time"
)

// TestCognitiveOverhead measures what the platform adds to a
// generate-text call (authentication, the bot's read, the mapping both
// ways) against the fake provider on loopback: 500 calls through the
// platform and 500 straight to the provider, p50 and p99 of each, and the
// time to the first streamed chunk both ways. A measurement, not a check:
// it runs with LLM_BENCH=1 (docs/llm.md has the figures).
func TestCognitiveOverhead(t *testing.T) {
	if os.Getenv("LLM_BENCH") == "" {
		t.Skip("LLM_BENCH=1 runs the measurement")
	}
	f := newCognitiveFixture(t, nil, "llama3")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(url string, body []byte, h map[string]string, stream bool) (total, first time.Duration) {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		start := time.Now()
		res, err := client.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%s: %v %v", url, err, res)
		}
		if stream {
			br := bufio.NewReader(res.Body)
			if _, err := br.ReadBytes('\n'); err != nil {
				t.Fatal(err)
			}
			first = time.Since(start)
			_, _ = io.Copy(io.Discard, br)
		} else {
			_, _ = io.Copy(io.Discard, res.Body)
		}
		res.Body.Close()
		return time.Since(start), first
	}
	msgs := []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": "hello there, how are you today?"}}
	platformBody, _ := json.Marshal(map[string]any{"model": "best", "messages": msgs, "maxTokens": 100})
	upstreamBody, _ := json.Marshal(map[string]any{"model": "llama3", "messages": msgs, "max_tokens": 100})
	platformStream, _ := json.Marshal(map[string]any{"model": "best", "messages": msgs, "stream": true})
	upstreamStream, _ := json.Marshal(map[string]any{"model": "llama3", "messages": msgs, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	auth := map[string]string{"Authorization": "Bearer " + f.AdminToken, "x-bot-id": f.bot}
	const n = 500
	measure := func(name, url string, body []byte, h map[string]string, stream bool) (p50, p99 time.Duration) {
		for i := 0; i < 20; i++ { // warm connections and caches
			post(url, body, h, stream)
		}
		ds := make([]time.Duration, n)
		for i := range ds {
			total, first := post(url, body, h, stream)
			ds[i] = total
			if stream {
				ds[i] = first
			}
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		p50, p99 = ds[n/2], ds[n*99/100]
		t.Logf("%-34s p50 %8.3f ms  p99 %8.3f ms", name, float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000)
		return
	}
	d50, d99 := measure("provider directly", f.up.URL+"/v1/chat/completions", upstreamBody, nil, false)
	p50, p99 := measure("through the platform", f.URL+"/v2/cognitive/generate-text", platformBody, auth, false)
	t.Logf("added: p50 %.3f ms, p99 %.3f ms", float64((p50-d50).Microseconds())/1000, float64((p99-d99).Microseconds())/1000)
	s50, _ := measure("first chunk, provider directly", f.up.URL+"/v1/chat/completions", upstreamStream, nil, true)
	q50, _ := measure("first chunk, through the platform", f.URL+"/v2/cognitive/generate-text-stream", platformStream, auth, true)
	t.Logf("first chunk added: p50 %.3f ms", float64((q50-s50).Microseconds())/1000)
}
