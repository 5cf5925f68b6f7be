package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/platform"
)

// The cognitive API (docs/llm.md): a bot's LLM calls, forwarded by the
// gateway (shared/llm) to the operator's OpenAI-compatible providers. It
// is not in the reference API (@botpress/cognitive calls it on the bot's
// apiUrl), so bodies are checked by the gateway, not a reference schema.

// maxCognitiveBody caps a prompt: a model's whole context (128k tokens of
// text is about 512 KiB) with room; images travel by URL.
const maxCognitiveBody = 8 << 20

// cognitiveRoutes are the operations answered as JSON.
func (s *server) cognitiveRoutes() []route {
	r := func(pattern, op string, h func(*call) (any, error)) route {
		return route{pattern: pattern, op: op, scope: scopeBot, role: platform.RoleDeveloper, ownBody: true, maxBody: maxCognitiveBody, handle: h}
	}
	return []route{
		r("POST /v2/cognitive/generate-text", "generateText", s.generateText),
		r("GET /v2/cognitive/models", "listCognitiveModels", s.listCognitiveModels),
	}
}

// streamRoute is an operation whose answer is written as it is made.
type streamRoute struct {
	route
	// stream answers the call on w. An error before it wrote anything is
	// answered in the API's error shape; after, the connection is cut.
	stream func(c *call, w *streamWriter) error
}

func (s *server) cognitiveStreamRoutes() []streamRoute {
	return []streamRoute{{
		route:  route{pattern: "POST /v2/cognitive/generate-text-stream", op: "generateTextStream", scope: scopeBot, role: platform.RoleDeveloper, ownBody: true, maxBody: maxCognitiveBody},
		stream: s.generateTextStream,
	}}
}

func (s *server) streamHandler(sr streamRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, usage := dynamo.WithUsage(r.Context())
		c := &call{Request: r.WithContext(ctx), ctx: ctx, s: s, op: sr.op}
		sw := &streamWriter{w: w}
		rt := sr.route
		rt.handle = func(c *call) (any, error) { return nil, sr.stream(c, sw) }
		_, err := s.serve(w, c, rt)
		if s.OnUsage != nil {
			s.OnUsage(rt.op, usage)
		}
		if err == nil {
			return
		}
		if !sw.started {
			s.writeError(w, r, err)
			return
		}
		// The status is sent: cut the connection so the client sees a
		// broken stream, never a short one that looks complete.
		s.Logger.WarnContext(ctx, "stream interrupted", "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	})
}

// streamWriter writes NDJSON lines, each flushed as it is written.
type streamWriter struct {
	w       http.ResponseWriter
	started bool
}

func (sw *streamWriter) line(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	if !sw.started {
		sw.started = true
		sw.w.Header().Set("Content-Type", "application/x-ndjson")
		sw.w.Header().Set("Cache-Control", "no-cache")
		sw.w.WriteHeader(http.StatusOK)
	}
	if _, err := sw.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return http.NewResponseController(sw.w).Flush()
}

func (c *call) cognitiveRequest() (*llm.Request, error) {
	var req llm.Request
	if err := json.Unmarshal(c.body, &req); err != nil {
		return nil, platform.Invalid("invalid body: %v", err)
	}
	return &req, nil
}

func (s *server) generateText(c *call) (_ any, err error) {
	req, err := c.cognitiveRequest()
	if err != nil {
		return nil, err
	}
	// The console's record of the call (llm_calls.go), refused or not
	// (err is the result: what the caller gets).
	start, md := time.Now(), (*llm.Metadata)(nil)
	defer func() { s.recordLLMCall(c, req, start, md, err) }()
	if err := s.Store.LLMRoom(c.ctx, c.bot.ID); err != nil {
		return nil, err
	}
	res, err := s.LLM.Generate(c.ctx, req)
	if err != nil {
		return nil, err
	}
	md = &res.Metadata
	s.countLLM(c, res.Metadata)
	return res, nil
}

func (s *server) generateTextStream(c *call, w *streamWriter) (err error) {
	req, err := c.cognitiveRequest()
	if err != nil {
		return err
	}
	// The console's record of the call (llm_calls.go), refused or not
	// (err is the result: what the caller gets).
	start, md := time.Now(), (*llm.Metadata)(nil)
	defer func() { s.recordLLMCall(c, req, start, md, err) }()
	if err := s.Store.LLMRoom(c.ctx, c.bot.ID); err != nil {
		return err
	}
	return s.LLM.Stream(c.ctx, req, func(ch llm.Chunk) error {
		if ch.Finished && ch.Metadata != nil {
			md = ch.Metadata
			s.countLLM(c, *ch.Metadata)
		}
		return w.line(ch)
	})
}

// countLLM counts a completed call in the bot's usage. The tokens are
// spent: a failure to count is logged, the answer still given.
func (s *server) countLLM(c *call, md llm.Metadata) {
	if err := s.Store.CountLLM(c.ctx, c.bot.ID, md.Model, int64(md.Usage.InputTokens), int64(md.Usage.OutputTokens)); err != nil {
		s.Logger.ErrorContext(c.ctx, "counting an LLM call", "bot", c.bot.ID, "err", err)
	}
}

func (s *server) listCognitiveModels(c *call) (any, error) {
	models, err := s.LLM.Models(c.ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"models": models}, nil
}
