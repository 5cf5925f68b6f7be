package localdynamo

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/truora/minidyn/types"
)

// decodeStored decodes an item as the store holds it: the wire JSON
// appendItemJSON wrote. A reader of that one shape (no whitespace, one
// type per value) takes it without encoding/json's reflection, the most
// of a read's cost once the in-process path took JSON off the wire; any
// other input (whitespace, an escape it does not know, a surrogate pair,
// invalid UTF-8, a value of no or two types) goes to encoding/json, so
// the result is always json.Unmarshal's (TestDecodeStoredAsJSON).
func decodeStored(b []byte) (item, error) {
	p := storedParser{b: b}
	if it, ok := p.item(); ok && p.i == len(b) {
		return it, nil
	}
	var it item
	err := json.Unmarshal(b, &it)
	return it, err
}

type storedParser struct {
	b []byte
	i int
}

func (p *storedParser) next(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *storedParser) item() (item, bool) {
	if !p.next('{') {
		return nil, false
	}
	it := item{}
	if p.next('}') {
		return it, true
	}
	for {
		k, ok := p.str()
		if !ok || !p.next(':') {
			return nil, false
		}
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		it[k] = v
		if p.next('}') {
			return it, true
		}
		if !p.next(',') {
			return nil, false
		}
	}
}

func (p *storedParser) value() (*types.Item, bool) {
	if !p.next('{') {
		return nil, false
	}
	typ, ok := p.str()
	if !ok || !p.next(':') {
		return nil, false
	}
	v := &types.Item{}
	switch typ {
	case "S", "N":
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		if typ == "S" {
			v.S = &s
		} else {
			v.N = &s
		}
	case "B":
		b, ok := p.bin()
		if !ok {
			return nil, false
		}
		v.B = b
	case "BOOL", "NULL":
		var f bool
		switch {
		case p.lit("true"):
			f = true
		case p.lit("false"):
		default:
			return nil, false
		}
		if typ == "BOOL" {
			v.BOOL = &f
		} else {
			v.NULL = &f
		}
	case "SS", "NS":
		set := []*string{}
		ok := p.list(func() bool {
			s, ok := p.str()
			set = append(set, &s)
			return ok
		})
		if !ok {
			return nil, false
		}
		if typ == "SS" {
			v.SS = set
		} else {
			v.NS = set
		}
	case "BS":
		v.BS = [][]byte{}
		if !p.list(func() bool {
			b, ok := p.bin()
			v.BS = append(v.BS, b)
			return ok
		}) {
			return nil, false
		}
	case "L":
		v.L = []*types.Item{}
		if !p.list(func() bool {
			e, ok := p.value()
			v.L = append(v.L, e)
			return ok
		}) {
			return nil, false
		}
	case "M":
		m, ok := p.item()
		if !ok {
			return nil, false
		}
		v.M = m
	default:
		return nil, false
	}
	return v, p.next('}')
}

func (p *storedParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// list reads a JSON array, each element with elem.
func (p *storedParser) list(elem func() bool) bool {
	if !p.next('[') {
		return false
	}
	if p.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if p.next(']') {
			return true
		}
		if !p.next(',') {
			return false
		}
	}
}

func (p *storedParser) bin() ([]byte, bool) {
	s, ok := p.str()
	if !ok {
		return nil, false
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(out, []byte(s))
	if err != nil {
		return nil, false
	}
	return out[:n], true
}

// str reads a JSON string: valid UTF-8, the escapes appendString writes
// (\" \\ \n \r \t \uXXXX outside the surrogates).
func (p *storedParser) str() (string, bool) {
	if !p.next('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			raw := p.b[start:p.i]
			p.i++
			if !utf8.Valid(raw) {
				return "", false
			}
			return string(raw), true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// escaped finishes a string that has escapes, from start.
func (p *storedParser) escaped(start int) (string, bool) {
	out := make([]byte, 0, p.i-start+16)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		switch e := p.b[p.i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			if p.i+6 > len(p.b) {
				return "", false
			}
			r, err := strconv.ParseUint(string(p.b[p.i+2:p.i+6]), 16, 32)
			if err != nil || r >= 0xD800 && r < 0xE000 {
				return "", false // a surrogate: encoding/json's
			}
			out = utf8.AppendRune(out, rune(r))
			p.i += 4
		default:
			return "", false
		}
		p.i += 2
	}
	return "", false
}
