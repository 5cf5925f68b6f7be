package awslocal

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/botforge/platform/shared/iampolicy"
)

// The stack's identity: what CloudFormation would make of template.yaml
// deployed as stack StackName in Region of account Account.
const (
	StackName = "bot-platform"
	Region    = "us-east-1"
	Account   = "123456789012"
	stackUUID = "6f1c0a52-7d3e-4a8b-9c1d-00000000a001"
	StackID   = "arn:aws:cloudformation:" + Region + ":" + Account + ":stack/" + StackName + "/" + stackUUID
)

// Template is template.yaml read for the local stack: its functions (with
// their environment, routes, event sources and role), resolved against the
// stack's names and ARNs.
type Template struct {
	Functions []*Function
	Routes    []Route
	// Skipped are the functions the stack cannot run: no Makefile target
	// build-<LogicalId> names a Go package of the repository for them.
	Skipped []string
	// TableName, BucketName: the physical names of the stack's table and
	// bucket.
	TableName, BucketName string
	TableARN, StreamARN   string
	// bucketCORS: the CORS rules of the stack's buckets, by physical name
	// (s3cors.go).
	bucketCORS map[string][]corsRule
	resources  map[string]map[string]any
	params     map[string]string
	path       string // the template's file
	apiURL     string
	// queueBase is the SQS endpoint the queues' URLs are at (SetQueueBase).
	queueBase string
	outputs   map[string]any
	// functionURLs are the served function URLs by the logical id of the
	// AWS::Lambda::Url SAM makes of a FunctionUrlConfig (<function>Url),
	// known once the stack listens (SetFunctionURL).
	functionURLs map[string]string
	conditions   map[string]any    // the Conditions section (conditions.go)
	attrs        map[string]string // attributes of stand-ins, "id.attr" (SetAttribute)
}

// Function is one AWS::Serverless::Function of the template.
type Function struct {
	LogicalID string
	Name      string // FunctionName: <stack>-admin
	ARN       string
	Package   string // the Go package the Makefile's build-<LogicalId> builds: ./functions/admin
	Env       map[string]string
	Timeout   int // seconds
	Memory    int // MB
	// Reserved is the function's ReservedConcurrentExecutions (-1: none,
	// it shares the account's unreserved pool); ReservedParam the stack
	// parameter it is a Ref to, if any.
	Reserved      int
	ReservedParam string
	RoleID        string
	// Policy is the role's statements (inline policies and the template's
	// managed policies, flattened).
	Policy []iampolicy.Statement
	// Checks are the function's roles in other templates (the CDK app's):
	// a call must be allowed by these too (Options.CheckRoles).
	Checks   []RoleCheck
	source   string         // the template Policy comes from
	lateEnv  map[string]any // environment known once the stack serves it (resolveLateEnv)
	Stream   *StreamSource  // a DynamoDB event source
	S3       *S3Source      // an S3 event source
	Schedule []string       // Schedule events' expressions
	Routes   []Route        // HttpApi events
	URL      *FunctionURLConfig
}

// FunctionURLConfig is a function's FunctionUrlConfig: its URL's auth and
// whether the answer is streamed.
type FunctionURLConfig struct {
	AuthType   string // NONE or AWS_IAM
	InvokeMode string // BUFFERED (the default) or RESPONSE_STREAM
}

// Streaming says whether the URL streams the function's answer.
func (c *FunctionURLConfig) Streaming() bool { return c.InvokeMode == "RESPONSE_STREAM" }

// Route is an HTTP API route: "ANY /v1/admin/{proxy+}" to a function.
type Route struct {
	Method, Path string
	Function     *Function
}

// Key is the route key: "ANY /v1/tables" or "$default".
func (r Route) Key() string {
	if r.Path == "$default" {
		return "$default"
	}
	return r.Method + " " + r.Path
}

// StreamSource is a DynamoDB event source mapping.
type StreamSource struct {
	StreamARN        string
	BatchSize        int
	WindowSeconds    int
	MaxRetryAttempts int
	// Parallelization is the ParallelizationFactor: concurrent batches
	// of the shard (the stack's stream is one shard).
	Parallelization int
	Filters         []string // FilterCriteria patterns (JSON)
	// MaxRecordAgeSeconds: a record older is not sent again (-1: until it
	// expires); Bisect: a failed batch is halved and each half retried;
	// OnFailure: the ARN of the SQS queue a given-up batch's on-failure
	// record goes to ("" none: it is dropped).
	MaxRecordAgeSeconds int
	Bisect              bool
	OnFailure           string
}

