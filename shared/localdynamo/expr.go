package localdynamo

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/truora/minidyn/interpreter/language"
	"github.com/truora/minidyn/types"
)

// Expressions are evaluated by minidyn's interpreter. Each expression's text
// is parsed once per process (parsedTrees); only the evaluation runs per
// request and item.

// parsedTrees holds the syntax trees of the expressions parsed so far, by
// kind and text. A store sends the same few expressions again and again,
// and parsing one (minidyn builds a new parser, registering each operator)
// cost more CPU and allocations than evaluating it: about 3% of the local
// platform's CPU and 6% of its allocations per round trip. A tree is
// read-only once parsed (evaluation, the update's targets and the key
// condition's checks only read it), so one tree serves concurrent requests;
// ExpressionAttributeNames and Values are bound per request, in the
// environment. Expressions that fail to parse are not kept, and past
// maxParsedTrees new texts are parsed each time (a client sending ever new
// texts cannot grow the cache without bound).
var parsedTrees struct {
	m sync.Map // parseKey -> parsed
	n atomic.Int64
}

const maxParsedTrees = 4096

type parseKey struct {
	kind byte // 'c' a condition, 'u' an update, 'p' a projection
	text string
}

// parsed is what parsing an expression gave.
type parsed struct {
	cond   *language.ConditionalExpression
	update *language.UpdateStatement
	proj   []language.Expression
	errs   []string
}

// failed is the syntax errors of a parse, nil when it gave a tree: not nil
// (perhaps empty) when it reported errors or gave nothing.
func failed(errs []string, empty bool) []string {
	if len(errs) == 0 && !empty {
		return nil
	}
	if errs == nil {
		errs = []string{}
	}
	return errs
}

// parse returns the tree of the expression text of kind, parsing it on
// first use.
func parse(kind byte, text string) parsed {
	key := parseKey{kind, text}
	if v, ok := parsedTrees.m.Load(key); ok {
		return v.(parsed)
	}
	var out parsed
	switch kind {
	case 'c':
		p := language.NewParser(language.NewLexer(text))
		out.cond = p.ParseConditionalExpression()
		out.errs = failed(p.Errors(), out.cond.Expression == nil)
	case 'u':
		p := language.NewUpdateParser(language.NewLexer(text))
		out.update = p.ParseUpdateExpression()
		out.errs = failed(p.Errors(), out.update.Expression == nil)
	case 'p':
		p := language.NewParser(language.NewLexer(text))
		out.proj = p.ParseProjectionExpression()
		out.errs = failed(p.Errors(), len(out.proj) == 0)
	}
	if out.errs == nil && parsedTrees.n.Load() < maxParsedTrees {
		if _, loaded := parsedTrees.m.LoadOrStore(key, out); !loaded {
			parsedTrees.n.Add(1)
		}
	}
	return out
}

// exprInput is the ExpressionAttributeNames and Values of a request.
type exprInput struct {
	Names  map[string]string `json:"ExpressionAttributeNames"`
	Values item              `json:"ExpressionAttributeValues"`
}

var (
	namePlaceholder  = regexp.MustCompile(`#[A-Za-z0-9_]+`)
	valuePlaceholder = regexp.MustCompile(`:[A-Za-z0-9_]+`)
)

// checkPlaceholders applies DynamoDB's rules: every placeholder used is
// defined, every one defined is used, and values are valid.
func (in exprInput) checkPlaceholders(exprs ...string) error {
	all := strings.Join(exprs, " ")
	usedNames := map[string]bool{}
	for _, n := range namePlaceholder.FindAllString(all, -1) {
		usedNames[n] = true
		if _, ok := in.Names[n]; !ok {
			return fmt.Errorf("Value provided in ExpressionAttributeNames unused in expressions: unresolved attribute name: %s; An expression attribute name used in the document path is not defined; attribute name: %s", n, n)
		}
	}
	usedValues := map[string]bool{}
	for _, v := range valuePlaceholder.FindAllString(all, -1) {
		usedValues[v] = true
		if _, ok := in.Values[v]; !ok {
			return fmt.Errorf("An expression attribute value used in expression is not defined; attribute value: %s", v)
		}
	}
	if unused := unusedKeys(in.Names, usedNames); len(unused) > 0 {
		return fmt.Errorf("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", strings.Join(unused, ", "))
	}
	if unused := unusedKeys(in.Values, usedValues); len(unused) > 0 {
		return fmt.Errorf("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", strings.Join(unused, ", "))
	}
	for k, v := range in.Values {
		if err := checkValue(v); err != nil {
			return fmt.Errorf("ExpressionAttributeValues contains invalid value: %s for key %s", err.Error(), k)
		}
	}
	return nil
}

