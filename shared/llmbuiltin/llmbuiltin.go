// Package llmbuiltin is the built-in public integration "llm": the hub's
// llm interface (generateContent, listLanguageModels) on the operator's
// providers (shared/llm), for the clients that reach LLMs through an
// integration's actions (a plain `new Cognitive({ client })`,
// @botpress/zai) rather than the cognitive API. Install it under the alias
// "openai": plain Cognitive looks for its models under the aliases
// google-ai, anthropic, openai, cerebras, fireworks-ai and groq
// (docs/llm.md).
package llmbuiltin

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/hubstd"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/platform"
)

// Name and Version of the integration; the interface it implements.
const (
	Name             = "llm"
	Version          = "1.0.0"
	interfaceName    = "llm"
	interfaceVersion = "11.0.0"
)

// Integration answers the llm interface's actions with a gateway.
type Integration struct {
	// Gateway makes the calls; nil answers that no provider is configured.
	Gateway *llm.Gateway
	// Meter, when set, refuses a call past the bot's token quota and
	// counts each completed one (the usage counters).
	Meter llm.Meter
}

var _ builtin.Actor = (*Integration)(nil)

// Definition publishes the llm interface's actions and entity, with the
// interface's own schemas (shared/hubstd), the entity references resolved
// and the input left open to extra fields (clients send some: a userId, a
// serialized AbortSignal).
func (i *Integration) Definition() platform.Integration {
	iface, entity, _ := hubstd.Interface(interfaceName, interfaceVersion, "modelRef")
	actions := map[string]json.RawMessage{}
	for name, raw := range iface.Actions {
		var a map[string]any
		if json.Unmarshal(raw, &a) != nil {
			continue
		}
		a = hubstd.ResolveRefs(a, map[string]any{"modelRef": entity}).(map[string]any)
		if in, ok := a["input"].(map[string]any); ok {
			in["schema"] = open(in["schema"])
		}
		actions[name], _ = json.Marshal(a)
	}
	ref, _ := json.Marshal(map[string]any{
		"id": hubstd.InterfaceID(interfaceName, interfaceVersion), "name": interfaceName, "version": interfaceVersion,
		"entities": map[string]any{"modelRef": map[string]any{"name": "modelRef"}},
		"actions":  map[string]any{"generateContent": map[string]any{"name": "generateContent"}, "listLanguageModels": map[string]any{"name": "listLanguageModels"}},
		"events":   map[string]any{}, "channels": map[string]any{},
	})
	return platform.Integration{
		Name: Name, Version: Version, Title: "LLM",
		Description: "The operator's own language models (any OpenAI-compatible endpoint) for the bots of this platform: the llm interface. Install it under the alias openai.",
		Actions:     actions,
		Entities:    map[string]json.RawMessage{"modelRef": iface.Entities["modelRef"]},
		Interfaces:  map[string]json.RawMessage{interfaceName: ref},
	}
}

// open lets an object schema take properties it does not name.
func open(v any) any {
	if m, ok := v.(map[string]any); ok {
		delete(m, "additionalProperties")
	}
	return v
}

// RunAction answers generateContent and listLanguageModels.
func (i *Integration) RunAction(ctx context.Context, in builtin.Install, action string, input json.RawMessage) (json.RawMessage, error) {
	switch action {
	case "generateContent":
		var gi generateInput
		if err := json.Unmarshal(input, &gi); err != nil {
			return nil, platform.Invalid("generateContent input: %v", err)
		}
		req, err := gi.request()
		if err != nil {
			return nil, err
		}
		if i.Meter != nil {
			if err := i.Meter.LLMRoom(ctx, in.Bot.ID); err != nil {
				return nil, err
			}
		}
		res, err := i.Gateway.Generate(ctx, req)
		if err != nil {
			return nil, err
		}
		if i.Meter != nil {
			// The tokens are spent: a failure to count does not fail the call.
			_ = i.Meter.CountLLM(ctx, in.Bot.ID, res.Metadata.Model, int64(res.Metadata.Usage.InputTokens), int64(res.Metadata.Usage.OutputTokens))
		}
		return json.Marshal(output(res, i.Gateway.DefaultProvider()))
	case "listLanguageModels":
		models, err := i.Gateway.Models(ctx)
		if err != nil {
			return nil, err
		}
		first := i.Gateway.DefaultProvider()
		out := make([]map[string]any, 0, len(models))
		for _, m := range models {
			out = append(out, map[string]any{
				"id": localID(m.ID, first), "name": m.Name, "description": m.Description, "tags": m.Tags,
				"input":  map[string]any{"maxTokens": m.Input.MaxTokens, "costPer1MTokens": 0},
				"output": map[string]any{"maxTokens": m.Output.MaxTokens, "costPer1MTokens": 0},
			})
		}
		return json.Marshal(map[string]any{"models": out})
	}
	return nil, platform.Invalid("the llm integration has no action %q", action)
}

