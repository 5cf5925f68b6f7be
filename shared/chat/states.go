package chat

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/botforge/platform/shared/platform"
)

// Declaration is a state as a bot definition declares it: what it attaches
// to, the JSON schema of its payload, and its default expiry (milliseconds).
type Declaration struct {
	Type   platform.StateType `json:"type"`
	Schema json.RawMessage    `json:"schema"`
	Expiry *float64           `json:"expiry"`
}

// Declared finds the declaration of state name with type typ among a bot
// definition's states. An unknown type, an undeclared name or a name declared
// with another type is bad input.
func Declared(states map[string]json.RawMessage, typ platform.StateType, name string) (Declaration, error) {
	if !typ.Valid() {
		return Declaration{}, platform.Invalid("unknown state type %q: use conversation, user, bot, integration or workflow", typ)
	}
	raw, ok := states[name]
	if !ok {
		return Declaration{}, platform.Invalid("state %q is not declared in the bot definition", name)
	}
	var d Declaration
	if err := json.Unmarshal(raw, &d); err != nil {
		return Declaration{}, platform.Invalid("the bot definition's state %q is malformed: %v", name, err)
	}
	if d.Type != typ {
		return Declaration{}, platform.Invalid("state %q is declared with type %q, not %q", name, d.Type, typ)
	}
	return d, nil
}

// DefaultExpiry is the declared expiry in whole milliseconds, or nil.
func (d Declaration) DefaultExpiry() *int64 { return ExpiryMillis(d.Expiry) }

// ExpiryMillis rounds an expiry given in milliseconds to a whole number.
func ExpiryMillis(ms *float64) *int64 {
	if ms == nil {
		return nil
	}
	v := int64(math.Ceil(*ms))
	return &v
}

// Validate checks payload (a JSON object) against the declared schema.
func (d Declaration) Validate(name string, payload json.RawMessage) error {
	if len(bytes.TrimSpace(d.Schema)) == 0 {
		return nil
	}
	s, err := compiled(d.Schema)
	if err != nil {
		return platform.Errorf(platform.ErrInvalidJSONSchema, "the declared schema of state %q cannot be used: %v", name, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return platform.Invalid("invalid body: field %q: %v", "payload", err)
	}
	if err := s.Validate(v); err != nil {
		loc, msg := describe(err)
		if loc == "" {
			return platform.Invalid("invalid body: field %q: does not match the schema of state %q: %s", "payload", name, msg)
		}
		return platform.Invalid("invalid body: field %q: does not match the schema of state %q: %s", "payload."+loc, name, msg)
	}
	return nil
}

// Compiled schemas by the SHA-256 of their text: a bot's states are checked
// on every write, and compiling is the expensive part.
var (
	schemaMu    sync.Mutex
	schemaCache = map[[32]byte]*jsonschema.Schema{}
)

const maxCachedSchemas = 1024

func compiled(schema json.RawMessage) (*jsonschema.Schema, error) {
	sum := sha256.Sum256(schema)
	schemaMu.Lock()
	s, ok := schemaCache[sum]
	schemaMu.Unlock()
	if ok {
		return s, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	// Bot definitions carry draft-07 schemas (what zod-to-json-schema
	// writes) unless they say otherwise.
	c.DefaultDraft(jsonschema.Draft7)
	// A schema comes from a caller: it may not make the server read files
	// or URLs through $ref (only the embedded metaschemas resolve).
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const url = "mem:///state-schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err = c.Compile(url)
	if err != nil {
		return nil, err
	}
	schemaMu.Lock()
	if len(schemaCache) >= maxCachedSchemas {
		clear(schemaCache)
	}
	schemaCache[sum] = s
	schemaMu.Unlock()
	return s, nil
}

// describe picks the most specific error of a validation: the one at the
// deepest instance location, as a dotted path and a message.
func describe(err error) (string, string) {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return "", err.Error()
	}
	loc, msg := deepest(ve.BasicOutput())
	return strings.ReplaceAll(strings.TrimPrefix(loc, "/"), "/", "."), msg
}

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

// MergePayload returns old with the top-level keys of patch set to patch's
// values (patchState: only the passed keys change).
func MergePayload(old, patch json.RawMessage) (json.RawMessage, error) {
	merged := map[string]json.RawMessage{}
	if len(old) > 0 {
		if err := json.Unmarshal(old, &merged); err != nil {
			return nil, fmt.Errorf("stored payload: %w", err)
		}
		if merged == nil {
			merged = map[string]json.RawMessage{}
		}
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, platform.Invalid("invalid body: field %q: must be an object", "payload")
	}
	for k, v := range p {
		merged[k] = v
	}
	return json.Marshal(merged)
}
