package awslocal

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/botforge/platform/shared/iampolicy"
)

// RoleCheck is one more description of a function's role its calls must
// satisfy besides template.yaml's: the role the CDK app in infra/
// synthesizes for the same function, say.
type RoleCheck struct {
	Source string // the template it comes from, for reports
	Policy []iampolicy.Statement
}

// allows decides a call of f against its role in the template it runs
// from and against every RoleCheck: all must allow it. refusedBy names the
// template that refused ("" when allowed), d its decision.
func (f *Function) allows(action, resource string, ctx map[string]string) (d iampolicy.Decision, refusedBy string) {
	req := iampolicy.Request{Action: action, Resource: resource, Context: ctx}
	if d, _ = iampolicy.Evaluate(f.Policy, req); d != iampolicy.Allow {
		return d, f.source
	}
	for _, c := range f.Checks {
		if d, _ = iampolicy.Evaluate(c.Policy, req); d != iampolicy.Allow {
			return d, c.Source
		}
	}
	return iampolicy.Allow, ""
}

// addRoleChecks reads the roles of each template of paths and makes every
// function of t check its calls against its role there too. A function of
// t without a role in one of them is an error: the two descriptions of the
// stack disagree.
func (t *Template) addRoleChecks(paths []string) error {
	for _, p := range paths {
		roles, err := ReadRoles(p, t.params)
		if err != nil {
			return err
		}
		for _, f := range t.Functions {
			st, ok := roles[f.LogicalID]
			if !ok {
				return fmt.Errorf("%s: no function %s (its role cannot be checked)", p, f.LogicalID)
			}
			f.Checks = append(f.Checks, RoleCheck{Source: p, Policy: st})
		}
	}
	return nil
}

// contextString is a call's condition keys as recorded: "k=v,k=v", sorted.
func contextString(ctx map[string]string) string {
	if len(ctx) == 0 {
		return ""
	}
	kv := make([]string, 0, len(ctx))
	for k, v := range ctx {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func parseContext(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// ReadCalls reads the calls an aws-calls.json recorded (the stack writes
// it at exit, in its data directory).
func ReadCalls(path string) ([]CallCount, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Calls) == 0 {
		return nil, fmt.Errorf("%s: no calls recorded", path)
	}
	return r.Calls, nil
}

// CheckCalls evaluates recorded calls against roles (ReadRoles): the calls
// of each function against the role of the function of the same logical
// id, the calls a service made with a role of the stack (EventBridge
// Scheduler with SchedulerRole: Function is the role's name) against that
// role. It returns the calls the roles refuse. The calls the stack already
// refused are not checked; a function or role roles does not know is an
// error.
func CheckCalls(calls []CallCount, roles Roles) (refused []CallCount, err error) {
	for _, c := range calls {
		if !c.Allowed || strings.HasPrefix(c.Function, StackName+"-code-") {
			// Deployed code's roles are made at run time by the admin
			// function, not described by the template: the stack checked
			// their calls (their inline policy, their boundary) as made.
			continue
		}
		st, ok := roles[c.Function]
		if !ok {
			return nil, fmt.Errorf("the roles have no function or role %s", c.Function)
		}
		d, _ := iampolicy.Evaluate(st, iampolicy.Request{Action: c.Action, Resource: c.Resource, Context: parseContext(c.Context)})
		if d != iampolicy.Allow {
			refused = append(refused, c)
		}
	}
	return refused, nil
}