func unusedKeys[V any](m map[string]V, used map[string]bool) []string {
	var out []string
	for k := range m {
		if !used[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// env returns a fresh interpreter environment holding it and the values.
func (in exprInput) env(it item) (*language.Environment, error) {
	env := language.NewEnvironment()
	env.Aliases = maps.Clone(in.Names)
	if env.Aliases == nil {
		env.Aliases = map[string]string{}
	}
	if err := env.AddAttributes(it); err != nil {
		return nil, err
	}
	if err := env.AddAttributes(in.Values); err != nil {
		return nil, err
	}
	return env, nil
}

// condition is a parsed condition, filter or key condition expression.
type condition struct {
	ast  *language.ConditionalExpression
	in   exprInput
	what string // ConditionExpression, FilterExpression...
}

// compileCondition parses expr; an empty expression gives nil (always true).
func compileCondition(what, expr string, in exprInput) (*condition, error) {
	if strings.TrimSpace(expr) == "" {
		if expr != "" {
			return nil, fmt.Errorf("Invalid %s: The expression can not be empty;", what)
		}
		return nil, nil
	}
	t := parse('c', expr)
	if t.errs != nil {
		return nil, fmt.Errorf("Invalid %s: Syntax error; %s", what, strings.Join(t.errs, "; "))
	}
	return &condition{ast: t.cond, in: in, what: what}, nil
}

// match evaluates the condition on it (an empty item for a missing one).
func (c *condition) match(it item) (bool, error) {
	if c == nil {
		return true, nil
	}
	if it == nil {
		it = item{}
	}
	env, err := c.in.env(it)
	if err != nil {
		return false, fmt.Errorf("Invalid %s: %v", c.what, err)
	}
	res := language.Eval(c.ast, env)
	if res.Type() == language.ObjectTypeError {
		return false, fmt.Errorf("Invalid %s: %s", c.what, res.Inspect())
	}
	return res == language.TRUE, nil
}

// update is a parsed update expression.
type update struct {
	stmt *language.UpdateStatement
	in   exprInput
}

func compileUpdate(expr string, in exprInput) (*update, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("Invalid UpdateExpression: The expression can not be empty;")
	}
	t := parse('u', expr)
	if t.errs != nil {
		return nil, fmt.Errorf("Invalid UpdateExpression: Syntax error; %s", strings.Join(t.errs, "; "))
	}
	return &update{stmt: t.update, in: in}, nil
}

// apply returns the item the update makes of old (which it leaves alone).
func (u *update) apply(old item) (item, error) {
	env, err := u.in.env(cloneItem(old))
	if err != nil {
		return nil, fmt.Errorf("Invalid UpdateExpression: %v", err)
	}
	res := language.EvalUpdate(u.stmt, env)
	if res.Type() == language.ObjectTypeError {
		if e, ok := res.(*language.Error); ok {
			return nil, fmt.Errorf("Invalid UpdateExpression: %s", e.Message)
		}
		return nil, fmt.Errorf("Invalid UpdateExpression: %s", res.Inspect())
	}
	exclude := map[string]bool{}
	for k := range u.in.Values {
		exclude[k] = true
	}
	out := item{}
	env.Apply(out, u.in.Names, exclude)
	for k, v := range out {
		if err := checkValue(v); err != nil {
			return nil, fmt.Errorf("Invalid UpdateExpression: attribute %s: %v", k, err)
		}
	}
	return out, nil
}

// targets returns the top-level attributes the update expression writes.
func (u *update) targets() []string {
	var out []string
	var walk func(e language.Expression)
	walk = func(e language.Expression) {
		switch n := e.(type) {
		case *language.UpdateExpression:
			for _, s := range n.Expressions {
				walk(s)
			}
		case *language.ActionExpression:
			root := n.Left
			for {
				ix, ok := root.(*language.IndexExpression)
				if !ok {
					break
				}
				root = ix.Left
			}
			if id, ok := root.(*language.Identifier); ok {
				name := id.Value
				if a, ok := u.in.Names[name]; ok {
					name = a
				}
				out = append(out, name)
			}
		}
	}
	walk(u.stmt.Expression)
	return out
}

// projection is a parsed projection expression.
type projection struct {
	exprs []language.Expression
	in    exprInput
}

func compileProjection(expr string, in exprInput) (*projection, error) {
	if expr == "" {
		return nil, nil
	}
	t := parse('p', expr)
	if t.errs != nil {
		return nil, fmt.Errorf("Invalid ProjectionExpression: Syntax error; %s", strings.Join(t.errs, "; "))
	}
	return &projection{exprs: t.proj, in: in}, nil
}

// apply returns the projected attributes of it.
func (p *projection) apply(it item) (item, error) {
	if p == nil || it == nil {
		return it, nil
	}
	env := language.NewEnvironment()
	env.Aliases = maps.Clone(p.in.Names)
	if env.Aliases == nil {
		env.Aliases = map[string]string{}
	}
	if err := env.AddAttributes(it); err != nil {
		return nil, err
	}
	out := map[string]*types.Item{}
	for _, e := range p.exprs {
		res := language.Eval(e, env)
		if language.IsUndefinedObject(res) {
			continue
		}
		if res.Type() == language.ObjectTypeError {
			return nil, fmt.Errorf("Invalid ProjectionExpression: %s", res.Inspect())
		}
		path, err := language.ExtractPath(e, env)
		if err != nil {
			return nil, fmt.Errorf("Invalid ProjectionExpression: %v", err)
		}
		language.SetProjectedPath(out, path, res.ToDynamoDB())
	}
	return out, nil
}

// keyCondition is a Query's KeyConditionExpression reduced to what bounds
// the scan: the partition key value and an optional sort key condition.
type keyCondition struct {
	hashValue *types.Item
	op        string // "", "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"
	a, b      *types.Item
}

// compileKeyCondition checks that expr is what DynamoDB accepts as a key
// condition for the key schema (hash, rng).
func compileKeyCondition(expr string, in exprInput, hash, rng string) (*keyCondition, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("Query condition missed key schema element"+format, args...)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	t := parse('c', expr)
	if t.errs != nil {
		return nil, fmt.Errorf("Invalid KeyConditionExpression: Syntax error; %s", strings.Join(t.errs, "; "))
	}
	ast := t.cond
	var parts []language.Expression
	var split func(e language.Expression) error
	split = func(e language.Expression) error {
		if inf, ok := e.(*language.InfixExpression); ok && strings.EqualFold(inf.Operator, "AND") {
			if err := split(inf.Left); err != nil {
				return err
			}
			return split(inf.Right)
		}
		parts = append(parts, e)
		return nil
	}
	if err := split(ast.Expression); err != nil {
		return nil, err
	}
	if len(parts) > 2 {
		return nil, fmt.Errorf("Invalid KeyConditionExpression: The expression has too many conditions")
	}
	name := func(e language.Expression) (string, bool) {
		id, ok := e.(*language.Identifier)
		if !ok || strings.HasPrefix(id.Value, ":") {
			return "", false
		}
		n := id.Value
		if strings.HasPrefix(n, "#") {
			a, ok := in.Names[n]
			if !ok {
				return "", false
			}
			n = a
		}
		return n, true
	}
	value := func(e language.Expression) (*types.Item, error) {
		id, ok := e.(*language.Identifier)
		if !ok || !strings.HasPrefix(id.Value, ":") {
			return nil, fmt.Errorf("Invalid KeyConditionExpression: key conditions compare a key attribute with a value")
		}
		v, ok := in.Values[id.Value]
		if !ok {
			return nil, fmt.Errorf("An expression attribute value used in expression is not defined; attribute value: %s", id.Value)
		}
		return v, nil
	}
	kc := &keyCondition{}
	for _, part := range parts {
		var attr, op string
		var args []language.Expression
		switch e := part.(type) {
		case *language.InfixExpression:
			n, ok := name(e.Left)
			if !ok {
				return nil, fmt.Errorf("Invalid KeyConditionExpression: the left side of %s must be a key attribute", e.Operator)
			}
			attr, op, args = n, e.Operator, []language.Expression{e.Right}
		case *language.BetweenExpression:
			n, ok := name(e.Left)
			if !ok {
				return nil, fmt.Errorf("Invalid KeyConditionExpression: BETWEEN applies to a key attribute")
			}
			attr, op, args = n, "BETWEEN", e.Range[:]
		case *language.CallExpression:
			fn, _ := e.Function.(*language.Identifier)
			if fn == nil || fn.Value != "begins_with" || len(e.Arguments) != 2 {
				return nil, fmt.Errorf("Invalid KeyConditionExpression: the only function allowed is begins_with(sortKey, :prefix)")
			}
			n, ok := name(e.Arguments[0])
			if !ok {
				return nil, fmt.Errorf("Invalid KeyConditionExpression: begins_with applies to a key attribute")
			}
			attr, op, args = n, "begins_with", e.Arguments[1:]
		default:
			return nil, fmt.Errorf("Invalid KeyConditionExpression: unsupported condition %s", part.String())
		}
		vals := make([]*types.Item, len(args))
		for i, a := range args {
			v, err := value(a)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		switch {
		case attr == hash:
			if op != "=" {
				return nil, fmt.Errorf("Query key condition not supported")
			}
			if kc.hashValue != nil {
				return nil, fmt.Errorf("Invalid KeyConditionExpression: the partition key appears twice")
			}
			kc.hashValue = vals[0]
		case attr == rng && rng != "":
			switch op {
			case "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with":
			default:
				return nil, fmt.Errorf("Invalid KeyConditionExpression: operator %s is not supported on the sort key", op)
			}
			if kc.op != "" {
				return nil, fmt.Errorf("Invalid KeyConditionExpression: the sort key appears twice")
			}
			kc.op, kc.a = op, vals[0]
			if op == "BETWEEN" {
				kc.b = vals[1]
			}
		default:
			return nil, fmt.Errorf("Query condition missed key schema element: %s", hash)
		}
	}
	if kc.hashValue == nil {
		return nil, bad(": %s", hash)
	}
	return kc, nil
}
