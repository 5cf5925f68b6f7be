package awslocal_test

// The stack run whole, as `make aws-local` runs it: requests through the
// template's routes into the functions' binaries, every AWS call they make
// checked against their roles in the template.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/botforge/platform/shared/awslocal"
	"github.com/botforge/platform/shared/mototest"
)

var built struct {
	once sync.Once
	dir  string
	err  error
}

// TestMain removes the functions built for the package's tests when they
// end: about 450 MB a run, which filled a developer's disk (113 runs'
// worth) when left in the temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// functions builds the functions once for every test of the package (a
// template changed by a test names the same packages).
func functions(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		tpl, err := awslocal.ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "")
		if err != nil {
			built.err = err
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "awslocal-bin-"); built.err == nil {
			built.err = awslocal.Build(context.Background(), "../..", tpl, built.dir)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

type stack struct {
	*awslocal.Stack
	token string
}

// startStack runs the stack of template (the repository's when "") until
// the test ends.
func startStack(t *testing.T, template string) *stack {
	t.Helper()
	return startStackWith(t, awslocal.Options{Template: template})
}

func startStackWith(t *testing.T, o awslocal.Options) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the Lambda functions")
	}
	bin := functions(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	dir := o.DataDir
	o.Root, o.Prebuilt = "../..", bin
	if o.FunctionOutput == nil {
		o.FunctionOutput = io.Discard
	}
	s, err := awslocal.Open(context.Background(), o, ln)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: s.Handler()}}
	srv.Start()
	t.Cleanup(func() { srv.Close(); s.Close() })
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return &stack{Stack: s, token: string(tok)}
}

// call sends one API request and decodes the answer; want is the status
// expected.
func (s *stack) call(t *testing.T, method, path string, hdr map[string]string, body any, want int) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d (want %d) %s", method, path, res.StatusCode, want, raw)
	}
	return out
}

// botWithFile makes a workspace and a bot, and upserts a file of it: the
// file's upload URL (signed by the files function).
func (s *stack) botWithFile(t *testing.T) (hdr map[string]string, uploadURL string) {
	hdr, uploadURL, _ = s.botWithFileIn(t)
	return hdr, uploadURL
}

func (s *stack) botWithFileIn(t *testing.T) (hdr map[string]string, uploadURL, workspace string) {
	t.Helper()
	ws := s.call(t, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "roles"}, 200)["id"].(string)
	bot := s.call(t, "POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws}, map[string]any{"name": "roles"}, 200)["bot"].(map[string]any)["id"].(string)
	hdr = map[string]string{"x-bot-id": bot}
	f := s.call(t, "PUT", "/v1/files", hdr, map[string]any{"key": "notes.txt", "size": 5}, 200)["file"].(map[string]any)
	return hdr, f["uploadUrl"].(string), ws
}

