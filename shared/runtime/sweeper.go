package runtime

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/botforge/platform/shared/dynamo"
)

// Sweeper is the deletion sweeper on AWS (shared/dynamo.Sweeper over the
// environment's table, deleting file contents from PLATFORM_BUCKET): it
// finishes the deletions a request left (deleteBot's data beyond its time
// budget, a conversation or user whose delete a crash cut short).
func Sweeper(cfg aws.Config, env Env) *dynamo.Sweeper {
	w := &dynamo.Sweeper{Store: lambdaStore(cfg, env), Log: slog.Default()}
	if os.Getenv("PLATFORM_BUCKET") != "" { // env.Bucket has a default

		w.Objects = FileStorage(cfg, env)
	}
	return w
}

// SweepReserve is the time a sweep leaves before the invocation's end: the
// sweep stops between two steps (each idempotent) and the next scheduled
// run goes on, rather than Lambda ending it in the middle of one.
const SweepReserve = 10 * time.Second

// SweepDeletions is the sweeper function's handler: whatever invoked it
// (its schedule), it runs one sweep of every pending deletion, within the
// invocation's time less SweepReserve. A deletion that fails fails the
// invocation (visible in the function's Errors metric) and stays pending
// for the next run.
func SweepDeletions(w *dynamo.Sweeper) func(ctx context.Context, event json.RawMessage) error {
	return func(ctx context.Context, _ json.RawMessage) error {
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline.Add(-SweepReserve))
			defer cancel()
		}
		_, err := w.Run(ctx)
		return err
	}
}

// StartSweeper serves the sweeper function (functions/sweeper). It never
// returns.
func StartSweeper() {
	env, cfg := startLambda()
	startLambdaHandler(SweepDeletions(Sweeper(cfg, env)))
}
