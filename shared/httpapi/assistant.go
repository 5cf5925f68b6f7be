package httpapi

import "github.com/botforge/platform/shared/assistant"

// The assistant bot the platform ships (docs/assistant.md): its code for
// the console's "New assistant", which deploys it with updateBot like any
// bot's code. Not in the reference API (the platform's own operation).
func (s *server) assistantRoutes() []route {
	return []route{
		// Any signed-in account: the code is the platform's, not a secret.
		{pattern: "GET /v1/admin/assistant", op: "getAssistantCode", scope: scopeAccount, handle: s.getAssistantCode},
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
