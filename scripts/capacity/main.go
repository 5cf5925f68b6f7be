// Command capacity is the platform's capacity model (docs/data-model.md,
// "Heat"): it replays a load's shape through the local platform, whose
// embedded DynamoDB counts the capacity units each partition key takes,
// and prints the peak units per key at the load's rate, the message rate
// at which the hottest key reaches DynamoDB's per-partition limit, the
// Lambda concurrency and the cost per million messages at on-demand
// prices (shared/capacity/prices.go).
//
//	go run ./scripts/capacity -rate 500 -bots 50 -conversations 5000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/botforge/platform/shared/capacity"
)

func main() {
	var (
		load      capacity.Load
		a         = capacity.DefaultAssumptions
		turns     = flag.Int("turns", 4, "turns (a bot message and a user message) per conversation in the replay")
		maxConv   = flag.Int("replay-conversations", 400, "at most this many conversations are replayed (per-conversation keys are scaled to the load's)")
		tableRows = flag.Int("table-rows", 2000, "rows of the table the table queries read")
	)
	flag.Float64Var(&load.MessagesPerSecond, "rate", 100, "messages written per second, platform-wide")
	flag.IntVar(&load.Bots, "bots", 10, "bots")
	flag.IntVar(&load.Conversations, "conversations", 100, "conversations active at once")
	flag.Float64Var(&load.TableQueriesPerSecond, "table-queries", 10, "selective findTableRows calls per second")
	flag.Float64Var(&a.DeliveryMillis, "delivery-ms", a.DeliveryMillis, "mean time a bot or integration takes to answer a delivery")
	flag.Float64Var(&a.APIMillis, "api-ms", a.APIMillis, "mean duration of an API call")
	flag.Float64Var(&a.FilesPerMessage, "files-per-message", a.FilesPerMessage, "file uploads per message")
	flag.Parse()
	if load.MessagesPerSecond <= 0 || load.Bots < 1 || load.Conversations < load.Bots {
		fmt.Fprintln(os.Stderr, "capacity: -rate must be positive, -bots at least 1 and -conversations at least -bots")
		os.Exit(2)
	}
	shape := capacity.Shape{Bots: load.Bots, Conversations: min(load.Conversations, *maxConv), Turns: *turns}
	if shape.Bots > shape.Conversations {
		shape.Bots = shape.Conversations
	}
	if load.TableQueriesPerSecond > 0 {
		shape.TableRows, shape.TableQueries = *tableRows, 50
	}
	c, err := capacity.Replay(context.Background(), shape)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	capacity.Model(c, load, a, capacity.OnDemand).Print(os.Stdout)
}
