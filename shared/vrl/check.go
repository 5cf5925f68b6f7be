package vrl

import "strings"

// kind is a set of VRL value kinds, used by the compile-time checks that
// decide, as VRL does, which expressions are fallible.
type kind uint8

const (
	kNull kind = 1 << iota
	kBool
	kInt
	kFloat
	kString
	kObject
	kArray
	kAny = kNull | kBool | kInt | kFloat | kString | kObject | kArray
)

func (k kind) String() string {
	if k == kAny {
		return "any"
	}
	var names []string
	for _, e := range []struct {
		k kind
		n string
	}{{kString, "string"}, {kInt, "integer"}, {kFloat, "float"}, {kBool, "boolean"}, {kObject, "object"}, {kArray, "array"}, {kNull, "null"}} {
		if k&e.k != 0 {
			names = append(names, e.n)
		}
	}
	if len(names) == 0 {
		return "never"
	}
	return strings.Join(names, " or ")
}

// typ is the static type of an expression.
type typ struct {
	k        kind
	inner    kind // kinds of array elements / object values (kAny when unknown)
	fallible bool
	fpos     pos // where the unhandled failure comes from
	constVal any // literal value when known (for division checks)
	isConst  bool
}

func t(k kind) typ { return typ{k: k, inner: kAny} }

func (a typ) union(b typ) typ {
	return typ{k: a.k | b.k, inner: a.inner | b.inner, fallible: a.fallible || b.fallible, fpos: firstPos(a, b)}
}

func firstPos(a, b typ) pos {
	if a.fallible {
		return a.fpos
	}
	return b.fpos
}

func (a typ) subset(k kind) bool { return a.k&^k == 0 }

func (a typ) failAt(p pos) typ {
	if !a.fallible {
		a.fallible = true
		a.fpos = p
	}
	return a
}

type checker struct {
	vars map[string]typ
}

func (c *checker) snapshot() map[string]typ {
	m := make(map[string]typ, len(c.vars))
	for k, v := range c.vars {
		m[k] = v
	}
	return m
}

// scoped restores the variable set of before a block, keeping the new
// types of variables that already existed.
func (c *checker) scoped(before map[string]typ) {
	for k := range c.vars {
		if _, ok := before[k]; !ok {
			delete(c.vars, k)
		}
	}
}

func unhandled(ty typ) error {
	return errAt(ty.fpos, "unhandled fallible expression: handle the error with \"!\", \"??\" or \"ok, err = ...\"")
}

// stmt checks an expression whose failure nothing handles.
func (c *checker) stmt(n node) (typ, error) {
	ty, err := c.expr(n)
	if err != nil {
		return ty, err
	}
	if ty.fallible {
		return ty, unhandled(ty)
	}
	return ty, nil
}

func (c *checker) exprs(ns []node) (typ, error) {
	ty := t(kNull)
	for _, n := range ns {
		var err error
		if ty, err = c.stmt(n); err != nil {
			return ty, err
		}
	}
	return ty, nil
}

func (c *checker) block(b *blockNode) (typ, error) {
	before := c.snapshot()
	ty, err := c.exprs(b.exprs)
	c.scoped(before)
	return ty, err
}

