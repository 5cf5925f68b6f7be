package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Request is the body of POST /v2/cognitive/generate-text[-stream], as
// @botpress/cognitive 0.5.4 (CognitiveRequest) sends it. Fields the
// gateway has no use for (meta, options, search, a client's userId) are
// accepted and ignored.
type Request struct {
	Model           StringList      `json:"model"`
	Messages        []Message       `json:"messages"`
	Temperature     *float64        `json:"temperature"`
	SystemPrompt    string          `json:"systemPrompt"`
	MaxTokens       *int            `json:"maxTokens"`
	StopSequences   StringList      `json:"stopSequences"`
	Stream          bool            `json:"stream"`
	ResponseFormat  string          `json:"responseFormat"`
	ReasoningEffort string          `json:"reasoningEffort"`
	Tools           []Tool          `json:"tools"`
	ToolControl     *ToolControl    `json:"toolControl"`
	Meta            json.RawMessage `json:"meta"`
}

// StringList is a string or a list of strings on the wire (model,
// stopSequences).
type StringList []string

func (s *StringList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = StringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("a string or a list of strings is expected")
	}
	*s = many
	return nil
}

// Message is one message of a request.
type Message struct {
	Role string `json:"role"` // user, assistant, system
	// Content is a string, a list of parts, or null (an assistant's tool
	// calls).
	Content Content `json:"content"`
	// Type: text, tool_calls, tool_result, multipart.
	Type             string            `json:"type"`
	ToolCalls        []MessageToolCall `json:"toolCalls"`
	ToolResultCallID string            `json:"toolResultCallId"`
}

// Content is a message's content: Text, or Parts when a list was sent.
type Content struct {
	Text  string
	Parts []Part
	// IsParts: the content was a list (even an empty one).
	IsParts bool
}

func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*c = Content{}
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		c.IsParts = true
		return json.Unmarshal(b, &c.Parts)
	}
	return fmt.Errorf("content must be a string, a list of parts or null")
}

// Part is one part of a multipart content.
type Part struct {
	Type     string `json:"type"` // text, image, audio
	Text     string `json:"text"`
	URL      string `json:"url"`
	MimeType string `json:"mimeType"`
}

// MessageToolCall is a tool call of an assistant's message.
type MessageToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// Tool is a tool the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolControl says how the model uses the tools.
type ToolControl struct {
	Mode     string `json:"mode"` // auto, none, required, specific
	ToolName string `json:"toolName"`
	Parallel *bool  `json:"parallel"`
}

// Response is the answer of generate-text (CognitiveResponse).
type Response struct {
	Output    string     `json:"output"`
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	Metadata  Metadata   `json:"metadata"`
}

// ToolCall is a tool call the model asked for.
type ToolCall struct {
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
}

// Metadata describes a completed call (CognitiveMetadata).
type Metadata struct {
	RequestID string `json:"requestId,omitempty"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Usage     Usage  `json:"usage"`
	// Cost is 0: the operator's own models bill no one through the platform.
	Cost       float64 `json:"cost"`
	Cached     bool    `json:"cached"`
	Latency    int64   `json:"latency"`
	TTFT       int64   `json:"ttft,omitempty"`
	StopReason string  `json:"stopReason"`
	// ReasoningEffort is the effort sent upstream, when one was.
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
}

// Usage counts a call's tokens, from the upstream's own counts.
type Usage struct {
	InputTokens  int     `json:"inputTokens"`
	InputCost    float64 `json:"inputCost"`
	OutputTokens int     `json:"outputTokens"`
	OutputCost   float64 `json:"outputCost"`
}

// Chunk is one line of generate-text-stream's NDJSON answer
// (CognitiveStreamChunk): text as it comes, then a last chunk with
// finished, the tool calls and the metadata.
type Chunk struct {
	Output    string     `json:"output,omitempty"`
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	Created   int64      `json:"created"`
	Finished  bool       `json:"finished,omitempty"`
	Metadata  *Metadata  `json:"metadata,omitempty"`
}

// Model is one model of GET /v2/cognitive/models.
type Model struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	Description  string       `json:"description"`
	Aliases      []string     `json:"aliases,omitempty"`
	Tags         []string     `json:"tags"`
	Input        ModelLimits  `json:"input"`
	Output       ModelLimits  `json:"output"`
	Lifecycle    string       `json:"lifecycle"`
	Capabilities Capabilities `json:"capabilities"`
}

// ModelLimits are a model's token limit and (zero) cost of one direction.
type ModelLimits struct {
	MaxTokens       int     `json:"maxTokens"`
	CostPer1MTokens float64 `json:"costPer1MTokens"`
}

// Capabilities say what a model accepts.
type Capabilities struct {
	SupportsImages        bool `json:"supportsImages"`
	SupportsAudio         bool `json:"supportsAudio"`
	SupportsTranscription bool `json:"supportsTranscription"`
	SupportsSearch        bool `json:"supportsSearch"`
}
