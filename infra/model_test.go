package main

// The model both stack descriptions are reduced to before they are compared:
// template.yaml (SAM, before its transform) and the CDK app's synthesized
// template (plain CloudFormation) are both parsed with goformation, every
// intrinsic function reduced to one canonical string form, and what the
// stack means (functions, routes, table, bucket, schedules, roles, log
// groups, outputs) extracted from whichever resource types express it.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/apigatewayv2"
	"github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/cloudformation/events"
	"github.com/awslabs/goformation/v7/cloudformation/global"
	"github.com/awslabs/goformation/v7/cloudformation/iam"
	"github.com/awslabs/goformation/v7/cloudformation/lambda"
	"github.com/awslabs/goformation/v7/cloudformation/logs"
	"github.com/awslabs/goformation/v7/cloudformation/policies"
	"github.com/awslabs/goformation/v7/cloudformation/s3"
	"github.com/awslabs/goformation/v7/cloudformation/scheduler"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"
)

type stackModel struct {
	Description    string               `json:"description"`
	Parameters     map[string]parameter `json:"parameters"`
	Functions      map[string]function  `json:"functions"`
	Routes         map[string]route     `json:"routes"` // by route key, e.g. "ANY /v1/chat/{proxy+}"
	Tables         map[string]table     `json:"tables"`
	Buckets        map[string]bucket    `json:"buckets"`
	ScheduleGroups map[string]string    `json:"scheduleGroups"` // logical id -> name
	Schedules      map[string]string    `json:"schedules"`      // static schedules -> target (none: the admin function creates them)
	// Functions invoked by a stream (SAM DynamoDB events, event source
	// mappings), by "<function> <- <stream>".
	StreamSources map[string]streamSource `json:"streamSources"`
	// Functions invoked on a schedule (SAM Schedule events, EventBridge
	// rules with their permission), by "<function> <expression>".
	FunctionSchedules map[string]functionSchedule `json:"functionSchedules"`
	Roles             map[string]role             `json:"roles"`
	// Managed policies (the permissions boundary of deployed code's
	// roles), by logical id: their statements.
	ManagedPolicies map[string][]string      `json:"managedPolicies"`
	LogGroups       map[string]logGroup      `json:"logGroups"`
	Outputs         map[string]output        `json:"outputs"`
	Other           map[string]otherResource `json:"otherResources"` // any resource type the model does not know
	// Custom resources (Custom::*), by logical id.
	CustomResources map[string]customResource `json:"customResources"`
	// The container stream tier's resources (ECS, load balancer,
	// autoscaling, security groups), by logical id: each whole, as JSON
	// with its intrinsics canonical (condition and dependencies included).
	StreamTier map[string]string `json:"streamTier"`
	// Operating the stack (operationsTypes), by logical id: each whole,
	// as JSON with its intrinsics canonical.
	Operations map[string]string `json:"operations"`
	// The table's auto scaling (TableCapacityMode provisioned: the
	// Application Auto Scaling resources named TableScaling*), by logical
	// id: each whole, as JSON with its intrinsics canonical.
	TableCapacity map[string]string `json:"tableCapacity"`
	// The condition of every other conditional resource, by logical id
	// (ChatStreamFunction and what it needs, StreamTier lambda only). A
	// SAM function's condition is also its URL's and the URL's
	// permission's (SAM gives them the function's), as the CDK app writes
	// them.
	Conditions map[string]string `json:"conditions"`
	// APIThrottle is the HTTP API's default route throttling: "burst B
	// rate R" (numbers or ${Param}), "" none.
	APIThrottle string `json:"apiThrottle"`
}

// streamTierTypes are the resource types only the container stream tier
// has (template.yaml's Stream* resources).
var streamTierTypes = []string{"AWS::ECS::", "AWS::ElasticLoadBalancingV2::", "AWS::ApplicationAutoScaling::", "AWS::EC2::SecurityGroup", "AWS::CloudFormation::WaitConditionHandle"}

// operationsTypes are the resource types of operating the stack (issue 33:
// failure queues, alarms and their topic, the dashboard, the web ACL, the
// custom domain), compared whole as the stream tier's are.
var operationsTypes = []string{"AWS::SQS::", "AWS::SNS::", "AWS::CloudWatch::", "AWS::WAFv2::", "AWS::ApiGatewayV2::DomainName", "AWS::ApiGatewayV2::ApiMapping"}

// wholeTypes are the types the model compares whole.
var wholeTypes = append(append([]string{}, streamTierTypes...), operationsTypes...)

type customResource struct {
	Type       string            `json:"type"`
	Properties map[string]string `json:"properties"` // canonical values
	DependsOn  []string          `json:"dependsOn"`
}

type streamSource struct {
	Function         string   `json:"function"`
	Stream           string   `json:"stream"` // e.g. ${Table.StreamArn}
	StartingPosition string   `json:"startingPosition"`
	BatchSize        int      `json:"batchSize"`
	BatchingWindow   int      `json:"maximumBatchingWindowInSeconds"`
	MaxRetries       int      `json:"maximumRetryAttempts"` // -1: until the records expire
	Parallelization  int      `json:"parallelizationFactor"`
	Filters          []string `json:"filters"` // patterns, canonical JSON
	Enabled          bool     `json:"enabled"`
	// Bounded retries and where a given-up batch goes (issue 33).
	MaxRecordAge int    `json:"maximumRecordAgeInSeconds"` // -1: until the records expire
	Bisect       bool   `json:"bisectBatchOnFunctionError"`
	OnFailure    string `json:"onFailure,omitempty"` // the destination's ARN
}

type functionSchedule struct {
	Function   string `json:"function"`
	Expression string `json:"expression"`
	Enabled    bool   `json:"enabled"`
	Input      string `json:"input,omitempty"`
	// Permitted: EventBridge may invoke the function for this rule (SAM
	// adds the permission; a plain template needs its own).
	Permitted bool `json:"permitted"`
}

type output struct {
	Value       string `json:"value"`
	Description string `json:"description"`
}

type parameter struct {
	Type           string   `json:"type"`
	Description    string   `json:"description"`
	Constraint     string   `json:"constraintDescription,omitempty"`
	Default        string   `json:"default,omitempty"`
	NoEcho         bool     `json:"noEcho,omitempty"`
	MinLength      int      `json:"minLength,omitempty"`
	AllowedPattern string   `json:"allowedPattern,omitempty"`
	AllowedValues  []string `json:"allowedValues,omitempty"`
	MinValue       *float64 `json:"minValue,omitempty"`
	MaxValue       *float64 `json:"maxValue,omitempty"`
}