func (c *checker) expr(n node) (typ, error) {
	switch n := n.(type) {
	case *litNode:
		ty := t(kindOf(n.v))
		ty.constVal, ty.isConst = n.v, true
		return ty, nil
	case *arrayNode:
		ty := typ{k: kArray}
		for _, it := range n.items {
			et, err := c.expr(it)
			if err != nil {
				return et, err
			}
			ty.inner |= et.k
			if et.fallible && !ty.fallible {
				ty.fallible, ty.fpos = true, et.fpos
			}
		}
		if len(n.items) == 0 {
			ty.inner = 0
		}
		return ty, nil
	case *objectNode:
		ty := typ{k: kObject}
		for _, v := range n.vals {
			et, err := c.expr(v)
			if err != nil {
				return et, err
			}
			ty.inner |= et.k
			if et.fallible && !ty.fallible {
				ty.fallible, ty.fpos = true, et.fpos
			}
		}
		return ty, nil
	case *blockNode:
		return c.block(n)
	case *groupNode:
		return c.expr(n.x)
	case *varNode:
		ty, ok := c.vars[n.name]
		if !ok {
			return ty, errAt(n.p, "call to undefined variable %q", n.name)
		}
		ty.fallible = false
		ty.isConst = false
		return ty, nil
	case *eventNode:
		return t(kAny), nil
	case *pathNode:
		var bt typ
		switch b := n.base.(type) {
		case *eventNode:
			bt = t(kAny)
		default:
			var err error
			if bt, err = c.expr(b); err != nil {
				return bt, err
			}
		}
		out := t(kAny)
		if len(n.segs) == 1 {
			s := n.segs[0]
			switch {
			case bt.k&(kObject|kArray) == 0:
				out = t(kNull)
			case s.isIndex && bt.k&kArray != 0 && bt.k&kObject == 0:
				out = t(bt.inner | kNull)
			case !s.isIndex && bt.k&kObject != 0 && bt.k&kArray == 0:
				out = t(bt.inner | kNull)
			}
		}
		out.fallible, out.fpos = bt.fallible, bt.fpos
		return out, nil
	case *notNode:
		xt, err := c.expr(n.x)
		if err != nil {
			return xt, err
		}
		out := typ{k: kBool, fallible: xt.fallible, fpos: xt.fpos}
		if !xt.subset(kBool) {
			out = out.failAt(n.p)
		}
		return out, nil
	case *binNode:
		return c.binary(n)
	case *callNode:
		return c.call(n)
	case *assignNode:
		return c.assign(n)
	case *ifNode:
		ct, err := c.expr(n.cond)
		if err != nil {
			return ct, err
		}
		if ct.fallible {
			return ct, errAt(ct.fpos, "fallible predicate: handle the error with \"!\" or \"??\"")
		}
		if ct.k != kBool {
			return ct, errAt(n.cond.position(), "non-boolean predicate: it resolves to %s, not boolean", ct.k)
		}
		s0 := c.snapshot()
		tt, err := c.block(n.then)
		if err != nil {
			return tt, err
		}
		s1 := c.snapshot()
		c.vars = copyVars(s0)
		et := t(kNull)
		if n.els != nil {
			if et, err = c.block(n.els); err != nil {
				return et, err
			}
		}
		for k, v := range c.vars {
			c.vars[k] = v.union(s1[k])
		}
		return tt.union(et), nil
	case *abortNode:
		if n.msg != nil {
			mt, err := c.stmt(n.msg)
			if err != nil {
				return mt, err
			}
			if mt.k&kString == 0 {
				return mt, errAt(n.msg.position(), "abort message must be a string, got %s", mt.k)
			}
		}
		return typ{}, nil
	case *underscoreNode:
		return typ{}, errAt(n.p, "\"_\" can only be an assignment target")
	}
	return typ{}, errAt(n.position(), "unsupported expression")
}

