package runtime

import (
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dispatch"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/logstore"
)

// Dispatcher is the runtime's dispatcher on AWS (docs/runtime.md): it
// delivers the outbox of the environment's table with client, and logs
// each delivery to the bot and integration log groups (failures made bot
// issues), as the scheduler function logs recurring events. The Lambda
// function passes delivery.Client(false): no delivery reaches a private or
// loopback address.
func Dispatcher(cfg aws.Config, env Env, client *http.Client) *dispatch.Dispatcher {
	store := dynamo.New(DynamoClient(cfg, env, nil), env.Table)
	if limits, err := env.Limits(); err == nil { // the invocations quota (docs/account.md)
		store.SetLimits(limits)
	} else {
		slog.Default().Error("quotas not applied", "err", err)
	}
	return &dispatch.Dispatcher{
		Store:    store,
		Client:   client,
		Observer: logstore.Observer(Logs(cfg, env), store, nil),
		Log:      slog.Default(),
	}
}

// DispatchReserve is the time a dispatcher function keeps in hand: a pass
// starts only while the invocation has at least this long left, so that a
// pass whose deliveries take their longest (delivery.MaxBotTimeout) still
// records their outcomes before Lambda ends the invocation (30 s of margin
// for the reads and writes around them). A pass cut short would not lose
// anything (the entry stays leased, then is delivered again), but it would
// deliver twice.
const DispatchReserve = delivery.MaxBotTimeout + 30*time.Second

// DrainOutbox is the dispatcher function's handler. Whatever invoked it (a
// batch of the table's stream showing new outbox entries, or the one-minute
// schedule for retries and scheduled events: the records themselves are not
// needed, the outbox is the truth), it makes passes over the outbox until
// one delivers nothing or the invocation's time runs short
// (DispatchReserve). A failed pass fails the invocation: Lambda retries a
// stream batch, and the next scheduled run comes a minute later anyway.
func DrainOutbox(d *dispatch.Dispatcher) func(ctx context.Context, event json.RawMessage) error {
	return func(ctx context.Context, _ json.RawMessage) error {
		for first := true; ; first = false {
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < DispatchReserve {
				if first { // a function Timeout shorter than the reserve: it would never deliver
					slog.Error("dispatch: the invocation is too short for a pass", "left", time.Until(deadline).String(), "needs", DispatchReserve.String())
				}
				return nil // the next invocation goes on
			}
			n, err := d.RunOnce(ctx)
			if err != nil {
				return err
			}
			if n == 0 {
				return nil // nothing more due now
			}
		}
	}
}

// StartDispatcher serves the dispatcher function (functions/dispatcher).
// It never returns.
func StartDispatcher() {
	UseJSONLogs()
	ctx := context.Background()
	env := FromEnv()
	cfg, err := AWSConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(DrainOutbox(Dispatcher(cfg, env, delivery.Client(false))))
}
