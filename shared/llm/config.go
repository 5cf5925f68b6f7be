// Package llm is the platform's LLM gateway: the operator's OpenAI-compatible
// providers (configuration, model lists, aliases) and the calls of the
// cognitive API (/v2/cognitive/*) forwarded to their /chat/completions,
// with the request and answer mapped between the two shapes
// (docs/llm.md). It holds no storage and no HTTP routes: the HTTP layer
// (shared/httpapi/cognitive.go) authenticates the bot and calls it.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the gateway (README, docs/llm.md).
const (
	EnvURL             = "PLATFORM_LLM_URL"
	EnvAPIKey          = "PLATFORM_LLM_API_KEY"
	EnvProvider        = "PLATFORM_LLM_PROVIDER"
	EnvModels          = "PLATFORM_LLM_MODELS"
	EnvTimeout         = "PLATFORM_LLM_TIMEOUT"
	EnvInputMaxTokens  = "PLATFORM_LLM_INPUT_MAX_TOKENS"
	EnvOutputMaxTokens = "PLATFORM_LLM_OUTPUT_MAX_TOKENS"
	EnvConfig          = "PLATFORM_LLM_CONFIG"
)

// Defaults of the gateway's settings.
const (
	DefaultProvider        = "openai"
	DefaultTimeout         = 60 * time.Second
	DefaultInputMaxTokens  = 128000
	DefaultOutputMaxTokens = 4096
	// MaxAttempts bounds the upstream calls one request makes (the first
	// and its retries).
	MaxAttempts = 3
)

// KnownProviders are the provider prefixes of the model ids the official
// clients send (@botpress/cognitive's model table): an id with one of them
// that the operator did not map goes to the default model.
var KnownProviders = []string{"openai", "anthropic", "google-ai", "groq", "cerebras", "fireworks-ai", "xai", "openrouter"}

// Meter keeps the bots' LLM usage (the platform's usage counters,
// dynamo.Store): LLMRoom refuses a call past the operator's token quota
// (403 QuotaExceeded) before the provider is called; CountLLM counts a
// completed call's tokens for the bot and model.
type Meter interface {
	LLMRoom(ctx context.Context, bot string) error
	CountLLM(ctx context.Context, bot, model string, in, out int64) error
}

// Provider is one OpenAI-compatible endpoint of the operator.
type Provider struct {
	// Name prefixes its models' ids (<name>:<model>); default "openai".
	Name string `json:"name"`
	// URL is the base URL, ending in /v1 (…/v1/models, …/v1/chat/completions).
	URL string `json:"url"`
	// APIKey is sent as a bearer token (optional: a local vLLM or Ollama
	// needs none). APIKeyEnv names an environment variable holding it
	// instead (config files: keep keys out of them).
	APIKey    string `json:"apiKey,omitempty"`
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// InputMaxTokens is the context of its models; OutputMaxTokens the
	// most a reply may hold (a larger maxTokens is lowered to it).
	InputMaxTokens  int `json:"inputMaxTokens,omitempty"`
	OutputMaxTokens int `json:"outputMaxTokens,omitempty"`
	// MaxCompletionTokens: send max_completion_tokens instead of
	// max_tokens (OpenAI's reasoning models want it; the gateway also
	// switches by itself when an upstream refuses max_tokens).
	MaxCompletionTokens bool `json:"maxCompletionTokens,omitempty"`
}

// Config is the gateway's configuration.
type Config struct {
	Providers []Provider `json:"providers"`
	// Models maps a client's model id (e.g. "openai:gpt-4o", "best") to an
	// upstream model: "<provider>:<model>" or a model of the first provider.
	Models map[string]string `json:"models,omitempty"`
	// Timeout bounds each upstream attempt (a stream: the wait for each
	// piece of it).
	Timeout time.Duration `json:"-"`
}

// Configured tells whether a provider is set.
func (c Config) Configured() bool { return len(c.Providers) > 0 }

