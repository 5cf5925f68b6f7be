package awslocal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/awslocal"
)

// loggingBot is a bot's code (the SDK's shape: a server started on a
// port) that logs each event it gets.
const loggingBot = `'use strict'
const http = require('http')
module.exports = { default: { start(port) {
  http.createServer((req, res) => {
    if (req.url === '/health') { res.end('ok'); return }
    req.resume()
    req.on('end', () => { console.log('code got ' + req.headers['x-bp-type']); res.end('{}') })
  }).listen(port, '127.0.0.1')
} } }
`

// boundaryWithoutBotLogs writes a copy of template.yaml whose CodeBoundary
// (the permissions boundary of deployed code's roles) no longer covers the
// bot log group.
func boundaryWithoutBotLogs(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(string(raw), "\n  CodeBoundary:\n")
	old := "Resource: [!GetAtt BotLogGroup.Arn, !GetAtt IntegrationLogGroup.Arn]"
	if !ok || !strings.Contains(after, old) {
		t.Fatal("template.yaml: no CodeBoundary on the bot and integration log groups")
	}
	after = strings.Replace(after, old, "Resource: [!GetAtt IntegrationLogGroup.Arn]", 1)
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(before+"\n  CodeBoundary:\n"+after), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDeployedCodeLogsUnderItsRole: deployed code's output goes to the bot
// log group with the role the admin function made for its function (its
// inline policy within the CodeBoundary permissions boundary), checked as
// IAM would: allowed with the template as it is; refused, and the lines
// lost, when the boundary no longer covers the bot log group although the
// role's own policy still does.
func TestDeployedCodeLogsUnderItsRole(t *testing.T) {
	cases := []struct {
		name      string
		template  func(t *testing.T) string
		allowed   bool
		refusedBy string
	}{
		{"template.yaml", func(*testing.T) string { return "" }, true, ""},
		{"CodeBoundary without the bot log group", boundaryWithoutBotLogs, false, "the permissions boundary arn:aws:iam::" + awslocal.Account + ":policy/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startStack(t, tc.template(t))
			hdr, _, ws := s.botWithFileIn(t)
			botID := hdr["x-bot-id"]
			s.call(t, "PUT", "/v1/admin/bots/"+botID, map[string]string{"x-workspace-id": ws}, map[string]any{"code": loggingBot}, 200)
			conv := s.call(t, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}}, 201)["conversation"].(map[string]any)["id"]
			user := s.call(t, "POST", "/v1/chat/users", hdr, map[string]any{"tags": map[string]string{}}, 201)["user"].(map[string]any)["id"]
			s.call(t, "POST", "/v1/chat/messages", hdr, map[string]any{"conversationId": conv, "userId": user,
				"type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201)
			// The message reaches the code through the stream and the
			// dispatcher; its output line is the call awaited.
			role := awslocal.StackName + "-code-" + botID
			var got *awslocal.CallCount
			for deadline := time.Now().Add(60 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				for _, c := range s.Calls.Summary() {
					if c.Function == role && c.Action == "logs:PutLogEvents" {
						got = &c
					}
				}
			}
			if got == nil {
				t.Fatalf("no output of the deployed code recorded (calls: %+v)", s.Calls.Summary())
			}
			if !strings.Contains(got.Resource, ":log-group:/platform/"+awslocal.StackName+"/bots:log-stream:") {
				t.Errorf("written to %s", got.Resource)
			}
			if got.Allowed != tc.allowed || !strings.HasPrefix(got.RefusedBy, tc.refusedBy) || (tc.refusedBy == "" && got.RefusedBy != "") {
				t.Fatalf("allowed %v refused by %q, want %v %q", got.Allowed, got.RefusedBy, tc.allowed, tc.refusedBy)
			}
		})
	}
}
