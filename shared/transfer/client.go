// Package transfer exports a workspace or a bot from any Botpress-compatible
// API into a portable archive (shared/archive), using only the operations
// the official client calls, and imports an archive into this platform
// through its admin import operation (docs/export-import.md).
package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls an API with a token (a personal access token, or a bot's).
type Client struct {
	URL   string
	Token string
	HTTP  *http.Client
	// Header, when set, is sent instead of the bearer token: the
	// credentials of a console's request (a session cookie with its CSRF
	// token, or its Authorization), for a job run on its behalf (jobs.go).
	Header http.Header
}

// APIError is an API's error answer.
type APIError struct {
	Status int
	Code   string
	Type   string
	Msg    string
	Op     string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.Op, e.Status, e.Type, e.Msg)
}

// NotFound tells whether err is the API's 404.
func NotFound(err error) bool {
	e, ok := err.(*APIError)
	return ok && e.Status == http.StatusNotFound
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 5 * time.Minute}
}

// headers scope a call: the workspace and, for Chat/Tables/Files, the bot.
type headers struct{ ws, bot string }

// do makes one call and decodes its JSON answer into out (nil: discarded).
// Transient failures (5xx other than 501, 429, a broken connection) are
// retried a few times: an export of hours must survive a blip.
func (c *Client) do(ctx context.Context, h headers, method, path string, body, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return err
		}
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 200 * time.Millisecond):
			}
		}
		var rd io.Reader
		if raw != nil {
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
		if err != nil {
			return err
		}
		if c.Header != nil {
			for k, v := range c.Header {
				req.Header[k] = v
			}
		} else {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if h.ws != "" {
			req.Header.Set("x-workspace-id", h.ws)
		}
		if h.bot != "" {
			req.Header.Set("x-bot-id", h.bot)
		}
		resp, err := c.http().Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			last = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode >= 300 {
			var e struct{ Code, Type, Message string }
			json.Unmarshal(b, &e)
			ae := &APIError{Status: resp.StatusCode, Type: e.Type, Msg: e.Message, Op: method + " " + path}
			if e.Message == "" {
				ae.Msg = strings.TrimSpace(string(b))
			}
			if resp.StatusCode == 429 || (resp.StatusCode >= 500 && resp.StatusCode != 501) {
				last = ae
				continue
			}
			return ae
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		return nil
	}
	return last
}

// download streams a file's contents from its url to fn.
func (c *Client) download(ctx context.Context, u string, fn func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("download %s: %s", redact(u), resp.Status)
	}
	return fn(resp.Body)
}

func redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// page is a list answer's meta.
type page struct {
	Meta struct {
		NextToken string `json:"nextToken"`
	} `json:"meta"`
}

func withToken(path, token string) string {
	if token == "" {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "nextToken=" + url.QueryEscape(token)
}
