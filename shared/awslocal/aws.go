package awslocal

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/botforge/platform/shared/iampolicy"
)

// Each function reaches AWS at an endpoint of its own (every service on one
// port, told apart by the service of the request's SigV4 credential
// scope), so each call is known to be that function's. The endpoint works
// out the IAM actions and resources of the call (as IAM would authorize
// it), records them, evaluates them against the function's role in the
// template and either refuses the call as AWS does (AccessDenied, in the
// service's error shape) or hands it to the service's stand-in.

// Call is one authorization of an AWS call: a function, the IAM action on
// the resource, and the decision. One request may need several (a
// TransactWriteItems is the item actions on each table; a copy reads the
// source and writes the destination; CreateSchedule passes a role).
type Call struct {
	Function string // logical id: AdminFunction
	Service  string // dynamodb, s3, scheduler, logs, lambda, iam
	Action   string // dynamodb:PutItem
	Resource string
	// Context is the call's condition keys ("iam:PassedToService=...").
	Context string `json:",omitempty"`
	Allowed bool
	// RefusedBy names the template whose role refused the call.
	RefusedBy string `json:",omitempty"`
}

// Request is one request a function sent to an AWS service (one
// TransactWriteItems, one PutObject), whatever it needed authorized.
type Request struct {
	Function, Service, Operation string
}

// Recorder keeps every call made through the stack's endpoints.
type Recorder struct {
	mu       sync.Mutex
	calls    []Call
	requests []Request
	log      *slog.Logger
}

func (r *Recorder) request(q Request) {
	r.mu.Lock()
	r.requests = append(r.requests, q)
	r.mu.Unlock()
}

// Requests returns the requests made so far (a copy).
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

func (r *Recorder) add(c Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if !c.Allowed && r.log != nil {
		r.log.Error("aws-local: AccessDenied: the role does not allow the call",
			"function", c.Function, "action", c.Action, "resource", c.Resource, "role of", c.RefusedBy)
	}
}

// Calls returns the calls recorded so far (a copy).
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Denied returns the calls the roles refused.
func (r *Recorder) Denied() []Call {
	var out []Call
	for _, c := range r.Calls() {
		if !c.Allowed {
			out = append(out, c)
		}
	}
	return out
}

