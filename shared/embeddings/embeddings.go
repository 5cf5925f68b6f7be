// Package embeddings is the client of the operator's embeddings model: an
// OpenAI-compatible POST /embeddings, on the LLM provider's endpoint
// (PLATFORM_LLM_URL) or its own (PLATFORM_EMBEDDINGS_URL). Knowledge-base
// indexing embeds passages with it and searchFiles embeds the query
// (docs/files.md, "Semantic search"). Without PLATFORM_EMBEDDINGS_MODEL
// there is no client and search stays lexical.
package embeddings

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Environment variables (README, docs/files.md).
const (
	EnvModel   = "PLATFORM_EMBEDDINGS_MODEL"
	EnvURL     = "PLATFORM_EMBEDDINGS_URL"
	EnvAPIKey  = "PLATFORM_EMBEDDINGS_API_KEY"
	EnvTimeout = "PLATFORM_EMBEDDINGS_TIMEOUT"
	// EnvAPIKeyParameter names an SSM SecureString parameter holding the
	// key (AWS: the key is never in the template or the environment).
	EnvAPIKeyParameter = "PLATFORM_EMBEDDINGS_API_KEY_PARAMETER"
	// The LLM provider's endpoint and key, used when the embeddings have
	// none of their own.
	envLLMURL    = "PLATFORM_LLM_URL"
	envLLMAPIKey = "PLATFORM_LLM_API_KEY"
)

// Limits of the client.
const (
	// DefaultTimeout bounds one attempt (one batch).
	DefaultTimeout = 30 * time.Second
	// MaxAttempts bounds the calls of one batch (the first and retries).
	MaxAttempts = 3
	// BatchSize is the inputs of one POST /embeddings.
	BatchSize = 64
	// MaxInputBytes cuts each input (passages are at most a few thousand
	// characters; an oversized one would fail the whole batch).
	MaxInputBytes = 8000
	// MaxDims bounds the dimensions of a vector the platform stores.
	MaxDims = 4096
)

// Config of the client.
type Config struct {
	Model   string
	URL     string // base URL ending in /v1
	APIKey  string
	Timeout time.Duration
}

// FromEnv reads the configuration; ok is false when no model is set.
// secret reads the key from PLATFORM_EMBEDDINGS_API_KEY_PARAMETER's
// parameter (nil: none can be read here).
func FromEnv(get func(string) string, secret func(name string) (string, error)) (c Config, ok bool, err error) {
	c.Model = strings.TrimSpace(get(EnvModel))
	if c.Model == "" {
		return c, false, nil
	}
	c.URL, c.APIKey = strings.TrimSpace(get(EnvURL)), get(EnvAPIKey)
	if c.URL == "" {
		c.URL = strings.TrimSpace(get(envLLMURL))
		if c.APIKey == "" {
			c.APIKey = get(envLLMAPIKey)
		}
	}
	if name := strings.TrimSpace(get(EnvAPIKeyParameter)); name != "" && c.APIKey == "" {
		if secret == nil {
			return c, false, fmt.Errorf("%s=%q: parameters are read on AWS only; set %s here", EnvAPIKeyParameter, name, EnvAPIKey)
		}
		if c.APIKey, err = secret(name); err != nil {
			return c, false, fmt.Errorf("%s=%q: reading the key: %w", EnvAPIKeyParameter, name, err)
		}
	}
	if c.URL == "" {
		return c, false, fmt.Errorf("%s is set but no endpoint: set %s (or %s) to an OpenAI-compatible base URL ending in /v1", EnvModel, EnvURL, envLLMURL)
	}
	u, perr := url.Parse(c.URL)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, false, fmt.Errorf("embeddings url %q is not an http(s) URL (a base URL ending in /v1)", c.URL)
	}
	c.URL = strings.TrimRight(c.URL, "/")
	c.Timeout = DefaultTimeout
	if s := strings.TrimSpace(get(EnvTimeout)); s != "" {
		d, perr := time.ParseDuration(s)
		if perr != nil || d <= 0 {
			return c, false, fmt.Errorf("%s=%q: a positive duration is expected (e.g. 30s)", EnvTimeout, s)
		}
		c.Timeout = d
	}
	return c, true, nil
}

