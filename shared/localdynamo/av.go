package localdynamo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/truora/minidyn/types"
)

// item is a DynamoDB item: attribute name to value. Values use minidyn's
// types.Item, the representation its expression interpreter works on.
type item = map[string]*types.Item

// maxItemSize is DynamoDB's item size limit (400 KB).
const maxItemSize = 400 * 1024

// wireItem is an item of a request: its wire JSON (the HTTP path), or its
// values converted from the SDK's (the in-process path, inprocess.go).
type wireItem struct {
	raw json.RawMessage
	it  item // with set: the values
	set bool
}

func (w *wireItem) UnmarshalJSON(b []byte) error {
	w.raw = append(json.RawMessage(nil), b...)
	return nil
}

// present tells whether the request has the item (null is none).
func (w wireItem) present() bool { return w.set || len(w.raw) > 0 && string(w.raw) != "null" }

// jsonItem is an item of an answer: the HTTP path encodes it as wire JSON
// (appendItemJSON), the in-process path converts it to the SDK's values.
type jsonItem item

func (j jsonItem) MarshalJSON() ([]byte, error) { return appendItemJSON(nil, item(j)), nil }

// decodeItem parses an item of a request and checks every value.
func decodeItem(w wireItem) (item, error) {
	it := w.it
	if !w.set {
		raw := w.raw
		if len(raw) == 0 || string(raw) == "null" {
			return nil, nil
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, fmt.Errorf("invalid item: %v", err)
		}
	}
	for _, v := range it {
		if err := checkValue(v); err != nil {
			return nil, err
		}
	}
	return it, nil
}

