package assistant

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Options say which platform to deploy to and what the assistant is.
type Options struct {
	APIURL    string // the platform's API, e.g. http://127.0.0.1:8080
	Token     string // a personal access token (developer role or above)
	Workspace string // workspace id; empty: the caller's only workspace
	Name      string
	// Documents are files uploaded and indexed as the assistant's knowledge
	// base (one knowledge base, its files tagged kbId).
	Documents []string
	Settings  Settings
	// Progress, when set, gets one line per step (the command passes its
	// stderr when that is a terminal).
	Progress io.Writer
	// IndexTimeout bounds the wait for a document's indexing (on AWS it
	// follows the upload's S3 event); default 5 minutes.
	IndexTimeout time.Duration
	HTTP         *http.Client
}

// Result is what was deployed.
type Result struct {
	WorkspaceID     string     `json:"workspaceId"` // created when the account had none
	BotID           string     `json:"botId"`
	KnowledgeBaseID string     `json:"knowledgeBaseId,omitempty"`
	WebchatURL      string     `json:"webchatUrl"`
	Documents       []Document `json:"documents,omitempty"`
}

// Document is one uploaded document and how its indexing ended.
type Document struct {
	Path   string `json:"path"`
	FileID string `json:"fileId"`
	Key    string `json:"key"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// APIError is an error answer of the platform, in the API's error shape.
type APIError struct {
	Status  int
	Type    string
	Message string
	Op      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.Op, e.Status, e.Type, e.Message)
}

type client struct {
	base, token string
	http        *http.Client
}

func (c *client) do(ctx context.Context, op, method, path string, hdr map[string]string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if res.StatusCode >= 300 {
		e := &APIError{Status: res.StatusCode, Op: op}
		var shape struct{ Type, Message string }
		if json.Unmarshal(b, &shape) == nil && shape.Message != "" {
			e.Type, e.Message = shape.Type, shape.Message
		} else {
			e.Message = strings.TrimSpace(string(b))
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: the answer is not the expected JSON: %w", op, err)
		}
	}
	return nil
}

// Create deploys an assistant: a bot with the assistant's code and
// settings, its documents uploaded and indexed as its knowledge base, the
// built-in webchat installed (and hitl when Settings.Handover), and answers
// the bot's id and its hosted webchat page. Public API calls only, so it
// works against a local platform and an AWS deployment alike.
func Create(ctx context.Context, o Options) (res *Result, err error) {
	if strings.TrimSpace(o.Name) == "" {
		return nil, errors.New("a name is required")
	}
	if o.APIURL == "" || o.Token == "" {
		return nil, errors.New("the API URL and a token are required")
	}
	base, err := url.Parse(o.APIURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("the API URL %q is not an http(s) URL", o.APIURL)
	}
	// Read every document before anything is created: a missing file is
	// the user's mistake, not a half-made bot.
	type doc struct {
		path, key string
		data      []byte
	}
	var docs []doc
	keys := map[string]bool{}
	for _, p := range o.Documents {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("document: %w", err)
		}
		key := filepath.Base(p)
		for i := 2; keys[key]; i++ {
			ext := filepath.Ext(filepath.Base(p))
			key = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(filepath.Base(p), ext), i, ext)
		}
		keys[key] = true
		docs = append(docs, doc{p, key, b})
	}
	hc := o.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	c := &client{base: strings.TrimRight(o.APIURL, "/"), token: o.Token, http: hc}
	say := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", a...)
		}
	}
	// The model is checked before anything is created: a typo is the
	// user's mistake, not a bot that fails at its first message.
	if err := c.checkModel(ctx, o.Settings.Model, say); err != nil {
		return nil, err
	}
	res = &Result{WorkspaceID: o.Workspace}
	madeWorkspace := false

	if res.WorkspaceID == "" {
		var ws struct {
			Workspaces []struct{ ID, Name string } `json:"workspaces"`
		}
		if err := c.do(ctx, "listWorkspaces", "GET", "/v1/admin/workspaces", nil, nil, &ws); err != nil {
			return nil, err
		}
		switch len(ws.Workspaces) {
		case 0:
			// A fresh platform (make run): the first account has none yet.
			var w struct{ ID string }
			if err := c.do(ctx, "createWorkspace", "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "Assistants"}, &w); err != nil {
				return nil, err
			}
			res.WorkspaceID = w.ID
			madeWorkspace = true
			say("created workspace %s (Assistants)", w.ID)
		case 1:
			res.WorkspaceID = ws.Workspaces[0].ID
		default:
			var names []string
			for _, w := range ws.Workspaces {
				names = append(names, fmt.Sprintf("%s (%s)", w.ID, w.Name))
			}
			return nil, fmt.Errorf("the token's account has %d workspaces, name one with --workspace: %s", len(names), strings.Join(names, ", "))
		}
	}
	wsh := map[string]string{"x-workspace-id": res.WorkspaceID}
	s := o.Settings

	var created struct {
		Bot struct{ ID string } `json:"bot"`
	}
	if err := c.do(ctx, "createBot", "POST", "/v1/admin/bots", wsh, map[string]any{"name": o.Name, "tags": map[string]string{"assistant": "v1"}}, &created); err != nil {
		return nil, err
	}
	res.BotID = created.Bot.ID
	say("created bot %s (%s)", res.BotID, o.Name)
	// From here a failure deletes the bot (and the workspace made for
	// it): a failed create leaves nothing half-made behind. (The returns
	// below set res to nil before this runs: the ids are kept here.)
	botID, wsID := res.BotID, res.WorkspaceID
	defer func() {
		if err == nil {
			return
		}
		// The caller's context may be what failed: the clean-up gets its own.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := c.do(cctx, "deleteBot", "DELETE", "/v1/admin/bots/"+botID, wsh, nil, nil); derr != nil {
			err = fmt.Errorf("%w (and the bot %s it had created could not be deleted: %v)", err, botID, derr)
			res = nil
			return
		}
		if madeWorkspace {
			if derr := c.do(cctx, "deleteWorkspace", "DELETE", "/v1/admin/workspaces/"+wsID, nil, nil, nil); derr != nil {
				err = fmt.Errorf("%w (the bot %s it had created was deleted; its workspace %s could not be: %v)", err, botID, wsID, derr)
				res = nil
				return
			}
		}
		err = fmt.Errorf("%w (the bot %s it had created was deleted)", err, botID)
		res = nil
	}()
	bh := map[string]string{"x-bot-id": res.BotID}

	if len(docs) > 0 {
		var kb struct {
			KnowledgeBase struct{ ID string } `json:"knowledgeBase"`
		}
		if err := c.do(ctx, "createKnowledgeBase", "POST", "/v1/files/knowledge-bases", bh, map[string]any{"name": o.Name + " documents"}, &kb); err != nil {
			return nil, err
		}
		res.KnowledgeBaseID = kb.KnowledgeBase.ID
		s.KBIDs = append([]string{res.KnowledgeBaseID}, s.KBIDs...)
		for _, d := range docs {
			got, err := c.upload(ctx, bh, d.key, d.data, res.KnowledgeBaseID, o.IndexTimeout)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.path, err)
			}
			got.Path = d.path
			res.Documents = append(res.Documents, got)
			if got.Reason != "" {
				say("%s: %s (%s)", d.path, got.Status, got.Reason)
			} else {
				say("%s: %s", d.path, got.Status)
			}
		}
	}

	integrations := map[string]any{}
	for _, name := range []string{"webchat", "hitl"} {
		if name == "hitl" && !s.Handover {
			continue
		}
		var hub struct {
			Integration struct{ ID string } `json:"integration"`
		}
		if err := c.do(ctx, "getPublicIntegration "+name, "GET", "/v1/admin/hub/integrations/"+name+"/latest", wsh, nil, &hub); err != nil {
			return nil, err
		}
		integrations[hub.Integration.ID] = map[string]any{"enabled": true, "configuration": map[string]any{}}
	}
	body := Definition()
	body["code"] = Code
	body["configuration"] = map[string]any{"data": s}
	body["integrations"] = integrations
	if err := c.do(ctx, "updateBot", "PUT", "/v1/admin/bots/"+res.BotID, wsh, body, nil); err != nil {
		return nil, err
	}
	say("deployed the assistant's code (version %s)", Version())

	var page struct{ Code string }
	if err := c.do(ctx, "getBotWebchat", "GET", "/v1/admin/bots/"+res.BotID+"/webchat?type=sharableUrl", wsh, nil, &page); err != nil {
		return nil, err
	}
	res.WebchatURL = page.Code
	return res, nil
}

// checkModel refuses a model that is none of the platform's (an id, an
// alias, or a model's name: GET /v1/admin/assistant/models). On a platform
// with no model nothing is checked: the assistant deploys and tells its
// users so. An id of a provider the platform does not list is let through:
// the cognitive API answers it with its default model when the provider is
// one it knows (docs/llm.md).
func (c *client) checkModel(ctx context.Context, model string, say func(string, ...any)) error {
	var m struct {
		Available bool
		Reason    string
		Models    []struct {
			ID, Name string
			Aliases  []string
		}
	}
	if err := c.do(ctx, "listAssistantModels", "GET", "/v1/admin/assistant/models", nil, nil, &m); err != nil {
		return err
	}
	if !m.Available {
		say("no model: %s", m.Reason)
		return nil
	}
	switch model {
	case "", "auto", "best", "fast":
		return nil
	}
	providers := map[string]bool{}
	var ids []string
	for _, x := range m.Models {
		if x.ID == model || x.Name == model || slices.Contains(x.Aliases, model) {
			return nil
		}
		p, _, _ := strings.Cut(x.ID, ":")
		providers[p] = true
		ids = append(ids, x.ID)
	}
	if p, _, ok := strings.Cut(model, ":"); ok && !providers[p] {
		return nil
	}
	return fmt.Errorf("the model %q is not one of this platform's models (best, fast, %s)", model, strings.Join(ids, ", "))
}

// upload uploads one document into the knowledge base, indexed, and waits
// for its indexing to end (at once locally; on AWS after the S3 event).
func (c *client) upload(ctx context.Context, bh map[string]string, key string, data []byte, kbID string, timeout time.Duration) (Document, error) {
	var f struct {
		File struct {
			ID, Key, UploadURL, ContentType, Status, FailedStatusReason string
		} `json:"file"`
	}
	if err := c.do(ctx, "upsertFile", "PUT", "/v1/files", bh, map[string]any{
		"key": key, "size": len(data), "index": true, "tags": map[string]string{"kbId": kbID},
	}, &f); err != nil {
		return Document{}, err
	}
	req, err := http.NewRequestWithContext(ctx, "PUT", f.File.UploadURL, bytes.NewReader(data))
	if err != nil {
		return Document{}, err
	}
	req.ContentLength = int64(len(data))
	req.Header.Set("Content-Type", f.File.ContentType)
	put, err := c.http.Do(req)
	if err != nil {
		return Document{}, fmt.Errorf("upload: %w", err)
	}
	msg, _ := io.ReadAll(io.LimitReader(put.Body, 4096))
	put.Body.Close()
	if put.StatusCode >= 300 {
		return Document{}, fmt.Errorf("upload: %d %s", put.StatusCode, strings.TrimSpace(string(msg)))
	}
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := c.do(ctx, "getFile", "GET", "/v1/files/"+f.File.ID, bh, nil, &f); err != nil {
			return Document{}, err
		}
		switch f.File.Status {
		case "indexing_completed", "indexing_failed", "upload_failed":
			return Document{FileID: f.File.ID, Key: f.File.Key, Status: f.File.Status, Reason: f.File.FailedStatusReason}, nil
		}
		if time.Now().After(deadline) {
			return Document{}, fmt.Errorf("not indexed within %s (status %s)", timeout, f.File.Status)
		}
		select {
		case <-ctx.Done():
			return Document{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
