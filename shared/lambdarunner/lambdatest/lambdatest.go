// Package lambdatest is a Lambda and IAM endpoint for tests (httptest):
// it records every call and its body, keeps functions and roles in memory
// and runs an invocation as Lambda's Node.js runtime does, with the
// machine's node (the function's zip unpacked, index.handler(payload)).
package lambdatest

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Server is a Lambda and IAM endpoint recording every call: Lambda's
// REST-JSON API (functions kept in memory; Invoke runs the function's zip
// with the machine's node, as Lambda's Node.js runtime calls index.handler)
// and IAM's query API.
type Server struct {
	t   TB
	srv *httptest.Server
	// URL is the endpoint (LAMBDA_ENDPOINT and IAM_ENDPOINT).
	URL string

	mu    sync.Mutex
	calls []string // "Lambda.CreateFunction name", "IAM.CreateRole name", ...
	// bodies of the calls, by call
	bodies    map[string][]map[string]any
	functions map[string]*function
	roles     map[string]url.Values
	policies  map[string]string
	// faults: the next n CreateFunction calls answer "role cannot be
	// assumed"; the next n GetFunction calls after a change answer Pending
	// / InProgress; every Invoke answers TooManyRequests.
	RoleNotReady int
	// Conflict: the next n CreateFunction calls answer that the function
	// exists (made concurrently).
	Conflict     int
	PendingPolls int
	Throttle     bool
	// RefuseConcurrency: PutFunctionConcurrency is refused (the account's
	// unreserved concurrency cannot spare it).
	RefuseConcurrency bool
	logs              []string // the functions' stdout lines
	// policyNames: the name of each role's inline policy.
	policyNames map[string]string
	// deny: calls ("Lambda.DeleteFunction", "IAM.DeleteRole", ...)
	// answered AccessDenied, as for a caller without the permission; hang:
	// calls that never answer (until the caller gives up).
	deny, hang map[string]bool
	// PageSize is how many functions or roles a list call answers at most
	// (Lambda's and IAM's default: 50 and 100).
	PageSize int
	onLogs   func(config map[string]any, lines []string)
}

// SetDeny makes every call (e.g. "Lambda.DeleteFunction") answer
// AccessDenied, or not.
func (f *Server) SetDeny(call string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deny[call] = on
}

// SetHang makes every call (e.g. "Lambda.ListFunctions") wait until its
// caller gives up, or not.
func (f *Server) SetHang(call string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hang[call] = on
}