// localID is a model's id for this integration: the first provider's
// models by their own name (Cognitive refers to them as
// "<alias>:<id>", e.g. openai:llama3), the others' with their provider.
func localID(id, first string) string {
	if m, ok := strings.CutPrefix(id, first+":"); ok {
		return m
	}
	return id
}

// generateInput is the llm interface's generateContent input.
type generateInput struct {
	Model *struct {
		ID string `json:"id"`
	} `json:"model"`
	ReasoningEffort string        `json:"reasoningEffort"`
	SystemPrompt    string        `json:"systemPrompt"`
	Messages        []llm.Message `json:"messages"`
	ResponseFormat  string        `json:"responseFormat"`
	MaxTokens       *int          `json:"maxTokens"`
	Temperature     *float64      `json:"temperature"`
	StopSequences   []string      `json:"stopSequences"`
	Tools           []struct {
		Type     string `json:"type"`
		Function struct {
			Name            string          `json:"name"`
			Description     string          `json:"description"`
			ArgumentsSchema json.RawMessage `json:"argumentsSchema"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice *struct {
		Type         string `json:"type"`
		FunctionName string `json:"functionName"`
	} `json:"toolChoice"`
}

func (g generateInput) request() (*llm.Request, error) {
	req := &llm.Request{
		SystemPrompt: g.SystemPrompt, Messages: g.Messages, MaxTokens: g.MaxTokens, Temperature: g.Temperature,
		StopSequences: g.StopSequences, ResponseFormat: g.ResponseFormat, ReasoningEffort: g.ReasoningEffort,
	}
	if g.Model != nil && g.Model.ID != "" {
		req.Model = llm.StringList{g.Model.ID}
	}
	for _, t := range g.Tools {
		req.Tools = append(req.Tools, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.ArgumentsSchema})
	}
	if tc := g.ToolChoice; tc != nil {
		switch tc.Type {
		case "", "auto":
			if tc.Type == "auto" {
				req.ToolControl = &llm.ToolControl{Mode: "auto"}
			}
		case "none":
			req.ToolControl = &llm.ToolControl{Mode: "none"}
		case "any":
			req.ToolControl = &llm.ToolControl{Mode: "required"}
		case "specific":
			req.ToolControl = &llm.ToolControl{Mode: "specific", ToolName: tc.FunctionName}
		default:
			return nil, platform.Invalid("toolChoice.type %q: auto, specific, any or none", tc.Type)
		}
	}
	return req, nil
}

// output is the llm interface's generateContent output.
func output(res *llm.Response, first string) map[string]any {
	choice := map[string]any{"role": "assistant", "index": 0, "stopReason": res.Metadata.StopReason, "type": "text", "content": res.Output}
	if len(res.ToolCalls) > 0 {
		calls := make([]map[string]any, 0, len(res.ToolCalls))
		for _, c := range res.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Input}})
		}
		choice["type"], choice["toolCalls"] = "tool_calls", calls
		if res.Output == "" {
			choice["content"] = nil
		}
	}
	id := res.Metadata.RequestID
	if id == "" {
		id = platform.NewID("resp_")
	}
	return map[string]any{
		"id": id, "provider": res.Metadata.Provider, "model": localID(res.Metadata.Model, first),
		"choices":  []any{choice},
		"usage":    map[string]any{"inputTokens": res.Metadata.Usage.InputTokens, "inputCost": 0, "outputTokens": res.Metadata.Usage.OutputTokens, "outputCost": 0},
		"botpress": map[string]any{"cost": 0},
	}
}
