package runtime

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/botforge/platform/shared/chatrelay"
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
	store := lambdaStore(cfg, env)
	if limits, err := env.Limits(); err == nil { // the invocations quota (docs/account.md)
		store.SetLimits(limits)
	} else {
		slog.Default().Error("quotas not applied", "err", err)
	}
	gw, err := LLM(context.Background(), false)
	if err != nil {
		slog.Default().Error("the llm integration has no provider", "err", err)
	}
	d := &dispatch.Dispatcher{
		Store:    store,
		Client:   client,
		Observer: logstore.Observer(Logs(cfg, env), store, nil),
		Log:      slog.Default(),
		// The bots' replies reach the streams the streaming function
		// holds through the table (shared/chatrelay).
		Builtins: BuiltinsWith(chatrelay.New(DynamoClient(cfg, env, nil), env.Table, slog.Default()), gw, store, store.Limiter()),
	}
	// The webhook URLs integrations are given (register) are the API's.
	if env.PublicURL != "" {
		d.WebhookBase = strings.TrimSuffix(env.PublicURL, "/") + "/webhooks"
	}
	// Deployed code: Lambda functions, invoked through the client.
	if code := CodeRunner(cfg, env, CodeEnvFromEnv(), nil, nil); code != nil {
		d.Code, d.Client = code, WithCode(code, client)
	}
	return d
}

// DispatchReserve is the time a dispatcher function keeps in hand: a pass
// starts only while the invocation has at least this long left, so that a
// pass whose deliveries take their longest (delivery.MaxBotTimeout) still
// records their outcomes before Lambda ends the invocation (30 s of margin
// for the reads and writes around them). A pass cut short would not lose
// anything (the entry stays leased, then is delivered again), but it would
// deliver twice.
const DispatchReserve = delivery.MaxBotTimeout + 30*time.Second

// RetryWait is how long a dispatcher function waits, after a pass that
// left a retry in backoff, for that retry to come due rather than leave it
// to the next minute's run (retries back off 1, 2, 4 and 8 s).
const RetryWait = 20 * time.Second

// DrainOutbox is the dispatcher function's handler. A batch of the table's
// stream names the outbox shards that were written to (the records' keys;
// the event source mapping's ParallelizationFactor lets several batches of
// one stream shard run at once, each partition key's records in order):
// it works those shards. Anything else (the one-minute schedule) sweeps:
// the shards with something due (retries, scheduled entries, those a dead
// invocation held) are found through the sweep index, and entries of the
// outbox's previous layout are moved into their shards. Either way it
// makes passes until one delivers nothing and no retry comes due within
// RetryWait, or the invocation's time runs short (DispatchReserve). A
// failed pass fails the invocation: Lambda retries a stream batch (until
// its records leave the stream), and the next scheduled run comes a minute
// later anyway. Over the sparse sweep index (dynamo.Store's
// SparseSweepOnStream) a stream batch succeeds only once each shard it
// names is drained or its first pending entry indexed: a shard whose pass
// failed is covered so by the dispatcher (RunShards), and the shards of a
// batch left for want of time here (CoverShards).
func DrainOutbox(d *dispatch.Dispatcher) func(ctx context.Context, event json.RawMessage) error {
	// Entries of the layout before the outbox was sharded (an upgrade) are
	// moved at the first invocation of each instance, whatever its
	// trigger, and at every scheduled run: a stream-triggered run must not
	// deliver a conversation's newer entries while older ones still wait
	// under OUTBOX (per-conversation order across the upgrade).
	var migrated atomic.Bool
	return func(ctx context.Context, event json.RawMessage) error {
		// The outbox age this invocation publishes is what it finds
		// (another instance may have delivered what an earlier one saw).
		dispatch.ForgetPending()
		shards, fromStream := StreamShards(event)
		if fromStream {
			// Old records (a mapping re-reading the stream): only the
			// shards whose entries are still there are worked.
			var err error
			if shards, err = liveShards(ctx, d.Store, event, shards, time.Now()); err != nil {
				return err
			}
		}
		if !fromStream || !migrated.Load() {
			if m, ok := d.Store.(interface {
				MigrateOutbox(context.Context) (int, error)
			}); ok {
				if n, err := m.MigrateOutbox(ctx); err != nil {
					return err
				} else if n > 0 {
					slog.Info("dispatch: outbox entries moved into the sharded layout", "count", n)
				}
			}
			migrated.Store(true)
		}
		for first := true; ; first = false {
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < DispatchReserve {
				if first { // a function Timeout shorter than the reserve: it would never deliver
					slog.Error("dispatch: the invocation is too short for a pass", "left", time.Until(deadline).String(), "needs", DispatchReserve.String())
				}
				if fromStream {
					// What the batch names and is still pending goes into
					// the sweep index (a sparse index: nothing else would
					// find it once the batch succeeds); if that fails, the
					// batch fails and is retried.
					return d.CoverShards(ctx, shards)
				}
				return nil // the next invocation goes on
			}
			var (
				n   int
				err error
			)
			if fromStream {
				n, err = d.RunShards(ctx, shards)
			} else {
				n, err = d.RunOnce(ctx)
			}
			if err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			// Nothing more due now: wait for a retry due soon, if the
			// invocation has the time for the wait and a pass after it.
			next := d.NextDue()
			wait := time.Until(next)
			if next.IsZero() || wait > RetryWait {
				return nil
			}
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline)-wait < DispatchReserve {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(wait, 0) + 10*time.Millisecond):
			}
		}
	}
}

