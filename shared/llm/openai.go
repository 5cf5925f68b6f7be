package llm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// chatRequest is the body of an OpenAI-compatible POST /chat/completions.
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            []chatMessage     `json:"messages"`
	Temperature         *float64          `json:"temperature,omitempty"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Stop                []string          `json:"stop,omitempty"`
	ResponseFormat      *chatFormat       `json:"response_format,omitempty"`
	ReasoningEffort     string            `json:"reasoning_effort,omitempty"`
	Tools               []chatTool        `json:"tools,omitempty"`
	ToolChoice          any               `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       *chatStreamOption `json:"stream_options,omitempty"`
}

type chatStreamOption struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatFormat struct {
	Type string `json:"type"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"` // string, []chatPart or nil
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string        `json:"type"` // text, image_url
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatResponse is the answer of /chat/completions (and, with Delta, one
// event of its stream).
type chatResponse struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
}

type chatChoice struct {
	Message      chatAnswer `json:"message"`
	Delta        chatAnswer `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chatAnswer struct {
	Content *string `json:"content"`
	// Reasoning text, as vLLM (reasoning_content) and others (reasoning)
	// send it.
	ReasoningContent *string        `json:"reasoning_content"`
	Reasoning        *string        `json:"reasoning"`
	ToolCalls        []chatToolCall `json:"tool_calls"`
}

func (a chatAnswer) reasoning() string {
	if a.ReasoningContent != nil {
		return *a.ReasoningContent
	}
	if a.Reasoning != nil {
		return *a.Reasoning
	}
	return ""
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// stopReason maps an OpenAI finish_reason to the cognitive API's.
func stopReason(finish string) string {
	switch finish {
	case "stop":
		return "stop"
	case "length":
		return "max_tokens"
	case "content_filter":
		return "content_filter"
	case "tool_calls", "function_call":
		return "tool_calls"
	}
	return "other"
}

// reasoningModel tells whether an upstream model is one of OpenAI's
// reasoning models: they take reasoning_effort and max_completion_tokens
// (and refuse max_tokens).
func reasoningModel(model string) bool {
	m := model
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5"} {
		if m == p || strings.HasPrefix(m, p+"-") || strings.HasPrefix(m, p+".") {
			return true
		}
	}
	return false
}

// toChat maps a cognitive request to the upstream's body (model already
// resolved; maxTokens already bounded).
func toChat(req *Request, model string, maxTokens *int, completionTokens bool) (*chatRequest, error) {
	out := &chatRequest{Model: model, Temperature: req.Temperature, Stop: req.StopSequences}
	if maxTokens != nil {
		if completionTokens {
			out.MaxCompletionTokens = maxTokens
		} else {
			out.MaxTokens = maxTokens
		}
	}
	if req.SystemPrompt != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: req.SystemPrompt})
	}
	for i, m := range req.Messages {
		cm, err := toChatMessage(m)
		if err != nil {
			return nil, platform.Invalid("messages[%d]: %v", i, err)
		}
		out.Messages = append(out.Messages, cm)
	}
	switch req.ResponseFormat {
	case "", "text":
	case "json", "json_object":
		out.ResponseFormat = &chatFormat{Type: "json_object"}
	default:
		return nil, platform.Invalid("responseFormat %q: text, json or json_object", req.ResponseFormat)
	}
	switch req.ReasoningEffort {
	case "", "none", "dynamic":
		// Nothing to send: "none" is the default of models that do not
		// reason, and "dynamic" leaves the choice to the model.
	case "low", "medium", "high":
		if reasoningModel(model) {
			out.ReasoningEffort = req.ReasoningEffort
		}
	default:
		return nil, platform.Invalid("reasoningEffort %q: low, medium, high, dynamic or none", req.ReasoningEffort)
	}
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, platform.Invalid("tools[%d].name is required", i)
		}
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	if tc := req.ToolControl; tc != nil {
		switch tc.Mode {
		case "auto", "none", "required":
			out.ToolChoice = tc.Mode
		case "specific":
			if tc.ToolName == "" {
				return nil, platform.Invalid("toolControl.toolName is required with mode specific")
			}
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.ToolName}}
		default:
			return nil, platform.Invalid("toolControl.mode %q: auto, none, required or specific", tc.Mode)
		}
		if len(out.Tools) > 0 && tc.Mode != "none" {
			out.ParallelToolCalls = tc.Parallel
		}
	}
	return out, nil
}

func toChatMessage(m Message) (chatMessage, error) {
	switch m.Role {
	case "user", "assistant", "system":
	default:
		return chatMessage{}, fmt.Errorf("role %q: user, assistant or system", m.Role)
	}
	if m.Type == "tool_result" || m.ToolResultCallID != "" {
		if m.ToolResultCallID == "" {
			return chatMessage{}, fmt.Errorf("a tool_result needs toolResultCallId")
		}
		text, err := plainText(m.Content)
		if err != nil {
			return chatMessage{}, err
		}
		return chatMessage{Role: "tool", ToolCallID: m.ToolResultCallID, Content: text}, nil
	}
	cm := chatMessage{Role: m.Role}
	if m.Content.IsParts {
		parts := make([]chatPart, 0, len(m.Content.Parts))
		for j, p := range m.Content.Parts {
			switch p.Type {
			case "text":
				parts = append(parts, chatPart{Type: "text", Text: p.Text})
			case "image":
				if p.URL == "" {
					return chatMessage{}, fmt.Errorf("content[%d]: an image part needs its url", j)
				}
				parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: p.URL}})
			case "audio":
				return chatMessage{}, fmt.Errorf("content[%d]: audio parts are not supported by this platform's providers", j)
			default:
				return chatMessage{}, fmt.Errorf("content[%d].type %q: text or image", j, p.Type)
			}
		}
		cm.Content = parts
	} else if m.Content.Text != "" || len(m.ToolCalls) == 0 {
		cm.Content = m.Content.Text
	}
	for j, tc := range m.ToolCalls {
		if m.Role != "assistant" {
			return chatMessage{}, fmt.Errorf("only an assistant's message has toolCalls")
		}
		args := "{}"
		if a := strings.TrimSpace(string(tc.Function.Arguments)); a != "" && a != "null" {
			if a[0] == '"' { // already a JSON string of the arguments
				if err := json.Unmarshal(tc.Function.Arguments, &args); err != nil {
					return chatMessage{}, fmt.Errorf("toolCalls[%d].function.arguments: %v", j, err)
				}
			} else {
				args = a
			}
		}
		c := chatToolCall{ID: tc.ID, Type: "function"}
		c.Function.Name, c.Function.Arguments = tc.Function.Name, args
		cm.ToolCalls = append(cm.ToolCalls, c)
	}
	return cm, nil
}

func plainText(c Content) (string, error) {
	if !c.IsParts {
		return c.Text, nil
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Type != "text" {
			return "", fmt.Errorf("a tool result holds text only")
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// toolCalls maps an answer's tool calls (arguments: a JSON string).
func toolCalls(in []chatToolCall) []ToolCall {
	var out []ToolCall
	for _, c := range in {
		input := map[string]any{}
		if strings.TrimSpace(c.Function.Arguments) != "" {
			// Arguments that are not a JSON object are passed as one field:
			// the bot sees what the model wrote.
			if err := json.Unmarshal([]byte(c.Function.Arguments), &input); err != nil {
				input = map[string]any{"_raw": c.Function.Arguments}
			}
		}
		out = append(out, ToolCall{ID: c.ID, Name: c.Function.Name, Input: input})
	}
	return out
}

// estimateTokens is a rough count of a request's prompt tokens (4 bytes a
// token, a few per message): enough to refuse a prompt far beyond a
// model's context before calling it. The upstream's own refusal of a
// prompt just over it is mapped to the same 400.
func estimateTokens(c *chatRequest) int {
	n := 0
	for _, m := range c.Messages {
		n += 4
		switch v := m.Content.(type) {
		case string:
			n += len(v) / 4
		case []chatPart:
			for _, p := range v {
				n += len(p.Text) / 4
				if p.ImageURL != nil {
					n += 85 // a low-detail image's tokens at OpenAI
				}
			}
		}
		for _, t := range m.ToolCalls {
			n += len(t.Function.Arguments) / 4
		}
	}
	for _, t := range c.Tools {
		n += (len(t.Function.Description) + len(t.Function.Parameters)) / 4
	}
	return n
}
