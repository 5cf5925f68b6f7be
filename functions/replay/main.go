// Command replay re-delivers what the table-stream mappings gave up
// (docs/runbook.md "Failure queues"): for each message of the failure
// queues given (the stack's DispatcherFailureQueueUrl and
// ChatFanoutFailureQueueUrl outputs), it re-reads the batch's range from
// the table's stream and invokes the function again (shared/replay);
// replayed messages are deleted, failed ones stay. It runs with the
// operator's AWS credentials (the default chain; AWS_ENDPOINT_URL points
// it at `make aws-local`'s operator endpoint, <data-dir>/aws-local/operator.env).
//
//	go run ./functions/replay -queue-url "$DISPATCHER_QUEUE_URL,$FANOUT_QUEUE_URL" [-dry-run]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botforge/platform/shared/replay"
)

func main() {
	urls := flag.String("queue-url", "", "failure queue URLs, comma-separated (the stack's *FailureQueueUrl outputs)")
	dry := flag.Bool("dry-run", false, "describe each message; invoke and delete nothing")
	flag.Parse()
	if *urls == "" {
		fmt.Fprintln(os.Stderr, "replay: -queue-url is required (the stack's DispatcherFailureQueueUrl and ChatFanoutFailureQueueUrl outputs)")
		os.Exit(2)
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
	r := &replay.Replayer{SQS: sqs.NewFromConfig(cfg), Streams: dynamodbstreams.NewFromConfig(cfg), Lambda: lambda.NewFromConfig(cfg),
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)), DryRun: *dry}
	failed := false
	for _, u := range strings.Split(*urls, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		results, err := r.Queue(ctx, u)
		for _, res := range results {
			fmt.Println(res)
			failed = failed || res.Outcome == replay.Failed
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "replay:", err)
			failed = true
		}
		fmt.Printf("%s: %d messages\n", u, len(results))
	}
	if failed {
		os.Exit(1)
	}
}