// StreamShards returns the outbox shards a DynamoDB stream batch names
// (distinct, in order of first record) and whether event is such a batch.
func StreamShards(event json.RawMessage) ([]string, bool) {
	var batch struct {
		Records []struct {
			EventSource string `json:"eventSource"`
			DynamoDB    struct {
				Keys map[string]struct {
					S string `json:"S"`
				} `json:"Keys"`
			} `json:"dynamodb"`
		} `json:"Records"`
	}
	if json.Unmarshal(event, &batch) != nil || len(batch.Records) == 0 {
		return nil, false
	}
	var shards []string
	seen := map[string]bool{}
	for _, r := range batch.Records {
		if r.EventSource != "aws:dynamodb" {
			return nil, false
		}
		pk := r.DynamoDB.Keys["pk"].S
		if dynamo.IsShard(pk) && !seen[pk] {
			seen[pk] = true
			shards = append(shards, pk)
		}
	}
	return shards, true
}

// StaleRecord is the age (its ApproximateCreationDateTime) past which a
// stream record is checked before its shard is worked: the dispatcher's
// mapping reads from TRIM_HORIZON, so a mapping replaced or recreated
// reads again the stream's last 24 hours, whose entries are mostly
// delivered long ago (a Query of each of their shards, for nothing).
const StaleRecord = 5 * time.Minute

// liveShards drops from shards (those event names) the shards all of whose
// records in event are older than StaleRecord and name entries no longer
// in the table, found with one BatchGetItem of those records' keys (per
// 100). A shard with a young record, or with an old record whose entry is
// there, is kept. Records without keys or creation time count as young.
func liveShards(ctx context.Context, store any, event json.RawMessage, shards []string, now time.Time) ([]string, error) {
	exister, ok := store.(interface {
		OutboxEntriesExist(ctx context.Context, keys [][2]string) (map[[2]string]bool, error)
	})
	if !ok {
		return shards, nil
	}
	var batch struct {
		Records []struct {
			DynamoDB struct {
				Created float64 `json:"ApproximateCreationDateTime"`
				Keys    map[string]struct {
					S string `json:"S"`
				} `json:"Keys"`
			} `json:"dynamodb"`
		} `json:"Records"`
	}
	if json.Unmarshal(event, &batch) != nil {
		return shards, nil
	}
	young := map[string]bool{}
	var old [][2]string
	for _, r := range batch.Records {
		pk, sk := r.DynamoDB.Keys["pk"].S, r.DynamoDB.Keys["sk"].S
		created := time.Unix(0, int64(r.DynamoDB.Created*float64(time.Second)))
		if sk == "" || r.DynamoDB.Created == 0 || now.Sub(created) < StaleRecord {
			young[pk] = true
		} else {
			old = append(old, [2]string{pk, sk})
		}
	}
	var check [][2]string
	for _, k := range old {
		if !young[k[0]] {
			check = append(check, k)
		}
	}
	if len(check) == 0 {
		return shards, nil
	}
	found, err := exister.OutboxEntriesExist(ctx, check)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for k := range found {
		live[k[0]] = true
	}
	kept := shards[:0:0]
	for _, sh := range shards {
		if young[sh] || live[sh] {
			kept = append(kept, sh)
		}
	}
	return kept, nil
}

// StartDispatcher serves the dispatcher function (functions/dispatcher).
// It never returns.
func StartDispatcher() {
	env, cfg := startLambda()
	startLambdaHandler(DrainOutbox(Dispatcher(cfg, env, Outbound())))
}
