package vrl

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

type param struct {
	name     string
	kind     kind
	required bool
	query    bool     // the argument is a path, passed unevaluated
	enum     []string // the argument must be one of these string literals
}

type funcDef struct {
	params   []param
	ret      kind
	retType  func(args []typ) typ
	fallible func(args []typ, nodes []node) bool
	closure  bool
	call     func(r *runner, c *callNode, args []any) (any, error)
}

type absentT struct{}

var absent = absentT{}

func req(name string, k kind) param { return param{name: name, kind: k, required: true} }
func opt(name string, k kind) param { return param{name: name, kind: k} }

func optEnum(name string, vals ...string) param { return param{name: name, kind: kString, enum: vals} }

func always([]typ, []node) bool { return true }

// unless makes a call fallible when argument i may be of a kind outside k.
func unless(i int, k kind) func([]typ, []node) bool {
	return func(args []typ, _ []node) bool { return !args[i].subset(k) }
}

func arrayOf(k kind) func([]typ) typ {
	return func([]typ) typ { return typ{k: kArray, inner: k} }
}

const scalar = kNull | kBool | kInt | kFloat | kString

var functions map[string]*funcDef

func init() {
	str1 := func(f func(string) string) *funcDef {
		return &funcDef{params: []param{req("value", kString)}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) { return f(a[0].(string)), nil }}
	}
	is := func(k kind) *funcDef {
		return &funcDef{params: []param{req("value", kAny)}, ret: kBool,
			call: func(r *runner, c *callNode, a []any) (any, error) { return kindOf(a[0])&k != 0, nil }}
	}
	assertKind := func(k kind) *funcDef {
		return &funcDef{params: []param{req("value", kAny)}, ret: k, fallible: unless(0, k),
			call: func(r *runner, c *callNode, a []any) (any, error) {
				if kindOf(a[0])&k == 0 {
					return nil, fmt.Errorf("expected %s, got %s", k, typeName(a[0]))
				}
				return a[0], nil
			}}
	}
	strPred := func(f func(s, sub string) bool) *funcDef {
		return &funcDef{params: []param{req("value", kString), req("substring", kString), opt("case_sensitive", kBool)}, ret: kBool,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				s, sub := a[0].(string), a[1].(string)
				if a[2] == false {
					s, sub = strings.ToLower(s), strings.ToLower(sub)
				}
				return f(s, sub), nil
			}}
	}
	digest := func(h func() hash.Hash) *funcDef {
		return &funcDef{params: []param{req("value", kString)}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				d := h()
				io.WriteString(d, a[0].(string))
				return hex.EncodeToString(d.Sum(nil)), nil
			}}
	}

	functions = map[string]*funcDef{
		"parse_json": {params: []param{req("value", kString), opt("max_depth", kInt), opt("lossy", kBool)}, ret: kAny, fallible: always,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				s := a[0].(string)
				if err := r.charge(c.p, 2*len(s)); err != nil {
					return nil, err
				}
				v, err := parseJSON(s)
				if err != nil {
					return nil, fmt.Errorf("unable to parse json: %v", err)
				}
				if d, ok := a[1].(int64); ok {
					if d < 1 || d > 128 {
						return nil, errors.New("max_depth value should be greater than 0 and less than 129")
					}
					v = truncateDepth(v, int(d))
				}
				return v, nil
			}},
		"parse_query_string": {params: []param{req("value", kString)}, ret: kObject,
			retType: func([]typ) typ { return typ{k: kObject, inner: kString | kArray} },
			call: func(r *runner, c *callNode, a []any) (any, error) {
				s := a[0].(string)
				if err := r.charge(c.p, 2*len(s)); err != nil {
					return nil, err
				}
				return parseQueryString(s), nil
			}},
		"to_string": {params: []param{req("value", kAny)}, ret: kString, fallible: unless(0, scalar),
			call: func(r *runner, c *callNode, a []any) (any, error) {
				switch v := a[0].(type) {
				case nil:
					return "", nil
				case string:
					return v, nil
				case bool:
					return strconv.FormatBool(v), nil
				case int64:
					return strconv.FormatInt(v, 10), nil
				case float64:
					return strconv.FormatFloat(v, 'f', -1, 64), nil
				}
				return nil, fmt.Errorf("unable to coerce %s into string", typeName(a[0]))
			}},
		"to_int": {params: []param{req("value", kAny)}, ret: kInt, fallible: unless(0, kInt|kFloat|kBool|kNull),
			call: func(r *runner, c *callNode, a []any) (any, error) {
				switch v := a[0].(type) {
				case nil:
					return int64(0), nil
				case bool:
					if v {
						return int64(1), nil
					}
					return int64(0), nil
				case int64:
					return v, nil
				case float64:
					if math.IsNaN(v) || v >= 9.3e18 || v <= -9.3e18 {
						return nil, fmt.Errorf("unable to coerce %v into integer", v)
					}
					return int64(v), nil
				case string:
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("Invalid integer %q", v)
					}
					return n, nil
				}
				return nil, fmt.Errorf("unable to coerce %s into integer", typeName(a[0]))
			}},
		"to_float": {params: []param{req("value", kAny)}, ret: kFloat, fallible: unless(0, kInt|kFloat|kBool|kNull),
			call: func(r *runner, c *callNode, a []any) (any, error) {
				switch v := a[0].(type) {
				case nil:
					return 0.0, nil
				case bool:
					if v {
						return 1.0, nil
					}
					return 0.0, nil
				case int64:
					return float64(v), nil
				case float64:
					return v, nil
				case string:
					f, err := strconv.ParseFloat(v, 64)
					if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
						return nil, fmt.Errorf("Invalid floating point number %q", v)
					}
					return f, nil
				}
				return nil, fmt.Errorf("unable to coerce %s into float", typeName(a[0]))
			}},
		"to_bool": {params: []param{req("value", kAny)}, ret: kBool, fallible: unless(0, kInt|kFloat|kBool|kNull),
			call: func(r *runner, c *callNode, a []any) (any, error) {
				switch v := a[0].(type) {
				case nil:
					return false, nil
				case bool:
					return v, nil
				case int64:
					return v != 0, nil
				case float64:
					return v != 0, nil
				case string:
					switch strings.ToLower(v) {
					case "true", "t", "yes", "y", "1":
						return true, nil
					case "false", "f", "no", "n", "0":
						return false, nil
					}
					return nil, fmt.Errorf("unable to coerce %q into boolean", v)
				}
				return nil, fmt.Errorf("unable to coerce %s into boolean", typeName(a[0]))
			}},
		"string":     assertKind(kString),
		"int":        assertKind(kInt),
		"float":      assertKind(kFloat),
		"bool":       assertKind(kBool),
		"object":     assertKind(kObject),
		"array":      assertKind(kArray),
		"is_string":  is(kString),
		"is_null":    is(kNull),
		"is_object":  is(kObject),
		"is_array":   is(kArray),
		"is_boolean": is(kBool),
		"is_integer": is(kInt),
		"is_float":   is(kFloat),
		"is_nullish": {params: []param{req("value", kAny)}, ret: kBool,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				switch v := a[0].(type) {
				case nil:
					return true, nil
				case string:
					return strings.TrimSpace(v) == "" || v == "-", nil
				}
				return false, nil
			}},
		"is_empty": {params: []param{req("value", kString|kArray|kObject)}, ret: kBool,
			call: func(r *runner, c *callNode, a []any) (any, error) { return lengthOf(a[0]) == 0, nil }},
		"exists": {params: []param{{name: "field", kind: kAny, required: true, query: true}}, ret: kBool,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				base, segs := r.queryBase(c.params[0])
				_, ok := getPath(base, segs)
				return ok, nil
			}},
		"del": {params: []param{{name: "path", kind: kAny, required: true, query: true}}, ret: kAny,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				q := c.params[0]
				base, segs := r.queryBase(q)
				old, _ := getPath(base, segs)
				if len(segs) == 0 {
					return old, nil // deleting a whole variable or "." keeps it, as a no-op
				}
				nb := delPath(base, segs)
				switch q := q.(type) {
				case *pathNode:
					if v, ok := q.base.(*varNode); ok {
						r.setVar(v.name, nb)
					} else {
						r.event = nb
					}
				}
				return old, nil
			}},
		"get": {params: []param{req("value", kObject|kArray), req("path", kArray)}, ret: kAny, fallible: always,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				var segs []pathSeg
				for _, p := range a[1].([]any) {
					switch p := p.(type) {
					case string:
						segs = append(segs, pathSeg{field: p})
					case int64:
						segs = append(segs, pathSeg{index: p, isIndex: true})
					default:
						return nil, errors.New("path segment must be either string or integer, not " + typeName(p))
					}
				}
				v, _ := getPath(a[0], segs)
				return v, nil
			}},
		"contains":         strPred(strings.Contains),
		"starts_with":      strPred(strings.HasPrefix),
		"ends_with":        strPred(strings.HasSuffix),
		"upcase":           str1(strings.ToUpper),
		"downcase":         str1(strings.ToLower),
		"strip_whitespace": str1(func(s string) string { return strings.TrimSpace(s) }),
		"split": {params: []param{req("value", kString), req("pattern", kString), opt("limit", kInt)}, ret: kArray, retType: arrayOf(kString),
			call: func(r *runner, c *callNode, a []any) (any, error) {
				s, sep := a[0].(string), a[1].(string)
				if err := r.charge(c.p, 2*len(s)+16); err != nil {
					return nil, err
				}
				n := -1
				if l, ok := a[2].(int64); ok {
					if l < 0 {
						return nil, errors.New("limit must not be negative")
					}
					n = int(min(l, int64(len(s)+2)))
				}
				var parts []string
				if sep == "" {
					parts = []string{""}
					for _, ch := range s {
						parts = append(parts, string(ch))
					}
					parts = append(parts, "")
					if n >= 0 && len(parts) > n {
						if n == 0 {
							parts = nil
						} else {
							parts = append(parts[:n-1], strings.Join(parts[n-1:], ""))
						}
					}
				} else if n == 0 {
					parts = nil
				} else {
					parts = strings.SplitN(s, sep, n)
				}
				if err := r.charge(c.p, 16*len(parts)); err != nil {
					return nil, err
				}
				out := make([]any, len(parts))
				for i, p := range parts {
					out[i] = p
				}
				return out, nil
			}},
		"join": {params: []param{req("value", kArray), opt("separator", kString)}, ret: kString, fallible: always,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				sep, _ := a[1].(string)
				items := a[0].([]any)
				parts := make([]string, len(items))
				total := 0
				for i, it := range items {
					s, ok := it.(string)
					if !ok {
						return nil, fmt.Errorf("all array items must be strings, found %s", typeName(it))
					}
					parts[i] = s
					total += len(s) + len(sep)
				}
				if err := r.charge(c.p, total); err != nil {
					return nil, err
				}
				return strings.Join(parts, sep), nil
			}},
		"length": {params: []param{req("value", kString|kArray|kObject)}, ret: kInt,
			call: func(r *runner, c *callNode, a []any) (any, error) { return int64(lengthOf(a[0])), nil }},
		"encode_json": {params: []param{req("value", kAny), opt("pretty", kBool)}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				if err := r.charge(c.p, cost(a[0])); err != nil {
					return nil, err
				}
				var b bytes.Buffer
				if err := encodeJSON(&b, a[0], a[1] == true, "", r, c.p); err != nil {
					return nil, err
				}
				return b.String(), nil
			}},
		"encode_base64": {params: []param{req("value", kString), opt("padding", kBool), optEnum("charset", "standard", "url_safe")}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				enc, err := b64(a[2], a[1] != false)
				if err != nil {
					return nil, err
				}
				s := a[0].(string)
				if err := r.charge(c.p, len(s)*2); err != nil {
					return nil, err
				}
				return enc.EncodeToString([]byte(s)), nil
			}},
		"decode_base64": {params: []param{req("value", kString), optEnum("charset", "standard", "url_safe")}, ret: kString, fallible: always,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				enc, err := b64(a[1], false)
				if err != nil {
					return nil, err
				}
				s := strings.TrimRight(a[0].(string), "=")
				out, err := enc.DecodeString(s)
				if err != nil {
					return nil, errors.New("unable to decode value from base64")
				}
				return string(out), nil
			}},
		"encode_base16": {params: []param{req("value", kString)}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				s := a[0].(string)
				if err := r.charge(c.p, 2*len(s)); err != nil {
					return nil, err
				}
				return hex.EncodeToString([]byte(s)), nil
			}},
		"decode_base16": {params: []param{req("value", kString)}, ret: kString, fallible: always,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				out, err := hex.DecodeString(a[0].(string))
				if err != nil {
					return nil, errors.New("unable to decode value from base16")
				}
				return string(out), nil
			}},
		"encode_percent": {params: []param{req("value", kString), optEnum("ascii_set", asciiSetNames()...)}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				set := "NON_ALPHANUMERIC"
				if s, ok := a[1].(string); ok {
					set = s
				}
				keep, ok := asciiSets[set]
				if !ok {
					return nil, fmt.Errorf("unknown ascii_set %q", set)
				}
				s := a[0].(string)
				if err := r.charge(c.p, 3*len(s)); err != nil {
					return nil, err
				}
				return percentEncode(s, keep), nil
			}},
		"decode_percent": {params: []param{req("value", kString)}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				return strings.ToValidUTF8(percentDecode(a[0].(string), false), "\uFFFD"), nil
			}},
		"replace": {params: []param{req("value", kString), req("pattern", kString), req("with", kString), opt("count", kInt)}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				s, old, with := a[0].(string), a[1].(string), a[2].(string)
				n := -1
				if k, ok := a[3].(int64); ok && k >= 0 {
					n = int(min(k, int64(len(s)+1)))
				}
				count := strings.Count(s, old)
				if n >= 0 && count > n {
					count = n
				}
				if err := r.charge(c.p, len(s)+count*len(with)); err != nil {
					return nil, err
				}
				return strings.Replace(s, old, with, n), nil
			}},
		"hmac": {params: []param{req("value", kString), req("key", kString), opt("algorithm", kString)}, ret: kString,
			fallible: func(args []typ, nodes []node) bool {
				return nodes[2] != nil && !constIn(upper(nodes[2]), "SHA1", "SHA-224", "SHA-256", "SHA-384", "SHA-512")
			},
			call: func(r *runner, c *callNode, a []any) (any, error) {
				alg := "SHA-256"
				if s, ok := a[2].(string); ok {
					alg = strings.ToUpper(s)
				}
				var h func() hash.Hash
				switch alg {
				case "SHA1":
					h = sha1.New
				case "SHA-224":
					h = sha256.New224
				case "SHA-256":
					h = sha256.New
				case "SHA-384":
					h = sha512.New384
				case "SHA-512":
					h = sha512.New
				default:
					return nil, fmt.Errorf("Invalid algorithm: %s", alg)
				}
				m := hmac.New(h, []byte(a[1].(string)))
				io.WriteString(m, a[0].(string))
				return string(m.Sum(nil)), nil
			}},
		"sha1": digest(sha1.New),
		"md5":  digest(md5.New),
		"sha2": {params: []param{req("value", kString), optEnum("variant", "SHA-224", "SHA-256", "SHA-384", "SHA-512", "SHA-512/224", "SHA-512/256")}, ret: kString,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				v := "SHA-512/256"
				if s, ok := a[1].(string); ok {
					v = s
				}
				h, ok := map[string]func() hash.Hash{"SHA-224": sha256.New224, "SHA-256": sha256.New, "SHA-384": sha512.New384,
					"SHA-512": sha512.New, "SHA-512/224": sha512.New512_224, "SHA-512/256": sha512.New512_256}[v]
				if !ok {
					return nil, fmt.Errorf("invalid variant %q", v)
				}
				d := h()
				io.WriteString(d, a[0].(string))
				return hex.EncodeToString(d.Sum(nil)), nil
			}},
		"assert": {params: []param{req("condition", kBool), opt("message", kString)}, ret: kBool, fallible: always,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				if a[0] == true {
					return true, nil
				}
				if m, ok := a[1].(string); ok {
					return nil, errors.New(m)
				}
				return nil, errors.New("assertion failed")
			}},
		"for_each": {params: []param{req("value", kObject|kArray)}, ret: kNull, closure: true,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				cl := c.closure
				run := func(k, v any) error {
					frame := map[string]any{}
					if cl.params[0] != "" {
						frame[cl.params[0]] = k
					}
					if cl.params[1] != "" {
						frame[cl.params[1]] = v
					}
					r.frames = append(r.frames, frame)
					_, err := r.block(cl.body)
					r.frames = r.frames[:len(r.frames)-1]
					return err
				}
				switch v := a[0].(type) {
				case []any:
					for i, e := range v {
						if err := run(int64(i), e); err != nil {
							return nil, err
						}
					}
				case map[string]any:
					for _, k := range sortedKeys(v) {
						if err := run(k, v[k]); err != nil {
							return nil, err
						}
					}
				}
				return nil, nil
			}},
		"keys": {params: []param{req("value", kObject)}, ret: kArray, retType: arrayOf(kString),
			call: func(r *runner, c *callNode, a []any) (any, error) {
				m := a[0].(map[string]any)
				out := make([]any, 0, len(m))
				for _, k := range sortedKeys(m) {
					out = append(out, k)
				}
				return out, r.charge(c.p, 16*len(m))
			}},
		"values": {params: []param{req("value", kObject)}, ret: kArray,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				m := a[0].(map[string]any)
				out := make([]any, 0, len(m))
				for _, k := range sortedKeys(m) {
					out = append(out, m[k])
				}
				return out, r.charge(c.p, 16*len(m))
			}},
		"push": {params: []param{req("value", kArray), req("item", kAny)}, ret: kArray,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				arr := a[0].([]any)
				if err := r.charge(c.p, 16*(len(arr)+1)); err != nil {
					return nil, err
				}
				out := make([]any, len(arr), len(arr)+1)
				copy(out, arr)
				return append(out, a[1]), nil
			}},
		"append": {params: []param{req("value", kArray), req("items", kArray)}, ret: kArray,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				x, y := a[0].([]any), a[1].([]any)
				if err := r.charge(c.p, 16*(len(x)+len(y))); err != nil {
					return nil, err
				}
				out := make([]any, 0, len(x)+len(y))
				return append(append(out, x...), y...), nil
			}},
		"merge": {params: []param{req("to", kObject), req("from", kObject), opt("deep", kBool)}, ret: kObject,
			call: func(r *runner, c *callNode, a []any) (any, error) {
				x, y := a[0].(map[string]any), a[1].(map[string]any)
				if err := r.charge(c.p, 48*(len(x)+len(y))); err != nil {
					return nil, err
				}
				return mergeObjects(x, y, a[2] == true), nil
			}},
	}
}

