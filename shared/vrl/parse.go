package vrl

import "strings"

type node interface{ position() pos }

type pathSeg struct {
	field   string
	index   int64
	isIndex bool
}

type (
	litNode struct {
		p pos
		v any
	}
	arrayNode struct {
		p     pos
		items []node
	}
	objectNode struct {
		p    pos
		keys []string
		vals []node
	}
	blockNode struct {
		p     pos
		exprs []node
	}
	groupNode struct {
		p pos
		x node
	}
	varNode struct {
		p    pos
		name string
	}
	eventNode struct{ p pos }
	pathNode  struct {
		p    pos
		base node // eventNode, varNode or any other term
		segs []pathSeg
	}
	callArg struct {
		name string
		x    node
		p    pos
	}
	closureNode struct {
		p      pos
		params []string // "" for "_"
		body   *blockNode
	}
	callNode struct {
		p       pos
		name    string
		bang    bool
		args    []callArg
		closure *closureNode
		fn      *funcDef
		params  []node // resolved in check: argument per parameter (nil if absent)
	}
	notNode struct {
		p pos
		x node
	}
	binNode struct {
		p    pos
		op   string
		l, r node
	}
	target struct {
		p       pos
		noop    bool
		event   bool
		varName string
		segs    []pathSeg
	}
	assignNode struct {
		p         pos
		tgt       *target
		errTgt    *target // non-nil for "ok, err = expr"
		x         node
		okDefault any
	}
	ifNode struct {
		p    pos
		cond node
		then *blockNode
		els  *blockNode // may be nil
	}
	abortNode struct {
		p   pos
		msg node
	}
	underscoreNode struct{ p pos }
)

func (n *litNode) position() pos        { return n.p }
func (n *arrayNode) position() pos      { return n.p }
func (n *objectNode) position() pos     { return n.p }
func (n *blockNode) position() pos      { return n.p }
func (n *groupNode) position() pos      { return n.p }
func (n *varNode) position() pos        { return n.p }
func (n *eventNode) position() pos      { return n.p }
func (n *pathNode) position() pos       { return n.p }
func (n *callNode) position() pos       { return n.p }
func (n *notNode) position() pos        { return n.p }
func (n *binNode) position() pos        { return n.p }
func (n *assignNode) position() pos     { return n.p }
func (n *ifNode) position() pos         { return n.p }
func (n *abortNode) position() pos      { return n.p }
func (n *underscoreNode) position() pos { return n.p }

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekN(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == s
}

func (p *parser) skipNewlines() {
	for p.peek().kind == tNewline {
		p.next()
	}
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of program"
	case tNewline:
		return "newline"
	case tIdent, tCall:
		return "identifier " + quote(t.text)
	case tString, tRawStr:
		return "string literal"
	case tInt, tFloat:
		return "number"
	case tField:
		return quote(t.text)
	case tInvalid:
		return "invalid character " + quote(t.text)
	}
	return quote(t.text)
}

func quote(s string) string { return "\"" + strings.ReplaceAll(s, "\"", "\\\"") + "\"" }

func (p *parser) unexpected(want string) error {
	t := p.peek()
	if want != "" {
		return errAt(t.pos, "syntax error: unexpected %s, expected %s", describe(t), want)
	}
	return errAt(t.pos, "syntax error: unexpected %s", describe(t))
}

func (p *parser) expectOp(s string) (token, error) {
	if !p.isOp(s) {
		return token{}, p.unexpected(quote(s))
	}
	return p.next(), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return errAt(p.peek().pos, "program nesting exceeds %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

var keywords = map[string]bool{"if": true, "else": true, "null": true, "true": true, "false": true, "abort": true}

// reserved identifiers VRL refuses as variable names.
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`array bool boolean break continue do emit float for forall foreach all each any
		try undefined int integer iter object regex return string traverse timestamp duration unless walk while loop`) {
		m[w] = true
	}
	return m
}()

// parseProgram: NL* (Expr (EOE Expr)*)? EOE? EOF
func parseProgram(toks []token) ([]node, error) {
	p := &parser{toks: toks}
	exprs, err := p.parseExprs(tEOF)
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, p.unexpected("end of program")
	}
	return exprs, nil
}

