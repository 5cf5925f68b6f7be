package httpapi

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/platform"
)

// A bot's LLM calls (docs/llm-calls.md): each cognitive API call is
// recorded (model, tokens, latency, the conversation its meta names) and
// listed for the console's emulator, which shows them under each turn.

func (s *server) llmCallRoutes() []route {
	return []route{
		{pattern: "GET /v1/admin/bots/{id}/llm-calls", op: "listBotLlmCalls", scope: scopeWorkspace, role: platform.RoleViewer, botSelf: true, handle: s.listBotLLMCalls},
	}
}

const (
	defaultLLMCallPage = 50
	maxLLMCallPage     = 100
)

// listBotLLMCalls pages a bot's LLM calls newest first; conversationId
// keeps those naming it, since (RFC 3339) those made after it.
func (s *server) listBotLLMCalls(c *call) (any, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	q := c.query()
	var v [4]string
	for i, name := range []string{"conversationId", "since", "limit", "nextToken"} {
		if v[i], err = q.str(name); err != nil {
			return nil, err
		}
	}
	conv, since, limit, tok := v[0], v[1], v[2], v[3]
	if len(conv) > 200 {
		return nil, platform.Invalid("query parameter \"conversationId\" is longer than 200 characters")
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			return nil, platform.Invalid("query parameter \"since\" must be an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)")
		}
		since = platform.FormatTime(t)
	}
	n := defaultLLMCallPage
	if limit != "" {
		if n, err = strconv.Atoi(limit); err != nil || n < 1 || n > maxLLMCallPage {
			return nil, platform.Invalid("query parameter \"limit\" must be an integer from 1 to %d", maxLLMCallPage)
		}
	}
	list := b.ID + "|" + conv + "|" + since
	p := dynamo.Page{Limit: int32(n)}
	if tok != "" {
		if p.Start, err = c.s.pager.decode(c.op+"|"+list, tok); err != nil {
			return nil, err
		}
	}
	calls, next, err := s.Store.ListLLMCalls(c.ctx, b.ID, since, conv, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"calls": calls, "meta": c.meta(list, next)}, nil
}

// recordLLMCall records a cognitive call of the calling bot. A failure to
// record is logged: it never fails the call.
func (s *server) recordLLMCall(c *call, req *llm.Request, start time.Time, md *llm.Metadata, callErr error) {
	if c.bot.ID == "" {
		return
	}
	rec := platform.LLMCall{ID: platform.NewID("llmcall_"), CreatedAt: platform.FormatTime(start), Operation: c.op,
		LatencyMs: time.Since(start).Milliseconds(), Status: "ok"}
	if req != nil {
		if len(req.Model) > 0 {
			rec.Model = req.Model[0]
		}
		var meta struct {
			ConversationID any `json:"conversationId"`
			PromptSource   any `json:"promptSource"`
		}
		if len(req.Meta) > 0 && json.Unmarshal(req.Meta, &meta) == nil {
			rec.ConversationID = shortString(meta.ConversationID, 200)
			rec.PromptSource = shortString(meta.PromptSource, 200)
		}
	}
	if md != nil {
		if md.Model != "" {
			rec.Model = md.Model
		}
		rec.InputTokens, rec.OutputTokens, rec.StopReason = md.Usage.InputTokens, md.Usage.OutputTokens, md.StopReason
	}
	if callErr != nil {
		rec.Status, rec.Error = "error", shortString(callErr.Error(), 500)
	}
	rec.Model = shortString(rec.Model, 200)
	// The call's own context may be cancelled (a client gone mid-stream):
	// the record is still written, within a bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
	defer cancel()
	if err := s.Store.RecordLLMCall(ctx, c.bot.ID, rec); err != nil {
		s.Logger.WarnContext(c.ctx, "LLM call not recorded", "bot", c.bot.ID, "err", err)
	}
}

// shortString is v when it is a string, cut to max bytes.
func shortString(v any, max int) string {
	s, _ := v.(string)
	if len(s) > max {
		s = s[:max]
	}
	return s
}
