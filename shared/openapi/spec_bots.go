package openapi

// applyBotsAndIntegrationsSpec adds to the reference the fields the
// specification (interface 1.108.0) has and the reference (1.70.2) lacks,
// for bots and integrations: a bot's secrets (names in the Bot, values in
// updateBot), a bot's dev flag in updateBot, an integration's signing
// secret (shown to its developers) and maxConcurrency, and maxExecutionTime
// at integration creation.
func applyBotsAndIntegrationsSpec(v any) {
	doc, _ := v.(map[string]any)
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	bodies, _ := comps["requestBodies"].(map[string]any)
	props := func(s any) map[string]any {
		m, _ := s.(map[string]any)
		p, _ := m["properties"].(map[string]any)
		return p
	}
	body := func(op string) map[string]any {
		b, _ := bodies[op+"Body"].(map[string]any)
		c, _ := b["content"].(map[string]any)
		j, _ := c["application/json"].(map[string]any)
		return props(j["schema"])
	}
	set := func(p map[string]any, name string, schema map[string]any) {
		if p != nil {
			if _, ok := p[name]; !ok {
				p[name] = schema
			}
		}
	}
	str := func() map[string]any { return map[string]any{"type": "string"} }
	integer := func() map[string]any { return map[string]any{"type": "integer"} }

	set(props(schemas["Bot"]), "secrets", map[string]any{"type": "array", "items": str()})
	set(body("updateBot"), "secrets", map[string]any{"type": "object", "additionalProperties": map[string]any{"type": []any{"string", "null"}, "maxLength": 20000}})
	set(body("updateBot"), "dev", map[string]any{"type": "boolean"})
	set(props(schemas["Integration"]), "signingSecret", map[string]any{"type": "string", "maxLength": 2000})
	set(props(schemas["Integration"]), "maxConcurrency", integer())
	set(body("createIntegration"), "maxConcurrency", integer())
	set(body("createIntegration"), "maxExecutionTime", integer())
	set(body("updateIntegration"), "maxConcurrency", integer())
	// The dry runs take exactly the bodies of what they validate.
	set(body("validateIntegrationCreation"), "maxConcurrency", integer())
	set(body("validateIntegrationCreation"), "maxExecutionTime", integer())
	set(body("validateIntegrationUpdate"), "maxConcurrency", integer())
}