func put(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "text/plain")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// withoutStatement writes a copy of template.yaml without one statement of
// a role's inline policy.
func withoutStatement(t *testing.T, role, policy string, index int) string {
	t.Helper()
	raw, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	get := func(n *yaml.Node, key string) *yaml.Node {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
		t.Fatalf("no %s", key)
		return nil
	}
	pols := get(get(get(get(doc.Content[0], "Resources"), role), "Properties"), "Policies")
	removed := false
	for _, p := range pols.Content {
		if get(p, "PolicyName").Value == policy {
			st := get(get(p, "PolicyDocument"), "Statement")
			st.Content = append(st.Content[:index], st.Content[index+1:]...)
			removed = true
		}
	}
	if !removed {
		t.Fatalf("%s has no policy %s", role, policy)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRoleWithoutStatementRefusesItsCall: the files function's role
// without its statement on the bucket's files/ keys. The presigned upload
// URL the function signs is then refused by S3 as AccessDenied (and the
// refusal reported), where the template as it is lets the same upload
// through and completes it.
func TestRoleWithoutStatementRefusesItsCall(t *testing.T) {
	cases := []struct {
		name     string
		template func(t *testing.T) string
		// checkRoles: the role removed from a template checked besides
		// the one run (Options.CheckRoles, as the CDK app's is).
		checkRoles bool
		status     int
	}{
		{"template.yaml", func(*testing.T) string { return "" }, false, 200},
		{"FilesFunctionRole without its files/ statement", func(t *testing.T) string {
			return withoutStatement(t, "FilesFunctionRole", "bucket", 0)
		}, false, 403},
		{"checked against a template whose FilesFunctionRole lacks it", func(t *testing.T) string {
			return withoutStatement(t, "FilesFunctionRole", "bucket", 0)
		}, true, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := awslocal.Options{Template: tc.template(t)}
			if tc.checkRoles {
				o = awslocal.Options{CheckRoles: []string{o.Template}}
			}
			s := startStackWith(t, o)
			hdr, url := s.botWithFile(t)
			status, body := put(t, url, "hello")
			if status != tc.status {
				t.Fatalf("upload: %d (want %d) %s", status, tc.status, body)
			}
			denied := s.Calls.Denied()
			file := s.call(t, "GET", "/v1/files/notes.txt", hdr, nil, 200)["file"].(map[string]any)
			if tc.status == 200 {
				if len(denied) != 0 || file["status"] != "upload_completed" {
					t.Fatalf("denied %v, file %v", denied, file["status"])
				}
				return
			}
			if !strings.Contains(body, "<Code>AccessDenied</Code>") {
				t.Errorf("S3's answer: %s", body)
			}
			if len(denied) != 1 || denied[0].Function != "FilesFunction" || denied[0].Action != "s3:PutObject" ||
				!strings.HasPrefix(denied[0].Resource, "arn:aws:s3:::"+s.Template.BucketName+"/files/") {
				t.Fatalf("denied: %+v", denied)
			}
			// The template that refused: the one run (its file name), or
			// the one checked besides it (its path as given).
			want := "template.yaml"
			if tc.checkRoles {
				want = o.CheckRoles[0]
			}
			if denied[0].RefusedBy != want {
				t.Errorf("refused by %q, want %q", denied[0].RefusedBy, want)
			}
			if file["status"] != "upload_pending" {
				t.Errorf("file status %v", file["status"])
			}
		})
	}
}

// TestRecordedCallsAreAllowed runs the platform's main paths through the
// stack (accounts, bots with a recurring event, chat with a bot the
// dispatcher delivers to through the table's stream, tables, files with
// their upload completed by the S3 event, logs through Logs Insights,
// deleteBot) and checks that every AWS call every function made is one its
// role allows.
func TestRecordedCallsAreAllowed(t *testing.T) {
	s := startStack(t, "")
	delivered := make(chan string, 10)
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case delivered <- r.Header.Get("x-bp-type"):
		default:
		}
		w.WriteHeader(200)
	}))
	defer bot.Close()

	hdr, url, ws := s.botWithFileIn(t)
	adm := map[string]string{"x-workspace-id": ws}
	if status, body := put(t, url, "hello"); status != 200 {
		t.Fatalf("upload: %d %s", status, body)
	}
	if st := s.call(t, "GET", "/v1/files/notes.txt", hdr, nil, 200)["file"].(map[string]any)["status"]; st != "upload_completed" {
		t.Fatalf("file status %v", st)
	}
	botID := hdr["x-bot-id"]
	s.call(t, "PUT", "/v1/admin/bots/"+botID, adm, map[string]any{"url": bot.URL,
		"recurringEvents": map[string]any{"nightly": map[string]any{"schedule": map[string]any{"cron": "0 3 * * *"}, "type": "t", "payload": map[string]any{}}}}, 200)
	conv := s.call(t, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}}, 201)["conversation"].(map[string]any)["id"]
	user := s.call(t, "POST", "/v1/chat/users", hdr, map[string]any{"tags": map[string]string{}}, 201)["user"].(map[string]any)["id"]
	s.call(t, "POST", "/v1/chat/messages", hdr, map[string]any{"conversationId": conv, "userId": user,
		"type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201)
	s.call(t, "GET", "/v1/chat/messages?conversationId="+conv.(string), hdr, nil, 200)
	select { // the outbox entry, through the stream, to the dispatcher, to the bot
	case typ := <-delivered:
		t.Logf("delivered to the bot: %s", typ)
	case <-time.After(60 * time.Second):
		t.Fatal("the message was not delivered to the bot")
	}
	s.call(t, "POST", "/v1/tables", hdr, map[string]any{"name": "rolesTable", "schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}, 200)
	s.call(t, "POST", "/v1/tables/rolesTable/rows", hdr, map[string]any{"rows": []any{map[string]any{"n": 1}}}, 200)
	s.call(t, "POST", "/v1/tables/rolesTable/rows/find", hdr, map[string]any{}, 200)
	now := time.Now().UTC()
	s.call(t, "GET", "/v1/admin/bots/"+botID+"/logs?timeStart="+now.Add(-time.Hour).Format(time.RFC3339)+"&timeEnd="+now.Format(time.RFC3339), adm, nil, 200)
	// EventBridge Scheduler fires the recurring event: the scheduler
	// function, invoked with SchedulerRole, delivers it to the bot.
	s.FireSchedules(context.Background())
	for typ := ""; typ != "t"; {
		select {
		case typ = <-delivered:
		case <-time.After(30 * time.Second):
			t.Fatal("the recurring event was not delivered to the bot")
		}
	}
	s.call(t, "DELETE", "/v1/admin/bots/"+botID, adm, nil, 200)
	// The template's rules (the sweeper's five minutes, the dispatcher's
	// minute), fired now; then the stack's deletion: CodeTeardown's
	// Delete to the teardown function, which answers CloudFormation.
	if err := s.FireRules(context.Background()); err != nil {
		t.Fatalf("rules: %v", err)
	}
	answers, err := s.DeleteCustomResources(context.Background())
	if err != nil || len(answers) != 1 || answers[0].LogicalID != "CodeTeardown" || answers[0].Status != "SUCCESS" {
		t.Fatalf("custom resources' deletion: %+v, %v", answers, err)
	}

	byFunction := map[string]map[string]bool{}
	for _, c := range s.Calls.Summary() {
		if byFunction[c.Function] == nil {
			byFunction[c.Function] = map[string]bool{}
		}
		byFunction[c.Function][c.Action] = true
		// The one refusal expected, as on AWS: deleteBot of a bot that
		// never had code removes its role, which IAM, not finding it,
		// names without its path; the runner takes that AccessDenied for
		// "no role" (shared/lambdarunner remove).
		if !c.Allowed && c.Action == "iam:DeleteRolePolicy" && c.Resource == "arn:aws:iam::"+awslocal.Account+":role/"+awslocal.StackName+"-code-"+botID {
			t.Logf("refused as expected (no role to remove): %s %s", c.Action, c.Resource)
			continue
		}
		if !c.Allowed {
			t.Errorf("refused: %s %s on %s (%d times)", c.Function, c.Action, c.Resource, c.Count)
		}
	}
	for _, want := range []struct{ function, action string }{
		{"AdminFunction", "scheduler:CreateSchedule"}, {"AdminFunction", "iam:PassRole"}, {"AdminFunction", "scheduler:DeleteSchedule"},
		{"AdminFunction", "logs:StartQuery"}, {"ChatFunction", "dynamodb:PutItem"}, {"TablesFunction", "dynamodb:Query"},
		{"FilesFunction", "s3:PutObject"}, {"UploadCompletionFunction", "s3:GetObject"}, {"DispatcherFunction", "dynamodb:GetRecords"},
		{"bot-platform-SchedulerRole-LOCAL", "lambda:InvokeFunction"}, {"SchedulerFunction", "dynamodb:GetItem"},
		{"SweeperFunction", "dynamodb:Query"}, {"TeardownFunction", "lambda:ListFunctions"}, {"TeardownFunction", "iam:ListRoles"},
	} {
		if !byFunction[want.function][want.action] {
			t.Errorf("no %s call by %s recorded", want.action, want.function)
		}
	}
	checkRecord(t, s)
	var fns []string
	for f, actions := range byFunction {
		var as []string
		for a := range actions {
			as = append(as, a)
		}
		sort.Strings(as)
		fns = append(fns, f+": "+strings.Join(as, " "))
	}
	sort.Strings(fns)
	t.Logf("calls by function:\n%s", strings.Join(fns, "\n"))
}

// TestExternalServices runs the stack over moto_server's DynamoDB and S3
// (a third-party emulator) instead of the embedded ones: the API works, and
// an upload through the presigned URL is completed by the object-created
// event the stack makes from the PUT it sees pass.
func TestExternalServices(t *testing.T) {
	moto := mototest.Start(t)
	s := startStackWith(t, awslocal.Options{DynamoEndpoint: moto, S3Endpoint: moto})
	hdr, url := s.botWithFile(t)
	if status, body := put(t, url, "hello"); status != 200 {
		t.Fatalf("upload: %d %s", status, body)
	}
	if st := s.call(t, "GET", "/v1/files/notes.txt", hdr, nil, 200)["file"].(map[string]any)["status"]; st != "upload_completed" {
		t.Fatalf("file status %v", st)
	}
	s.call(t, "POST", "/v1/tables", hdr, map[string]any{"name": "motoTable", "schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}, 200)
	s.call(t, "POST", "/v1/tables/motoTable/rows", hdr, map[string]any{"rows": []any{map[string]any{"n": 1}}}, 200)
	if rows := s.call(t, "POST", "/v1/tables/motoTable/rows/find", hdr, map[string]any{}, 200)["rows"].([]any); len(rows) != 1 {
		t.Fatalf("rows: %v", rows)
	}
	if d := s.Calls.Denied(); len(d) != 0 {
		t.Fatalf("denied: %+v", d)
	}
}

// callRecord is the record of calls infra's TestCDKRolesAllowRecordedCalls
// checks against the roles the CDK app synthesizes (infra is its own
// module and runs no stack).
const callRecord = "../../infra/testdata/aws-calls.json"

// checkRecord keeps callRecord whole: every allowed call made here (by
// function, action and condition keys: resources name ids made anew each
// run) must be in it. AWS_LOCAL_UPDATE_CALLS=1 rewrites it from this run.
func checkRecord(t *testing.T, s *stack) {
	t.Helper()
	if os.Getenv("AWS_LOCAL_UPDATE_CALLS") != "" {
		if err := s.WriteReport(callRecord); err != nil {
			t.Fatal(err)
		}
	}
	recorded, err := awslocal.ReadCalls(callRecord)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, c := range recorded {
		known[c.Function+" "+c.Action+" "+c.Context] = true
	}
	for _, c := range s.Calls.Summary() {
		if c.Allowed && !known[c.Function+" "+c.Action+" "+c.Context] {
			t.Errorf("%s %s (%s) is not in %s: rerun with AWS_LOCAL_UPDATE_CALLS=1", c.Function, c.Action, c.Context, callRecord)
		}
	}
}

// TestChatStreamURL: the stack serves ChatStreamFunction's URL (the real
// functions/chatstream behind lambdaurl, streaming) on a listener of its
// own, published as the ChatStreamUrl output; the Chat API answers there.
func TestChatStreamURL(t *testing.T) {
	dir := t.TempDir()
	s := startStackWith(t, awslocal.Options{DataDir: dir})
	u := s.FunctionURLs["ChatStreamFunction"]
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/") || strings.HasPrefix(u, s.URL) {
		t.Fatalf("ChatStreamFunction's URL %q (API %s)", u, s.URL)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "aws-local", "outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := json.Unmarshal(raw, &out); err != nil || out["ChatStreamUrl"] != u || out["ApiUrl"] != s.URL {
		t.Fatalf("outputs.json: %s (%v)", raw, err)
	}
	res, err := http.Get(u + "webhooks/whk_0000000000000000000000000/hello")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var e map[string]any
	if res.StatusCode != http.StatusNotFound || json.Unmarshal(b, &e) != nil || e["type"] == nil || e["message"] == nil {
		t.Fatalf("an unknown webhook at the chat stream URL: %d %s", res.StatusCode, b)
	}

	// A listen at the URL gets the signal of a message created through API
	// Gateway (the Chat function): the table's stream, the fan-out function
	// beside the dispatcher, the listening invocation's inbox.
	ws := s.call(t, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "chat"}, 200)["id"].(string)
	wsHdr := map[string]string{"x-workspace-id": ws}
	bot := s.call(t, "POST", "/v1/admin/bots", wsHdr, map[string]any{"name": "chat"}, 200)["bot"].(map[string]any)["id"].(string)
	chatID := s.call(t, "GET", "/v1/admin/hub/integrations/chat/latest", nil, nil, 200)["integration"].(map[string]any)["id"].(string)
	s.call(t, "PUT", "/v1/admin/bots/"+bot, wsHdr, map[string]any{"integrations": map[string]any{chatID: map[string]any{"enabled": true, "configuration": map[string]any{}}}}, 200)
	inst := s.call(t, "GET", "/v1/admin/bots/"+bot, wsHdr, nil, 200)["bot"].(map[string]any)["integrations"].(map[string]any)[chatID].(map[string]any)
	hook := inst["webhookUrl"].(string)
	streamHook := u + "webhooks/" + hook[strings.LastIndex(hook, "/")+1:]
	chat := func(base, method, path, key string, body any, want int) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("x-user-key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		if res.StatusCode != want || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("%s %s%s: %d (want %d) %s", method, base, path, res.StatusCode, want, raw)
		}
		return out
	}
	key := chat(streamHook, "POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := chat(streamHook, "POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", streamHook+"/conversations/"+conv+"/listen", nil)
	req.Header.Set("x-user-key", key)
	lres, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer lres.Body.Close()
	if lres.StatusCode != 200 || !strings.HasPrefix(lres.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("listen: %d %v", lres.StatusCode, lres.Header)
	}
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(lres.Body)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	msg := chat(hook, "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "hi"}}, 201)["message"].(map[string]any)["id"].(string)
	for {
		select {
		case l, ok := <-events:
			if !ok {
				t.Fatal("the stream ended before the message's signal")
			}
			if strings.HasPrefix(l, "data:") && strings.Contains(l, msg) {
				return
			}
		case <-ctx.Done():
			t.Fatal("no signal of the message on the stream within 30 s")
		}
	}
}
