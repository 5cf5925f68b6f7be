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
	"strings"
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
	sqsEndpoint := flag.String("sqs-endpoint", os.Getenv("SQS_ENDPOINT"), "an external SQS (moto) holding the stream mappings' failure queues instead of the embedded one")
	var checkRoles []string
	flag.Func("check-roles", "one more template whose roles each function's calls must satisfy (the CDK app's: infra/cdk.out/bot-platform.template.json); repeatable", func(v string) error {
		checkRoles = append(checkRoles, v)
		return nil
	})
	accountConcurrency := flag.Int("account-concurrency", awslocal.DefaultAccountConcurrency,
		"the account's Lambda concurrency the functions share (AWS's default 1,000 scaled down by ten); the template's reserved concurrency is scaled in proportion unless its parameter is given with --parameter")
	params := map[string]string{}
	flag.Func("parameter", "a stack parameter Name=Value, as sam deploy --parameter-overrides (e.g. ChatStreamConcurrency=5); repeatable", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want Name=Value")
		}
		params[k] = val
		return nil
	})
	secure := map[string]string{}
	flag.Func("secure-string", "an SSM SecureString parameter Name=Value put before any function starts, e.g. /bot-platform/oidc-client-secret=... (docs/signin.md); repeatable. Or, the stack running, aws ssm put-parameter with aws-local/operator.env", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || !strings.HasPrefix(k, "/") {
			return fmt.Errorf("want /Name=Value")
		}
		secure[k] = val
		return nil
	})
	streamTier := flag.String("stream-tier", os.Getenv("AWS_LOCAL_STREAM_TIER"), "the stack's StreamTier: lambda (default) or container, its tasks as long-running processes behind a load balancer's stand-in (docs/deploy.md \"Stream tiers\"; AWS_LOCAL_STREAM_TIER)")
	streamTasks := flag.Int("stream-tasks", awslocal.DefaultStreamTasks, "with -stream-tier container: how many tasks")
	streamLB := flag.String("stream-load-balancer", os.Getenv("AWS_LOCAL_STREAM_LB"), "with -stream-tier container: the stack's StreamLoadBalancerType, alb (default) or nlb: TCP passed through with proxy protocol v2 to tasks that end TLS with a test certificate, <data-dir>/aws-local/stream-tls.pem (AWS_LOCAL_STREAM_LB)")
	checkCalls := flag.String("check-calls", "", "check the calls an aws-calls.json recorded against the roles of the --check-roles templates, then exit (1 when one is refused): no stack runs")
	flag.Parse()
	if *streamTier != "" && *streamTier != "lambda" && *streamTier != "container" {
		fmt.Fprintf(os.Stderr, "aws-local: -stream-tier %q: lambda or container\n", *streamTier)
		os.Exit(2)
	}
	if *streamLB != "" && *streamLB != "alb" && *streamLB != "nlb" {
		fmt.Fprintf(os.Stderr, "aws-local: -stream-load-balancer %q: alb or nlb\n", *streamLB)
		os.Exit(2)
	}
	if *checkCalls != "" {
		os.Exit(check(*checkCalls, checkRoles))
	}
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
		DynamoEndpoint: *ddb, S3Endpoint: *s3, SQSEndpoint: *sqsEndpoint, FunctionOutput: out, CheckRoles: checkRoles,
		AccountConcurrency: *accountConcurrency, Parameters: params,
		StreamTier: *streamTier, StreamTasks: *streamTasks, StreamLoadBalancer: *streamLB, SecureStrings: secure})
	if err != nil {
		fmt.Fprintln(os.Stderr, "aws-local:", err)
		os.Exit(1)
	}
}

// check evaluates recorded calls against each template's roles and prints
// the refused ones: 0 when all are allowed, 1 when one is refused, 2 when
// the check cannot be made.
func check(callsPath string, templates []string) int {
	if len(templates) == 0 {
		fmt.Fprintln(os.Stderr, "aws-local: --check-calls needs a --check-roles template")
		return 2
	}
	calls, err := awslocal.ReadCalls(callsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aws-local:", err)
		return 2
	}
	code := 0
	for _, t := range templates {
		roles, err := awslocal.ReadRoles(t, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "aws-local:", err)
			return 2
		}
		refused, err := awslocal.CheckCalls(calls, roles)
		if err != nil {
			fmt.Fprintf(os.Stderr, "aws-local: %s: %v\n", t, err)
			return 2
		}
		for _, c := range refused {
			fmt.Printf("AccessDenied (%s): %s %s on %s\n", t, c.Function, c.Action, c.Resource)
			code = 1
		}
		if len(refused) == 0 {
			fmt.Printf("%s: the %d recorded calls are all allowed\n", t, len(calls))
		}
	}
	return code
}