func copyVars(m map[string]typ) map[string]typ {
	out := make(map[string]typ, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func kindOf(v any) kind {
	switch v.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case int64:
		return kInt
	case float64:
		return kFloat
	case string:
		return kString
	case map[string]any:
		return kObject
	case []any:
		return kArray
	}
	return kAny
}

func (c *checker) assign(n *assignNode) (typ, error) {
	xt, err := c.expr(n.x)
	if err != nil {
		return xt, err
	}
	if n.errTgt == nil {
		if xt.fallible {
			return xt, unhandled(xt)
		}
		if err := c.setTarget(n.tgt, xt); err != nil {
			return xt, err
		}
		xt.isConst = false
		return xt, nil
	}
	if !xt.fallible {
		return xt, errAt(n.p, "unnecessary error assignment: the expression can't fail")
	}
	n.okDefault = defaultFor(xt.k)
	okT := t(xt.k)
	okT.inner = xt.inner
	if n.okDefault == nil {
		okT.k |= kNull
	}
	if err := c.setTarget(n.tgt, okT); err != nil {
		return xt, err
	}
	if err := c.setTarget(n.errTgt, t(kString|kNull)); err != nil {
		return xt, err
	}
	return okT, nil
}

func defaultFor(k kind) any {
	switch k {
	case kString:
		return ""
	case kInt:
		return int64(0)
	case kFloat:
		return 0.0
	case kBool:
		return false
	case kObject:
		return map[string]any{}
	case kArray:
		return []any{}
	}
	return nil
}

func (c *checker) setTarget(tg *target, ty typ) error {
	ty.fallible = false
	ty.isConst = false
	switch {
	case tg.noop, tg.event:
		return nil
	case len(tg.segs) == 0:
		if reserved[tg.varName] || keywords[tg.varName] {
			return errAt(tg.p, "%q is a reserved identifier", tg.varName)
		}
		c.vars[tg.varName] = ty
	default:
		old, ok := c.vars[tg.varName]
		nt := t(kObject | kArray)
		if ok {
			nt.k |= old.k
		}
		c.vars[tg.varName] = nt
	}
	return nil
}

func (c *checker) binary(n *binNode) (typ, error) {
	lt, err := c.expr(n.l)
	if err != nil {
		return lt, err
	}
	rt, err := c.expr(n.r)
	if err != nil {
		return rt, err
	}
	both := typ{fallible: lt.fallible || rt.fallible, fpos: firstPos(lt, rt), inner: kAny}
	fallUnless := func(k kind) typ {
		out := both
		if !lt.subset(k) || !rt.subset(k) {
			out = out.failAt(n.p)
		}
		return out
	}
	switch n.op {
	case "??":
		if !lt.fallible {
			return lt, errAt(n.p, "unnecessary error coalescing operation: the left-hand side can't fail")
		}
		out := typ{k: lt.k | rt.k, inner: lt.inner | rt.inner, fallible: rt.fallible, fpos: rt.fpos}
		return out, nil
	case "||":
		var out typ
		switch {
		case lt.k == kNull || (lt.isConst && lt.constVal == false):
			out = rt
		case lt.k&(kNull|kBool) == 0 || (lt.isConst && lt.constVal == true):
			out = lt
		default:
			out = t((lt.k &^ kNull) | rt.k)
		}
		out.fallible, out.fpos, out.isConst = both.fallible, both.fpos, false
		return out, nil
	case "&&":
		out := fallUnless(kNull | kBool)
		out.k = kBool
		return out, nil
	case "==", "!=":
		both.k = kBool
		return both, nil
	case "<", "<=", ">", ">=":
		if lt.k == kString && rt.k == kString {
			both.k = kBool
			return both, nil
		}
		out := fallUnless(kInt | kFloat)
		out.k = kBool
		return out, nil
	case "|":
		if lt.k != kObject || rt.k != kObject {
			return both, errAt(n.p, "only objects can be merged")
		}
		both.k = kObject
		return both, nil
	case "/":
		out := both
		out.k = kFloat
		ok := false
		if (lt.k == kInt || lt.k == kFloat) && rt.isConst {
			switch v := rt.constVal.(type) {
			case int64:
				ok = v != 0
			case float64:
				ok = v != 0
			}
		}
		if !ok {
			out = out.failAt(n.p)
		}
		return out, nil
	}
	// + - *
	switch {
	case n.op == "+" && (lt.k == kString || rt.k == kString):
		out := fallUnless(kString | kNull)
		out.k = kString
		return out, nil
	case lt.k == kFloat || rt.k == kFloat:
		out := fallUnless(kInt | kFloat)
		out.k = kFloat
		return out, nil
	case lt.k == kInt && rt.k == kInt:
		both.k = kInt
		return both, nil
	case n.op == "*" && ((lt.k == kString && rt.k == kInt) || (lt.k == kInt && rt.k == kString)):
		both.k = kString
		return both, nil
	case n.op == "-":
		out := both.failAt(n.p)
		out.k = kInt | kFloat
		return out, nil
	}
	out := both.failAt(n.p)
	out.k = kString | kInt | kFloat
	return out, nil
}

func (c *checker) call(n *callNode) (typ, error) {
	fn := functions[n.name]
	if fn == nil {
		return typ{}, errAt(n.p, "call to undefined function %q", n.name)
	}
	n.fn = fn
	n.params = make([]node, len(fn.params))
	next := 0
	for _, a := range n.args {
		idx := -1
		if a.name == "" {
			for next < len(fn.params) && n.params[next] != nil {
				next++
			}
			if next >= len(fn.params) {
				return typ{}, errAt(a.p, "too many arguments for %q (at most %d)", n.name, len(fn.params))
			}
			idx = next
		} else {
			for i, p := range fn.params {
				if p.name == a.name {
					idx = i
				}
			}
			if idx < 0 {
				return typ{}, errAt(a.p, "unknown keyword argument %q for %q", a.name, n.name)
			}
			if n.params[idx] != nil {
				return typ{}, errAt(a.p, "argument %q given twice", a.name)
			}
		}
		n.params[idx] = a.x
	}
	out := typ{k: fn.ret, inner: kAny}
	args := make([]typ, len(fn.params))
	for i, p := range fn.params {
		a := n.params[i]
		if a == nil {
			if p.required {
				return typ{}, errAt(n.p, "missing required argument %q for %q", p.name, n.name)
			}
			continue
		}
		if p.enum != nil && !constIn(a, p.enum...) {
			return typ{}, errAt(a.position(), "invalid argument %q for %q: must be one of %s", p.name, n.name, strings.Join(p.enum, ", "))
		}
		if p.query {
			switch a := a.(type) {
			case *pathNode:
				switch a.base.(type) {
				case *eventNode, *varNode:
				default:
					return typ{}, errAt(a.p, "argument %q of %q must be a path", p.name, n.name)
				}
			case *eventNode, *varNode:
			default:
				return typ{}, errAt(a.position(), "argument %q of %q must be a path", p.name, n.name)
			}
		}
		at, err := c.expr(a)
		if err != nil {
			return at, err
		}
		if at.fallible {
			return at, errAt(at.fpos, "fallible argument to %q: handle the error with \"!\" or \"??\" before passing it", n.name)
		}
		if at.k&p.kind == 0 {
			return at, errAt(a.position(), "invalid argument %q for %q: expected %s, got %s", p.name, n.name, p.kind, at.k)
		}
		if !at.subset(p.kind) {
			out = out.failAt(n.p)
		}
		args[i] = at
	}
	if fn.fallible != nil && fn.fallible(args, n.params) {
		out = out.failAt(n.p)
	}
	if fn.retType != nil {
		rt := fn.retType(args)
		out.k, out.inner = rt.k, rt.inner
	}
	if fn.closure {
		if n.closure == nil {
			return out, errAt(n.p, "function %q requires a closure", n.name)
		}
		if len(n.closure.params) != 2 {
			return out, errAt(n.closure.p, "closure of %q takes 2 parameters, got %d", n.name, len(n.closure.params))
		}
		vt := args[0]
		keyK := kind(0)
		if vt.k&kObject != 0 {
			keyK |= kString
		}
		if vt.k&kArray != 0 {
			keyK |= kInt
		}
		before := c.snapshot()
		c.vars[n.closure.params[0]] = t(keyK)
		inner := vt.inner
		if inner == 0 {
			inner = kAny
		}
		c.vars[n.closure.params[1]] = t(inner)
		delete(c.vars, "")
		if _, err := c.block(n.closure.body); err != nil {
			return out, err
		}
		for k, v := range before {
			if isParam(n.closure.params, k) {
				c.vars[k] = v
			} else {
				c.vars[k] = v.union(c.vars[k])
			}
		}
		for k := range c.vars {
			if _, ok := before[k]; !ok {
				delete(c.vars, k)
			}
		}
	} else if n.closure != nil {
		return out, errAt(n.closure.p, "function %q does not take a closure", n.name)
	}
	if n.bang {
		out.fallible = false
	}
	return out, nil
}

func isParam(ps []string, name string) bool {
	for _, p := range ps {
		if p != "" && p == name {
			return true
		}
	}
	return false
}