// FromEnv reads the configuration from the variables get answers
// (os.Getenv in the platform). PLATFORM_LLM_CONFIG names a JSON file of
// several providers; otherwise PLATFORM_LLM_URL gives the only one. No
// provider at all is a valid configuration: the cognitive API then answers
// that none is configured.
func FromEnv(get func(string) string) (Config, error) {
	c := Config{Timeout: DefaultTimeout}
	if path := strings.TrimSpace(get(EnvConfig)); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("%s: %w", EnvConfig, err)
		}
		var fc struct {
			Config
			Timeout string `json:"timeout"`
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return c, fmt.Errorf("%s %s: %w", EnvConfig, path, err)
		}
		c.Providers, c.Models = fc.Providers, fc.Models
		if fc.Timeout != "" {
			d, err := time.ParseDuration(fc.Timeout)
			if err != nil || d <= 0 {
				return c, fmt.Errorf("%s %s: timeout %q is not a positive duration (e.g. 60s)", EnvConfig, path, fc.Timeout)
			}
			c.Timeout = d
		}
	}
	if u := strings.TrimSpace(get(EnvURL)); u != "" {
		c.Providers = append([]Provider{{
			Name: strings.TrimSpace(get(EnvProvider)), URL: u, APIKey: get(EnvAPIKey),
		}}, c.Providers...)
	}
	for _, n := range []struct {
		env string
		dst func(int)
	}{
		{EnvInputMaxTokens, func(v int) {
			for i := range c.Providers {
				if c.Providers[i].InputMaxTokens == 0 {
					c.Providers[i].InputMaxTokens = v
				}
			}
		}},
		{EnvOutputMaxTokens, func(v int) {
			for i := range c.Providers {
				if c.Providers[i].OutputMaxTokens == 0 {
					c.Providers[i].OutputMaxTokens = v
				}
			}
		}},
	} {
		if s := strings.TrimSpace(get(n.env)); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v <= 0 {
				return c, fmt.Errorf("%s=%q: a positive number of tokens is expected", n.env, s)
			}
			n.dst(v)
		}
	}
	if s := strings.TrimSpace(get(EnvModels)); s != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return c, fmt.Errorf("%s: a JSON object of client model id -> upstream model id is expected: %w", EnvModels, err)
		}
		if c.Models == nil {
			c.Models = map[string]string{}
		}
		for k, v := range m {
			c.Models[k] = v
		}
	}
	if s := strings.TrimSpace(get(EnvTimeout)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s=%q: a positive duration is expected (e.g. 60s)", EnvTimeout, s)
		}
		c.Timeout = d
	}
	return c, c.normalize()
}

// normalize fills defaults and checks the providers.
func (c *Config) normalize() error {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	seen := map[string]bool{}
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.Name == "" {
			p.Name = DefaultProvider
		}
		if strings.ContainsAny(p.Name, ": /") {
			return fmt.Errorf("LLM provider name %q: no ':', '/' or space", p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("LLM provider %q is configured twice", p.Name)
		}
		seen[p.Name] = true
		u, err := url.Parse(p.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("LLM provider %q: url %q is not an http(s) URL (a base URL ending in /v1, e.g. http://127.0.0.1:11434/v1)", p.Name, p.URL)
		}
		p.URL = strings.TrimRight(p.URL, "/")
		if p.APIKey == "" && p.APIKeyEnv != "" {
			p.APIKey = os.Getenv(p.APIKeyEnv)
		}
		if p.InputMaxTokens <= 0 {
			p.InputMaxTokens = DefaultInputMaxTokens
		}
		if p.OutputMaxTokens <= 0 {
			p.OutputMaxTokens = DefaultOutputMaxTokens
		}
	}
	for k, v := range c.Models {
		if strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s: empty model id in %q -> %q", EnvModels, k, v)
		}
	}
	return nil
}
