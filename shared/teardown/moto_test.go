package teardown_test

// The teardown against a third-party Lambda and IAM emulator (moto_server):
// the list calls' shapes and pagination, the deletes, as another
// implementation than the project's fake answers them.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/botforge/platform/shared/lambdarunner"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/teardown"
)

func TestTeardownOnMoto(t *testing.T) {
	endpoint := mototest.Start(t)
	lc, ic := clients(endpoint)
	r := &lambdarunner.Runner{Lambda: lc, IAM: ic, Source: source{}, Prefix: "st-code-", RolePath: "/st-code/",
		BoundaryARN: "arn:aws:iam::123456789012:policy/st-code-boundary", BotLogGroup: "/platform/st/bots",
		IntegrationLogGroup: "/platform/st/integrations", LogsARN: "arn:aws:logs:eu-west-1:123456789012:log-group:",
		Poll: 50 * time.Millisecond, Wait: 20 * time.Second, RoleWait: 20 * time.Second}
	ctx := context.Background()
	for _, id := range []string{"bot_1", "bot_2", "bot_3"} {
		if err := r.DeployBot(ctx, platform.Bot{ID: id, CodeKey: "code/" + id + ".js"}, "https://api.example.com"); err != nil {
			t.Fatal(err)
		}
	}
	// Another role beside them, not under the path.
	if _, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("other"), AssumeRolePolicyDocument: aws.String("{}")}); err != nil {
		t.Fatal(err)
	}
	c := newCloudFormation(t)
	h := &teardown.Teardown{Lambda: lc, IAM: ic, Prefix: "st-code-", RolePath: "/st-code/"}
	if err := h.Handle(ctx, event(c, cfn.RequestDelete, "st-code-teardown")); err != nil {
		t.Fatal(err)
	}
	answers, _ := c.got()
	if len(answers) != 1 || answers[0].Status != cfn.StatusSuccess {
		t.Fatalf("answers %+v", answers)
	}
	fns, err := lc.ListFunctions(ctx, &lambda.ListFunctionsInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns.Functions {
		if strings.HasPrefix(aws.ToString(f.FunctionName), "st-code-") {
			t.Errorf("function %s left", aws.ToString(f.FunctionName))
		}
	}
	roles, err := ic.ListRoles(ctx, &iam.ListRolesInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ro := range roles.Roles {
		names = append(names, aws.ToString(ro.RoleName))
	}
	if strings.Join(names, ",") != "other" {
		t.Fatalf("roles left: %v", names)
	}
}
