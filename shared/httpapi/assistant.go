package httpapi

import (
	"errors"

	"github.com/botforge/platform/shared/assistant"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/platform"
)

// The assistant bot the platform ships (docs/assistant.md): its code for
// the console's "New assistant", which deploys it with updateBot like any
// bot's code, and the models it may answer with. Not in the reference API
// (the platform's own operations).
func (s *server) assistantRoutes() []route {
	return []route{
		// Any signed-in account: the code is the platform's, not a secret.
		{pattern: "GET /v1/admin/assistant", op: "getAssistantCode", scope: scopeAccount, handle: s.getAssistantCode},
		// The models before any bot exists (listCognitiveModels needs one),
		// so that a new assistant's model is chosen, and checked, before
		// it is created.
		{pattern: "GET /v1/admin/assistant/models", op: "listAssistantModels", scope: scopeAccount, handle: s.listAssistantModels},
	}
}

func (s *server) getAssistantCode(c *call) (any, error) {
	return map[string]any{
		"version":    assistant.Version(),
		"code":       assistant.Code,
		"defaults":   assistant.DefaultsJSON(),
		"definition": assistant.Definition(),
	}, nil
}

// listAssistantModels answers listCognitiveModels' list, or, on a platform
// with no model, available:false and the setting to make (the assistant
// still deploys: it tells its users no model is configured).
func (s *server) listAssistantModels(c *call) (any, error) {
	models, err := s.LLM.Models(c.ctx)
	var pe *platform.Error
	if errors.Is(err, llm.ErrNotConfigured) && errors.As(err, &pe) {
		return map[string]any{"available": false, "reason": pe.Message, "models": []llm.Model{}}, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"available": true, "models": models}, nil
}