func mergeObjects(x, y map[string]any, deep bool) map[string]any {
	out := make(map[string]any, len(x)+len(y))
	for k, v := range x {
		out[k] = v
	}
	for k, v := range y {
		if deep {
			xm, ok1 := out[k].(map[string]any)
			ym, ok2 := v.(map[string]any)
			if ok1 && ok2 {
				out[k] = mergeObjects(xm, ym, true)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func constIn(n node, vals ...string) bool {
	if n == nil {
		return true
	}
	l, ok := n.(*litNode)
	if !ok {
		return false
	}
	s, ok := l.v.(string)
	if !ok {
		return false
	}
	for _, v := range vals {
		if s == v {
			return true
		}
	}
	return false
}

// upper returns a string literal node upper-cased (other nodes unchanged).
func upper(n node) node {
	if l, ok := n.(*litNode); ok {
		if s, ok := l.v.(string); ok {
			return &litNode{p: l.p, v: strings.ToUpper(s)}
		}
	}
	return n
}

func lengthOf(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case []any:
		return len(v)
	case map[string]any:
		return len(v)
	}
	return 0
}

// queryBase resolves the base value and segments of a path argument.
func (r *runner) queryBase(n node) (any, []pathSeg) {
	switch n := n.(type) {
	case *eventNode:
		return r.event, nil
	case *varNode:
		return r.lookup(n.name), nil
	case *pathNode:
		if v, ok := n.base.(*varNode); ok {
			return r.lookup(v.name), n.segs
		}
		return r.event, n.segs
	}
	return nil, nil
}

func (r *runner) call(c *callNode) (any, error) {
	fn := c.fn
	args := make([]any, len(fn.params))
	for i, p := range fn.params {
		a := c.params[i]
		if a == nil {
			args[i] = absent
			continue
		}
		if p.query {
			args[i] = nil
			continue
		}
		v, err := r.eval(a)
		if err != nil {
			return nil, err
		}
		if s, ok := v.(string); ok {
			if err := r.charge(c.p, len(s)); err != nil {
				return nil, err
			}
		}
		if kindOf(v)&p.kind == 0 {
			e := errAt(c.p, "function call error for %q: expected %s for argument %q, got %s", c.name, p.kind, p.name, typeName(v))
			if c.bang {
				return nil, &stopError{err: e}
			}
			return nil, e
		}
		args[i] = v
	}
	v, err := fn.call(r, c, args)
	if err != nil {
		var s *stopError
		if errors.As(err, &s) {
			return nil, err
		}
		e := errAt(c.p, "function call error for %q: %v", c.name, err)
		if c.bang {
			return nil, &stopError{err: e}
		}
		return nil, e
	}
	return v, r.charge(c.p, shallowCost(v))
}

func parseJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing characters after the JSON value")
	}
	return fromJSON(v)
}

func fromJSON(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return numberValue(string(x))
	case map[string]any:
		for k, e := range x {
			n, err := fromJSON(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := fromJSON(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}

// truncateDepth replaces containers deeper than depth by their JSON text,
// as parse_json's max_depth does.
func truncateDepth(v any, depth int) any {
	switch x := v.(type) {
	case map[string]any, []any:
		if depth == 0 {
			var b bytes.Buffer
			encodeJSON(&b, x, false, "", nil, pos{})
			return b.String()
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = truncateDepth(e, depth-1)
		}
	case []any:
		for i, e := range x {
			x[i] = truncateDepth(e, depth-1)
		}
	}
	return v
}

func encodeJSON(b *bytes.Buffer, v any, pretty bool, indent string, r *runner, p pos) error {
	if r != nil && b.Len() > MaxAlloc {
		return stop(p, "program exceeds the memory limit (%d bytes)", MaxAlloc)
	}
	nl := func(ind string) {
		if pretty {
			b.WriteByte('\n')
			b.WriteString(ind)
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(formatJSONFloat(x))
	case string:
		writeJSONString(b, x)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			break
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			nl(indent + "  ")
			if err := encodeJSON(b, e, pretty, indent+"  ", r, p); err != nil {
				return err
			}
		}
		nl(indent)
		b.WriteByte(']')
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			break
		}
		b.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteByte(',')
			}
			nl(indent + "  ")
			writeJSONString(b, k)
			b.WriteByte(':')
			if pretty {
				b.WriteByte(' ')
			}
			if err := encodeJSON(b, x[k], pretty, indent+"  ", r, p); err != nil {
				return err
			}
		}
		nl(indent)
		b.WriteByte('}')
	}
	return nil
}

func formatJSONFloat(f float64) string {
	a := math.Abs(f)
	if a != 0 && (a < 1e-5 || a >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		s = strings.Replace(s, "e+", "e", 1)
		s = strings.Replace(s, "e-0", "e-", 1)
		if i := strings.Index(s, "e0"); i >= 0 {
			s = s[:i+1] + s[i+2:]
		}
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func writeJSONString(b *bytes.Buffer, s string) {
	const hexd = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 {
					b.WriteString(`\u00`)
					b.WriteByte(hexd[c>>4])
					b.WriteByte(hexd[c&0xf])
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

func b64(charset any, padding bool) (*base64.Encoding, error) {
	cs := "standard"
	if s, ok := charset.(string); ok {
		cs = s
	}
	var enc *base64.Encoding
	switch cs {
	case "standard":
		enc = base64.StdEncoding
	case "url_safe":
		enc = base64.URLEncoding
	default:
		return nil, fmt.Errorf("unknown charset %q", cs)
	}
	if !padding {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc, nil
}

// asciiSets lists, per VRL ascii_set name, the ASCII bytes left unencoded
// besides alphanumerics (the sets of the Rust percent-encoding and url crates).
var asciiSets = func() map[string]func(byte) bool {
	base := func(extra string) func(byte) bool {
		return func(c byte) bool {
			if c < 0x20 || c >= 0x7f {
				return false
			}
			return !strings.ContainsRune(extra, rune(c))
		}
	}
	const (
		fragment = " \"<>`"
		query    = " \"#<>"
		special  = query + "'"
		path     = query + "?`{}"
		userinfo = path + "/:;=@[\\]^|"
		compon   = userinfo + "$%&+,"
		form     = compon + "!'()~"
	)
	return map[string]func(byte) bool{
		"NON_ALPHANUMERIC": func(c byte) bool {
			return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		},
		"CONTROLS":            base(""),
		"FRAGMENT":            base(fragment),
		"QUERY":               base(query),
		"SPECIAL":             base(special),
		"PATH":                base(path),
		"USERINFO":            base(userinfo),
		"COMPONENT":           base(compon),
		"WWW_FORM_URLENCODED": base(form),
	}
}()

func asciiSetNames() []string {
	return []string{"NON_ALPHANUMERIC", "CONTROLS", "FRAGMENT", "QUERY", "SPECIAL", "PATH", "USERINFO", "COMPONENT", "WWW_FORM_URLENCODED"}
}

func percentEncode(s string, keep func(byte) bool) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keep(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&0xf])
		}
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// percentDecode decodes %XX sequences leniently (invalid ones stay as is).
func percentDecode(s string, plusSpace bool) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			h, ok1 := unhex(s[i+1])
			l, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(h<<4 | l)
				i += 2
				continue
			}
		}
		if c == '+' && plusSpace {
			b.WriteByte(' ')
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// parseQueryString follows VRL: a leading "?" is ignored, pairs are
// form-urlencoded, a key without "=" maps to "", repeated keys make arrays.
func parseQueryString(s string) map[string]any {
	s = strings.TrimPrefix(s, "?")
	out := map[string]any{}
	for _, pair := range strings.Split(s, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k = strings.ToValidUTF8(percentDecode(k, true), "\uFFFD")
		v = strings.ToValidUTF8(percentDecode(v, true), "\uFFFD")
		switch old := out[k].(type) {
		case nil:
			out[k] = v
		case string:
			out[k] = []any{old, v}
		case []any:
			out[k] = append(old, v)
		}
	}
	return out
}