// Summary counts the calls by function, action and resource, and marks the
// refused ones: what <data-dir>/aws-calls.json holds.
func (r *Recorder) Summary() []CallCount {
	counts := map[Call]int{}
	for _, c := range r.Calls() {
		counts[c]++
	}
	out := make([]CallCount, 0, len(counts))
	for c, n := range counts {
		out = append(out, CallCount{Call: c, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Function != b.Function {
			return a.Function < b.Function
		}
		if a.Action != b.Action {
			return a.Action < b.Action
		}
		return a.Resource < b.Resource
	})
	return out
}

// CallCount is a call and how often it was made.
type CallCount struct {
	Call
	Count int
}

// authz is one authorization a request needs.
type authz struct {
	action, resource string
	context          map[string]string
}

// endpoint is one function's AWS endpoint.
type endpoint struct {
	fn       *Function
	services map[string]http.Handler
	rec      *Recorder
	role     func(name string) url.Values // roles made through IAM
	// created, when set, is called after an S3 request that created an
	// object succeeded (an external S3 notifies no one here: the stack
	// makes its object-created events from what it sees pass).
	created func(bucket, key string, size int64)
	// fault, when set and true for the call, fails it (Stack.InjectFault).
	fault func(function, operation string) bool
	// cors: the CORS rules of the stack's buckets by name, answered as S3
	// answers them (s3cors.go).
	cors map[string][]corsRule
}

// statusRecorder keeps the status of an answer.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

var credentialScope = regexp.MustCompile(`Credential=[^/,\s]+/\d{8}/[^/]+/([a-z0-9-]+)/aws4_request`)

// serviceOf is the service a request is signed for.
func serviceOf(r *http.Request) string {
	if m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	if c := r.URL.Query().Get("X-Amz-Credential"); c != "" { // presigned
		if parts := strings.Split(c, "/"); len(parts) == 5 {
			return parts[3]
		}
	}
	return ""
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	svc := serviceOf(r)
	h := e.services[svc]
	if h == nil {
		http.Error(w, fmt.Sprintf("aws-local: no stand-in for service %q", svc), http.StatusNotImplemented)
		return
	}
	if svc == "s3" && isPreflight(r) {
		// No credentials, no role: S3 answers from the bucket's rules.
		e.rec.request(Request{Function: e.fn.LogicalID, Service: svc, Operation: "S3 OPTIONS"})
		servePreflight(w, r, e.cors)
		return
	}
	if svc == "s3" {
		w = withCORS(w, r, e.cors)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var needs []authz
	switch svc {
	case "dynamodb":
		needs = dynamoAuthz(r, body)
	case "s3":
		needs = s3Authz(r, body)
	case "scheduler":
		needs = schedulerAuthz(r, body)
	case "logs":
		needs = logsAuthz(r, body)
	case "lambda":
		needs = lambdaAuthz(r, body)
	case "iam":
		needs = iamAuthz(r, body, e.role)
	case "secretsmanager":
		needs = secretsAuthz(r, body)
	case "ssm":
		needs = ssmAuthz(r, body)
	}
	e.rec.request(Request{Function: e.fn.LogicalID, Service: svc, Operation: operation(svc, r, needs)})
	for _, a := range needs {
		d, by := e.fn.allows(a.action, a.resource, a.context)
		e.rec.add(Call{Function: e.fn.LogicalID, Service: svc, Action: a.action, Resource: a.resource,
			Context: contextString(a.context), Allowed: d == iampolicy.Allow, RefusedBy: by})
		if d != iampolicy.Allow {
			accessDenied(w, svc, e.fn, a, d)
			return
		}
	}
	if op := operation(svc, r, needs); e.fault != nil && e.fault(e.fn.LogicalID, op) {
		// Non-retryable (a 400 the SDKs do not retry): the call fails once.
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazon.coral.service#InjectedFault", "message": "aws-local: fault injected into " + op})
		return
	}
	if svc != "s3" || e.created == nil {
		h.ServeHTTP(w, r)
		return
	}
	sw := &statusRecorder{ResponseWriter: w}
	h.ServeHTTP(sw, r)
	q := r.URL.Query()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	put := r.Method == http.MethodPut && !q.Has("partNumber")
	complete := r.Method == http.MethodPost && q.Has("uploadId")
	if sw.status == http.StatusOK && key != "" && (put || complete) {
		e.created(bucket, key, int64(len(body)))
	}
}

// operation names a request: the API operation of the JSON protocols, the
// S3 method, else the action of its first authorization.
func operation(svc string, r *http.Request, needs []authz) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		return t[strings.LastIndex(t, ".")+1:]
	}
	if svc == "s3" {
		return "S3 " + r.Method
	}
	if len(needs) > 0 {
		return needs[0].action
	}
	return svc
}

// accessDenied answers as the service does when IAM refuses a call.
func accessDenied(w http.ResponseWriter, svc string, fn *Function, a authz, d iampolicy.Decision) {
	why := "no identity-based policy allows the " + a.action + " action"
	if d == iampolicy.ExplicitDeny {
		why = "an explicit deny in an identity-based policy"
	}
	msg := fmt.Sprintf("User: arn:aws:sts::%s:assumed-role/%s/%s is not authorized to perform: %s on resource: %s because %s",
		Account, physical(fn.RoleID), fn.Name, a.action, a.resource, why)
	switch svc {
	case "s3":
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s</Message><RequestId>aws-local</RequestId></Error>`, xmlEscape(msg))
	case "iam":
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>%s</Message></Error><RequestId>aws-local</RequestId></ErrorResponse>`, xmlEscape(msg))
	case "dynamodb":
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazon.coral.service#AccessDeniedException", "Message": msg})
	case "logs":
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "AccessDeniedException", "message": msg})
	default: // REST-JSON: scheduler, lambda
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]string{"Message": msg})
	}
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func tableARN(name string) string {
	return "arn:aws:dynamodb:" + Region + ":" + Account + ":table/" + name
}

// dynamoAuthz: the IAM actions of a DynamoDB call. A transaction is
// authorized item by item (TransactWriteItems is no IAM action); a batch
// needs its batch action on each table.
func dynamoAuthz(r *http.Request, body []byte) []authz {
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	var in struct {
		TableName     string
		IndexName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	_ = json.Unmarshal(body, &in)
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		var out []authz
		for _, it := range in.TransactItems {
			for kind, x := range it {
				action := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}[kind]
				out = append(out, authz{action: "dynamodb:" + action, resource: tableARN(x.TableName)})
			}
		}
		return out
	case "BatchGetItem", "BatchWriteItem":
		names := make([]string, 0, len(in.RequestItems))
		for n := range in.RequestItems {
			names = append(names, n)
		}
		sort.Strings(names)
		var out []authz
		for _, n := range names {
			out = append(out, authz{action: "dynamodb:" + op, resource: tableARN(n)})
		}
		return out
	case "ListTables", "DescribeLimits", "DescribeEndpoints":
		return []authz{{action: "dynamodb:" + op, resource: "*"}}
	}
	res := tableARN(in.TableName)
	if in.IndexName != "" {
		res += "/index/" + in.IndexName
	}
	return []authz{{action: "dynamodb:" + op, resource: res}}
}

