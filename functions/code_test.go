package functions_test

// Deployed code on AWS, wired as the functions wire it (shared/runtime):
// the admin function deploys a bot's code as a Lambda function (role under
// the path, with the boundary; the function's key a bot API key), the
// dispatcher function delivers the bot's events by invoking it, a change
// of secrets updates it, deleting the bot removes it. Lambda and IAM are
// a recording endpoint that runs invocations with node (lambdatest).

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/lambdarunner/lambdatest"
)

func TestDeployedCodeOnAWS(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	s := newStandIns(t)
	aws := lambdatest.New(t)
	for k, v := range map[string]string{
		"PLATFORM_CODE_PREFIX":       "bot-platform-code-",
		"PLATFORM_CODE_ROLE_PATH":    "/bot-platform-code/",
		"PLATFORM_CODE_BOUNDARY_ARN": "arn:aws:iam::123456789012:policy/bot-platform-CodeBoundary",
		"PLATFORM_CODE_LOGS_ARN":     "arn:aws:logs:us-east-1:123456789012:log-group:",
		"LAMBDA_ENDPOINT":            aws.URL,
		"IAM_ENDPOINT":               aws.URL,
	} {
		t.Setenv(k, v)
	}
	ws, botID := s.bot(t)
	admin := map[string]string{"x-workspace-id": ws}
	code := `exports.handler = async (req) => {
  console.log('event for', req.headers['x-bot-id'], process.env.SECRET_GREETING || '')
  return { status: 200, body: JSON.stringify({ op: req.headers['x-bp-operation'], type: req.headers['x-bp-type'] }) }
}`
	s.call(t, httpapi.AreaAdmin, http.MethodPut, "/v1/admin/bots/"+botID, admin, map[string]any{"code": code})
	fn := "bot-platform-code-" + botID
	calls := strings.Join(aws.Calls(), "\n")
	for _, want := range []string{"IAM.CreateRole " + fn, "IAM.PutRolePolicy " + fn, "Lambda.CreateFunction " + fn} {
		if !strings.Contains(calls, want) {
			t.Fatalf("updateBot with code: no %s in\n%s", want, calls)
		}
	}
	role := aws.Bodies("IAM.CreateRole")[0]
	if role["Path"] != "/bot-platform-code/" || role["PermissionsBoundary"] != "arn:aws:iam::123456789012:policy/bot-platform-CodeBoundary" {
		t.Fatalf("role: %v", role)
	}
	created := aws.Bodies("Lambda.CreateFunction")[0]
	env := created["Environment"].(map[string]any)["Variables"].(map[string]any)
	if !strings.HasPrefix(env["BP_TOKEN"].(string), "bp_bak_") || env["BP_BOT_ID"] != botID || env["BP_API_URL"] != "http://example.com" ||
		created["LoggingConfig"].(map[string]any)["LogGroup"] != s.Env["PLATFORM_BOT_LOG_GROUP"] {
		t.Fatalf("function: %v", created)
	}

	// The dispatcher delivers an event by invoking the function.
	id := s.queueEvent(t, botID, "hello")
	if err := dispatcherHandler(t)(context.Background(), streamSample(t)); err != nil {
		t.Fatal(err)
	}
	if st := s.eventStatus(t, botID, id); st != "processed" {
		t.Fatalf("event %s after the dispatcher ran, want processed (calls %q)", st, aws.Calls())
	}
	inv := aws.Bodies("Lambda.Invoke")
	var payload struct {
		Version string
		Headers map[string]string
		Body    string
	}
	if len(inv) != 1 || json.Unmarshal([]byte(inv[0]["payload"].(string)), &payload) != nil ||
		payload.Headers["x-bot-id"] != botID || payload.Headers["x-bp-operation"] != "event_received" || !strings.Contains(payload.Body, id) ||
		payload.Version != env["BP_CODE_VERSION"] {
		t.Fatalf("invocations: %v", inv)
	}
	if logs := aws.Logs(); len(logs) != 1 || !strings.Contains(logs[0], `"botId":"`+botID+`"`) || !strings.Contains(logs[0], "event for "+botID) {
		t.Fatalf("function logs: %q", logs)
	}

	// A new secret: the function's configuration changes, its key stays.
	aws.Calls()
	s.call(t, httpapi.AreaAdmin, http.MethodPut, "/v1/admin/bots/"+botID, admin, map[string]any{"secrets": map[string]any{"GREETING": "hi"}})
	upd := aws.Bodies("Lambda.UpdateFunctionConfiguration")
	if len(upd) != 1 {
		t.Fatalf("updateBot secrets: calls %q", aws.Calls())
	}
	uenv := upd[0]["Environment"].(map[string]any)["Variables"].(map[string]any)
	if uenv["SECRET_GREETING"] != "hi" || uenv["BP_TOKEN"] != env["BP_TOKEN"] {
		t.Fatalf("updated env: %v", uenv)
	}
	// A change that is not the code's: nothing deployed (one read).
	aws.Calls()
	s.call(t, httpapi.AreaAdmin, http.MethodPut, "/v1/admin/bots/"+botID, admin, map[string]any{"description": "same code"})
	if got := aws.Calls(); len(got) != 1 || got[0] != "Lambda.GetFunction "+fn {
		t.Fatalf("updateBot without a code change: %q", got)
	}

	// Deleting the bot removes its function and role.
	s.call(t, httpapi.AreaAdmin, http.MethodDelete, "/v1/admin/bots/"+botID, admin, nil)
	got := strings.Join(aws.Calls(), "\n")
	for _, want := range []string{"Lambda.DeleteFunction " + fn, "IAM.DeleteRolePolicy " + fn, "IAM.DeleteRole " + fn} {
		if !strings.Contains(got, want) {
			t.Fatalf("deleteBot: no %s in\n%s", want, got)
		}
	}
	if aws.Function(fn) {
		t.Fatal("the function outlived its bot")
	}
}
