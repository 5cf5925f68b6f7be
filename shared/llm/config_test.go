package llm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/llm/llmtest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestFromEnv: the variables, their defaults and their refusals.
func TestFromEnv(t *testing.T) {
	c, err := llm.FromEnv(env(nil))
	if err != nil || c.Configured() || c.Timeout != llm.DefaultTimeout {
		t.Fatalf("nothing set: %+v %v", c, err)
	}
	c, err = llm.FromEnv(env(map[string]string{"PLATFORM_LLM_URL": "http://127.0.0.1:1/v1/", "PLATFORM_LLM_TIMEOUT": "5s", "PLATFORM_LLM_OUTPUT_MAX_TOKENS": "99", "PLATFORM_LLM_MODELS": `{"best":"m"}`}))
	if err != nil || len(c.Providers) != 1 || c.Providers[0].Name != "openai" || c.Providers[0].URL != "http://127.0.0.1:1/v1" ||
		c.Providers[0].OutputMaxTokens != 99 || c.Providers[0].InputMaxTokens != llm.DefaultInputMaxTokens || c.Timeout != 5*time.Second || c.Models["best"] != "m" {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, bad := range []map[string]string{
		{"PLATFORM_LLM_URL": "ftp://x/v1"},
		{"PLATFORM_LLM_URL": "http://x/v1", "PLATFORM_LLM_TIMEOUT": "soon"},
		{"PLATFORM_LLM_URL": "http://x/v1", "PLATFORM_LLM_MODELS": "[1]"},
		{"PLATFORM_LLM_URL": "http://x/v1", "PLATFORM_LLM_INPUT_MAX_TOKENS": "-3"},
		{"PLATFORM_LLM_URL": "http://x/v1", "PLATFORM_LLM_PROVIDER": "a:b"},
		{"PLATFORM_LLM_CONFIG": "/nonexistent/llm.json"},
	} {
		if _, err := llm.FromEnv(env(bad)); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// TestSeveralProviders: a config file of two providers; each model
// resolves to its own provider, the key of each is sent to it only.
func TestSeveralProviders(t *testing.T) {
	a, b := llmtest.New("alpha"), llmtest.New("beta-1", "beta-2")
	defer a.Close()
	defer b.Close()
	b.APIKey = "key-b"
	t.Setenv("B_KEY", "key-b")
	file := filepath.Join(t.TempDir(), "llm.json")
	cfg := `{"providers":[{"name":"local","url":"` + a.BaseURL() + `"},{"name":"cloud","url":"` + b.BaseURL() + `","apiKeyEnv":"B_KEY","outputMaxTokens":10}],"models":{"fast":"cloud:beta-2"},"timeout":"3s"}`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := llm.FromEnv(env(map[string]string{"PLATFORM_LLM_CONFIG": file}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := llm.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ model, up, want string }{
		{"best", "a", "alpha"}, {"fast", "b", "beta-2"}, {"cloud:beta-1", "b", "beta-1"}, {"openai:gpt-4o", "a", "alpha"},
	} {
		max := 50
		res, err := g.Generate(ctx, &llm.Request{Model: llm.StringList{tc.model}, MaxTokens: &max, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}})
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		up := a
		if tc.up == "b" {
			up = b
		}
		last := up.Last()
		if last.Body["model"] != tc.want || !strings.HasSuffix(res.Metadata.Model, ":"+tc.want) {
			t.Errorf("%s: went to %v (%s)", tc.model, last.Body["model"], res.Metadata.Model)
		}
		if tc.up == "b" && (last.Authorization != "Bearer key-b" || last.Body["max_tokens"] != 10.0) {
			t.Errorf("%s: key %q, max_tokens %v", tc.model, last.Authorization, last.Body["max_tokens"])
		}
		if tc.up == "a" && last.Authorization != "" {
			t.Errorf("%s: the local provider got a key", tc.model)
		}
	}
	models, err := g.Models(ctx)
	if err != nil || len(models) != 3 || models[1].ID != "cloud:beta-1" {
		t.Fatalf("models: %+v %v", models, err)
	}
}