// S3Source is an S3 event notification.
type S3Source struct {
	Bucket         string
	Events         []string
	Prefix, Suffix string
}

// ReadTemplate reads and resolves the template at path; makefile is the
// Makefile whose build-<LogicalId> targets say which package each function
// is; params are the stack's parameter values (defaults otherwise); apiURL
// is the HTTP API's endpoint (HttpApi.ApiEndpoint).
func ReadTemplate(path, makefile string, params map[string]string, apiURL string) (*Template, error) {
	t, root, err := parseTemplate(path, params, apiURL)
	if err != nil {
		return nil, err
	}
	res, _ := root["Resources"].(map[string]any)
	// A resource whose Condition is false does not exist in this stack
	// (with StreamTier container: ChatStreamFunction and its URL).
	for id := range res {
		c, ok := t.resources[id]["Condition"]
		if !ok {
			continue
		}
		on, err := t.Condition(fmt.Sprint(c))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, id, err)
		}
		if !on {
			delete(res, id)
			delete(t.resources, id)
		}
	}
	mk, err := os.ReadFile(makefile)
	if err != nil {
		return nil, err
	}
	var globals map[string]any
	if g, ok := root["Globals"].(map[string]any); ok {
		globals, _ = g["Function"].(map[string]any)
	}
	ids := make([]string, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if t.typeOf(id) == "AWS::DynamoDB::Table" {
			t.TableName, _ = t.ref(id)
			t.TableARN, _ = t.getAtt(id, "Arn")
			t.StreamARN, _ = t.getAtt(id, "StreamArn")
		}
		if t.typeOf(id) == "AWS::S3::Bucket" {
			t.BucketName, _ = t.ref(id)
			rules, err := t.readBucketCORS(id)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
			if t.bucketCORS == nil {
				t.bucketCORS = map[string][]corsRule{}
			}
			t.bucketCORS[t.BucketName] = rules
		}
		if t.typeOf(id) != "AWS::Serverless::Function" {
			continue
		}
		f, err := t.function(id, globals, string(mk))
		if errors.Is(err, errNoPackage) {
			// Not a Go function of the repository (inline code, a
			// custom resource's handler): the stack runs without it.
			t.Skipped = append(t.Skipped, id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		t.Functions = append(t.Functions, f)
		t.Routes = append(t.Routes, f.Routes...)
	}
	t.outputs, _ = root["Outputs"].(map[string]any)
	return t, nil
}

// resolveLateEnv resolves the environment variables of fn that name an
// attribute served by the stack (a function URL, the load balancer's
// address), once they are served, into fn.Env.
func (t *Template) resolveLateEnv(fn *Function) error {
	for k, v := range fn.lateEnv {
		s, err := t.str(v)
		if err != nil {
			return fmt.Errorf("%s: environment %s: %w", fn.LogicalID, k, err)
		}
		fn.Env[k] = s
	}
	return nil
}

// SetFunctionURL records where fn's URL is served (ending with '/', as
// Lambda's FunctionUrl): !GetAtt <fn>Url.FunctionUrl resolves to it.
func (t *Template) SetFunctionURL(fn *Function, url string) {
	if t.functionURLs == nil {
		t.functionURLs = map[string]string{}
	}
	t.functionURLs[fn.LogicalID+"Url"] = url
}

// Outputs are the template's outputs that resolve here (ApiUrl,
// ChatStreamUrl once its URL is served, the table's name, ...), by name.
func (t *Template) Outputs() map[string]string {
	out := map[string]string{}
	for name, o := range t.outputs {
		om, _ := o.(map[string]any)
		if v, err := t.str(om["Value"]); err == nil {
			out[name] = v
		}
	}
	return out
}

// parseTemplate reads a CloudFormation template (YAML with the short
// tags, or JSON) and the stack's parameter values.
func parseTemplate(path string, params map[string]string, apiURL string) (*Template, map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	v, err := nodeValue(&doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	root, _ := v.(map[string]any)
	t := &Template{resources: map[string]map[string]any{}, params: map[string]string{}, apiURL: apiURL, path: filepath.Base(path)}
	if ps, ok := root["Parameters"].(map[string]any); ok {
		for name, p := range ps {
			pm, _ := p.(map[string]any)
			if d, ok := pm["Default"]; ok {
				t.params[name] = fmt.Sprint(d)
			}
		}
	}
	for k, v := range params {
		t.params[k] = v
	}
	res, _ := root["Resources"].(map[string]any)
	for id, r := range res {
		rm, _ := r.(map[string]any)
		t.resources[id] = rm
	}
	t.conditions, _ = root["Conditions"].(map[string]any)
	return t, root, nil
}

// Roles are the roles of a template: a function's by the function's
// logical id, every role by its name too; each role's statements,
// flattened.
type Roles map[string][]iampolicy.Statement

// ReadRoles reads the role of each function of a CloudFormation template,
// resolved against the same stack names and ARNs as ReadTemplate: the
// functions of template.yaml (AWS::Serverless::Function) or of the
// template the CDK app in infra/ synthesizes (AWS::Lambda::Function, the
// same logical ids). The stack checks its functions' calls against these
// too (Options.CheckRoles), and CheckCalls a record of calls.
func ReadRoles(path string, params map[string]string) (Roles, error) {
	t, _, err := parseTemplate(path, params, "")
	if err != nil {
		return nil, err
	}
	roles := Roles{}
	for id := range t.resources {
		switch t.typeOf(id) {
		case "AWS::Serverless::Function", "AWS::Lambda::Function":
		default:
			continue
		}
		role, _ := t.props(id)["Role"].(map[string]any)
		ga, _ := role["Fn::GetAtt"].([]any)
		if len(ga) != 2 || t.typeOf(fmt.Sprint(ga[0])) != "AWS::IAM::Role" {
			return nil, fmt.Errorf("%s: %s: Role is not !GetAtt <a role of the template>.Arn", path, id)
		}
		st, err := t.rolePolicy(fmt.Sprint(ga[0]))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: role %v: %w", path, id, ga[0], err)
		}
		roles[id] = st
	}
	// The roles services assume (SchedulerRole: EventBridge Scheduler's),
	// by name: the stack records their calls under it.
	for id := range t.resources {
		if t.typeOf(id) != "AWS::IAM::Role" {
			continue
		}
		name, err := t.ref(id)
		if err != nil {
			return nil, err
		}
		if st, err := t.rolePolicy(id); err == nil {
			roles[name] = st
		}
	}
	return roles, nil
}

// FunctionByName finds a function by its FunctionName or logical id.
func (t *Template) FunctionByName(name string) *Function {
	for _, f := range t.Functions {
		if f.Name == name || f.LogicalID == name {
			return f
		}
	}
	return nil
}

func (t *Template) typeOf(id string) string {
	s, _ := t.resources[id]["Type"].(string)
	return s
}

func (t *Template) props(id string) map[string]any {
	p, _ := t.resources[id]["Properties"].(map[string]any)
	return p
}

var errNoPackage = errors.New("no Go package: no Makefile target")

// errNotYet: an attribute known once the stack serves its resource (a
// function URL, the load balancer's address).
var errNotYet = errors.New("not known until the stack serves it")

var buildTarget = regexp.MustCompile(`(?m)^build-(\w+):\s*\n\t[^\n]*?(\./functions/[\w-]+)`)

func (t *Template) function(id string, globals map[string]any, makefile string) (*Function, error) {
	p := t.props(id)
	f := &Function{LogicalID: id, Env: map[string]string{}, Timeout: 3, Memory: 128, Reserved: -1, source: t.path}
	for _, m := range buildTarget.FindAllStringSubmatch(makefile, -1) {
		if m[1] == id {
			f.Package = m[2]
		}
	}
	if f.Package == "" {
		return nil, fmt.Errorf("%w build-%s", errNoPackage, id)
	}
	var err error
	if f.Name, err = t.ref(id); err != nil {
		return nil, err
	}
	f.ARN, _ = t.getAtt(id, "Arn")
	for _, src := range []map[string]any{globals, p} {
		if n, ok := src["Timeout"]; ok {
			f.Timeout, _ = strconv.Atoi(fmt.Sprint(n))
		}
		if n, ok := src["MemorySize"]; ok {
			f.Memory, _ = strconv.Atoi(fmt.Sprint(n))
		}
		if n, ok := src["ReservedConcurrentExecutions"]; ok {
			v, err := t.str(n)
			if err != nil {
				return nil, fmt.Errorf("ReservedConcurrentExecutions: %w", err)
			}
			if f.Reserved, err = strconv.Atoi(v); err != nil || f.Reserved < 0 {
				return nil, fmt.Errorf("ReservedConcurrentExecutions %q: not a non-negative integer", v)
			}
			if m, ok := n.(map[string]any); ok {
				f.ReservedParam, _ = m["Ref"].(string)
			}
		}
		env, _ := src["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		for k, v := range vars {
			s, err := t.str(v)
			if errors.Is(err, errNotYet) {
				// The chat function's PLATFORM_CHAT_STREAM_URL: resolved
				// once the stream function's URL or the load balancer is
				// served (ResolveLateEnv).
				if f.lateEnv == nil {
					f.lateEnv = map[string]any{}
				}
				f.lateEnv[k] = v
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("environment %s: %w", k, err)
			}
			f.Env[k] = s
		}
	}
	role, ok := p["Role"].(map[string]any)
	if ga, isGA := role["Fn::GetAtt"].([]any); ok && isGA && len(ga) == 2 {
		f.RoleID, _ = ga[0].(string)
	}
	if f.RoleID == "" || t.typeOf(f.RoleID) != "AWS::IAM::Role" {
		return nil, fmt.Errorf("Role is not !GetAtt <a role of the template>.Arn")
	}
	if f.Policy, err = t.rolePolicy(f.RoleID); err != nil {
		return nil, fmt.Errorf("role %s: %w", f.RoleID, err)
	}
	evs, _ := p["Events"].(map[string]any)
	names := make([]string, 0, len(evs))
	for n := range evs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ev, _ := evs[n].(map[string]any)
		ep, _ := ev["Properties"].(map[string]any)
		switch ev["Type"] {
		case "HttpApi":
			method, _ := ep["Method"].(string)
			path, _ := ep["Path"].(string)
			if method == "" {
				method = "ANY"
			}
			f.Routes = append(f.Routes, Route{Method: strings.ToUpper(method), Path: path, Function: f})
		case "DynamoDB":
			s := &StreamSource{BatchSize: 100}
			if s.StreamARN, err = t.str(ep["Stream"]); err != nil {
				return nil, err
			}
			if n, ok := ep["BatchSize"]; ok {
				s.BatchSize, _ = strconv.Atoi(fmt.Sprint(n))
			}
			if n, ok := ep["MaximumBatchingWindowInSeconds"]; ok {
				s.WindowSeconds, _ = strconv.Atoi(fmt.Sprint(n))
			}
			s.MaxRetryAttempts = -1 // until the record expires
			if n, ok := ep["MaximumRetryAttempts"]; ok {
				s.MaxRetryAttempts, _ = strconv.Atoi(fmt.Sprint(n))
			}
			s.Parallelization = 1
			if n, ok := ep["ParallelizationFactor"]; ok {
				s.Parallelization, _ = strconv.Atoi(fmt.Sprint(n))
			}
			s.MaxRecordAgeSeconds = -1
			if n, ok := ep["MaximumRecordAgeInSeconds"]; ok {
				s.MaxRecordAgeSeconds, _ = strconv.Atoi(fmt.Sprint(n))
			}
			if b, ok := ep["BisectBatchOnFunctionError"]; ok {
				s.Bisect = fmt.Sprint(b) == "true"
			}
			if dc, ok := ep["DestinationConfig"].(map[string]any); ok {
				of, _ := dc["OnFailure"].(map[string]any)
				if s.OnFailure, err = t.str(of["Destination"]); err != nil {
					return nil, fmt.Errorf("DestinationConfig.OnFailure.Destination: %w", err)
				}
				if typ := fmt.Sprint(of["Type"]); typ != "SQS" {
					return nil, fmt.Errorf("DestinationConfig.OnFailure.Type %q: only SQS runs here", typ)
				}
			}
			fc, _ := ep["FilterCriteria"].(map[string]any)
			fl, _ := fc["Filters"].([]any)
			for _, x := range fl {
				xm, _ := x.(map[string]any)
				pat, err := t.str(xm["Pattern"])
				if err != nil {
					return nil, err
				}
				s.Filters = append(s.Filters, pat)
			}
			f.Stream = s
		case "S3":
			s := &S3Source{}
			if s.Bucket, err = t.str(ep["Bucket"]); err != nil {
				return nil, err
			}
			switch e := ep["Events"].(type) {
			case string:
				s.Events = []string{e}
			case []any:
				for _, x := range e {
					s.Events = append(s.Events, fmt.Sprint(x))
				}
			}
			fm, _ := ep["Filter"].(map[string]any)
			key, _ := fm["S3Key"].(map[string]any)
			rules, _ := key["Rules"].([]any)
			for _, r := range rules {
				rm, _ := r.(map[string]any)
				v, _ := t.str(rm["Value"])
				switch strings.ToLower(fmt.Sprint(rm["Name"])) {
				case "prefix":
					s.Prefix = v
				case "suffix":
					s.Suffix = v
				}
			}
			f.S3 = s
		case "Schedule":
			expr, err := t.str(ep["Schedule"])
			if err != nil {
				return nil, err
			}
			f.Schedule = append(f.Schedule, expr)
		}
	}
	if uc, ok := p["FunctionUrlConfig"].(map[string]any); ok {
		c := &FunctionURLConfig{InvokeMode: "BUFFERED"}
		if c.AuthType, err = t.str(uc["AuthType"]); err != nil {
			return nil, fmt.Errorf("FunctionUrlConfig.AuthType: %w", err)
		}
		if m, ok := uc["InvokeMode"]; ok {
			if c.InvokeMode, err = t.str(m); err != nil {
				return nil, fmt.Errorf("FunctionUrlConfig.InvokeMode: %w", err)
			}
		}
		switch {
		case c.AuthType != "NONE" && c.AuthType != "AWS_IAM":
			return nil, fmt.Errorf("FunctionUrlConfig.AuthType %q: NONE or AWS_IAM", c.AuthType)
		case c.InvokeMode != "BUFFERED" && c.InvokeMode != "RESPONSE_STREAM":
			return nil, fmt.Errorf("FunctionUrlConfig.InvokeMode %q: BUFFERED or RESPONSE_STREAM", c.InvokeMode)
		}
		f.URL = c
	}
	return f, nil
}

