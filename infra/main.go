// Command infra is the CDK app of the platform: it synthesizes the same
// production stack as ../template.yaml (see NewPlatformStack). Run it with
// the CDK CLI from infra/: `npx aws-cdk synth`, `npx aws-cdk deploy`
// (cdk.json builds the function binaries first); see ../docs/deploy.md.
//
// Context (-c key=value): stackName (default bot-platform), lambdaDir
// (default ../.build/lambda: <dir>/bootstrap for every function).
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	if _, err := NewPlatformStack(app, optionsFrom(app)); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
	app.Synth(nil)
}

// optionsFrom reads the stack options from the app's context.
func optionsFrom(app awscdk.App) StackOptions {
	get := func(key, def string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
			return v
		}
		return def
	}
	return StackOptions{
		StackName: get("stackName", "bot-platform"),
		LambdaDir: get("lambdaDir", "../.build/lambda"),
	}
}