type function struct {
	Package       string            `json:"package"` // what it runs, e.g. functions/admin
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	Runtime       string            `json:"runtime"`
	Architectures []string          `json:"architectures"`
	Handler       string            `json:"handler"`
	MemorySize    int               `json:"memorySize"`
	Timeout       int               `json:"timeout"`
	Role          string            `json:"role"`
	Env           map[string]string `json:"env"`
	DependsOn     []string          `json:"dependsOnLogGroups"`
	InvokedBy     []string          `json:"invokedBy"`     // resource-policy principals
	URL           string            `json:"url,omitempty"` // its function URL: "<AuthType> <InvokeMode>"
	// Reserved is its ReservedConcurrentExecutions: a number, "${Param}",
	// or "" for none.
	Reserved string `json:"reservedConcurrency,omitempty"`
	// Tracing is its X-Ray mode (Active, PassThrough; "" none).
	Tracing string `json:"tracing,omitempty"`
}

// publicURL is the resource-policy principal of a function URL without
// auth (SAM's FunctionUrlConfig adds that permission).
const publicURL = "* (function URL)"

func urlOf(authType string, invokeMode *string) string {
	mode := "BUFFERED"
	if invokeMode != nil {
		mode = *invokeMode
	}
	return authType + " " + mode
}

type route struct {
	API                  string `json:"api"`
	Function             string `json:"function"`
	PayloadFormatVersion string `json:"payloadFormatVersion"`
}

type table struct {
	DeletionPolicy     string            `json:"deletionPolicy"`
	BillingMode        string            `json:"billingMode"`
	Attributes         map[string]string `json:"attributes"`
	Keys               map[string]string `json:"keys"`
	Indexes            map[string]index  `json:"indexes"`
	TTL                string            `json:"ttl"`
	Stream             string            `json:"stream"` // StreamViewType, "" without a stream
	PITR               bool              `json:"pointInTimeRecovery"`
	DeletionProtection bool              `json:"deletionProtection"`
	// Throughput is its ProvisionedThroughput (TableCapacityMode
	// provisioned), "" none.
	Throughput string `json:"throughput,omitempty"`
}

type index struct {
	Keys       map[string]string `json:"keys"`
	Projection string            `json:"projection"`
	Throughput string            `json:"throughput,omitempty"`
}

// throughputOf renders a ProvisionedThroughput, "" none.
func throughputOf(p *dynamodb.Table_ProvisionedThroughput) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("read %d write %d", p.ReadCapacityUnits, p.WriteCapacityUnits)
}

type bucket struct {
	Name                string            `json:"name"`
	DeletionPolicy      string            `json:"deletionPolicy"`
	Encryption          []string          `json:"encryption"`
	PublicAccessBlock   []string          `json:"publicAccessBlock"`
	Ownership           []string          `json:"ownership"`
	Versioning          string            `json:"versioning,omitempty"`
	CORS                []string          `json:"cors"`
	Lifecycle           []string          `json:"lifecycle"`
	Notifications       map[string]string `json:"notifications"` // "<event> <filter>" -> function
	Policy              []string          `json:"policy"`
	NotificationWaitsOn []string          `json:"notificationWaitsOn"` // permissions the bucket depends on
}

type role struct {
	Trust      []string `json:"trust"`
	Statements []string `json:"statements"`
}

type logGroup struct {
	Name           string `json:"name"`
	Retention      string `json:"retention"`
	DeletionPolicy string `json:"deletionPolicy"`
}

type otherResource struct {
	Type string `json:"type"`
}

// parseTemplate parses a template file (YAML or JSON) with goformation,
// intrinsic functions reduced to canonical strings.
func parseTemplate(path string) (*cloudformation.Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var processed []byte
	if strings.HasSuffix(path, ".json") {
		processed, err = intrinsics.ProcessJSON(data, canonicalOptions(path))
	} else {
		processed, err = intrinsics.ProcessYAML(data, canonicalOptions(path))
	}
	if err != nil {
		return nil, err
	}
	if processed, err = liftFilterCriteria(processed); err != nil {
		return nil, err
	}
	if processed, err = liftInvokedViaFunctionUrl(processed); err != nil {
		return nil, err
	}
	t := &cloudformation.Template{}
	if err := json.Unmarshal(processed, t); err != nil {
		return nil, err
	}
	return t, nil
}

// viaURLMetadata is the metadata key that holds a permission's
// InvokedViaFunctionUrl (see liftInvokedViaFunctionUrl).
const viaURLMetadata = "model:InvokedViaFunctionUrl"

