// Command aws-local runs the AWS build of the platform whole on this
// machine (shared/awslocal, docs/deploy.md): the Lambda functions of
// template.yaml, built as for Lambda, behind the template's API Gateway
// routes, with the table's stream, the bucket's events, EventBridge
// Scheduler, CloudWatch Logs and each function's role checked on every AWS
// call. It takes the local platform's flags and writes the first account's
// token to <data-dir>/admin-token as `make run` does. Run it from the
// repository (it builds the functions from there).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/botforge/platform/shared/awslocal"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address the stack's HTTP API listens on")
	dataDir := flag.String("data-dir", "./.data-aws", "directory holding the stack's state")
	root := flag.String("root", os.Getenv("AWS_LOCAL_ROOT"), "the repository (default: found from the working directory up)")
	template := flag.String("template", "", "the template to run (default: the repository's template.yaml)")
	ddb := flag.String("dynamodb-endpoint", os.Getenv("DYNAMODB_ENDPOINT"), "an external DynamoDB (moto) instead of the embedded one")
	s3 := flag.String("s3-endpoint", os.Getenv("S3_ENDPOINT"), "an external S3 (moto) instead of the embedded one")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(filepath.Join(*dataDir, "aws-local"), 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "aws-local:", err)
		os.Exit(1)
	}
	// The functions' own output (their request logs) goes to a file; the
	// stack's log (refused calls among it) to stderr.
	out, err := os.OpenFile(filepath.Join(*dataDir, "aws-local", "functions.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aws-local:", err)
		os.Exit(1)
	}
	defer out.Close()
	err = awslocal.Run(ctx, awslocal.Options{Addr: *addr, DataDir: *dataDir, Root: *root, Template: *template,
		DynamoEndpoint: *ddb, S3Endpoint: *s3, FunctionOutput: out})
	if err != nil {
		fmt.Fprintln(os.Stderr, "aws-local:", err)
		os.Exit(1)
	}
}
