package teardown_test

// The teardown against the fake Lambda and IAM endpoint
// (lambdarunner/lambdatest): deployed code made by the admin function's
// runner, deleted by the custom resource's Delete, answered to a stand-in
// of CloudFormation's response URL.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/botforge/platform/shared/lambdarunner"
	"github.com/botforge/platform/shared/lambdarunner/lambdatest"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/teardown"
)

type source struct{}

func (source) Code(context.Context, string) ([]byte, error) {
	return []byte(`exports.handler = async () => ({})`), nil
}
func (source) BotToken(context.Context, platform.Bot) (lambdarunner.Key, error) {
	return lambdarunner.Key{Token: "bp_bak_test", RevokeOthers: func() {}, Revoke: func() {}}, nil
}
func (source) IntegrationToken(context.Context, platform.Integration) (lambdarunner.Key, error) {
	return lambdarunner.Key{Token: "bp_iak_test", RevokeOthers: func() {}, Revoke: func() {}}, nil
}

func clients(endpoint string) (*lambda.Client, *iam.Client) {
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1}
	return lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// deployed makes, as the admin function does, the functions and roles of
// two bots and an integration version of stack "st", and beside them what
// the teardown must leave: a function of stack "st-code-x" (same name
// prefix, not deployed code), a function and a role of other paths.
func deployed(t *testing.T, f *lambdatest.Server) (code []string) {
	t.Helper()
	lc, ic := clients(f.URL)
	r := &lambdarunner.Runner{Lambda: lc, IAM: ic, Source: source{}, Prefix: "st-code-", RolePath: "/st-code/",
		BoundaryARN: "arn:aws:iam::123456789012:policy/st-code-boundary", BotLogGroup: "/platform/st/bots",
		IntegrationLogGroup: "/platform/st/integrations", LogsARN: "arn:aws:logs:eu-west-1:123456789012:log-group:",
		Poll: time.Millisecond, Wait: 5 * time.Second, RoleWait: 5 * time.Second}
	ctx := context.Background()
	for _, id := range []string{"bot_1", "bot_2"} {
		if err := r.DeployBot(ctx, platform.Bot{ID: id, CodeKey: "code/" + id + ".js"}, "https://api.example.com"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.DeployIntegration(ctx, platform.Integration{ID: "intver_1", CodeKey: "code/i.js"}, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	zip, _ := lambdarunner.Zip([]byte(`exports.handler = async () => ({})`))
	for _, name := range []string{"st-code-x-admin", "other-admin"} {
		_, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name), Description: aws.String("Admin API (functions/admin)"),
			Role: aws.String("arn:aws:iam::123456789012:role/other"), Code: &types.FunctionCode{ZipFile: zip}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, path := range map[string]string{"other": "/", "st-code-deeper": "/st-code/deeper/"} {
		if _, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), Path: aws.String(path), AssumeRolePolicyDocument: aws.String("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	f.Calls()
	return []string{"st-code-bot_1", "st-code-bot_2", "st-code-intver_1"}
}

// cloudFormation stands in for the response URL CloudFormation gives a
// custom resource: it records each answer; fail makes the next n PUTs
// answer 500.
type cloudFormation struct {
	mu      sync.Mutex
	answers []cfn.Response
	types   []string // the Content-Type of each PUT
	fail    int
	srv     *httptest.Server
}

func newCloudFormation(t *testing.T) *cloudFormation {
	c := &cloudFormation{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.Method != http.MethodPut {
			w.WriteHeader(405)
			return
		}
		if c.fail > 0 {
			c.fail--
			w.WriteHeader(500)
			return
		}
		var res cfn.Response
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &res); err != nil {
			w.WriteHeader(400)
			return
		}
		c.answers = append(c.answers, res)
		c.types = append(c.types, r.Header.Get("Content-Type"))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *cloudFormation) got() ([]cfn.Response, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]cfn.Response(nil), c.answers...), append([]string(nil), c.types...)
}

func event(c *cloudFormation, typ cfn.RequestType, physical string) cfn.Event {
	return cfn.Event{RequestType: typ, RequestID: "req-1", ResponseURL: c.srv.URL + "/presigned?X-Amz-Signature=x",
		ResourceType: "Custom::CodeTeardown", LogicalResourceID: "CodeTeardown", PhysicalResourceID: physical,
		StackID: "arn:aws:cloudformation:eu-west-1:123456789012:stack/st/0b1c2d3e", ResourceProperties: map[string]any{"ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:st-teardown"}}
}

func newTeardown(f *lambdatest.Server) *teardown.Teardown {
	lc, ic := clients(f.URL)
	return &teardown.Teardown{Lambda: lc, IAM: ic, Prefix: "st-code-", RolePath: "/st-code/"}
}

func existing(f *lambdatest.Server, names []string) []string {
	var out []string
	for _, n := range names {
		if f.Function(n) {
			out = append(out, n)
		}
	}
	return out
}

// TestTeardown: what each request does to deployed code and what
// CloudFormation is answered.
func TestTeardown(t *testing.T) {
	decoyFunctions := []string{"st-code-x-admin", "other-admin"}
	for _, tc := range []struct {
		name     string
		request  cfn.RequestType
		physical string // the event's PhysicalResourceId
		setup    func(f *lambdatest.Server, c *cloudFormation)
		status   cfn.StatusType
		reason   string   // in a FAILED answer's Reason
		left     []string // deployed code's functions left
		roles    []string // roles left
	}{
		{name: "create does nothing", request: cfn.RequestCreate, status: cfn.StatusSuccess,
			left: []string{"st-code-bot_1", "st-code-bot_2", "st-code-intver_1"}, roles: []string{"other", "st-code-bot_1", "st-code-bot_2", "st-code-deeper", "st-code-intver_1"}},
		{name: "update does nothing", request: cfn.RequestUpdate, physical: "st-code-teardown", status: cfn.StatusSuccess,
			left: []string{"st-code-bot_1", "st-code-bot_2", "st-code-intver_1"}, roles: []string{"other", "st-code-bot_1", "st-code-bot_2", "st-code-deeper", "st-code-intver_1"}},
		{name: "delete deletes deployed code only", request: cfn.RequestDelete, physical: "st-code-teardown", status: cfn.StatusSuccess,
			roles: []string{"other", "st-code-deeper"}},
		{name: "delete over pages", request: cfn.RequestDelete, physical: "st-code-teardown", status: cfn.StatusSuccess,
			setup: func(f *lambdatest.Server, _ *cloudFormation) { f.PageSize = 1 }, roles: []string{"other", "st-code-deeper"}},
		{name: "delete answered despite a failing response URL", request: cfn.RequestDelete, physical: "st-code-teardown", status: cfn.StatusSuccess,
			setup: func(_ *lambdatest.Server, c *cloudFormation) { c.fail = 2 }, roles: []string{"other", "st-code-deeper"}},
		{name: "delete refused: FAILED, naming what is left", request: cfn.RequestDelete, physical: "st-code-teardown", status: cfn.StatusFailed,
			setup:  func(f *lambdatest.Server, _ *cloudFormation) { f.SetDeny("Lambda.DeleteFunction", true) },
			reason: "delete function st-code-bot_1", left: []string{"st-code-bot_1", "st-code-bot_2", "st-code-intver_1"},
			// The roles go all the same: each step is independent.
			roles: []string{"other", "st-code-deeper"}},
		{name: "roles refused: FAILED", request: cfn.RequestDelete, physical: "st-code-teardown", status: cfn.StatusFailed,
			setup:  func(f *lambdatest.Server, _ *cloudFormation) { f.SetDeny("IAM.ListRoles", true) },
			reason: "list roles", roles: []string{"other", "st-code-bot_1", "st-code-bot_2", "st-code-deeper", "st-code-intver_1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := lambdatest.New(t)
			code := deployed(t, f)
			c := newCloudFormation(t)
			if tc.setup != nil {
				tc.setup(f, c)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := newTeardown(f).Handle(ctx, event(c, tc.request, tc.physical)); err != nil {
				t.Fatalf("handle: %v", err)
			}
			answers, types := c.got()
			if len(answers) != 1 {
				t.Fatalf("%d answers, want 1: %+v", len(answers), answers)
			}
			a := answers[0]
			if a.Status != tc.status || a.PhysicalResourceID != "st-code-teardown" || a.RequestID != "req-1" || a.LogicalResourceID != "CodeTeardown" ||
				a.StackID != "arn:aws:cloudformation:eu-west-1:123456789012:stack/st/0b1c2d3e" || types[0] != "" {
				t.Fatalf("answer %+v (content type %q)", a, types[0])
			}
			if !strings.Contains(a.Reason, tc.reason) || (tc.status == cfn.StatusFailed) != strings.Contains(a.Reason, "Delete the stack again") {
				t.Fatalf("reason %q, want it to name %q", a.Reason, tc.reason)
			}
			if got := existing(f, code); !reflect.DeepEqual(got, tc.left) {
				t.Fatalf("deployed code's functions left: %v, want %v", got, tc.left)
			}
			if got := existing(f, decoyFunctions); !reflect.DeepEqual(got, decoyFunctions) {
				t.Fatalf("other functions left: %v, want all of %v", got, decoyFunctions)
			}
			if got := f.Roles(); !reflect.DeepEqual(got, tc.roles) {
				t.Fatalf("roles left: %v, want %v", got, tc.roles)
			}
		})
	}
}

// TestTeardownRetried: a Delete that failed, run again (the stack deleted
// again) once the cause is gone, finishes.
func TestTeardownRetried(t *testing.T) {
	f := lambdatest.New(t)
	code := deployed(t, f)
	c := newCloudFormation(t)
	td := newTeardown(f)
	f.SetDeny("IAM.DeleteRole", true)
	if err := td.Handle(context.Background(), event(c, cfn.RequestDelete, "st-code-teardown")); err != nil {
		t.Fatal(err)
	}
	f.SetDeny("IAM.DeleteRole", false)
	if err := td.Handle(context.Background(), event(c, cfn.RequestDelete, "st-code-teardown")); err != nil {
		t.Fatal(err)
	}
	answers, _ := c.got()
	if len(answers) != 2 || answers[0].Status != cfn.StatusFailed || !strings.Contains(answers[0].Reason, "delete role st-code-bot_1") || answers[1].Status != cfn.StatusSuccess {
		t.Fatalf("answers %+v", answers)
	}
	if left := existing(f, code); len(left) != 0 {
		t.Fatalf("functions left: %v", left)
	}
	if got := f.Roles(); !reflect.DeepEqual(got, []string{"other", "st-code-deeper"}) {
		t.Fatalf("roles left: %v", got)
	}
}

// TestTeardownAnswersBeforeItsDeadline: a teardown that cannot finish (a
// call that never answers) is answered FAILED Reserve before the
// invocation's end, rather than leaving CloudFormation waiting.
func TestTeardownAnswersBeforeItsDeadline(t *testing.T) {
	f := lambdatest.New(t)
	deployed(t, f)
	c := newCloudFormation(t)
	f.SetHang("Lambda.ListFunctions", true)
	deadline := time.Now().Add(teardown.Reserve + 500*time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := newTeardown(f).Handle(ctx, event(c, cfn.RequestDelete, "st-code-teardown")); err != nil {
		t.Fatal(err)
	}
	answers, _ := c.got()
	if len(answers) != 1 || answers[0].Status != cfn.StatusFailed || !strings.Contains(answers[0].Reason, "list functions") {
		t.Fatalf("answers %+v", answers)
	}
	if left := time.Until(deadline); left < teardown.Reserve-time.Second {
		t.Fatalf("answered with %v left of the invocation, want about %v", left, teardown.Reserve)
	}
}