// liftInvokedViaFunctionUrl moves the InvokedViaFunctionUrl of each
// AWS::Lambda::Permission (the lambda:InvokeFunction a function URL needs
// beside lambda:InvokeFunctionUrl) to its metadata: goformation does not
// know the property and its strict decoding refuses it.
func liftInvokedViaFunctionUrl(processed []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(processed, &doc); err != nil {
		return nil, err
	}
	resources, _ := doc["Resources"].(map[string]any)
	for _, r := range resources {
		res, _ := r.(map[string]any)
		props, _ := res["Properties"].(map[string]any)
		v, ok := props["InvokedViaFunctionUrl"]
		if res["Type"] != "AWS::Lambda::Permission" || !ok {
			continue
		}
		delete(props, "InvokedViaFunctionUrl")
		meta, _ := res["Metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[viaURLMetadata] = v
		res["Metadata"] = meta
	}
	return json.Marshal(doc)
}

// filterMetadata prefixes the metadata key that holds a SAM DynamoDB
// event's FilterCriteria (see liftFilterCriteria), followed by the event's
// name.
const filterMetadata = "model:FilterCriteria:"

// liftFilterCriteria moves the FilterCriteria of each SAM DynamoDB event to
// its function's metadata: goformation's SAM event types have no
// FilterCriteria, and its strict decoding drops an event with a property it
// does not know.
func liftFilterCriteria(processed []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(processed, &doc); err != nil {
		return nil, err
	}
	resources, _ := doc["Resources"].(map[string]any)
	for _, r := range resources {
		res, _ := r.(map[string]any)
		if res["Type"] != "AWS::Serverless::Function" {
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		evs, _ := props["Events"].(map[string]any)
		for name, e := range evs {
			ev, _ := e.(map[string]any)
			evProps, _ := ev["Properties"].(map[string]any)
			fc, ok := evProps["FilterCriteria"]
			if ev["Type"] != "DynamoDB" || !ok {
				continue
			}
			delete(evProps, "FilterCriteria")
			meta, _ := res["Metadata"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
				res["Metadata"] = meta
			}
			meta[filterMetadata+name] = fc
		}
	}
	return json.Marshal(doc)
}

// filterPatterns renders FilterCriteria.Filters[].Pattern (JSON strings)
// as canonical JSON, sorted.
func filterPatterns(patterns []string) ([]string, error) {
	out := []string{}
	for _, p := range patterns {
		var v any
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			return nil, fmt.Errorf("filter pattern %q: %v", p, err)
		}
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out, nil
}

// Numeric parameters: a typed numeric property (e.g. a log group's
// RetentionInDays) cannot hold a string, so a Ref to a Number parameter
// becomes this base plus the parameter's rank, mapped back by numberRef.
const numberRefBase = 1 << 30

// canonicalOptions makes goformation keep every intrinsic function as a
// string: Ref X and GetAtt X.Y become "${X}" and "${X.Y}" (what Fn::Sub
// writes), Fn::Sub and Fn::Join become the string they build, anything
// else "${Fn::Name(args)}". Two templates that build the same value with
// different functions (CDK writes Fn::Join where SAM authors write Fn::Sub)
// get the same string.
func canonicalOptions(path string) *intrinsics.ProcessorOptions {
	overrides := map[string]intrinsics.IntrinsicHandler{}
	generic := func(name string, input, _ any) any {
		args := canon(input)
		if l, ok := input.([]any); ok {
			parts := make([]string, len(l))
			for i, a := range l {
				parts[i] = canon(a)
			}
			args = strings.Join(parts, ", ")
		}
		return "${" + name + "(" + args + ")}"
	}
	for _, name := range []string{"Fn::Base64", "Fn::And", "Fn::Equals", "Fn::If", "Fn::Not", "Fn::Or", "Fn::FindInMap",
		"Fn::GetAZs", "Fn::ImportValue", "Fn::Cidr", "Fn::Transform"} {
		overrides[name] = generic
	}
	// An Fn::If choosing an object (a property or AWS::NoValue: the
	// table's and indexes' ProvisionedThroughput with TableProvisioned) is
	// its object, which the typed property can hold; the condition is
	// compared where it chooses a string (the table's BillingMode).
	overrides["Fn::If"] = func(name string, input, tmpl any) any {
		if l, ok := input.([]any); ok && len(l) == 3 {
			if m, ok := l[1].(map[string]any); ok {
				return m
			}
		}
		return generic(name, input, tmpl)
	}
	overrides["Ref"] = func(_ string, input, tmpl any) any {
		name := canon(input)
		if i := numberParamRank(tmpl, name); i >= 0 {
			return float64(numberRefBase + i)
		}
		return "${" + name + "}"
	}
	overrides["Fn::GetAtt"] = func(_ string, input, _ any) any {
		if l, ok := input.([]any); ok && len(l) == 2 {
			return "${" + canon(l[0]) + "." + canon(l[1]) + "}"
		}
		return "${" + canon(input) + "}"
	}
	overrides["Fn::Sub"] = func(_ string, input, _ any) any {
		if l, ok := input.([]any); ok && len(l) == 2 {
			s := canon(l[0])
			vars, _ := l[1].(map[string]any)
			for k, v := range vars {
				s = strings.ReplaceAll(s, "${"+k+"}", canon(v))
			}
			return s
		}
		return canon(input)
	}
	overrides["Fn::Join"] = func(_ string, input, _ any) any {
		l, ok := input.([]any)
		if !ok || len(l) != 2 {
			return generic("Fn::Join", input, nil)
		}
		parts, ok := l[1].([]any)
		if !ok {
			return generic("Fn::Join", input, nil)
		}
		s := make([]string, len(parts))
		for i, p := range parts {
			s[i] = canon(p)
		}
		return strings.Join(s, canon(l[0]))
	}
	overrides["Fn::Split"] = func(_ string, input, _ any) any {
		l, ok := input.([]any)
		if ok && len(l) == 2 && !strings.Contains(canon(l[1]), "${") {
			var out []any
			for _, p := range strings.Split(canon(l[1]), canon(l[0])) {
				out = append(out, p)
			}
			return out
		}
		return generic("Fn::Split", input, nil)
	}
	overrides["Fn::Select"] = func(_ string, input, _ any) any {
		l, ok := input.([]any)
		if ok && len(l) == 2 {
			if list, ok := l[1].([]any); ok {
				if i, err := strconv.Atoi(canon(l[0])); err == nil && i >= 0 && i < len(list) {
					return list[i]
				}
			}
		}
		return generic("Fn::Select", input, nil)
	}
	return &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: overrides}
}

// canon renders a processed value as a string.
func canon(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func numberParams(tmpl any) []string {
	t, _ := tmpl.(map[string]any)
	params, _ := t["Parameters"].(map[string]any)
	var names []string
	for name, p := range params {
		if m, _ := p.(map[string]any); m["Type"] == "Number" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func numberParamRank(tmpl any, name string) int {
	for i, n := range numberParams(tmpl) {
		if n == name {
			return i
		}
	}
	return -1
}

// numberRef renders a numeric property: a number, or "${Param}".
func numberRef(t *cloudformation.Template, v int) string {
	if v >= numberRefBase {
		var names []string
		for name, p := range t.Parameters {
			if p.Type == "Number" {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		if i := v - numberRefBase; i < len(names) {
			return "${" + names[i] + "}"
		}
	}
	return strconv.Itoa(v)
}

var refPattern = regexp.MustCompile(`^\$\{([A-Za-z0-9]+)(\.[A-Za-z]+)?\}$`)

// logicalID returns X of "${X}" or "${X.Attr}", or "" for anything else.
func logicalIDOf(s string) string {
	if m := refPattern.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func deletionPolicy(p policies.DeletionPolicy) string {
	if p == "" {
		return "Delete"
	}
	return string(p)
}

// jsonStrings renders each element as canonical JSON, sorted.
func jsonStrings[T any](l []T) []string {
	var out []string
	for _, v := range l {
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

// statements flattens a policy document into sorted, unique
// "Effect action on resource [principal] [if condition]" lines: the
// grouping of actions and resources into statements does not matter.
func statements(doc any) ([]string, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("policy document is %T", doc)
	}
	list, ok := m["Statement"].([]any)
	if !ok {
		list = []any{m["Statement"]}
	}
	var out []string
	for _, st := range list {
		s, ok := st.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("statement is %T", st)
		}
		for k := range s {
			switch k {
			case "Effect", "Action", "Resource", "Principal", "Condition", "Sid":
			default:
				return nil, fmt.Errorf("statement key %s is not modelled", k)
			}
		}
		suffix := ""
		if p, ok := s["Principal"]; ok {
			suffix += " principal " + canon(p)
		}
		if c, ok := s["Condition"]; ok {
			suffix += " if " + canon(c)
		}
		resources := strs(s["Resource"])
		if len(resources) == 0 {
			resources = []string{"(no resource)"}
		}
		for _, a := range strs(s["Action"]) {
			for _, r := range resources {
				out = append(out, fmt.Sprintf("%s %s on %s%s", canon(s["Effect"]), strings.ToLower(a), r, suffix))
			}
		}
	}
	return uniq(out), nil
}

func strs(v any) []string {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, canon(e))
		}
		return out
	case []string:
		return v
	}
	return []string{canon(v)}
}

func uniq(l []string) []string {
	sort.Strings(l)
	out := l[:0]
	for i, s := range l {
		if i == 0 || s != l[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// buildPackages maps each function of a SAM template built by the Makefile
// (BuildMethod makefile) to the package its build-<LogicalId> target builds.
func buildPackages(repoRoot string) func(id string) (string, error) {
	pkg := regexp.MustCompile(`\./(functions/[a-z0-9-]+)`)
	// Read by make in a subprocess: read here too, so that go test's cache
	// of results knows the outcome depends on it.
	_, _ = os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	return func(id string) (string, error) {
		out, err := exec.Command("make", "-s", "-n", "-C", repoRoot, "build-"+id, "ARTIFACTS_DIR=/artifacts").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("make -n build-%s: %v: %s", id, err, out)
		}
		m := pkg.FindStringSubmatch(string(out))
		if m == nil || !strings.Contains(string(out), "-o /artifacts/bootstrap") {
			return "", fmt.Errorf("make build-%s does not build a functions/ package into $(ARTIFACTS_DIR)/bootstrap: %s", id, out)
		}
		return m[1], nil
	}
}

// conditionOf is the name of res's Condition ("" without one), except for
// the stream tier's resources, whose whole JSON the model compares.
func conditionOf(res cloudformation.Resource) string {
	typ := res.AWSCloudFormationType()
	for _, p := range wholeTypes {
		if strings.HasPrefix(typ, p) {
			return ""
		}
	}
	j, _ := json.Marshal(res)
	var v struct{ Condition string }
	_ = json.Unmarshal(j, &v)
	return v.Condition
}

// modelOf reduces a parsed template to the model. packageOf tells what a
// SAM function runs; a CDK function's asset metadata names its directory
// under lambdaDir.
func modelOf(t *cloudformation.Template, packageOf func(id string) (string, error), lambdaDir string) (stackModel, error) {
	m := stackModel{
		Description: deref(stringPtr(t.Description)),
		Parameters:  map[string]parameter{}, Functions: map[string]function{}, Routes: map[string]route{},
		Tables: map[string]table{}, Buckets: map[string]bucket{}, ScheduleGroups: map[string]string{},
		Schedules: map[string]string{}, Roles: map[string]role{}, LogGroups: map[string]logGroup{},
		Outputs: map[string]output{}, Other: map[string]otherResource{}, ManagedPolicies: map[string][]string{},
		StreamSources: map[string]streamSource{}, FunctionSchedules: map[string]functionSchedule{},
		CustomResources: map[string]customResource{}, StreamTier: map[string]string{}, Operations: map[string]string{}, TableCapacity: map[string]string{}, Conditions: map[string]string{},
	}
	for name, p := range t.Parameters {
		if name == "BootstrapVersion" { // the CDK bootstrap check, not part of the stack
			continue
		}
		m.Parameters[name] = parameter{Type: p.Type, Description: deref(p.Description), Constraint: deref(p.ConstraintDescription),
			Default: canon(p.Default), NoEcho: deref(p.NoEcho),
			MinLength: deref(p.MinLength), AllowedPattern: deref(p.AllowedPattern), AllowedValues: strs(p.AllowedValues),
			MinValue: p.MinValue, MaxValue: p.MaxValue}
	}
	for name, o := range t.Outputs {
		m.Outputs[name] = output{Value: canon(o.Value), Description: deref(o.Description)}
	}

	var globals global.Function
	if g, ok := t.Globals["Function"].(*global.Function); ok {
		globals = *g
	}
	integrations := map[string]*apigatewayv2.Integration{}
	var routes []*apigatewayv2.Route
	var permissions []*lambda.Permission
	var urls []*lambda.Url
	var s3Events []s3Event
	var standalonePolicies []*iam.Policy
	var bucketPolicies []*s3.BucketPolicy
	ruleSchedules := map[string][]string{} // EventBridge rule -> its FunctionSchedules keys
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	for id, res := range t.Resources {
		if c := conditionOf(res); c != "" {
			m.Conditions[id] = c
			if f, ok := res.(*serverless.Function); ok && f.FunctionUrlConfig != nil {
				m.Conditions[id+"Url"] = c
				m.Conditions[id+"UrlPublicPermissions"] = c
			}
		}
		switch r := res.(type) {
		case *serverless.Function:
			f, evs, err := samFunction(t, id, r, globals, packageOf)
			if err != nil {
				fail("%s: %v", id, err)
				continue
			}
			for _, ev := range evs.routes {
				m.Routes[ev.key] = ev.route
			}
			s3Events = append(s3Events, evs.s3...)
			for _, src := range evs.streams {
				m.StreamSources[src.Function+" <- "+src.Stream] = src
			}
			for _, sc := range evs.schedules {
				m.FunctionSchedules[sc.Function+" "+sc.Expression] = sc
			}
			m.Functions[id] = f
		case *lambda.Function:
			f, err := cfnFunction(t, id, r, lambdaDir)
			if err != nil {
				fail("%s: %v", id, err)
				continue
			}
			m.Functions[id] = f
		case *serverless.HttpApi:
			// The API itself (routes name it) and its default stage's
			// throttling.
			if d := r.DefaultRouteSettings; d != nil {
				m.APIThrottle = throttle(t, d.ThrottlingBurstLimit, d.ThrottlingRateLimit)
			}
		case *apigatewayv2.Api:
		case *apigatewayv2.Stage:
			if r.StageName != "$default" || !deref(r.AutoDeploy) {
				fail("%s: stage %s (auto deploy %v): only the auto-deployed $default stage is modelled (SAM's HttpApi has it)", id, r.StageName, deref(r.AutoDeploy))
			}
			if d := r.DefaultRouteSettings; d != nil {
				m.APIThrottle = throttle(t, d.ThrottlingBurstLimit, d.ThrottlingRateLimit)
			}
		case *apigatewayv2.Integration:
			integrations[id] = r
		case *apigatewayv2.Route:
			routes = append(routes, r)
		case *lambda.Permission:
			permissions = append(permissions, r)
		case *lambda.Url:
			urls = append(urls, r)
		case *lambda.EventSourceMapping:
			src, err := streamSourceOf(r)
			if err != nil {
				fail("%s: %v", id, err)
				continue
			}
			m.StreamSources[src.Function+" <- "+src.Stream] = src
		case *events.Rule:
			scheds, err := rulesSchedules(r)
			if err != nil {
				fail("%s: %v", id, err)
				continue
			}
			for _, sc := range scheds {
				key := sc.Function + " " + sc.Expression
				m.FunctionSchedules[key] = sc
				ruleSchedules[id] = append(ruleSchedules[id], key)
			}
		case *dynamodb.Table:
			m.Tables[id] = tableOf(r)
		case *s3.Bucket:
			b, err := bucketOf(r)
			if err != nil {
				fail("%s: %v", id, err)
			}
			m.Buckets[id] = b
		case *s3.BucketPolicy:
			bucketPolicies = append(bucketPolicies, r)
		case *scheduler.ScheduleGroup:
			m.ScheduleGroups[id] = deref(r.Name)
		case *scheduler.Schedule:
			m.Schedules[id] = canon(r.Target.Arn)
		case *iam.Role:
			ro, err := roleOf(r)
			if err != nil {
				fail("%s: %v", id, err)
			}
			m.Roles[id] = ro
		case *iam.Policy:
			standalonePolicies = append(standalonePolicies, r)
		case *iam.ManagedPolicy:
			if len(r.Roles) > 0 || len(r.Users) > 0 || len(r.Groups) > 0 {
				fail("%s: a managed policy attached to a principal is not modelled (least privilege: inline policies only)", id)
			}
			st, err := statements(r.PolicyDocument)
			if err != nil {
				fail("%s: %v", id, err)
			}
			m.ManagedPolicies[id] = st
		case *cloudformation.CustomResource:
			cr := customResource{Type: r.Type, Properties: map[string]string{}, DependsOn: append([]string{}, r.AWSCloudFormationDependsOn...)}
			for k, v := range r.Properties {
				cr.Properties[k] = canon(v)
			}
			sort.Strings(cr.DependsOn)
			m.CustomResources[id] = cr
		case *logs.LogGroup:
			m.LogGroups[id] = logGroup{Name: deref(r.LogGroupName), Retention: numberRef(t, deref(r.RetentionInDays)),
				DeletionPolicy: deletionPolicy(r.AWSCloudFormationDeletionPolicy)}
		default:
			typ := res.AWSCloudFormationType()
			tier, ops := false, false
			for _, p := range streamTierTypes {
				tier = tier || strings.HasPrefix(typ, p)
			}
			for _, p := range operationsTypes {
				ops = ops || strings.HasPrefix(typ, p)
			}
			if !tier && !ops {
				m.Other[id] = otherResource{Type: typ}
				continue
			}
			j, err := json.Marshal(res)
			if err != nil {
				fail("%s: %v", id, err)
			}
			if ops {
				m.Operations[id] = string(j)
			} else if strings.HasPrefix(id, "TableScaling") {
				m.TableCapacity[id] = string(j)
			} else {
				m.StreamTier[id] = string(j)
			}
		}
	}

	// Routes of a plain template: route -> integration -> function.
	for _, r := range routes {
		integrationID := strings.TrimPrefix(deref(r.Target), "integrations/")
		in, ok := integrations[logicalIDOf(integrationID)]
		if !ok {
			fail("route %s: target %q is not an integration of this template", r.RouteKey, deref(r.Target))
			continue
		}
		m.Routes[r.RouteKey] = route{API: r.ApiId, Function: logicalIDOf(deref(in.IntegrationUri)), PayloadFormatVersion: deref(in.PayloadFormatVersion)}
	}
	// Function URLs of a plain template.
	for _, u := range urls {
		id := logicalIDOf(u.TargetFunctionArn)
		f, ok := m.Functions[id]
		if !ok || u.Cors != nil || u.Qualifier != nil {
			fail("function URL of %q: not a function of this template, or CORS or a qualifier (not modelled)", u.TargetFunctionArn)
			continue
		}
		f.URL = urlOf(u.AuthType, u.InvokeMode)
		m.Functions[id] = f
	}
	// Resource policies of functions.
	for _, p := range permissions {
		id := logicalIDOf(p.FunctionName)
		f, ok := m.Functions[id]
		if !ok {
			fail("permission on %q: not a function of this template", p.FunctionName)
			continue
		}
		viaURL, _ := p.AWSCloudFormationMetadata[viaURLMetadata].(bool)
		if p.Principal == "*" && (p.FunctionUrlAuthType != nil && p.Action == "lambda:InvokeFunctionUrl" || viaURL && p.Action == "lambda:InvokeFunction") {
			f.InvokedBy = uniq(append(f.InvokedBy, publicURL))
		} else {
			f.InvokedBy = uniq(append(f.InvokedBy, principal(p.Principal, deref(p.SourceAccount))))
		}
		m.Functions[id] = f
		// EventBridge may invoke the function for the rule the permission names.
		if p.Principal == "events.amazonaws.com" && p.SourceArn != nil {
			for _, key := range ruleSchedules[logicalIDOf(*p.SourceArn)] {
				if sc := m.FunctionSchedules[key]; sc.Function == id {
					sc.Permitted = true
					m.FunctionSchedules[key] = sc
				}
			}
		}
	}
	// SAM's S3 events: a notification on the bucket and a permission.
	for _, ev := range s3Events {
		b, ok := m.Buckets[logicalIDOf(ev.bucket)]
		if !ok {
			fail("%s: S3 event on %q: not a bucket of this template", ev.function, ev.bucket)
			continue
		}
		b.Notifications[ev.event] = ev.function
		b.NotificationWaitsOn = uniq(append(b.NotificationWaitsOn, "permission of "+ev.function))
		m.Buckets[logicalIDOf(ev.bucket)] = b
		f := m.Functions[ev.function]
		f.InvokedBy = uniq(append(f.InvokedBy, principal("s3.amazonaws.com", "${AWS::AccountId}")))
		m.Functions[ev.function] = f
	}
	// A plain template's bucket waits on its functions' permissions.
	for id, b := range m.Buckets {
		if r, ok := t.Resources[id].(*s3.Bucket); ok {
			for _, dep := range r.AWSCloudFormationDependsOn {
				if p, ok := t.Resources[dep].(*lambda.Permission); ok {
					b.NotificationWaitsOn = uniq(append(b.NotificationWaitsOn, "permission of "+logicalIDOf(p.FunctionName)))
				}
			}
			m.Buckets[id] = b
		}
	}
	for _, p := range bucketPolicies {
		id := logicalIDOf(p.Bucket)
		b, ok := m.Buckets[id]
		if !ok {
			fail("bucket policy of %q: not a bucket of this template", p.Bucket)
			continue
		}
		st, err := statements(p.PolicyDocument)
		if err != nil {
			fail("bucket policy of %s: %v", id, err)
		}
		b.Policy = uniq(append(b.Policy, st...))
		m.Buckets[id] = b
	}
	for _, p := range standalonePolicies {
		st, err := statements(p.PolicyDocument)
		if err != nil {
			fail("policy %s: %v", p.PolicyName, err)
		}
		for _, r := range p.Roles {
			id := logicalIDOf(r)
			ro, ok := m.Roles[id]
			if !ok {
				fail("policy %s: role %q is not a role of this template", p.PolicyName, r)
				continue
			}
			ro.Statements = uniq(append(ro.Statements, st...))
			m.Roles[id] = ro
		}
	}
	// A function's log group and custom resource dependencies (the other
	// DependsOn are implied by references).
	for id, f := range m.Functions {
		var deps []string
		switch r := t.Resources[id].(type) {
		case *serverless.Function:
			deps = r.AWSCloudFormationDependsOn
		case *lambda.Function:
			deps = r.AWSCloudFormationDependsOn
		}
		f.DependsOn = []string{}
		for _, d := range deps {
			switch t.Resources[d].(type) {
			case *logs.LogGroup, *cloudformation.CustomResource:
				f.DependsOn = append(f.DependsOn, d)
			}
		}
		sort.Strings(f.DependsOn)
		m.Functions[id] = f
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return m, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return m, nil
}

func stringPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func principal(p, sourceAccount string) string {
	if sourceAccount != "" {
		return p + " from account " + sourceAccount
	}
	return p
}

type routeEvent struct {
	key   string
	route route
}

type s3Event struct {
	function, bucket, event string
}

type samEvents struct {
	routes    []routeEvent
	s3        []s3Event
	streams   []streamSource
	schedules []functionSchedule
}

// samFunction reads an AWS::Serverless::Function, merged with the Globals.
func samFunction(t *cloudformation.Template, id string, r *serverless.Function, g global.Function, packageOf func(string) (string, error)) (function, samEvents, error) {
	var evs samEvents
	f := function{
		Name: deref(r.FunctionName), Description: deref(r.Description), Role: logicalIDOf(deref(r.Role)),
		Runtime: deref(r.Runtime), Handler: deref(r.Handler), Architectures: r.Architectures,
		Env: map[string]string{}, InvokedBy: []string{},
	}
	if f.Runtime == "" {
		f.Runtime = deref(g.Runtime)
	}
	if f.Handler == "" {
		f.Handler = deref(g.Handler)
	}
	if f.Architectures == nil && g.Architectures != nil {
		f.Architectures = *g.Architectures
	}
	if f.Description == "" {
		f.Description = deref(g.Description)
	}
	f.MemorySize = deref(r.MemorySize)
	if r.MemorySize == nil {
		f.MemorySize = deref(g.MemorySize)
	}
	f.Timeout = deref(r.Timeout)
	if r.Timeout == nil {
		f.Timeout = deref(g.Timeout)
	}
	if r.ReservedConcurrentExecutions != nil {
		f.Reserved = numberRef(t, *r.ReservedConcurrentExecutions)
	}
	if f.Tracing = deref(r.Tracing); f.Tracing == "" {
		f.Tracing = deref(g.Tracing)
	}
	if g.Environment != nil {
		for k, v := range g.Environment.Variables {
			f.Env[k] = v
		}
	}
	if r.Environment != nil {
		for k, v := range r.Environment.Variables {
			f.Env[k] = v
		}
	}
	if u := r.FunctionUrlConfig; u != nil {
		if u.Cors != nil {
			return f, evs, fmt.Errorf("FunctionUrlConfig.Cors is not modelled (the API answers CORS itself)")
		}
		f.URL = urlOf(u.AuthType, u.InvokeMode)
		if u.AuthType == "NONE" {
			f.InvokedBy = uniq(append(f.InvokedBy, publicURL))
		}
	}
	if f.Role == "" {
		return f, evs, fmt.Errorf("no Role of this template: SAM would create one with AWS managed policies (not least privilege)")
	}
	if r.Policies != nil {
		return f, evs, fmt.Errorf("Policies are ignored with a Role: put them in the role")
	}
	if bm, _ := r.AWSCloudFormationMetadata["BuildMethod"].(string); bm != "makefile" {
		return f, evs, fmt.Errorf("Metadata.BuildMethod is %q, want makefile (the Makefile's build-%s target)", bm, id)
	}
	pkg, err := packageOf(id)
	if err != nil {
		return f, evs, err
	}
	f.Package = pkg

	names := make([]string, 0, len(r.Events))
	for name := range r.Events {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ev := r.Events[name]
		if ev.Properties == nil {
			return f, evs, fmt.Errorf("event %s has no properties", name)
		}
		switch ev.Type {
		case "HttpApi":
			h := ev.Properties.HttpApiEvent
			if h == nil {
				return f, evs, fmt.Errorf("event %s: not an HttpApi event", name)
			}
			pfv := deref(h.PayloadFormatVersion)
			if pfv == "" {
				pfv = "2.0" // SAM's default for HttpApi events
			}
			key := strings.ToUpper(deref(h.Method)) + " " + deref(h.Path)
			if deref(h.Path) == "$default" {
				key = "$default" // SAM's catch-all route: route key $default, any method
			}
			evs.routes = append(evs.routes, routeEvent{key: key, route: route{API: deref(h.ApiId), Function: id, PayloadFormatVersion: pfv}})
			f.InvokedBy = uniq(append(f.InvokedBy, "apigateway.amazonaws.com"))
		case "S3":
			e := ev.Properties.S3Event
			if e == nil || e.Events == nil {
				return f, evs, fmt.Errorf("event %s: not an S3 event", name)
			}
			filter := ""
			if e.Filter != nil && e.Filter.S3Key != nil {
				var rules []string
				for _, r := range e.Filter.S3Key.Rules {
					rules = append(rules, strings.ToLower(r.Name)+"="+r.Value)
				}
				filter = keyFilter(rules)
			}
			var events []string
			if e.Events.String != nil {
				events = []string{*e.Events.String}
			} else if e.Events.StringArray != nil {
				events = *e.Events.StringArray
			}
			for _, x := range events {
				evs.s3 = append(evs.s3, s3Event{function: id, bucket: e.Bucket, event: x + filter})
			}
		case "DynamoDB":
			e := ev.Properties.DynamoDBEvent
			if e == nil {
				return f, evs, fmt.Errorf("event %s: not a DynamoDB event (or a property the model does not know)", name)
			}
			onFailure := ""
			if d := e.DestinationConfig; d != nil && d.OnFailure != nil {
				if t := deref(d.OnFailure.Type); t != "SQS" && t != "SNS" {
					return f, evs, fmt.Errorf("event %s: on-failure destination type %q (SQS or SNS)", name, t)
				}
				onFailure = d.OnFailure.Destination
			}
			var patterns []string
			if fc, ok := r.AWSCloudFormationMetadata[filterMetadata+name].(map[string]any); ok {
				filters, _ := fc["Filters"].([]any)
				for _, x := range filters {
					p, _ := x.(map[string]any)["Pattern"].(string)
					patterns = append(patterns, p)
				}
			}
			filters, err := filterPatterns(patterns)
			if err != nil {
				return f, evs, fmt.Errorf("event %s: %v", name, err)
			}
			evs.streams = append(evs.streams, streamSource{
				Function: id, Stream: e.Stream, StartingPosition: e.StartingPosition,
				BatchSize: intOr(e.BatchSize, 100), BatchingWindow: intOr(e.MaximumBatchingWindowInSeconds, 0),
				MaxRetries: intOr(e.MaximumRetryAttempts, -1), Parallelization: intOr(e.ParallelizationFactor, 1),
				Filters: filters, Enabled: e.Enabled == nil || *e.Enabled,
				MaxRecordAge: intOr(e.MaximumRecordAgeInSeconds, -1), Bisect: deref(e.BisectBatchOnFunctionError), OnFailure: onFailure,
			})
		case "Schedule":
			e := ev.Properties.ScheduleEvent
			if e == nil {
				return f, evs, fmt.Errorf("event %s: not a Schedule event (or a property the model does not know)", name)
			}
			evs.schedules = append(evs.schedules, functionSchedule{Function: id, Expression: e.Schedule,
				Enabled: e.Enabled == nil || *e.Enabled, Input: deref(e.Input), Permitted: true})
			f.InvokedBy = uniq(append(f.InvokedBy, "events.amazonaws.com"))
		default:
			return f, evs, fmt.Errorf("event %s: type %s is not modelled", name, ev.Type)
		}
	}
	return f, evs, nil
}

// cfnFunction reads an AWS::Lambda::Function of the CDK app.
func cfnFunction(t *cloudformation.Template, id string, r *lambda.Function, lambdaDir string) (function, error) {
	f := function{
		Name: deref(r.FunctionName), Description: deref(r.Description), Role: logicalIDOf(r.Role),
		Runtime: deref(r.Runtime), Handler: deref(r.Handler), Architectures: r.Architectures,
		MemorySize: deref(r.MemorySize), Timeout: deref(r.Timeout), Env: map[string]string{}, InvokedBy: []string{},
	}
	if r.Environment != nil {
		for k, v := range r.Environment.Variables {
			f.Env[k] = v
		}
	}
	if r.ReservedConcurrentExecutions != nil {
		f.Reserved = numberRef(t, *r.ReservedConcurrentExecutions)
	}
	if r.TracingConfig != nil {
		f.Tracing = deref(r.TracingConfig.Mode)
	}
	if f.Architectures == nil {
		f.Architectures = []string{"x86_64"}
	}
	asset, _ := r.AWSCloudFormationMetadata["aws:asset:path"].(string)
	if asset == "" {
		return f, fmt.Errorf("no aws:asset:path metadata: synthesize with aws:cdk:enable-asset-metadata")
	}
	rel, err := filepath.Rel(lambdaDir, asset)
	if err != nil || strings.Contains(rel, "..") || strings.Contains(rel, string(filepath.Separator)) {
		return f, fmt.Errorf("asset %s is not a function directory of %s", asset, lambdaDir)
	}
	f.Package = "functions/" + rel
	return f, nil
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// streamSourceOf reads an event source mapping (defaults as
// CloudFormation's for a DynamoDB stream).
func streamSourceOf(r *lambda.EventSourceMapping) (streamSource, error) {
	src := streamSource{Function: logicalIDOf(r.FunctionName), Stream: deref(r.EventSourceArn), StartingPosition: deref(r.StartingPosition),
		BatchSize: intOr(r.BatchSize, 100), BatchingWindow: intOr(r.MaximumBatchingWindowInSeconds, 0),
		MaxRetries: intOr(r.MaximumRetryAttempts, -1), Parallelization: intOr(r.ParallelizationFactor, 1), Enabled: r.Enabled == nil || *r.Enabled}
	if src.Function == "" {
		return src, fmt.Errorf("function %q is not a function of this template", r.FunctionName)
	}
	if len(r.FunctionResponseTypes) > 0 || r.TumblingWindowInSeconds != nil || len(r.Topics) > 0 || len(r.Queues) > 0 {
		return src, fmt.Errorf("only the stream, starting position, batching, retries, failure destination and filters are modelled")
	}
	src.MaxRecordAge, src.Bisect = intOr(r.MaximumRecordAgeInSeconds, -1), deref(r.BisectBatchOnFunctionError)
	if d := r.DestinationConfig; d != nil && d.OnFailure != nil {
		src.OnFailure = deref(d.OnFailure.Destination)
	}
	var patterns []string
	if r.FilterCriteria != nil {
		for _, f := range r.FilterCriteria.Filters {
			patterns = append(patterns, deref(f.Pattern))
		}
	}
	var err error
	src.Filters, err = filterPatterns(patterns)
	return src, err
}

// rulesSchedules reads an EventBridge rule that invokes functions on a
// schedule.
func rulesSchedules(r *events.Rule) ([]functionSchedule, error) {
	if r.ScheduleExpression == nil || r.EventPattern != nil {
		return nil, fmt.Errorf("only scheduled rules are modelled")
	}
	var out []functionSchedule
	for _, tg := range r.Targets {
		fn := logicalIDOf(tg.Arn)
		if fn == "" || tg.InputPath != nil || tg.InputTransformer != nil || tg.RetryPolicy != nil || tg.DeadLetterConfig != nil || tg.RoleArn != nil {
			return nil, fmt.Errorf("target %s: only functions of this template, with or without an Input, are modelled", tg.Id)
		}
		out = append(out, functionSchedule{Function: fn, Expression: *r.ScheduleExpression,
			Enabled: deref(r.State) == "" || deref(r.State) == "ENABLED", Input: deref(tg.Input)})
	}
	return out, nil
}

func tableOf(r *dynamodb.Table) table {
	tb := table{
		DeletionPolicy: deletionPolicy(r.AWSCloudFormationDeletionPolicy), BillingMode: deref(r.BillingMode),
		Attributes: map[string]string{}, Keys: map[string]string{}, Indexes: map[string]index{},
		DeletionProtection: deref(r.DeletionProtectionEnabled), Throughput: throughputOf(r.ProvisionedThroughput),
	}
	for _, a := range r.AttributeDefinitions {
		tb.Attributes[a.AttributeName] = a.AttributeType
	}
	keys := func(ks []dynamodb.Table_KeySchema) map[string]string {
		out := map[string]string{}
		for _, k := range ks {
			out[k.AttributeName] = k.KeyType
		}
		return out
	}
	tb.Keys = keys(r.KeySchema)
	for _, g := range r.GlobalSecondaryIndexes {
		ix := index{Keys: keys(g.KeySchema), Throughput: throughputOf(g.ProvisionedThroughput)}
		if g.Projection.ProjectionType != nil {
			ix.Projection = *g.Projection.ProjectionType
		}
		tb.Indexes[g.IndexName] = ix
	}
	if r.TimeToLiveSpecification != nil && r.TimeToLiveSpecification.Enabled {
		tb.TTL = deref(r.TimeToLiveSpecification.AttributeName)
	}
	if r.StreamSpecification != nil {
		tb.Stream = r.StreamSpecification.StreamViewType
	}
	if r.PointInTimeRecoverySpecification != nil {
		tb.PITR = deref(r.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled)
	}
	return tb
}

func bucketOf(r *s3.Bucket) (bucket, error) {
	b := bucket{
		Name: deref(r.BucketName), DeletionPolicy: deletionPolicy(r.AWSCloudFormationDeletionPolicy),
		Notifications: map[string]string{}, Policy: []string{}, NotificationWaitsOn: []string{},
	}
	if r.BucketEncryption != nil {
		b.Encryption = jsonStrings(r.BucketEncryption.ServerSideEncryptionConfiguration)
	}
	if r.PublicAccessBlockConfiguration != nil {
		b.PublicAccessBlock = jsonStrings([]any{r.PublicAccessBlockConfiguration})
	}
	if r.OwnershipControls != nil {
		b.Ownership = jsonStrings(r.OwnershipControls.Rules)
	}
	if r.VersioningConfiguration != nil {
		b.Versioning = r.VersioningConfiguration.Status
	}
	if r.CorsConfiguration != nil {
		b.CORS = jsonStrings(r.CorsConfiguration.CorsRules)
	}
	if r.LifecycleConfiguration != nil {
		b.Lifecycle = jsonStrings(r.LifecycleConfiguration.Rules)
	}
	if n := r.NotificationConfiguration; n != nil {
		if len(n.QueueConfigurations) > 0 || len(n.TopicConfigurations) > 0 || n.EventBridgeConfiguration != nil {
			return b, fmt.Errorf("only Lambda notifications are modelled")
		}
		for _, l := range n.LambdaConfigurations {
			filter := ""
			if l.Filter != nil && l.Filter.S3Key != nil {
				var rules []string
				for _, r := range l.Filter.S3Key.Rules {
					rules = append(rules, strings.ToLower(r.Name)+"="+r.Value)
				}
				filter = keyFilter(rules)
			}
			b.Notifications[l.Event+filter] = logicalIDOf(l.Function)
		}
	}
	return b, nil
}

// keyFilter renders the key filter rules of a notification.
func keyFilter(rules []string) string {
	if len(rules) == 0 {
		return ""
	}
	sort.Strings(rules)
	return " if key " + strings.Join(rules, " and ")
}

func roleOf(r *iam.Role) (role, error) {
	ro := role{Statements: []string{}}
	var err error
	if ro.Trust, err = statements(r.AssumeRolePolicyDocument); err != nil {
		return ro, fmt.Errorf("trust policy: %w", err)
	}
	if len(r.ManagedPolicyArns) > 0 {
		return ro, fmt.Errorf("managed policies are not modelled (least privilege: inline policies only)")
	}
	for _, p := range r.Policies {
		st, err := statements(p.PolicyDocument)
		if err != nil {
			return ro, fmt.Errorf("policy %s: %w", p.PolicyName, err)
		}
		ro.Statements = append(ro.Statements, st...)
	}
	ro.Statements = uniq(ro.Statements)
	return ro, nil
}

// throttle renders a route's throttling settings.
func throttle(t *cloudformation.Template, burst *int, rate *float64) string {
	out := ""
	if burst != nil {
		out += "burst " + numberRef(t, *burst)
	}
	if rate != nil {
		out += " rate " + numberRef(t, int(*rate))
	}
	return strings.TrimSpace(out)
}