// rolePolicy flattens a role's inline policies and the managed policies of
// the template it names.
func (t *Template) rolePolicy(id string) ([]iampolicy.Statement, error) {
	p := t.props(id)
	var out []iampolicy.Statement
	add := func(doc any) error {
		resolved, err := t.resolve(doc)
		if err != nil {
			return err
		}
		dm, _ := resolved.(map[string]any)
		st, err := iampolicy.ParseStatements(dm["Statement"])
		if err != nil {
			return err
		}
		out = append(out, st...)
		return nil
	}
	pols, _ := p["Policies"].([]any)
	for _, x := range pols {
		xm, _ := x.(map[string]any)
		if err := add(xm["PolicyDocument"]); err != nil {
			return nil, fmt.Errorf("policy %v: %w", xm["PolicyName"], err)
		}
	}
	// AWS::IAM::Policy resources naming the role (what the CDK's grant
	// methods make).
	for pid := range t.resources {
		if t.typeOf(pid) != "AWS::IAM::Policy" {
			continue
		}
		rs, _ := t.props(pid)["Roles"].([]any)
		for _, r := range rs {
			if rm, _ := r.(map[string]any); rm["Ref"] == id {
				if err := add(t.props(pid)["PolicyDocument"]); err != nil {
					return nil, fmt.Errorf("policy %s: %w", pid, err)
				}
			}
		}
	}
	arns, _ := p["ManagedPolicyArns"].([]any)
	for _, a := range arns {
		ref, ok := a.(map[string]any)["Ref"].(string)
		if !ok || t.typeOf(ref) != "AWS::IAM::ManagedPolicy" {
			return nil, fmt.Errorf("managed policy %v: only the template's own are known here", a)
		}
		if err := add(t.props(ref)["PolicyDocument"]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// managedPolicy is the statements of the template's managed policy of
// that ARN (the permissions boundary of deployed code's roles).
func (t *Template) managedPolicy(arn string) ([]iampolicy.Statement, bool) {
	for id := range t.resources {
		if t.typeOf(id) != "AWS::IAM::ManagedPolicy" {
			continue
		}
		if a, err := t.ref(id); err != nil || a != arn {
			continue
		}
		doc, err := t.resolve(t.props(id)["PolicyDocument"])
		if err != nil {
			return nil, false
		}
		dm, _ := doc.(map[string]any)
		st, err := iampolicy.ParseStatements(dm["Statement"])
		return st, err == nil
	}
	return nil, false
}

// str resolves v to a string.
func (t *Template) str(v any) (string, error) {
	r, err := t.resolve(v)
	if err != nil {
		return "", err
	}
	switch x := r.(type) {
	case string:
		return x, nil
	case int, float64, bool:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("not a string: %v", r)
}

// resolve evaluates the intrinsic functions in v.
func (t *Template) resolve(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := t.resolve(e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				switch k {
				case "Ref":
					return t.ref(fmt.Sprint(arg))
				case "Fn::GetAtt":
					a, _ := arg.([]any)
					if len(a) != 2 {
						return nil, fmt.Errorf("Fn::GetAtt %v", arg)
					}
					return t.getAtt(fmt.Sprint(a[0]), fmt.Sprint(a[1]))
				case "Fn::Sub":
					return t.sub(arg)
				case "Fn::If":
					return t.fnIf(arg)
				case "Fn::Join":
					a, _ := arg.([]any)
					if len(a) != 2 {
						return nil, fmt.Errorf("Fn::Join %v", arg)
					}
					parts, err := t.resolve(a[1])
					if err != nil {
						return nil, err
					}
					ps, _ := parts.([]any)
					ss := make([]string, len(ps))
					for i, p := range ps {
						ss[i] = fmt.Sprint(p)
					}
					return strings.Join(ss, fmt.Sprint(a[0])), nil
				case "Fn::Select":
					a, _ := arg.([]any)
					if len(a) != 2 {
						return nil, fmt.Errorf("Fn::Select %v", arg)
					}
					i, _ := strconv.Atoi(fmt.Sprint(a[0]))
					list, err := t.resolve(a[1])
					if err != nil {
						return nil, err
					}
					l, _ := list.([]any)
					if i < 0 || i >= len(l) {
						return nil, fmt.Errorf("Fn::Select %d of %d", i, len(l))
					}
					return l[i], nil
				case "Fn::Split":
					a, _ := arg.([]any)
					if len(a) != 2 {
						return nil, fmt.Errorf("Fn::Split %v", arg)
					}
					s, err := t.str(a[1])
					if err != nil {
						return nil, err
					}
					var out []any
					for _, p := range strings.Split(s, fmt.Sprint(a[0])) {
						out = append(out, p)
					}
					return out, nil
				}
				if strings.HasPrefix(k, "Fn::") {
					return nil, fmt.Errorf("%s is not supported here", k)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := t.resolve(e)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

func (t *Template) sub(arg any) (any, error) {
	var s string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		s = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Sub %v", arg)
		}
		s = fmt.Sprint(a[0])
		vars, _ = a[1].(map[string]any)
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		var v string
		var err error
		if x, ok := vars[name]; ok {
			v, err = t.str(x)
		} else if res, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
			v, err = t.getAtt(res, attr)
		} else {
			v, err = t.ref(name)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	return out, firstErr
}

// physical is the name CloudFormation would generate for a resource
// without an explicit one.
func physical(id string) string { return StackName + "-" + id + "-LOCAL" }

func (t *Template) ref(name string) (string, error) {
	switch name {
	case "AWS::StackName":
		return StackName, nil
	case "AWS::Region":
		return Region, nil
	case "AWS::AccountId":
		return Account, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::StackId":
		return StackID, nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	if v, ok := t.params[name]; ok {
		return v, nil
	}
	p := t.props(name)
	named := func(prop string) (string, error) {
		if v, ok := p[prop]; ok {
			return t.str(v)
		}
		return physical(name), nil
	}
	switch t.typeOf(name) {
	case "AWS::Serverless::Function", "AWS::Lambda::Function":
		return named("FunctionName")
	case "AWS::DynamoDB::Table":
		return named("TableName")
	case "AWS::S3::Bucket":
		return named("BucketName")
	case "AWS::Logs::LogGroup":
		return named("LogGroupName")
	case "AWS::IAM::Role":
		return named("RoleName")
	case "AWS::Scheduler::ScheduleGroup":
		return named("Name")
	case "AWS::IAM::ManagedPolicy":
		n, err := named("ManagedPolicyName")
		return "arn:aws:iam::" + Account + ":policy/" + n, err
	case "AWS::Serverless::HttpApi":
		return "local", nil
	case "AWS::SQS::Queue":
		// Its URL: at the stack's SQS endpoint (SetQueueBase), once known.
		n, err := named("QueueName")
		return t.queueBase + "/" + Account + "/" + n, err
	case "":
		return "", fmt.Errorf("Ref %s: no such parameter or resource", name)
	}
	return physical(name), nil
}

func (t *Template) getAtt(id, attr string) (string, error) {
	if u, ok := t.functionURLs[id]; ok && attr == "FunctionUrl" {
		return u, nil
	}
	if v, ok := t.attrs[id+"."+attr]; ok {
		return v, nil
	}
	if attr == "FunctionUrl" { // SAM's <function>Url, once served
		return "", fmt.Errorf("Fn::GetAtt %s.%s: %w", id, attr, errNotYet)
	}
	name, err := t.ref(id)
	if err != nil {
		return "", err
	}
	switch t.typeOf(id) + "." + attr {
	case "AWS::Serverless::Function.Arn", "AWS::Lambda::Function.Arn":
		return "arn:aws:lambda:" + Region + ":" + Account + ":function:" + name, nil
	case "AWS::IAM::Role.Arn":
		path := "/"
		if p, ok := t.props(id)["Path"]; ok {
			path, _ = t.str(p)
		}
		return "arn:aws:iam::" + Account + ":role" + path + name, nil
	case "AWS::DynamoDB::Table.Arn":
		return "arn:aws:dynamodb:" + Region + ":" + Account + ":table/" + name, nil
	case "AWS::DynamoDB::Table.StreamArn":
		return "arn:aws:dynamodb:" + Region + ":" + Account + ":table/" + name + "/stream/2026-01-01T00:00:00.000", nil
	case "AWS::S3::Bucket.Arn":
		return "arn:aws:s3:::" + name, nil
	case "AWS::Logs::LogGroup.Arn":
		// As CloudFormation gives it: with ":*" (every stream of the group).
		return "arn:aws:logs:" + Region + ":" + Account + ":log-group:" + name + ":*", nil
	case "AWS::Scheduler::ScheduleGroup.Arn":
		return "arn:aws:scheduler:" + Region + ":" + Account + ":schedule-group/" + name, nil
	case "AWS::Serverless::HttpApi.ApiEndpoint":
		return t.apiURL, nil
	case "AWS::SQS::Queue.Arn":
		return "arn:aws:sqs:" + Region + ":" + Account + ":" + path.Base(name), nil
	case "AWS::SQS::Queue.QueueName":
		return path.Base(name), nil
	}
	return "", fmt.Errorf("Fn::GetAtt %s.%s is not known here: %w", id, attr, errNotYet)
}

// nodeValue turns a YAML node into plain values, CloudFormation's short
// tags (!Ref, !GetAtt, !Sub, ...) into their long forms.
func nodeValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return nodeValue(n.Content[0])
	case yaml.AliasNode:
		return nodeValue(n.Alias)
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := nodeValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			val, err := nodeValue(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		if strings.HasPrefix(n.Tag, "!") {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, err
		}
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return v, nil
	}
	fn := strings.TrimPrefix(n.Tag, "!")
	switch fn {
	case "Ref":
		return map[string]any{"Ref": v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			v = []any{res, attr}
		}
		return map[string]any{"Fn::GetAtt": v}, nil
	}
	return map[string]any{"Fn::" + fn: v}, nil
}

// SetQueueBase sets the endpoint the template's SQS queues' URLs (their
// Ref) are at: the stack's SQS stand-in.
func (t *Template) SetQueueBase(u string) { t.queueBase = strings.TrimSuffix(u, "/") }

// Queues are the names of the template's SQS queues (the stream mappings'
// failure destinations), sorted.
func (t *Template) Queues() []string {
	var out []string
	for id := range t.resources {
		if t.typeOf(id) != "AWS::SQS::Queue" {
			continue
		}
		if n, err := t.getAtt(id, "QueueName"); err == nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
