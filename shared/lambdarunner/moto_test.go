package lambdarunner_test

// The runner's deployments against a third-party Lambda and IAM emulator
// (moto_server): CreateFunction, GetFunction, UpdateFunctionCode,
// UpdateFunctionConfiguration, DeleteFunction and the role calls work
// there without Docker (Invoke does not: that part is tested against the
// fake endpoint, which runs the zip with node).

import (
	"context"
	"github.com/botforge/platform/shared/mototest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/botforge/platform/shared/lambdarunner"
	"github.com/botforge/platform/shared/platform"
)

func TestDeployOnMoto(t *testing.T) {
	endpoint := mototest.Start(t)
	src := &fakeSource{code: map[string][]byte{"a.js": []byte(`exports.handler = async () => ({})`), "b.js": []byte(`exports.handler = async () => ({ status: 204 })`)}}
	r := newRunner(t, endpoint, src)
	r.BoundaryARN = "arn:aws:iam::123456789012:policy/st-code-boundary"
	r.Poll = 50 * time.Millisecond
	ctx := context.Background()
	b := platform.Bot{ID: "bot_1", CodeKey: "a.js", SecretValues: map[string]string{"K": "v"}}
	if err := r.DeployBot(ctx, b, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	get := func() *types.FunctionConfiguration {
		out, err := r.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("st-code-bot_1")})
		if err != nil {
			t.Fatal(err)
		}
		return out.Configuration
	}
	c := get()
	if c.Runtime != types.RuntimeNodejs22x || c.Handler == nil || *c.Handler != "index.handler" || len(c.Architectures) != 1 || c.Architectures[0] != types.ArchitectureArm64 ||
		!strings.HasSuffix(aws.ToString(c.Role), ":role/st-code/st-code-bot_1") || c.Environment.Variables["SECRET_K"] != "v" ||
		c.Environment.Variables["BP_TOKEN"] != "bp_bak_test1" || !strings.Contains(aws.ToString(c.Description), lambdarunner.Version(b.CodeKey, b.SecretValues)) {
		t.Fatalf("function on moto: %+v", c)
	}
	sha := aws.ToString(c.CodeSha256)
	// Deploying it again changes nothing.
	if err := r.DeployBot(ctx, b, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	if c := get(); aws.ToString(c.CodeSha256) != sha || len(src.minted) != 1 {
		t.Fatalf("a deployment of what runs changed the function: %+v", c)
	}
	// New code: its code and configuration change, its key stays.
	b.CodeKey = "b.js"
	if err := r.DeployBot(ctx, b, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	if c := get(); aws.ToString(c.CodeSha256) == sha || !strings.Contains(aws.ToString(c.Description), lambdarunner.Version(b.CodeKey, b.SecretValues)) || c.Environment.Variables["BP_TOKEN"] != "bp_bak_test1" {
		t.Fatalf("updated function on moto: %+v", c)
	}
	if err := r.RemoveBot(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("st-code-bot_1")}); err == nil {
		t.Fatal("the function is still there")
	}
	// Its role is gone: deploying again creates both.
	if err := r.DeployBot(ctx, b, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	if len(src.minted) != 2 {
		t.Fatalf("keys minted: %v", src.minted)
	}
	// An integration's maxConcurrency: the function's reserved concurrency.
	n := int64(4)
	i := platform.Integration{ID: "intver_1", CodeKey: "a.js", MaxConcurrency: &n}
	if err := r.DeployIntegration(ctx, i, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	out, err := r.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("st-code-intver_1")})
	if err != nil || out.Concurrency == nil || aws.ToInt32(out.Concurrency.ReservedConcurrentExecutions) != 4 {
		t.Fatalf("reserved concurrency on moto: %+v %v", out, err)
	}
}