// s3Authz: the IAM actions of a path-style S3 request (HeadObject is
// s3:GetObject, HeadBucket s3:ListBucket, the parts of a multipart upload
// s3:PutObject, a copy reads its source).
func s3Authz(r *http.Request, body []byte) []authz {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	q := r.URL.Query()
	obj := "arn:aws:s3:::" + bucket + "/" + key
	bkt := "arn:aws:s3:::" + bucket
	if key == "" {
		switch {
		case r.Method == http.MethodPost && q.Has("delete"):
			var del struct {
				Object []struct{ Key string }
			}
			_ = xml.Unmarshal(body, &del)
			var out []authz
			for _, o := range del.Object {
				out = append(out, authz{action: "s3:DeleteObject", resource: bkt + "/" + o.Key})
			}
			return out
		case r.Method == http.MethodPut:
			return []authz{{action: "s3:CreateBucket", resource: bkt}}
		case r.Method == http.MethodDelete:
			return []authz{{action: "s3:DeleteBucket", resource: bkt}}
		case q.Has("location"):
			return []authz{{action: "s3:GetBucketLocation", resource: bkt}}
		case q.Has("uploads"):
			return []authz{{action: "s3:ListBucketMultipartUploads", resource: bkt}}
		}
		return []authz{{action: "s3:ListBucket", resource: bkt}}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if q.Has("uploadId") {
			return []authz{{action: "s3:ListMultipartUploadParts", resource: obj}}
		}
		return []authz{{action: "s3:GetObject", resource: obj}}
	case http.MethodPut, http.MethodPost:
		out := []authz{{action: "s3:PutObject", resource: obj}}
		if r.Header.Get("X-Amz-Tagging") != "" {
			// PutObject with tags needs s3:PutObjectTagging too (S3's
			// PutObject: "Permissions").
			out = append(out, authz{action: "s3:PutObjectTagging", resource: obj})
		}
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			src, _ = url.PathUnescape(strings.TrimPrefix(src, "/"))
			src, _, _ = strings.Cut(src, "?versionId=")
			out = append(out, authz{action: "s3:GetObject", resource: "arn:aws:s3:::" + src})
		}
		return out
	case http.MethodDelete:
		if q.Has("uploadId") {
			return []authz{{action: "s3:AbortMultipartUpload", resource: obj}}
		}
		return []authz{{action: "s3:DeleteObject", resource: obj}}
	}
	return []authz{{action: "s3:" + r.Method, resource: obj}}
}

// schedulerAuthz: EventBridge Scheduler's REST API; creating or updating a
// schedule passes its target's role to scheduler.amazonaws.com.
func schedulerAuthz(r *http.Request, body []byte) []authz {
	name, ok := strings.CutPrefix(r.URL.Path, "/schedules/")
	if !ok {
		return []authz{{action: "scheduler:" + r.Method, resource: "*"}}
	}
	var in struct {
		GroupName string
		Target    struct{ RoleArn string }
	}
	_ = json.Unmarshal(body, &in)
	group := r.URL.Query().Get("groupName")
	if in.GroupName != "" {
		group = in.GroupName
	}
	if group == "" {
		group = "default"
	}
	res := "arn:aws:scheduler:" + Region + ":" + Account + ":schedule/" + group + "/" + name
	action := map[string]string{"POST": "CreateSchedule", "PUT": "UpdateSchedule", "DELETE": "DeleteSchedule", "GET": "GetSchedule"}[r.Method]
	out := []authz{{action: "scheduler:" + action, resource: res}}
	if in.Target.RoleArn != "" {
		out = append(out, authz{action: "iam:PassRole", resource: in.Target.RoleArn, context: map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}})
	}
	return out
}

func logGroupARN(group string) string {
	return "arn:aws:logs:" + Region + ":" + Account + ":log-group:" + group
}