// fault answers call as SetDeny or SetHang asked (f.mu held), and says
// whether it did.
func (f *Server) fault(w http.ResponseWriter, r *http.Request, call string) bool {
	if f.hang[call] {
		f.mu.Unlock()
		<-r.Context().Done()
		f.mu.Lock()
		return true
	}
	if !f.deny[call] {
		return false
	}
	msg := "User: arn:aws:sts::123456789012:assumed-role/test is not authorized to perform: " + call
	if strings.HasPrefix(call, "IAM.") {
		w.WriteHeader(403)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>%s</Message></Error><RequestId>1</RequestId></ErrorResponse>`, msg)
	} else {
		lambdaError(w, 403, "AccessDeniedException", msg)
	}
	return true
}

// page is the part of names (sorted) a list call answers from marker on,
// and the marker of the next part ("" when none is left).
func (f *Server) page(names []string, marker string) ([]string, string) {
	sort.Strings(names)
	size := f.PageSize
	if size <= 0 {
		size = 50
	}
	start := 0
	if marker != "" {
		start = sort.SearchStrings(names, marker)
	}
	names = names[start:]
	if len(names) > size {
		return names[:size], names[size]
	}
	return names, ""
}

type function struct {
	config  map[string]any
	zip     []byte
	pending int
	// reserved concurrency, 0: none
	reserved int
}

// refuseConcurrencyMsg is what Lambda answers a PutFunctionConcurrency an
// account's unreserved concurrency cannot spare.
var refuseConcurrencyMsg = "Specified ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution below its minimum value of [100]."

func (f *Server) serveConcurrency(w http.ResponseWriter, r *http.Request, body []byte) {
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/2017-10-31/functions/"), "/concurrency")
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	f.mu.Lock()
	defer f.mu.Unlock()
	fn := f.functions[name]
	switch r.Method {
	case http.MethodPut:
		f.record("Lambda.PutFunctionConcurrency "+name, in)
		if fn == nil {
			lambdaError(w, 404, "ResourceNotFoundException", "Function not found: "+name)
			return
		}
		if f.RefuseConcurrency {
			lambdaError(w, 400, "InvalidParameterValueException", refuseConcurrencyMsg)
			return
		}
		fn.reserved = int(in["ReservedConcurrentExecutions"].(float64))
		_ = json.NewEncoder(w).Encode(map[string]any{"ReservedConcurrentExecutions": fn.reserved})
	case http.MethodDelete:
		f.record("Lambda.DeleteFunctionConcurrency "+name, nil)
		if fn != nil {
			fn.reserved = 0
		}
		w.WriteHeader(204)
	}
}

// Reserved is a function's reserved concurrency (0: none).
func (f *Server) Reserved(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fn := f.functions[name]; fn != nil {
		return fn.reserved
	}
	return 0
}

// TB is what the Server needs of its user: a testing.TB, or a long-running
// program's stand-in (shared/awslocal serves deployed code with it).
type TB interface {
	TempDir() string
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Cleanup(func())
}

var _ TB = testing.TB(nil)

func New(t testing.TB) *Server {
	f := NewHandler(t)
	f.srv = httptest.NewServer(f)
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// NewHandler is a Server without a listener of its own: its user serves
// it (ServeHTTP) and sets URL.
func NewHandler(t TB) *Server {
	return &Server{t: t, bodies: map[string][]map[string]any{}, functions: map[string]*function{}, roles: map[string]url.Values{}, policies: map[string]string{},
		policyNames: map[string]string{}, deny: map[string]bool{}, hang: map[string]bool{}}
}

// ServeHTTP serves the Lambda and IAM APIs.
func (f *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.serve(w, r) }

// OnLogs, when set, receives the lines a function wrote on stdout, with
// the function's configuration (its LoggingConfig says where they go).
func (f *Server) OnLogs(fn func(config map[string]any, lines []string)) {
	f.mu.Lock()
	f.onLogs = fn
	f.mu.Unlock()
}

// Role is the CreateRole request of a role made through the server (its
// Path, PermissionsBoundary, ...), nil when there is none.
func (f *Server) Role(name string) url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.roles[name]; q != nil {
		out := url.Values{}
		for k, v := range q {
			out[k] = append([]string(nil), v...)
		}
		return out
	}
	return nil
}

func (f *Server) record(call string, body map[string]any) {
	f.calls = append(f.calls, call)
	f.bodies[strings.Fields(call)[0]] = append(f.bodies[strings.Fields(call)[0]], body)
}

// Calls returns the calls made since the last Calls ("Lambda.CreateFunction
// <name>", "IAM.CreateRole <name>", ...).
func (f *Server) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.HasPrefix(r.URL.Path, "/2015-03-31/functions") {
		f.serveLambda(w, r, body)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/2017-10-31/functions/") && strings.HasSuffix(r.URL.Path, "/concurrency") {
		f.serveConcurrency(w, r, body)
		return
	}
	f.serveIAM(w, r, body)
}

func (f *Server) serveLambda(w http.ResponseWriter, r *http.Request, body []byte) {
	rest := strings.TrimPrefix(r.URL.Path, "/2015-03-31/functions")
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	f.mu.Lock()
	defer f.mu.Unlock()
	name := parts[0]
	fn := f.functions[name]
	conf := func() map[string]any {
		c := map[string]any{}
		for k, v := range fn.config {
			c[k] = v
		}
		if fn.pending > 0 {
			fn.pending--
			c["State"], c["LastUpdateStatus"] = "Active", "InProgress"
			if _, ok := c["_new"]; ok {
				c["State"] = "Pending"
			}
		} else {
			c["State"], c["LastUpdateStatus"] = "Active", "Successful"
			delete(fn.config, "_new")
		}
		delete(c, "_new")
		return c
	}
	switch {
	case r.Method == http.MethodGet && name == "":
		f.record("Lambda.ListFunctions", nil)
		if f.fault(w, r, "Lambda.ListFunctions") {
			return
		}
		names := make([]string, 0, len(f.functions))
		for n := range f.functions {
			names = append(names, n)
		}
		names, next := f.page(names, r.URL.Query().Get("Marker"))
		out := map[string]any{}
		list := []map[string]any{}
		for _, n := range names {
			list = append(list, map[string]any{"FunctionName": n, "Description": f.functions[n].config["Description"],
				"FunctionArn": "arn:aws:lambda:eu-west-1:123456789012:function:" + n})
		}
		out["Functions"] = list
		if next != "" {
			out["NextMarker"] = next
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodPost && name == "":
		name = in["FunctionName"].(string)
		f.record("Lambda.CreateFunction "+name, in)
		if f.RoleNotReady > 0 {
			f.RoleNotReady--
			lambdaError(w, 400, "InvalidParameterValueException", "The role defined for the function cannot be assumed by Lambda.")
			return
		}
		if f.functions[name] != nil || f.Conflict > 0 {
			if f.Conflict > 0 {
				f.Conflict--
			}
			lambdaError(w, 409, "ResourceConflictException", "Function already exist: "+name)
			return
		}
		code := in["Code"].(map[string]any)
		zipped, _ := base64Decode(code["ZipFile"].(string))
		cfg := map[string]any{"_new": true}
		for k, v := range in {
			if k != "Code" {
				cfg[k] = v
			}
		}
		fn = &function{config: cfg, zip: zipped, pending: f.PendingPolls}
		f.functions[name] = fn
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(conf())
	case fn == nil:
		f.record("Lambda."+map[string]string{"GET": "GetFunction", "DELETE": "DeleteFunction", "POST": "Invoke", "PUT": "Update"}[r.Method]+" "+name, in)
		lambdaError(w, 404, "ResourceNotFoundException", "Function not found: "+name)
	case r.Method == http.MethodGet && len(parts) == 1:
		f.record("Lambda.GetFunction "+name, nil)
		out := map[string]any{"Configuration": conf(), "Code": map[string]any{"RepositoryType": "S3"}}
		if fn.reserved > 0 {
			out["Concurrency"] = map[string]any{"ReservedConcurrentExecutions": fn.reserved}
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodDelete:
		f.record("Lambda.DeleteFunction "+name, nil)
		if f.fault(w, r, "Lambda.DeleteFunction") {
			return
		}
		delete(f.functions, name)
		w.WriteHeader(204)
	case r.Method == http.MethodPut && parts[1] == "code":
		f.record("Lambda.UpdateFunctionCode "+name, in)
		fn.zip, _ = base64Decode(in["ZipFile"].(string))
		fn.pending = f.PendingPolls
		_ = json.NewEncoder(w).Encode(conf())
	case r.Method == http.MethodPut && parts[1] == "configuration":
		f.record("Lambda.UpdateFunctionConfiguration "+name, in)
		for k, v := range in {
			fn.config[k] = v
		}
		fn.pending = f.PendingPolls
		_ = json.NewEncoder(w).Encode(conf())
	case r.Method == http.MethodPost && parts[1] == "invocations":
		f.record("Lambda.Invoke "+name, map[string]any{"payload": string(body)})
		if f.Throttle {
			lambdaError(w, 429, "TooManyRequestsException", "Rate exceeded")
			return
		}
		// The function runs without the lock: invocations run at once.
		f.mu.Unlock()
		out, fnErr, logs := runFunction(f.t, fn, body)
		f.mu.Lock()
		f.logs = append(f.logs, logs...)
		if f.onLogs != nil && len(logs) > 0 {
			f.onLogs(fn.config, logs)
		}
		if fnErr {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
		}
		w.Header().Set("X-Amz-Executed-Version", "$LATEST")
		_, _ = w.Write(out)
	default:
		lambdaError(w, 400, "InvalidRequestContentException", "unexpected call "+r.Method+" "+r.URL.Path)
	}
}

func (f *Server) serveIAM(w http.ResponseWriter, r *http.Request, body []byte) {
	q, _ := url.ParseQuery(string(body))
	f.mu.Lock()
	defer f.mu.Unlock()
	action, name := q.Get("Action"), q.Get("RoleName")
	rec := map[string]any{}
	for k := range q {
		rec[k] = q.Get(k)
	}
	f.record(strings.TrimSpace("IAM."+action+" "+name), rec)
	if f.fault(w, r, "IAM."+action) {
		return
	}
	iamErr := func(status int, code string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>1</RequestId></ErrorResponse>`, code, code)
	}
	role := func(v url.Values) string {
		return fmt.Sprintf(`<Role><Path>%s</Path><RoleName>%s</RoleName><RoleId>AROAFAKE</RoleId><Arn>arn:aws:iam::123456789012:role%s%s</Arn><CreateDate>2026-01-01T00:00:00Z</CreateDate></Role>`,
			v.Get("Path"), v.Get("RoleName"), v.Get("Path"), v.Get("RoleName"))
	}
	switch action {
	case "CreateRole":
		if f.roles[name] != nil {
			iamErr(409, "EntityAlreadyExists")
			return
		}
		f.roles[name] = q
		fmt.Fprintf(w, `<CreateRoleResponse><CreateRoleResult>%s</CreateRoleResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></CreateRoleResponse>`, role(q))
	case "GetRole":
		if f.roles[name] == nil {
			iamErr(404, "NoSuchEntity")
			return
		}
		fmt.Fprintf(w, `<GetRoleResponse><GetRoleResult>%s</GetRoleResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetRoleResponse>`, role(f.roles[name]))
	case "PutRolePolicy":
		f.policies[name] = q.Get("PolicyDocument")
		f.policyNames[name] = q.Get("PolicyName")
		fmt.Fprint(w, `<PutRolePolicyResponse><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></PutRolePolicyResponse>`)
	case "DeleteRolePolicy":
		if _, ok := f.policies[name]; !ok {
			iamErr(404, "NoSuchEntity")
			return
		}
		delete(f.policies, name)
		delete(f.policyNames, name)
		fmt.Fprint(w, `<DeleteRolePolicyResponse><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></DeleteRolePolicyResponse>`)
	case "DeleteRole":
		if f.roles[name] == nil {
			iamErr(404, "NoSuchEntity")
			return
		}
		if _, ok := f.policies[name]; ok { // as IAM: policies first
			iamErr(409, "DeleteConflict")
			return
		}
		delete(f.roles, name)
		fmt.Fprint(w, `<DeleteRoleResponse><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></DeleteRoleResponse>`)
	case "ListRoles":
		prefix := q.Get("PathPrefix")
		if prefix == "" {
			prefix = "/"
		}
		var names []string
		for n, v := range f.roles {
			if strings.HasPrefix(v.Get("Path"), prefix) {
				names = append(names, n)
			}
		}
		names, next := f.page(names, q.Get("Marker"))
		var members strings.Builder
		for _, n := range names {
			members.WriteString("<member>" + strings.TrimSuffix(strings.TrimPrefix(role(f.roles[n]), "<Role>"), "</Role>") + "</member>")
		}
		fmt.Fprintf(w, `<ListRolesResponse><ListRolesResult><Roles>%s</Roles><IsTruncated>%v</IsTruncated><Marker>%s</Marker></ListRolesResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></ListRolesResponse>`,
			members.String(), next != "", next)
	case "ListRolePolicies":
		if f.roles[name] == nil {
			iamErr(404, "NoSuchEntity")
			return
		}
		members := ""
		if p, ok := f.policyNames[name]; ok {
			members = "<member>" + p + "</member>"
		}
		fmt.Fprintf(w, `<ListRolePoliciesResponse><ListRolePoliciesResult><PolicyNames>%s</PolicyNames><IsTruncated>false</IsTruncated></ListRolePoliciesResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></ListRolePoliciesResponse>`, members)
	default:
		iamErr(400, "InvalidAction")
	}
}