// checkValue enforces DynamoDB's rules for one attribute value: exactly one
// data type, no empty or duplicate sets, valid numbers.
func checkValue(v *types.Item) error {
	if v == nil {
		return fmt.Errorf("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	}
	n := 0
	for _, set := range []bool{v.B != nil, v.BOOL != nil, v.BS != nil, v.L != nil, v.M != nil, v.N != nil, v.NS != nil, v.NULL != nil, v.S != nil, v.SS != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return fmt.Errorf("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	case n > 1:
		return fmt.Errorf("Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes")
	}
	switch {
	case v.NULL != nil && !*v.NULL:
		return fmt.Errorf("One or more parameter values were invalid: Null attribute value types must have the value of true")
	case v.N != nil:
		if _, err := parseNumber(*v.N); err != nil {
			return err
		}
	case v.SS != nil:
		if len(v.SS) == 0 {
			return fmt.Errorf("One or more parameter values were invalid: An string set  may not be empty")
		}
		seen := map[string]bool{}
		for _, s := range v.SS {
			if s == nil || seen[*s] {
				return fmt.Errorf("One or more parameter values were invalid: Input collection contains duplicates")
			}
			seen[*s] = true
		}
	case v.NS != nil:
		if len(v.NS) == 0 {
			return fmt.Errorf("One or more parameter values were invalid: An number set  may not be empty")
		}
		seen := map[string]bool{}
		for _, s := range v.NS {
			if s == nil {
				return fmt.Errorf("One or more parameter values were invalid: a number set member is null")
			}
			d, err := parseNumber(*s)
			if err != nil {
				return err
			}
			if k := string(d.key()); seen[k] {
				return fmt.Errorf("One or more parameter values were invalid: Input collection contains duplicates")
			} else {
				seen[k] = true
			}
		}
	case v.BS != nil:
		if len(v.BS) == 0 {
			return fmt.Errorf("One or more parameter values were invalid: Binary sets should not be empty")
		}
		for i := range v.BS {
			for j := i + 1; j < len(v.BS); j++ {
				if bytes.Equal(v.BS[i], v.BS[j]) {
					return fmt.Errorf("One or more parameter values were invalid: Input collection contains duplicates")
				}
			}
		}
	case v.L != nil:
		for _, e := range v.L {
			if err := checkValue(e); err != nil {
				return err
			}
		}
	case v.M != nil:
		for _, e := range v.M {
			if err := checkValue(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// itemSize approximates DynamoDB's item size: attribute names plus values.
func itemSize(it item) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v *types.Item) int {
	switch {
	case v == nil:
		return 0
	case v.S != nil:
		return len(*v.S)
	case v.N != nil:
		return len(*v.N)/2 + 1
	case v.B != nil:
		return len(v.B)
	case v.BOOL != nil, v.NULL != nil:
		return 1
	case v.SS != nil:
		n := 0
		for _, s := range v.SS {
			n += len(*s)
		}
		return n
	case v.NS != nil:
		n := 0
		for _, s := range v.NS {
			n += len(*s)/2 + 1
		}
		return n
	case v.BS != nil:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	case v.L != nil:
		n := 3
		for _, e := range v.L {
			n += 1 + valueSize(e)
		}
		return n
	case v.M != nil:
		n := 3
		for k, e := range v.M {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// typeOf returns the DynamoDB type name of a value ("S", "N", ...).
func typeOf(v *types.Item) string {
	switch {
	case v == nil:
		return ""
	case v.S != nil:
		return "S"
	case v.N != nil:
		return "N"
	case v.B != nil:
		return "B"
	case v.BOOL != nil:
		return "BOOL"
	case v.NULL != nil:
		return "NULL"
	case v.SS != nil:
		return "SS"
	case v.NS != nil:
		return "NS"
	case v.BS != nil:
		return "BS"
	case v.L != nil:
		return "L"
	case v.M != nil:
		return "M"
	}
	return ""
}

// appendItemJSON appends the wire JSON of an item, attributes in name order
// (so that equal items encode equally).
func appendItemJSON(b []byte, it item) []byte {
	b = append(b, '{')
	names := make([]string, 0, len(it))
	for k := range it {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendValueJSON(b, it[k])
	}
	return append(b, '}')
}

func itemJSON(it item) json.RawMessage { return appendItemJSON(nil, it) }

func appendValueJSON(b []byte, v *types.Item) []byte {
	switch {
	case v == nil:
		return append(b, `{"NULL":true}`...)
	case v.S != nil:
		b = append(b, `{"S":`...)
		b = appendString(b, *v.S)
	case v.N != nil:
		b = append(b, `{"N":`...)
		b = appendString(b, *v.N)
	case v.B != nil:
		b = append(b, `{"B":"`...)
		b = base64.StdEncoding.AppendEncode(b, v.B)
		b = append(b, '"')
	case v.BOOL != nil:
		b = append(b, `{"BOOL":`...)
		b = strconv.AppendBool(b, *v.BOOL)
	case v.NULL != nil:
		b = append(b, `{"NULL":true`...)
	case v.SS != nil, v.NS != nil:
		set, name := v.SS, "SS"
		if v.NS != nil {
			set, name = v.NS, "NS"
		}
		b = append(b, `{"`+name+`":[`...)
		for i, s := range set {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, *s)
		}
		b = append(b, ']')
	case v.BS != nil:
		b = append(b, `{"BS":[`...)
		for i, s := range v.BS {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, s)
			b = append(b, '"')
		}
		b = append(b, ']')
	case v.L != nil:
		b = append(b, `{"L":[`...)
		for i, e := range v.L {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValueJSON(b, e)
		}
		b = append(b, ']')
	case v.M != nil:
		b = append(b, `{"M":`...)
		b = appendItemJSON(b, v.M)
	default:
		return append(b, `{"NULL":true}`...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string. Invalid UTF-8 is replaced, as
// encoding/json does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// cloneItem returns a deep copy of an item.
func cloneItem(it item) item {
	if it == nil {
		return nil
	}
	out := make(item, len(it))
	for k, v := range it {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v *types.Item) *types.Item {
	if v == nil {
		return nil
	}
	c := *v
	if v.L != nil {
		c.L = make([]*types.Item, len(v.L))
		for i, e := range v.L {
			c.L[i] = cloneValue(e)
		}
	}
	if v.M != nil {
		c.M = cloneItem(v.M)
	}
	return &c
}

// valuesEqual reports whether two values are the same DynamoDB value.
func valuesEqual(a, b *types.Item) bool {
	return bytes.Equal(appendValueJSON(nil, a), appendValueJSON(nil, b))
}
