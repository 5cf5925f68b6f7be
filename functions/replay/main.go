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
//
// With -outbox-scan it recovers the outbox entries nothing else finds
// after the dispatcher was down for more than the stream's 24 hours (an
// entry due at once has no sweep index entry: only its stream record named
// it): it scans the table for outbox entries outside the sweep index older
// than -older-than and invokes the dispatcher function with stream batches
// naming their shards (shared/replay OutboxScan; docs/runbook.md
// "Outbox scan").
//
//	go run ./functions/replay -outbox-scan -table "$TABLE" -stack <stack> [-segments 8] [-older-than 15m] [-dry-run]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botforge/platform/shared/replay"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  replay -queue-url URL[,URL...] [-dry-run]
      re-deliver the batches the table-stream mappings gave up (the stack's
      DispatcherFailureQueueUrl and ChatFanoutFailureQueueUrl outputs)
  replay -outbox-scan -table TABLE (-stack STACK | -function NAME) [-segments N] [-older-than D] [-dry-run]
      after the dispatcher was down for more than the stream's 24 hours: scan
      the table for outbox entries outside the sweep index older than D and
      invoke the dispatcher function with stream batches naming their shards
      (a line per shard and a total; exit code 1 if an invocation failed)

AWS credentials: the default chain (AWS_ENDPOINT_URL for make aws-local's
operator endpoint). docs/runbook.md, "Failure queues" and "Outbox scan".

flags:
`

// run is the command: its exit code (2 for a usage error, 1 when
// something failed).
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	urls := fs.String("queue-url", "", "failure queue URLs, comma-separated (the stack's *FailureQueueUrl outputs)")
	dry := fs.Bool("dry-run", false, "describe each message (with -outbox-scan: list each shard); invoke and delete nothing")
	// The outbox scan (docs/runbook.md "Outbox scan").
	scan := fs.Bool("outbox-scan", false, "scan the table for outbox entries outside the sweep index (due at once, named only by their stream records) older than -older-than, and invoke the dispatcher function with stream batches naming their shards: after a dispatcher outage longer than the stream's 24 hours")
	table := fs.String("table", os.Getenv("PLATFORM_TABLE"), "with -outbox-scan: the table (the stack's TableName output; default $PLATFORM_TABLE)")
	stack := fs.String("stack", "", "with -outbox-scan: the stack's name; the dispatcher function is <stack>-dispatcher unless -function is given")
	function := fs.String("function", "", "with -outbox-scan: the dispatcher function's name or ARN (default <stack>-dispatcher)")
	segments := fs.Int("segments", 4, "with -outbox-scan: parallel Scan segments")
	olderThan := fs.Duration("older-than", 15*time.Minute, "with -outbox-scan: leave entries due less than this long ago (their stream records may still be on their way)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "replay: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *scan {
		if *urls != "" {
			fmt.Fprintln(stderr, "replay: -outbox-scan and -queue-url are two modes: give one")
			return 2
		}
		if *function == "" && *stack != "" {
			*function = *stack + "-dispatcher"
		}
		return outboxScan(*table, *function, *segments, *olderThan, *dry, stdout, stderr)
	}
	if *urls == "" {
		fmt.Fprintln(stderr, "replay: -queue-url is required (the stack's DispatcherFailureQueueUrl and ChatFanoutFailureQueueUrl outputs), or -outbox-scan")
		return 2
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "replay:", err)
		return 1
	}
	r := &replay.Replayer{SQS: sqs.NewFromConfig(cfg), Streams: dynamodbstreams.NewFromConfig(cfg), Lambda: lambda.NewFromConfig(cfg),
		Log: slog.New(slog.NewTextHandler(stderr, nil)), DryRun: *dry}
	failed := false
	for _, u := range strings.Split(*urls, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		results, err := r.Queue(ctx, u)
		for _, res := range results {
			fmt.Fprintln(stdout, res)
			failed = failed || res.Outcome == replay.Failed
		}
		if err != nil {
			fmt.Fprintln(stderr, "replay:", err)
			failed = true
		}
		fmt.Fprintf(stdout, "%s: %d messages\n", u, len(results))
	}
	if failed {
		return 1
	}
	return 0
}

// outboxScan runs -outbox-scan and returns the exit code: 2 for a usage
// error, 1 when the scan or an invocation failed.
func outboxScan(table, function string, segments int, olderThan time.Duration, dry bool, stdout, stderr io.Writer) int {
	if table == "" || (function == "" && !dry) || segments < 1 || olderThan < 0 {
		fmt.Fprintln(stderr, "replay: -outbox-scan needs -table (or PLATFORM_TABLE), -stack or -function (but with -dry-run), -segments of at least 1 and a -older-than not negative")
		return 2
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "replay:", err)
		return 1
	}
	o := &replay.OutboxScan{DynamoDB: dynamodb.NewFromConfig(cfg), Lambda: lambda.NewFromConfig(cfg), Table: table, Function: function,
		Segments: segments, OlderThan: olderThan, DryRun: dry}
	results, err := o.Run(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "replay:", err)
		return 1
	}
	code, entries, batches := 0, 0, 0
	for _, r := range results {
		fmt.Fprintln(stdout, r)
		entries, batches = entries+r.Entries, max(batches, r.Batch)
		if r.Outcome == replay.Failed {
			code = 1
		}
	}
	note := ""
	if dry {
		note = " (dry run: nothing invoked)"
	}
	fmt.Fprintf(stdout, "outbox scan of %s: %d shards, %d entries, %d batches%s\n", table, len(results), entries, batches, note)
	return code
}