// runFunction runs one invocation of fn as Lambda's Node.js runtime does:
// the zip unpacked, index.handler(event) called with the payload, its
// result (or the error it throws) returned; the function's environment
// is its configuration's.
func runFunction(t TB, fn *function, payload []byte) (out []byte, fnErr bool, logs []string) {
	dir := t.TempDir()
	zr, err := zip.NewReader(bytes.NewReader(fn.zip), int64(len(fn.zip)))
	if err != nil {
		t.Errorf("the function's zip: %v", err)
		return []byte(`{"errorMessage":"bad zip"}`), true, nil
	}
	for _, zf := range zr.File {
		rc, _ := zf.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		if err := os.WriteFile(filepath.Join(dir, zf.Name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	handler, _ := fn.config["Handler"].(string)
	if handler != "index.handler" {
		t.Errorf("handler %q", handler)
	}
	resultFile := filepath.Join(dir, "result.json")
	script := `const fs = require('fs')
const event = JSON.parse(fs.readFileSync(0, 'utf8'))
require(process.argv[1] + '/index.cjs').handler(event).then(
  (r) => { fs.writeFileSync(process.argv[2], JSON.stringify(r)); process.exit(0) },
  (e) => { fs.writeFileSync(process.argv[2], JSON.stringify({errorType: 'Error', errorMessage: e.message, _failed: true})); process.exit(0) })`
	cmd := exec.Command("node", "-e", script, dir, resultFile)
	cmd.Stdin = bytes.NewReader(payload)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if env, ok := fn.config["Environment"].(map[string]any); ok {
		for k, v := range env["Variables"].(map[string]any) {
			cmd.Env = append(cmd.Env, k+"="+v.(string))
		}
	}
	cmd.Env = append(cmd.Env, "PORT="+freePort(t))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	_ = cmd.Run() // an exit status: the result file says (or its absence)
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l != "" {
			logs = append(logs, l)
		}
	}
	res, err := os.ReadFile(resultFile)
	if err != nil {
		return []byte(`{"errorType":"Runtime.ExitError","errorMessage":"the runtime exited"}`), true, logs
	}
	var failed struct {
		Failed bool `json:"_failed"`
	}
	_ = json.Unmarshal(res, &failed)
	return res, failed.Failed, logs
}

// Bodies are the bodies of every call of an action ("Lambda.CreateFunction").
func (f *Server) Bodies(action string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies[action]...)
}

// Policy is the inline policy of a role.
func (f *Server) Policy(role string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policies[role]
}

// Logs are the lines the functions wrote on stdout.
func (f *Server) Logs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.logs...)
}

// Roles are the names of the roles that exist.
func (f *Server) Roles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.roles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Function reports whether a function exists.
func (f *Server) Function(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.functions[name] != nil
}

// SetThrottle makes every Invoke answer TooManyRequests (or not).
func (f *Server) SetThrottle(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Throttle = on
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

func freePort(t TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
