package tables

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// canonical re-encodes a JSON value in the one form the platform stores:
// no insignificant space, object members sorted by name, numbers as
// float64 renders them, no HTML escaping. Two equal values have the same
// canonical form, so stored documents can be searched for a value as a
// substring (see Filter.Needles).
func canonical(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the value")
	}
	v, err := normalizeNumbers(v)
	if err != nil {
		return nil, err
	}
	return encode(v), nil
}

// normalizeNumbers turns json.Numbers into float64 (JavaScript's numbers,
// which is what callers of the API have), refusing those out of range.
func normalizeNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			n, err := normalizeNumbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := normalizeNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}

// encode renders a decoded JSON value canonically.
func encode(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // maps of string keys, slices, strings, float64, bools, nil: cannot fail
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// decodeValue decodes a stored (canonical) value. Scalars, which filters
// and searches read from every row, take a fast path.
func decodeValue(raw json.RawMessage) any {
	if n := len(raw); n > 0 {
		switch c := raw[0]; {
		case c == '"':
			if n >= 2 && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 && bytes.IndexByte(raw[1:n-1], '"') < 0 {
				return string(raw[1 : n-1])
			}
		case c == 't' && string(raw) == "true":
			return true
		case c == 'f' && string(raw) == "false":
			return false
		case c == 'n' && string(raw) == "null":
			return nil
		case c == '-' || (c >= '0' && c <= '9'):
			if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
				return f
			}
		}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return v
}

// objectKeys returns the member names of a JSON object in document order
// (maps forget it, and the order of a schema's columns is how missing
// x-zui indexes are numbered).
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonType names the JSON type of a decoded value, for messages.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// quote renders a value shortly for a message.
func quote(v any) string {
	b := encode(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
