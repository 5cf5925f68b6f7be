package openapi

// applyTablesSpec patches the reference's Tables API where the
// specification says more: a table schema's additionalProperties is a
// boolean (not only true), duplicateTable answers its job ({id, status}),
// and table jobs may also be of the types of the specification's version
// of the API (duplicate_table, delete_rows).
func applyTablesSpec(v any) {
	doc, _ := v.(map[string]any)
	at := func(m any, path ...string) map[string]any {
		for _, p := range path {
			mm, _ := m.(map[string]any)
			m = mm[p]
		}
		mm, _ := m.(map[string]any)
		return mm
	}
	comps := at(doc, "components")
	if ap := at(comps, "schemas", "Table", "properties", "schema", "properties", "additionalProperties"); ap != nil {
		delete(ap, "enum")
	}
	if props := at(comps, "responses", "duplicateTableResponse", "content", "application/json", "schema", "properties"); props != nil {
		props["job"] = map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"id": map[string]any{"type": "string"}, "status": map[string]any{"type": "string"}},
			"required":             []any{"id", "status"},
			"additionalProperties": false,
		}
	}
	for _, op := range []string{"exportTable", "importTable"} {
		if t := at(comps, "responses", op+"Response", "content", "application/json", "schema", "properties", "job", "properties", "type"); t != nil {
			t["enum"] = []any{"export", "import", "clear_column", "clear_vectors", "delete_rows", "duplicate_table"}
		}
	}
	if t := at(comps, "responses", "getTableJobsResponse", "content", "application/json", "schema", "properties", "jobs", "items", "properties", "type"); t != nil {
		t["enum"] = []any{"export", "import", "clear_column", "clear_vectors", "delete_rows", "duplicate_table"}
	}
}
