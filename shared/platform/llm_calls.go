package platform

import "time"

// LLMCall is the record of one of a bot's cognitive API calls
// (generate-text, generate-text-stream), listed by listBotLlmCalls for the
// console's emulator (docs/llm-calls.md).
type LLMCall struct {
	ID        string `json:"id"`
	CreatedAt string `json:"createdAt"`
	// Operation is generateText or generateTextStream.
	Operation string `json:"operation"`
	// Model is the model that answered (<provider>:<model>), or the one
	// asked for when the call failed.
	Model        string `json:"model"`
	InputTokens  int    `json:"inputTokens"`
	OutputTokens int    `json:"outputTokens"`
	// LatencyMs is the time the platform took to answer (to the end of a
	// stream), upstream included.
	LatencyMs int64 `json:"latencyMs"`
	// ConversationID is the conversation the caller named in the
	// request's meta (meta.conversationId), if any.
	ConversationID string `json:"conversationId,omitempty"`
	// PromptSource is meta.promptSource, as @botpress/cognitive sends it.
	PromptSource string `json:"promptSource,omitempty"`
	StopReason   string `json:"stopReason,omitempty"`
	// Status is "ok" or "error" (then Error says why).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Bounds of the LLM call records: a ring of MaxLLMCallsPerBot per bot,
// each kept at most LLMCallRetention.
const (
	MaxLLMCallsPerBot = 500
	LLMCallRetention  = 7 * 24 * time.Hour
)