// parseExprs parses expressions separated by newlines or ";" until the
// closing token ("}" or EOF), which it does not consume.
func (p *parser) parseExprs(end tokKind) ([]node, error) {
	var exprs []node
	p.skipNewlines()
	for {
		t := p.peek()
		if t.kind == tEOF || (end == tOp && p.isOp("}")) {
			return exprs, nil
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		exprs = append(exprs, e)
		// end of expression
		if p.peek().kind == tNewline {
			p.skipNewlines()
		} else if p.isOp(";") {
			p.next()
			p.skipNewlines()
		} else if p.peek().kind == tEOF || (end == tOp && p.isOp("}")) {
			return exprs, nil
		} else {
			return nil, p.unexpected("newline or \";\"")
		}
	}
}

// Expr := IfStatement | Abort | Assignment | Arithmetic
func (p *parser) parseExpr() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.peek()
	if t.kind == tIdent && t.text == "if" {
		return p.parseIf()
	}
	if t.kind == tIdent && t.text == "abort" {
		p.next()
		n := &abortNode{p: t.pos}
		nt := p.peek()
		if nt.kind == tNewline || nt.kind == tEOF || (nt.kind == tOp && (nt.text == ";" || nt.text == "}")) {
			return n, nil
		}
		msg, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		n.msg = msg
		return n, nil
	}
	return p.parseAssignment()
}

func (p *parser) parseAssignment() (node, error) {
	start := p.peek().pos
	lhs, err := p.parseArith()
	if err != nil {
		return nil, err
	}
	if p.isOp("=") || p.isOp("|=") {
		if p.isOp("|=") {
			return nil, errAt(p.peek().pos, "\"|=\" merge assignment is not supported")
		}
		tgt, err := toTarget(lhs)
		if err != nil {
			return nil, err
		}
		p.next()
		p.skipNewlines()
		rhs, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		return &assignNode{p: start, tgt: tgt, x: rhs}, nil
	}
	if p.isOp(",") {
		tgt, err := toTarget(lhs)
		if err != nil {
			return nil, err
		}
		p.next()
		second, err := p.parseArith()
		if err != nil {
			return nil, err
		}
		errTgt, err := toTarget(second)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp("="); err != nil {
			return nil, err
		}
		p.skipNewlines()
		rhs, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		return &assignNode{p: start, tgt: tgt, errTgt: errTgt, x: rhs}, nil
	}
	if u, ok := lhs.(*underscoreNode); ok {
		return nil, errAt(u.p, "syntax error: \"_\" can only be an assignment target")
	}
	return lhs, nil
}

func toTarget(n node) (*target, error) {
	switch n := n.(type) {
	case *underscoreNode:
		return &target{p: n.p, noop: true}, nil
	case *varNode:
		return &target{p: n.p, varName: n.name}, nil
	case *eventNode:
		return &target{p: n.p, event: true}, nil
	case *pathNode:
		switch b := n.base.(type) {
		case *eventNode:
			return &target{p: n.p, event: true, segs: n.segs}, nil
		case *varNode:
			return &target{p: n.p, varName: b.name, segs: n.segs}, nil
		}
	}
	return nil, errAt(n.position(), "syntax error: invalid assignment target")
}

func (p *parser) parseIf() (node, error) {
	t := p.next() // "if"
	cond, err := p.parseArith()
	if err != nil {
		return nil, err
	}
	p.skipNewlines()
	then, err := p.parseBlock()
	if err != nil {
		return nil, err
	}
	n := &ifNode{p: t.pos, cond: cond, then: then}
	// "else" may follow on a later line ("else" can't start an expression).
	j := p.i
	for p.toks[j].kind == tNewline {
		j++
	}
	if nt := p.toks[j]; nt.kind == tIdent && nt.text == "else" {
		p.i = j
		p.next()
		p.skipNewlines()
		if nt2 := p.peek(); nt2.kind == tIdent && nt2.text == "if" {
			if err := p.enter(); err != nil {
				return nil, err
			}
			inner, err := p.parseIf()
			p.leave()
			if err != nil {
				return nil, err
			}
			n.els = &blockNode{p: inner.position(), exprs: []node{inner}}
		} else {
			els, err := p.parseBlock()
			if err != nil {
				return nil, err
			}
			n.els = els
		}
	}
	return n, nil
}

