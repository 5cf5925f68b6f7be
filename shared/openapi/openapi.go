// Package openapi validates request bodies against the reference API's
// OpenAPI document (Botpress API 1.70.2, MIT, embedded as reference.json), so
// every operation rejects wrong types, missing required fields and unknown
// fields the same way, with a message naming the field.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/botforge/platform/shared/platform"
)

//go:embed reference.json
var referenceJSON []byte

const docURL = "mem:///reference.json"

var (
	loadOnce sync.Once
	doc      map[string]any
	loadErr  error

	mu       sync.Mutex
	compiled = map[string]*jsonschema.Schema{}
)

// Document returns the parsed reference document with OpenAPI 3.0's
// `nullable` rewritten to JSON Schema (a "null" type), for tests and tools.
func Document() (map[string]any, error) {
	loadOnce.Do(func() {
		var v any
		if loadErr = json.Unmarshal(referenceJSON, &v); loadErr != nil {
			return
		}
		rewriteNullable(v)
		applySpec(v)
		applyTablesSpec(v)
		applyBotsAndIntegrationsSpec(v)
		applyChatSpec(v)
		doc, _ = v.(map[string]any)
	})
	return doc, loadErr
}

func rewriteNullable(v any) {
	switch x := v.(type) {
	case map[string]any:
		if x["nullable"] == true {
			if t, ok := x["type"].(string); ok {
				x["type"] = []any{t, "null"}
			}
			if e, ok := x["enum"].([]any); ok {
				x["enum"] = append(e, nil)
			}
		}
		for _, c := range x {
			rewriteNullable(c)
		}
	case []any:
		for _, c := range x {
			rewriteNullable(c)
		}
	}
}

// schema compiles (once) the schema at a JSON pointer of the document.
func schema(pointer string) (*jsonschema.Schema, error) {
	mu.Lock()
	defer mu.Unlock()
	if s, ok := compiled[pointer]; ok {
		return s, nil
	}
	d, err := Document()
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	if err := c.AddResource(docURL, d); err != nil {
		return nil, err
	}
	s, err := c.Compile(docURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	compiled[pointer] = s
	return s, nil
}

// HasBody reports whether the reference declares a JSON body for operation op.
func HasBody(op string) bool {
	d, err := Document()
	if err != nil {
		return false
	}
	rb, _ := d["components"].(map[string]any)["requestBodies"].(map[string]any)
	_, ok := rb[op+"Body"]
	return ok
}

// ValidateBody checks a decoded JSON body (decoded with UseNumber) against
// the request body schema of operation op. The error is an InvalidPayload
// naming the first offending field.
func ValidateBody(op string, body any) error {
	if !HasBody(op) {
		return nil
	}
	s, err := schema("/components/requestBodies/" + op + "Body/content/application~1json/schema")
	if err != nil {
		return fmt.Errorf("compile body schema of %s: %w", op, err)
	}
	return asInvalid("body", s.Validate(body))
}

// ValidateResponse checks a response body against the reference's response
// schema of operation op (used by tests).
func ValidateResponse(op string, body any) error {
	s, err := schema("/components/responses/" + op + "Response/content/application~1json/schema")
	if err != nil {
		return err
	}
	return asInvalid("response", s.Validate(body))
}

func asInvalid(what string, err error) error {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err
	}
	loc, msg := deepest(ve.BasicOutput())
	field := strings.TrimPrefix(loc, "/")
	if field == "" {
		return platform.Invalid("invalid %s: %s", what, msg)
	}
	return platform.Invalid("invalid %s: field %q: %s", what, strings.ReplaceAll(field, "/", "."), msg)
}

// deepest picks the most specific error of a validation result: the one at
// the longest instance location.
func deepest(u *jsonschema.OutputUnit) (string, string) {
	loc, msg := u.InstanceLocation, ""
	if u.Error != nil {
		msg = u.Error.String()
	}
	for i := range u.Errors {
		l, m := deepest(&u.Errors[i])
		if m != "" && (msg == "" || len(l) > len(loc)) {
			loc, msg = l, m
		}
	}
	return loc, msg
}

// applySpec patches the reference where the specification says otherwise:
// a state's type may also be integration or workflow.
func applySpec(v any) {
	switch x := v.(type) {
	case map[string]any:
		if e, ok := x["enum"].([]any); ok && len(e) == 4 && e[0] == "conversation" && e[1] == "user" && e[2] == "bot" && e[3] == "task" {
			x["enum"] = append(e, "integration", "workflow")
		}
		for _, c := range x {
			applySpec(c)
		}
	case []any:
		for _, c := range x {
			applySpec(c)
		}
	}
}
