package openapi

// applyChatSpec adds to the reference what the specification (interface
// 1.108.0) says more about the Chat API: a conversation's messageCount
// (always present) and properties, a state's expiry and expiresAt, and the
// meta.created flag of getOrCreateConversation.
func applyChatSpec(v any) {
	doc, _ := v.(map[string]any)
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	responses, _ := comps["responses"].(map[string]any)
	object := func(s any) map[string]any {
		m, _ := s.(map[string]any)
		return m
	}
	props := func(s map[string]any) map[string]any {
		p, _ := s["properties"].(map[string]any)
		return p
	}
	set := func(s map[string]any, name string, schema map[string]any, required bool) {
		p := props(s)
		if p == nil {
			return
		}
		if _, ok := p[name]; !ok {
			p[name] = schema
		}
		if required {
			req, _ := s["required"].([]any)
			for _, r := range req {
				if r == name {
					return
				}
			}
			s["required"] = append(req, name)
		}
	}
	response := func(op string) map[string]any {
		r := object(responses[op+"Response"])
		c := object(r["content"])
		return object(object(c["application/json"])["schema"])
	}

	conv := object(schemas["Conversation"])
	set(conv, "messageCount", map[string]any{"type": "integer", "minimum": 0}, true)
	set(conv, "properties", map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}, false)

	state := object(schemas["State"])
	set(state, "expiry", map[string]any{"type": "integer", "minimum": 1}, false)
	set(state, "expiresAt", map[string]any{"type": "string", "format": "date-time"}, false)

	set(response("getOrCreateConversation"), "meta", map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"created": map[string]any{"type": "boolean"}},
		"required":             []any{"created"},
		"additionalProperties": false,
	}, true)
}