func (p *parser) parseBlock() (*blockNode, error) {
	t, err := p.expectOp("{")
	if err != nil {
		return nil, err
	}
	exprs, err := p.parseExprs(tOp)
	if err != nil {
		return nil, err
	}
	if len(exprs) == 0 {
		return nil, errAt(t.pos, "syntax error: empty block")
	}
	if _, err := p.expectOp("}"); err != nil {
		return nil, err
	}
	return &blockNode{p: t.pos, exprs: exprs}, nil
}

// binary precedence levels, loosest first.
var levels = [][]string{
	{"??"},
	{"||", "&&"},
	{"==", "!="},
	{">=", ">", "<=", "<"},
	{"|"},
	{"+", "-"},
	{"*", "/"},
}

func isComparison(op string) bool {
	switch op {
	case "==", "!=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

func (p *parser) parseArith() (node, error) { return p.parseLevel(0) }

func (p *parser) parseLevel(level int) (node, error) {
	if level == len(levels) {
		return p.parseNot()
	}
	lhs, err := p.parseLevel(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tOp {
			return lhs, nil
		}
		found := false
		for _, op := range levels[level] {
			if t.text == op {
				found = true
			}
		}
		if !found {
			return lhs, nil
		}
		p.next()
		p.skipNewlines()
		rhs, err := p.parseLevel(level + 1)
		if err != nil {
			return nil, err
		}
		if isComparison(t.text) {
			if b, ok := lhs.(*binNode); ok && isComparison(b.op) {
				return nil, errAt(t.pos, "comparison operators can't be chained together")
			}
		}
		lhs = &binNode{p: t.pos, op: t.text, l: lhs, r: rhs}
	}
}

func (p *parser) parseNot() (node, error) {
	if p.isOp("!") {
		t := p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notNode{p: t.pos, x: x}, nil
	}
	return p.parseTerm()
}

func (p *parser) parseTerm() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.peek()
	var base node
	switch t.kind {
	case tInt:
		p.next()
		base = &litNode{p: t.pos, v: t.ival}
	case tFloat:
		p.next()
		base = &litNode{p: t.pos, v: t.fval}
	case tRawStr:
		p.next()
		base = &litNode{p: t.pos, v: t.text}
	case tString:
		p.next()
		base = stringNode(t)
	case tCall:
		c, err := p.parseCall()
		if err != nil {
			return nil, err
		}
		base = c
	case tIdent:
		switch t.text {
		case "true", "false":
			p.next()
			base = &litNode{p: t.pos, v: t.text == "true"}
		case "null":
			p.next()
			base = &litNode{p: t.pos, v: nil}
		case "if", "else", "abort":
			return nil, p.unexpected("expression")
		default:
			if reserved[t.text] {
				return nil, errAt(t.pos, "syntax error: %q is a reserved identifier", t.text)
			}
			p.next()
			base = &varNode{p: t.pos, name: t.text}
		}
	case tOp:
		switch t.text {
		case "-":
			nt := p.peekN(1)
			if (nt.kind == tInt || nt.kind == tFloat) && !nt.space {
				p.next()
				p.next()
				if nt.kind == tInt {
					base = &litNode{p: t.pos, v: -nt.ival}
				} else {
					base = &litNode{p: t.pos, v: -nt.fval}
				}
				break
			}
			return nil, p.unexpected("expression")
		case "_":
			p.next()
			return &underscoreNode{p: t.pos}, nil
		case ".":
			p.next()
			nt := p.peek()
			if !nt.space && startsField(nt) {
				first, err := fieldOf(nt)
				if err != nil {
					return nil, err
				}
				p.next()
				segs, err := p.parseSegments()
				if err != nil {
					return nil, err
				}
				segs = append([]pathSeg{first}, segs...)
				return &pathNode{p: t.pos, base: &eventNode{p: t.pos}, segs: segs}, nil
			}
			if !nt.space && nt.kind == tOp && nt.text == "(" {
				return nil, errAt(nt.pos, "coalescing path segments are not supported")
			}
			if !nt.space && nt.kind == tOp && nt.text == "[" {
				segs, err := p.parseSegments()
				if err != nil {
					return nil, err
				}
				return &pathNode{p: t.pos, base: &eventNode{p: t.pos}, segs: segs}, nil
			}
			return &eventNode{p: t.pos}, nil
		case "(":
			p.next()
			x, err := p.parseAssignment()
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			base = &groupNode{p: t.pos, x: x}
		case "[":
			a, err := p.parseArray()
			if err != nil {
				return nil, err
			}
			base = a
		case "{":
			if p.looksLikeObject() {
				o, err := p.parseObject()
				if err != nil {
					return nil, err
				}
				base = o
			} else {
				b, err := p.parseBlock()
				if err != nil {
					return nil, err
				}
				base = b
			}
		case "%":
			return nil, errAt(t.pos, "metadata paths (%%) are not supported")
		default:
			return nil, p.unexpected("expression")
		}
	default:
		return nil, p.unexpected("expression")
	}
	// postfix path segments directly attached to the term
	nt := p.peek()
	if !nt.space && nt.kind == tOp && (nt.text == "." || nt.text == "[") {
		segs, err := p.parseSegments()
		if err != nil {
			return nil, err
		}
		return &pathNode{p: base.position(), base: base, segs: segs}, nil
	}
	return base, nil
}

func startsField(t token) bool {
	return t.kind == tIdent || t.kind == tString || t.kind == tField || t.kind == tInt
}

// parseSegments reads ".field", ".\"field\"" and "[index]" segments that
// follow each other without whitespace.
func (p *parser) parseSegments() ([]pathSeg, error) {
	var segs []pathSeg
	for {
		t := p.peek()
		if t.space || t.kind != tOp || (t.text != "." && t.text != "[") {
			return segs, nil
		}
		if len(segs) >= MaxDepth {
			return nil, errAt(t.pos, "path exceeds %d segments", MaxDepth)
		}
		p.next()
		if t.text == "." {
			f := p.peek()
			if f.space {
				return nil, p.unexpected("path field")
			}
			if f.kind == tOp && f.text == "(" {
				return nil, errAt(f.pos, "coalescing path segments are not supported")
			}
			if !startsField(f) {
				return nil, p.unexpected("path field")
			}
			seg, err := fieldOf(f)
			if err != nil {
				return nil, err
			}
			segs = append(segs, seg)
			p.next()
			continue
		}
		// "[" integer "]"
		neg := false
		if p.isOp("-") {
			p.next()
			neg = true
		}
		it := p.peek()
		if it.kind != tInt {
			return nil, errAt(it.pos, "syntax error: path index must be an integer literal")
		}
		p.next()
		idx := it.ival
		if neg {
			idx = -idx
		}
		if _, err := p.expectOp("]"); err != nil {
			return nil, err
		}
		segs = append(segs, pathSeg{index: idx, isIndex: true})
	}
}

func (p *parser) looksLikeObject() bool {
	j := p.i + 1
	for j < len(p.toks) && p.toks[j].kind == tNewline {
		j++
	}
	if j >= len(p.toks) {
		return false
	}
	t := p.toks[j]
	if t.kind == tOp && t.text == "}" {
		return true
	}
	if t.kind == tString && j+1 < len(p.toks) {
		n := p.toks[j+1]
		return n.kind == tOp && n.text == ":"
	}
	return false
}

func (p *parser) parseObject() (node, error) {
	t := p.next() // "{"
	o := &objectNode{p: t.pos}
	p.skipNewlines()
	seen := map[string]int{}
	for !p.isOp("}") {
		kt := p.peek()
		if kt.kind != tString {
			return nil, p.unexpected("object key string")
		}
		p.next()
		key := ""
		for _, s := range kt.segs {
			if s.variable {
				key += "{{ " + s.text + " }}"
			} else {
				key += s.text
			}
		}
		if _, err := p.expectOp(":"); err != nil {
			return nil, err
		}
		p.skipNewlines()
		v, err := p.parseArith()
		if err != nil {
			return nil, err
		}
		if i, ok := seen[key]; ok { // last one wins, as in a map
			o.vals[i] = v
		} else {
			seen[key] = len(o.keys)
			o.keys = append(o.keys, key)
			o.vals = append(o.vals, v)
		}
		p.skipNewlines()
		if p.isOp(",") {
			p.next()
			p.skipNewlines()
			continue
		}
		if !p.isOp("}") {
			return nil, p.unexpected("\",\" or \"}\"")
		}
	}
	p.next()
	return o, nil
}

func (p *parser) parseArray() (node, error) {
	t := p.next() // "["
	a := &arrayNode{p: t.pos}
	p.skipNewlines()
	for !p.isOp("]") {
		v, err := p.parseArith()
		if err != nil {
			return nil, err
		}
		a.items = append(a.items, v)
		p.skipNewlines()
		if p.isOp(",") {
			p.next()
			p.skipNewlines()
			continue
		}
		if !p.isOp("]") {
			return nil, p.unexpected("\",\" or \"]\"")
		}
	}
	p.next()
	return a, nil
}

func (p *parser) parseCall() (node, error) {
	t := p.next() // name
	c := &callNode{p: t.pos, name: t.text, bang: t.bang}
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	p.skipNewlines()
	for !p.isOp(")") {
		a := callArg{p: p.peek().pos}
		if k := p.peek(); (k.kind == tIdent || k.kind == tCall) && p.peekN(1).kind == tOp && p.peekN(1).text == ":" && k.kind == tIdent {
			a.name = k.text
			p.next()
			p.next()
			p.skipNewlines()
		}
		x, err := p.parseArith()
		if err != nil {
			return nil, err
		}
		a.x = x
		c.args = append(c.args, a)
		p.skipNewlines()
		if p.isOp(",") {
			p.next()
			p.skipNewlines()
			continue
		}
		if !p.isOp(")") {
			return nil, p.unexpected("\",\" or \")\"")
		}
	}
	p.next()
	if p.isOp("->") {
		at := p.next()
		cl := &closureNode{p: at.pos}
		if p.isOp("||") {
			p.next()
		} else {
			if _, err := p.expectOp("|"); err != nil {
				return nil, err
			}
			for !p.isOp("|") {
				v := p.peek()
				switch {
				case v.kind == tIdent && !keywords[v.text] && !reserved[v.text]:
					cl.params = append(cl.params, v.text)
				case v.kind == tOp && v.text == "_":
					cl.params = append(cl.params, "")
				default:
					return nil, p.unexpected("closure parameter")
				}
				p.next()
				if p.isOp(",") {
					p.next()
					continue
				}
				if !p.isOp("|") {
					return nil, p.unexpected("\",\" or \"|\"")
				}
			}
			p.next()
		}
		p.skipNewlines()
		body, err := p.parseBlock()
		if err != nil {
			return nil, err
		}
		cl.body = body
		c.closure = cl
	}
	return c, nil
}

// stringNode turns a string literal into a literal or, for templates, into
// the concatenation VRL rewrites it to.
func stringNode(t token) node {
	var out node
	for _, s := range t.segs {
		var n node
		if s.variable {
			n = &varNode{p: s.pos, name: s.text}
		} else {
			n = &litNode{p: s.pos, v: s.text}
		}
		if out == nil {
			out = n
		} else {
			out = &binNode{p: s.pos, op: "+", l: out, r: n}
		}
	}
	if out == nil {
		return &litNode{p: t.pos, v: ""}
	}
	return out
}

func fieldOf(f token) (pathSeg, error) {
	if f.kind == tString {
		if len(f.segs) != 1 || f.segs[0].variable {
			return pathSeg{}, errAt(f.pos, "syntax error: templates are not allowed in path fields")
		}
		return pathSeg{field: f.segs[0].text}, nil
	}
	return pathSeg{field: f.text}, nil
}
