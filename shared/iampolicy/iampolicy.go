// Package iampolicy evaluates IAM identity policies as AWS does for a role's
// own calls: an explicit Deny wins, then any Allow, otherwise the call is
// implicitly denied. It knows what the platform's template.yaml uses:
// Action and NotAction, Resource and NotResource with * and ? wildcards
// (actions case-insensitive, resources case-sensitive), and the condition
// operators StringEquals, StringNotEquals, StringLike, StringNotLike, Bool
// and ArnLike/ArnEquals (with ...IfExists). An unknown operator never
// matches: an Allow depending on it allows nothing, as with a condition
// whose key the call lacks.
package iampolicy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Statement is one statement of a policy document.
type Statement struct {
	Sid         string
	Effect      string // Allow or Deny
	Action      []string
	NotAction   []string
	Resource    []string
	NotResource []string
	// Condition: operator -> key -> values.
	Condition map[string]map[string][]string
}

// Request is one call to authorize: "dynamodb:PutItem" on an ARN, with the
// condition keys the call carries ("iam:PassedToService", ...).
type Request struct {
	Action   string
	Resource string
	Context  map[string]string
}

// Decision is the result of an evaluation.
type Decision int

const (
	ImplicitDeny Decision = iota // no statement allows the call
	Allow
	ExplicitDeny
)

func (d Decision) String() string {
	return [...]string{"implicit deny", "allow", "explicit deny"}[d]
}

// Evaluate decides req against statements (one role's policies, flattened).
// It also returns the statement that decided (the Deny or the first
// Allow), for reports.
func Evaluate(statements []Statement, req Request) (Decision, *Statement) {
	var allowed *Statement
	for i := range statements {
		s := &statements[i]
		if !s.matches(req) {
			continue
		}
		if strings.EqualFold(s.Effect, "Deny") {
			return ExplicitDeny, s
		}
		if allowed == nil && strings.EqualFold(s.Effect, "Allow") {
			allowed = s
		}
	}
	if allowed != nil {
		return Allow, allowed
	}
	return ImplicitDeny, nil
}

func (s *Statement) matches(req Request) bool {
	switch {
	case len(s.Action) > 0:
		if !anyMatch(s.Action, req.Action, true) {
			return false
		}
	case len(s.NotAction) > 0:
		if anyMatch(s.NotAction, req.Action, true) {
			return false
		}
	default:
		return false
	}
	switch {
	case len(s.Resource) > 0:
		if !anyMatch(s.Resource, req.Resource, false) {
			return false
		}
	case len(s.NotResource) > 0:
		if anyMatch(s.NotResource, req.Resource, false) {
			return false
		}
	default:
		return false
	}
	for op, keys := range s.Condition {
		for key, values := range keys {
			if !condition(op, req.Context, key, values) {
				return false
			}
		}
	}
	return true
}

func anyMatch(patterns []string, v string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			if Match(strings.ToLower(p), strings.ToLower(v)) {
				return true
			}
		} else if Match(p, v) {
			return true
		}
	}
	return false
}

// condition evaluates one condition key: any of the values matches (IAM's
// OR within a key). A key the request lacks fails the condition unless the
// operator ends in IfExists, or is a negation (StringNotEquals of a missing
// key holds, as in IAM).
func condition(op string, ctx map[string]string, key string, values []string) bool {
	base, ifExists := strings.CutSuffix(op, "IfExists")
	got, ok := ctx[key]
	if !ok {
		for k, v := range ctx { // condition keys are case-insensitive
			if strings.EqualFold(k, key) {
				got, ok = v, true
			}
		}
	}
	if !ok {
		return ifExists || strings.Contains(base, "Not")
	}
	any := func(f func(string) bool) bool {
		for _, v := range values {
			if f(v) {
				return true
			}
		}
		return false
	}
	switch base {
	case "StringEquals", "ArnEquals":
		return any(func(v string) bool { return got == v })
	case "StringNotEquals", "ArnNotEquals":
		return !any(func(v string) bool { return got == v })
	case "StringEqualsIgnoreCase":
		return any(func(v string) bool { return strings.EqualFold(got, v) })
	case "StringLike", "ArnLike":
		return any(func(v string) bool { return Match(v, got) })
	case "StringNotLike", "ArnNotLike":
		return !any(func(v string) bool { return Match(v, got) })
	case "Bool":
		return any(func(v string) bool { return strings.EqualFold(got, v) })
	}
	return false
}

// Match reports whether s matches pattern, where * matches any run of
// characters (none included) and ? exactly one.
func Match(pattern, s string) bool {
	// Iterative wildcard matching with backtracking to the last star.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// ParseStatements reads the Statement of a policy document whose values
// are already resolved to strings: a single statement or a list, each of
// Action/Resource a string or a list, Condition values a string, a bool or
// a list.
func ParseStatements(v any) ([]Statement, error) {
	var raw []any
	switch x := v.(type) {
	case []any:
		raw = x
	case map[string]any:
		raw = []any{x}
	default:
		return nil, fmt.Errorf("policy statement: %T", v)
	}
	out := make([]Statement, 0, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("statement %d: %T", i, r)
		}
		s := Statement{Condition: map[string]map[string][]string{}}
		s.Sid, _ = m["Sid"].(string)
		s.Effect, _ = m["Effect"].(string)
		var err error
		for field, dst := range map[string]*[]string{"Action": &s.Action, "NotAction": &s.NotAction, "Resource": &s.Resource, "NotResource": &s.NotResource} {
			if m[field] == nil {
				continue
			}
			if *dst, err = stringList(m[field]); err != nil {
				return nil, fmt.Errorf("statement %d %s: %w", i, field, err)
			}
		}
		if c, ok := m["Condition"].(map[string]any); ok {
			for op, keys := range c {
				km, ok := keys.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("statement %d condition %s: %T", i, op, keys)
				}
				s.Condition[op] = map[string][]string{}
				for k, vals := range km {
					if s.Condition[op][k], err = stringList(vals); err != nil {
						return nil, fmt.Errorf("statement %d condition %s %s: %w", i, op, k, err)
					}
				}
			}
		}
		if s.Effect != "Allow" && s.Effect != "Deny" {
			return nil, fmt.Errorf("statement %d: Effect %q", i, s.Effect)
		}
		out = append(out, s)
	}
	return out, nil
}

func stringList(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case bool:
		return []string{fmt.Sprint(x)}, nil
	case json.Number:
		return []string{x.String()}, nil
	case float64, int:
		return []string{fmt.Sprint(x)}, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, err := stringList(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unresolved value %v (%T)", v, v)
}
