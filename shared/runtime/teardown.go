package runtime

import (
	"context"
	"log"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/botforge/platform/shared/teardown"
)

// Teardown is the teardown of deployed code the environment names
// (PLATFORM_CODE_PREFIX, PLATFORM_CODE_ROLE_PATH; LAMBDA_ENDPOINT and
// IAM_ENDPOINT for other endpoints than AWS's).
func Teardown(cfg aws.Config, ce CodeEnv) *teardown.Teardown {
	return &teardown.Teardown{
		Lambda: lambda.NewFromConfig(cfg, func(o *lambda.Options) {
			if ce.LambdaEndpoint != "" {
				o.BaseEndpoint = aws.String(ce.LambdaEndpoint)
			}
		}),
		IAM: iam.NewFromConfig(cfg, func(o *iam.Options) {
			if ce.IAMEndpoint != "" {
				o.BaseEndpoint = aws.String(ce.IAMEndpoint)
			}
		}),
		Prefix: ce.Prefix, RolePath: ce.RolePath, Log: slog.Default(),
	}
}

// StartTeardown serves the teardown function (functions/teardown), the
// handler of the stack's CodeTeardown custom resource. It never returns.
func StartTeardown() {
	UseJSONLogs()
	cfg, err := AWSConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	startLambdaHandler(Teardown(cfg, CodeEnvFromEnv()).Handle)
}
