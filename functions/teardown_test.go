package functions_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/botforge/platform/shared/lambdarunner"
	"github.com/botforge/platform/shared/lambdarunner/lambdatest"
)

// TestTeardownBinary: the teardown function's binary, given the sample
// Delete event of the stack's CodeTeardown custom resource, deletes the
// deployed code's function and role on the fake Lambda and IAM endpoint
// and answers SUCCESS to the event's response URL.
func TestTeardownBinary(t *testing.T) {
	binaries(t)
	f := lambdatest.New(t)
	ctx := context.Background()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")}
	lc := lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = aws.String(f.URL) })
	ic := iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(f.URL) })
	const name = "bot-platform-code-bot_1"
	if _, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), Path: aws.String("/bot-platform-code/"), AssumeRolePolicyDocument: aws.String("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String("own-logs"), PolicyDocument: aws.String("{}")}); err != nil {
		t.Fatal(err)
	}
	zip, _ := lambdarunner.Zip([]byte(`exports.handler = async () => ({})`))
	if _, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name), Description: aws.String(lambdarunner.DescriptionPrefix + "v1"),
		Role: aws.String("arn:aws:iam::123456789012:role/bot-platform-code/" + name), Code: &types.FunctionCode{ZipFile: zip}}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var answers []cfn.Response
	cf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var res cfn.Response
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPut || json.Unmarshal(b, &res) != nil {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		answers = append(answers, res)
		mu.Unlock()
	}))
	t.Cleanup(cf.Close)

	env := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey,
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_EC2_METADATA_DISABLED": "true",
		"LAMBDA_ENDPOINT": f.URL, "IAM_ENDPOINT": f.URL,
		"PLATFORM_CODE_PREFIX": "bot-platform-code-", "PLATFORM_CODE_ROLE_PATH": "/bot-platform-code/",
	}
	inv := invoke(t, "teardown", env, sampleEvent(t, "teardown-delete.json", map[string]string{"<RESPONSE_URL>": cf.URL + "/presigned"}))
	if len(inv.Error) > 0 || string(inv.Response) != "null" {
		t.Fatalf("response %s, error %s\n%s", inv.Response, inv.Error, inv.Output)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 1 || answers[0].Status != cfn.StatusSuccess || answers[0].PhysicalResourceID != "bot-platform-code-teardown" ||
		answers[0].LogicalResourceID != "CodeTeardown" {
		t.Fatalf("CloudFormation was answered %+v\n%s", answers, inv.Output)
	}
	if f.Function(name) || len(f.Roles()) != 0 {
		t.Fatalf("left: function %v, roles %v", f.Function(name), f.Roles())
	}
}