// Client embeds texts with the configured model.
type Client struct {
	cfg  Config
	http *http.Client
}

// New returns a client; hc nil is http.DefaultClient.
func New(cfg Config, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Client{cfg: cfg, http: hc}
}

// Model is the embeddings model's id.
func (c *Client) Model() string { return c.cfg.Model }

// Embed returns one vector per text, in order, calling the endpoint in
// batches of BatchSize. All vectors have the same dimensions.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for i := 0; i < len(texts); i += BatchSize {
		batch := texts[i:min(i+BatchSize, len(texts))]
		vs, err := c.batch(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	for _, v := range out {
		if len(v) != len(out[0]) {
			return nil, fmt.Errorf("embeddings model %q answered vectors of %d and %d dimensions", c.cfg.Model, len(out[0]), len(v))
		}
	}
	return out, nil
}

// Error is a failure of the embeddings endpoint (after the retries). Its
// text names the model, not the endpoint: it is shown to bot developers
// (a file's failedStatusReason).
type Error struct {
	Model, Message string
	Attempts       int
}

func (e *Error) Error() string {
	if e.Attempts > 1 {
		return fmt.Sprintf("embeddings model %q: %s (after %d attempts)", e.Model, e.Message, e.Attempts)
	}
	return fmt.Sprintf("embeddings model %q: %s", e.Model, e.Message)
}

func (c *Client) batch(ctx context.Context, texts []string) ([][]float32, error) {
	in := make([]string, len(texts))
	for i, t := range texts {
		if len(t) > MaxInputBytes {
			t = strings.ToValidUTF8(t[:MaxInputBytes], "")
		}
		if strings.TrimSpace(t) == "" {
			t = " " // some servers refuse empty inputs
		}
		in[i] = t
	}
	body, err := json.Marshal(map[string]any{"model": c.cfg.Model, "input": in})
	if err != nil {
		return nil, err
	}
	var last string
	attempt := 1
	for ; attempt <= MaxAttempts; attempt++ {
		if attempt > 1 {
			wait := time.Duration(100*(1<<(attempt-2))) * time.Millisecond // 100 ms, 200 ms
			select {
			case <-ctx.Done():
				return nil, &Error{Model: c.cfg.Model, Message: ctx.Err().Error(), Attempts: attempt - 1}
			case <-time.After(wait):
			}
		}
		vs, retry, err := c.attempt(ctx, body, len(texts))
		if err == nil {
			return vs, nil
		}
		last = err.Error()
		if !retry || ctx.Err() != nil || attempt == MaxAttempts {
			break
		}
	}
	return nil, &Error{Model: c.cfg.Model, Message: last, Attempts: attempt}
}

func (c *Client) attempt(ctx context.Context, body []byte, n int) (_ [][]float32, retry bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, true, fmt.Errorf("no answer within %s", c.cfg.Timeout)
		}
		return nil, true, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return nil, true, err
	}
	if res.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(raw))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		retry := res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500
		return nil, retry, fmt.Errorf("answered %d: %s", res.StatusCode, msg)
	}
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, false, fmt.Errorf("answer is not an embeddings list: %v", err)
	}
	if len(out.Data) != n {
		return nil, false, fmt.Errorf("answered %d vectors for %d inputs", len(out.Data), n)
	}
	vs := make([][]float32, n)
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= n || vs[d.Index] != nil {
			return nil, false, fmt.Errorf("answer has a bad or repeated index %d", d.Index)
		}
		if len(d.Embedding) == 0 || len(d.Embedding) > MaxDims {
			return nil, false, fmt.Errorf("answered a vector of %d dimensions (1 to %d expected)", len(d.Embedding), MaxDims)
		}
		vs[d.Index] = d.Embedding
	}
	return vs, false, nil
}