// logsAuthz: CloudWatch Logs. Stream operations are on the stream's ARN
// (log-group:G:log-stream:S), group operations on log-group:G:* (the form
// IAM matches them against); GetQueryResults and StopQuery name no
// resource ("*").
func logsAuthz(r *http.Request, body []byte) []authz {
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	var in struct {
		LogGroupName  string
		LogGroupNames []string
		LogStreamName string
	}
	_ = json.Unmarshal(body, &in)
	switch op {
	case "PutLogEvents", "CreateLogStream", "GetLogEvents":
		return []authz{{action: "logs:" + op, resource: logGroupARN(in.LogGroupName) + ":log-stream:" + in.LogStreamName}}
	case "GetQueryResults", "StopQuery", "DescribeQueries":
		return []authz{{action: "logs:" + op, resource: "*"}}
	}
	groups := in.LogGroupNames
	if in.LogGroupName != "" {
		groups = append(groups, in.LogGroupName)
	}
	var out []authz
	for _, g := range groups {
		out = append(out, authz{action: "logs:" + op, resource: logGroupARN(g) + ":*"})
	}
	if len(out) == 0 {
		out = []authz{{action: "logs:" + op, resource: "*"}}
	}
	return out
}

func functionARN(name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	return "arn:aws:lambda:" + Region + ":" + Account + ":function:" + name
}

// lambdaAuthz: Lambda's REST API (creating a function passes its role to
// lambda.amazonaws.com).
func lambdaAuthz(r *http.Request, body []byte) []authz {
	p := r.URL.Path
	var in struct{ FunctionName, Role string }
	_ = json.Unmarshal(body, &in)
	seg := strings.Split(strings.Trim(p, "/"), "/")
	if len(seg) < 2 {
		return []authz{{action: "lambda:Unknown", resource: "*"}}
	}
	if seg[0] == "2017-10-31" && len(seg) >= 4 && seg[3] == "concurrency" {
		name, _ := url.PathUnescape(seg[2])
		a := "lambda:PutFunctionConcurrency"
		if r.Method == http.MethodDelete {
			a = "lambda:DeleteFunctionConcurrency"
		}
		return []authz{{action: a, resource: functionARN(name)}}
	}
	if len(seg) == 2 && r.Method == http.MethodPost {
		out := []authz{{action: "lambda:CreateFunction", resource: functionARN(in.FunctionName)}}
		if in.Role != "" {
			out = append(out, authz{action: "iam:PassRole", resource: in.Role, context: map[string]string{"iam:PassedToService": "lambda.amazonaws.com"}})
		}
		return out
	}
	if len(seg) < 3 {
		return []authz{{action: "lambda:ListFunctions", resource: "*"}}
	}
	name, _ := url.PathUnescape(seg[2])
	res := functionARN(name)
	var a string
	switch {
	case len(seg) >= 4 && seg[3] == "invocations":
		a = "InvokeFunction"
	case len(seg) >= 4 && seg[3] == "code":
		a = "UpdateFunctionCode"
	case len(seg) >= 4 && seg[3] == "configuration" && r.Method == http.MethodPut:
		a = "UpdateFunctionConfiguration"
	case len(seg) >= 4 && seg[3] == "configuration":
		a = "GetFunctionConfiguration"
	case r.Method == http.MethodDelete:
		a = "DeleteFunction"
	default:
		a = "GetFunction"
	}
	return []authz{{action: "lambda:" + a, resource: res}}
}

// iamAuthz: IAM's query API on roles. A role's ARN has its path, which a
// call other than CreateRole does not name: it comes from the role as
// made (role). Creating a role, or giving it a policy, carries its
// permissions boundary as the condition key iam:PermissionsBoundary.
func iamAuthz(r *http.Request, body []byte, role func(name string) url.Values) []authz {
	q, _ := url.ParseQuery(string(body))
	action := q.Get("Action")
	name := q.Get("RoleName")
	made := role(name)
	path := q.Get("Path")
	if path == "" && made != nil {
		path = made.Get("Path")
	}
	if path == "" {
		path = "/"
	}
	boundary := q.Get("PermissionsBoundary")
	if boundary == "" && made != nil {
		boundary = made.Get("PermissionsBoundary")
	}
	ctx := map[string]string{}
	if boundary != "" {
		ctx["iam:PermissionsBoundary"] = boundary
	}
	return []authz{{action: "iam:" + action, resource: "arn:aws:iam::" + Account + ":role" + path + name, context: ctx}}
}
