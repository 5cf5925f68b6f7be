package vrl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Limits applied to every program.
const (
	MaxSourceLen = 64 << 10 // bytes of source
	MaxDepth     = 100      // syntactic nesting (expressions, terms, "!")
	MaxSteps     = 200_000  // expression evaluations per run
	MaxAlloc     = 64 << 20 // bytes of values built or scanned per run (approximate; parse_json counts twice its input)
)

// Program is a compiled VRL program. It is safe for concurrent use.
type Program struct {
	exprs []node
}

// Compile parses and checks src. Syntax errors and type errors carry the
// line and column they refer to (*Error).
func Compile(src string) (*Program, error) {
	if len(src) > MaxSourceLen {
		return nil, &Error{Msg: fmt.Sprintf("program is %d bytes, more than the %d allowed", len(src), MaxSourceLen)}
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	exprs, err := parseProgram(toks)
	if err != nil {
		return nil, err
	}
	c := &checker{vars: map[string]typ{}}
	if _, err := c.exprs(exprs); err != nil {
		return nil, err
	}
	return &Program{exprs: exprs}, nil
}

// Run evaluates the program with event as ".". It returns the value of the
// last expression. A failure (a "!" call that fails, abort, assert, or a
// limit) is returned as an error.
func (p *Program) Run(event any) (result any, err error) {
	result, _, err = p.Transform(event)
	return result, err
}

// Transform evaluates the program as Run does and also returns "." as the
// program left it (the event after its assignments), as Vector's remap
// transform emits it.
func (p *Program) Transform(event any) (result, target any, err error) {
	r := &runner{}
	ev, err := normalize(event, 0)
	if err != nil {
		return nil, nil, &Error{Msg: "event: " + err.Error()}
	}
	r.event = ev
	r.frames = []map[string]any{{}}
	defer func() {
		if rec := recover(); rec != nil {
			result, target, err = nil, nil, &Error{Msg: fmt.Sprintf("internal error: %v", rec)}
		}
	}()
	var v any
	for _, e := range p.exprs {
		if v, err = r.eval(e); err != nil {
			return nil, nil, unwrapStop(err)
		}
	}
	return v, r.event, nil
}

// stopError ends the program: "??" and "ok, err =" don't catch it.
type stopError struct{ err *Error }

func (s *stopError) Error() string { return s.err.Error() }

func unwrapStop(err error) error {
	var s *stopError
	if errors.As(err, &s) {
		return s.err
	}
	return err
}

func stop(p pos, format string, args ...any) error {
	return &stopError{err: errAt(p, format, args...)}
}

type runner struct {
	event  any
	frames []map[string]any
	steps  int
	alloc  int
}

func (r *runner) charge(p pos, n int) error {
	r.alloc += n
	if r.alloc > MaxAlloc || n < 0 {
		return stop(p, "program exceeds the memory limit (%d bytes)", MaxAlloc)
	}
	return nil
}

func (r *runner) lookup(name string) any {
	for i := len(r.frames) - 1; i >= 0; i-- {
		if v, ok := r.frames[i][name]; ok {
			return v
		}
	}
	return nil
}

func (r *runner) setVar(name string, v any) {
	for i := len(r.frames) - 1; i >= 0; i-- {
		if _, ok := r.frames[i][name]; ok {
			r.frames[i][name] = v
			return
		}
	}
	r.frames[len(r.frames)-1][name] = v
}

func (r *runner) block(b *blockNode) (any, error) {
	r.frames = append(r.frames, map[string]any{})
	defer func() { r.frames = r.frames[:len(r.frames)-1] }()
	var v any
	var err error
	for _, e := range b.exprs {
		if v, err = r.eval(e); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (r *runner) eval(n node) (any, error) {
	r.steps++
	if r.steps > MaxSteps {
		return nil, stop(n.position(), "program exceeds the step limit (%d)", MaxSteps)
	}
	switch n := n.(type) {
	case *litNode:
		return n.v, nil
	case *arrayNode:
		out := make([]any, len(n.items))
		if err := r.charge(n.p, 16*len(n.items)); err != nil {
			return nil, err
		}
		for i, it := range n.items {
			v, err := r.eval(it)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *objectNode:
		out := make(map[string]any, len(n.keys))
		if err := r.charge(n.p, 48*len(n.keys)); err != nil {
			return nil, err
		}
		for i, k := range n.keys {
			v, err := r.eval(n.vals[i])
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case *blockNode:
		return r.block(n)
	case *groupNode:
		return r.eval(n.x)
	case *varNode:
		return r.lookup(n.name), nil
	case *eventNode:
		return r.event, nil
	case *pathNode:
		var base any
		if _, ok := n.base.(*eventNode); ok {
			base = r.event
		} else {
			var err error
			if base, err = r.eval(n.base); err != nil {
				return nil, err
			}
		}
		v, _ := getPath(base, n.segs)
		return v, nil
	case *notNode:
		v, err := r.eval(n.x)
		if err != nil {
			return nil, err
		}
		b, ok := v.(bool)
		if !ok {
			return nil, errAt(n.p, "can't negate type %s", typeName(v))
		}
		return !b, nil
	case *binNode:
		return r.binary(n)
	case *callNode:
		return r.call(n)
	case *assignNode:
		v, err := r.eval(n.x)
		if n.errTgt == nil {
			if err != nil {
				return nil, err
			}
			return v, r.assign(n.tgt, v)
		}
		var errV any
		if err != nil {
			var s *stopError
			if errors.As(err, &s) {
				return nil, err
			}
			v = n.okDefault
			if m, ok := v.(map[string]any); ok && len(m) == 0 {
				v = map[string]any{}
			}
			errV = errMessage(err)
		}
		if err := r.assign(n.tgt, v); err != nil {
			return nil, err
		}
		if err := r.assign(n.errTgt, errV); err != nil {
			return nil, err
		}
		return v, nil
	case *ifNode:
		c, err := r.eval(n.cond)
		if err != nil {
			return nil, err
		}
		if c == true {
			return r.block(n.then)
		}
		if n.els != nil {
			return r.block(n.els)
		}
		return nil, nil
	case *abortNode:
		if n.msg == nil {
			return nil, stop(n.p, "aborted")
		}
		m, err := r.eval(n.msg)
		if err != nil {
			return nil, err
		}
		s, ok := m.(string)
		if !ok {
			return nil, stop(n.p, "aborted (abort message is %s, not a string)", typeName(m))
		}
		return nil, stop(n.p, "aborted: %s", s)
	}
	return nil, errAt(n.position(), "unsupported expression")
}

// errMessage is the text VRL puts in the err variable.
func errMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

func (r *runner) assign(tg *target, v any) error {
	switch {
	case tg.noop:
		return nil
	case tg.event:
		nv, err := r.setPath(tg.p, r.event, tg.segs, v)
		if err != nil {
			return err
		}
		r.event = nv
	case len(tg.segs) == 0:
		r.setVar(tg.varName, v)
	default:
		nv, err := r.setPath(tg.p, r.lookup(tg.varName), tg.segs, v)
		if err != nil {
			return err
		}
		r.setVar(tg.varName, nv)
	}
	return nil
}

func getPath(v any, segs []pathSeg) (any, bool) {
	for _, s := range segs {
		if s.isIndex {
			a, ok := v.([]any)
			if !ok {
				return nil, false
			}
			i := s.index
			if i < 0 {
				i += int64(len(a))
			}
			if i < 0 || i >= int64(len(a)) {
				return nil, false
			}
			v = a[i]
		} else {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s.field]; !ok {
				return nil, false
			}
		}
	}
	return v, true
}

// setPath returns root with v stored at segs, copying the containers on the
// way (values are immutable once built) and creating missing ones.
func (r *runner) setPath(p pos, root any, segs []pathSeg, v any) (any, error) {
	if len(segs) == 0 {
		return v, nil
	}
	s := segs[0]
	if s.isIndex {
		a, _ := root.([]any)
		i := s.index
		if i < 0 {
			i += int64(len(a))
			if i < 0 {
				// VRL prepends nulls for a negative index past the start
				pad := -i
				if pad > 1<<20 {
					return nil, stop(p, "array index out of range")
				}
				na := make([]any, int64(len(a))+pad)
				copy(na[pad:], a)
				a, i = na, 0
			}
		}
		if i > 1<<20 {
			return nil, stop(p, "array index %d out of range", i)
		}
		n := len(a)
		if int(i) >= n {
			n = int(i) + 1
		}
		if err := r.charge(p, 16*n); err != nil {
			return nil, err
		}
		na := make([]any, n)
		copy(na, a)
		child, err := r.setPath(p, na[i], segs[1:], v)
		if err != nil {
			return nil, err
		}
		na[i] = child
		return na, nil
	}
	m, _ := root.(map[string]any)
	if err := r.charge(p, 48*(len(m)+1)); err != nil {
		return nil, err
	}
	nm := make(map[string]any, len(m)+1)
	for k, x := range m {
		nm[k] = x
	}
	child, err := r.setPath(p, nm[s.field], segs[1:], v)
	if err != nil {
		return nil, err
	}
	nm[s.field] = child
	return nm, nil
}

func delPath(root any, segs []pathSeg) any {
	if len(segs) == 0 {
		return root
	}
	s := segs[0]
	if s.isIndex {
		a, ok := root.([]any)
		if !ok {
			return root
		}
		i := s.index
		if i < 0 {
			i += int64(len(a))
		}
		if i < 0 || i >= int64(len(a)) {
			return root
		}
		na := make([]any, 0, len(a))
		na = append(na, a[:i]...)
		if len(segs) == 1 {
			return append(na, a[i+1:]...)
		}
		na = append(na, delPath(a[i], segs[1:]))
		return append(na, a[i+1:]...)
	}
	m, ok := root.(map[string]any)
	if !ok {
		return root
	}
	if _, ok := m[s.field]; !ok {
		return root
	}
	nm := make(map[string]any, len(m))
	for k, x := range m {
		nm[k] = x
	}
	if len(segs) == 1 {
		delete(nm, s.field)
	} else {
		nm[s.field] = delPath(m[s.field], segs[1:])
	}
	return nm
}

func (r *runner) binary(n *binNode) (any, error) {
	switch n.op {
	case "??":
		l, err := r.eval(n.l)
		if err == nil {
			return l, nil
		}
		var s *stopError
		if errors.As(err, &s) {
			return nil, err
		}
		return r.eval(n.r)
	case "||":
		l, err := r.eval(n.l)
		if err != nil {
			return nil, err
		}
		if l == nil || l == false {
			return r.eval(n.r)
		}
		return l, nil
	case "&&":
		l, err := r.eval(n.l)
		if err != nil {
			return nil, err
		}
		if l == nil || l == false {
			return false, nil
		}
		if l != true {
			return nil, errAt(n.p, "can't apply \"&&\" to type %s", typeName(l))
		}
		rv, err := r.eval(n.r)
		if err != nil {
			return nil, err
		}
		switch rv {
		case nil, false:
			return false, nil
		case true:
			return true, nil
		}
		return nil, errAt(n.p, "can't apply \"&&\" to type %s", typeName(rv))
	}
	l, err := r.eval(n.l)
	if err != nil {
		return nil, err
	}
	rv, err := r.eval(n.r)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "==", "!=":
		if err := r.charge(n.p, cost(l)+cost(rv)); err != nil {
			return nil, err
		}
		eq := equalLossy(l, rv)
		if n.op == "!=" {
			return !eq, nil
		}
		return eq, nil
	case "<", "<=", ">", ">=":
		if err := r.charge(n.p, cost(l)+cost(rv)); err != nil {
			return nil, err
		}
		c, ok := compare(l, rv)
		if !ok {
			return nil, errAt(n.p, "can't compare %s %s %s", typeName(l), n.op, typeName(rv))
		}
		switch n.op {
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		}
		return c >= 0, nil
	case "|":
		lm, ok1 := l.(map[string]any)
		rm, ok2 := rv.(map[string]any)
		if !ok1 || !ok2 {
			return nil, errAt(n.p, "can't merge %s and %s", typeName(l), typeName(rv))
		}
		if err := r.charge(n.p, 48*(len(lm)+len(rm))); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(lm)+len(rm))
		for k, v := range lm {
			out[k] = v
		}
		for k, v := range rm {
			out[k] = v
		}
		return out, nil
	}
	return r.arith(n, l, rv)
}

func (r *runner) arith(n *binNode, l, rv any) (any, error) {
	li, lInt := l.(int64)
	ri, rInt := rv.(int64)
	lf, lNum := toFloat(l)
	rf, rNum := toFloat(rv)
	ls, lStr := l.(string)
	rs, rStr := rv.(string)
	fail := func() (any, error) {
		verb := map[string]string{"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}[n.op]
		return nil, errAt(n.p, "can't %s type %s and %s", verb, typeName(l), typeName(rv))
	}
	switch n.op {
	case "+":
		switch {
		case lStr && (rStr || rv == nil):
			if err := r.charge(n.p, len(ls)+len(rs)); err != nil {
				return nil, err
			}
			return ls + rs, nil
		case l == nil && rStr:
			return rs, nil
		case lInt && rInt:
			return li + ri, nil
		case lNum && rNum:
			return lf + rf, nil
		}
	case "-":
		switch {
		case lInt && rInt:
			return li - ri, nil
		case lNum && rNum:
			return lf - rf, nil
		}
	case "*":
		switch {
		case lInt && rInt:
			return li * ri, nil
		case lNum && rNum:
			return lf * rf, nil
		case lStr && rInt, lInt && rStr:
			s, k := ls, ri
			if lInt {
				s, k = rs, li
			}
			if k < 0 {
				k = 0 // VRL repeats a negative number of times as zero
			}
			if k > 0 && int64(len(s)) > int64(MaxAlloc)/k {
				return nil, stop(n.p, "program exceeds the memory limit (%d bytes)", MaxAlloc)
			}
			if err := r.charge(n.p, len(s)*int(k)); err != nil {
				return nil, err
			}
			return strings.Repeat(s, int(k)), nil
		}
	case "/":
		if lNum && rNum {
			if rf == 0 {
				return nil, errAt(n.p, "can't divide by zero")
			}
			return lf / rf, nil
		}
	}
	return fail()
}

func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

func compare(a, b any) (int, bool) {
	if ai, ok := a.(int64); ok {
		if bi, ok := b.(int64); ok {
			switch {
			case ai < bi:
				return -1, true
			case ai > bi:
				return 1, true
			}
			return 0, true
		}
	}
	af, ok1 := toFloat(a)
	bf, ok2 := toFloat(b)
	if ok1 && ok2 {
		switch {
		case af < bf:
			return -1, true
		case af > bf:
			return 1, true
		}
		return 0, true
	}
	as, ok1 := a.(string)
	bs, ok2 := b.(string)
	if ok1 && ok2 {
		return strings.Compare(as, bs), true
	}
	return 0, false
}

// equalLossy is VRL's "==": integers and floats compare by value at the top
// level, everything else structurally.
func equalLossy(a, b any) bool {
	af, ok1 := toFloat(a)
	bf, ok2 := toFloat(b)
	if ok1 && ok2 {
		return af == bf
	}
	return deepEqual(a, b)
}

func deepEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !deepEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		ba, ok := b.([]any)
		if !ok || len(a) != len(ba) {
			return false
		}
		for i := range a {
			if !deepEqual(a[i], ba[i]) {
				return false
			}
		}
		return true
	case float64:
		bf, ok := b.(float64)
		return ok && a == bf
	}
	return a == b
}

// cost estimates the work of scanning or building v: string bytes plus a
// fixed amount per array element and object field, over the whole value.
func cost(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case []any:
		n := 16 * len(v)
		for _, e := range v {
			n += cost(e)
		}
		return n
	case map[string]any:
		n := 48 * len(v)
		for k, e := range v {
			n += len(k) + cost(e)
		}
		return n
	}
	return 8
}

// shallowCost is cost without descending into containers.
func shallowCost(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case []any:
		return 16 * len(v)
	case map[string]any:
		return 48 * len(v)
	}
	return 8
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		return "float"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// normalize converts an event into the value representation used here.
func normalize(v any, depth int) (any, error) {
	if depth > 512 {
		return nil, errors.New("value nested too deeply")
	}
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("NaN and infinite floats are not values")
		}
		return x, nil
	case float32:
		return normalize(float64(x), depth)
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		return int64(x), nil
	case json.Number:
		return numberValue(string(x))
	case []byte:
		return string(x), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	return nil, fmt.Errorf("unsupported value of type %s", rv.Type())
}

func numberValue(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("invalid number %q", s)
	}
	return f, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
