package awslocal

import (
	"fmt"
)

// A template's conditions (its Conditions section, evaluated against the
// stack's parameters) and Fn::If: template.yaml's StreamTier selects the
// stream tier (docs/deploy.md "Stream tiers"), and ChatStreamUrl is the
// function URL or the load balancer's address by it.

// Condition evaluates the template's condition name (false when the
// template has none of that name).
func (t *Template) Condition(name string) (bool, error) {
	c, ok := t.conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %s", name)
	}
	return t.evalCondition(c)
}

// Param is the stack's value of parameter name (its default unless set).
func (t *Template) Param(name string) string { return t.params[name] }

// SetAttribute makes !GetAtt id.attr resolve to value: the address of a
// stand-in for a resource the stack runs outside the template's
// functions (the stream tier's load balancer).
func (t *Template) SetAttribute(id, attr, value string) {
	if t.attrs == nil {
		t.attrs = map[string]string{}
	}
	t.attrs[id+"."+attr] = value
}

func (t *Template) evalCondition(v any) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("condition %v", v)
	}
	for k, arg := range m {
		args, _ := arg.([]any)
		switch k {
		case "Condition", "Fn::Condition":
			return t.Condition(fmt.Sprint(arg))
		case "Fn::Equals":
			if len(args) != 2 {
				return false, fmt.Errorf("Fn::Equals %v", arg)
			}
			a, err := t.str(args[0])
			if err != nil {
				return false, err
			}
			b, err := t.str(args[1])
			if err != nil {
				return false, err
			}
			return a == b, nil
		case "Fn::Not":
			if len(args) != 1 {
				return false, fmt.Errorf("Fn::Not %v", arg)
			}
			c, err := t.evalCondition(args[0])
			return !c, err
		case "Fn::And", "Fn::Or":
			and := k == "Fn::And"
			for _, a := range args {
				c, err := t.evalCondition(a)
				if err != nil {
					return false, err
				}
				if c != and {
					return c, nil
				}
			}
			return and, nil
		}
	}
	return false, fmt.Errorf("condition %v", v)
}

// fnIf resolves Fn::If [condition, then, else].
func (t *Template) fnIf(arg any) (any, error) {
	a, _ := arg.([]any)
	if len(a) != 3 {
		return nil, fmt.Errorf("Fn::If %v", arg)
	}
	c, err := t.Condition(fmt.Sprint(a[0]))
	if err != nil {
		return nil, err
	}
	if c {
		return t.resolve(a[1])
	}
	return t.resolve(a[2])
}
