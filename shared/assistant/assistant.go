// Package assistant is the assistant bot the platform ships
// (docs/assistant.md): its code, built from bot/assistant.js on the official
// SDK by scripts/assistant/build.mjs and embedded here so that the binary
// deploys the same bot locally and on AWS, its settings (the bot's
// configuration), and Create, which deploys one to any running platform
// through the public API (the `assistant create` command).
package assistant

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
)

// Code is the bot's CommonJS bundle, deployed as a bot's code (updateBot).
//
//go:embed bot.cjs
var Code string

//go:embed bot/defaults.json
var defaultsJSON []byte

// Version names the bundle: the first 12 hex digits of its SHA-256.
func Version() string {
	sum := sha256.Sum256([]byte(Code))
	return hex.EncodeToString(sum[:])[:12]
}

// Settings are the bot's configuration (configuration.data): what it
// answers with, from which documents. The bot reads them at every message,
// so an edit applies to the next one.
type Settings struct {
	Instructions    string            `json:"instructions"`
	Model           string            `json:"model"`
	Temperature     float64           `json:"temperature"`
	MaxTokens       int               `json:"maxTokens"`
	KBIDs           []string          `json:"kbIds"`
	FileTags        map[string]string `json:"fileTags"`
	Passages        int               `json:"passages"`
	CiteSources     bool              `json:"citeSources"`
	FallbackMessage string            `json:"fallbackMessage"`
	HistoryMessages int               `json:"historyMessages"`
	Handover        bool              `json:"handover"`
	HitlAlias       string            `json:"hitlAlias"`
}

// Defaults are the settings a new assistant starts from (bot/defaults.json,
// which the bot's code bundles too).
func Defaults() Settings {
	var s Settings
	if err := json.Unmarshal(defaultsJSON, &s); err != nil {
		panic("assistant: bot/defaults.json: " + err.Error())
	}
	return s
}

// DefaultsJSON is bot/defaults.json as it is.
func DefaultsJSON() json.RawMessage { return json.RawMessage(defaultsJSON) }

// MaxExecutionTime is the bot's maxExecutionTime (seconds): a turn waits
// for the model, which may take longer than the platform's default of 10 s
// to answer (on AWS the LLM timeout is 25 s); a delivery cut short would be
// retried.
const MaxExecutionTime = 60

// Definition is what updateBot must declare besides the code: the time a
// turn may take, and for the handover to a human the hitl plugin's state
// and tags (prefixed as the SDK prefixes a plugin's: docs/hitl.md).
func Definition() map[string]any {
	tag := map[string]any{}
	return map[string]any{
		"maxExecutionTime": MaxExecutionTime,
		"states": map[string]any{"hitl#hitl": map[string]any{"type": "conversation",
			"schema": map[string]any{"type": "object", "properties": map[string]any{"hitlActive": map[string]any{"type": "boolean"}}}}},
		"conversation": map[string]any{"tags": map[string]any{"hitl#downstream": tag, "hitl#upstream": tag, "hitl#humanAgentId": tag}},
		"user":         map[string]any{"tags": map[string]any{"hitl#downstream": tag, "hitl#upstream": tag}},
	}
}
