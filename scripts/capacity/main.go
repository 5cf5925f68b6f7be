// Command capacity is the platform's capacity model (docs/data-model.md,
// "Heat"): it replays a load's shape through the local platform, whose
// embedded DynamoDB counts the capacity units each partition key takes,
// and prints the peak units per key at the load's rate, the message rate
// at which the hottest key reaches DynamoDB's per-partition limit, the
// Lambda concurrency and the cost per million messages at on-demand
// prices and with the table's capacity provisioned under auto scaling at
// -utilization percent (shared/capacity/prices.go, provisioned.go). The
// cost is AWS's: the replay makes its deliveries as the AWS build does
// (capacity.Shape.AWS: a lease per delivery, every outbox entry in the
// sweep index); the local platform's counts (no lease, the sparse sweep
// index) are printed beside it (-local).
//
//	go run ./scripts/capacity -rate 500 -bots 50 -conversations 5000
//
// With -onebot N it is the one-bot load test: N users' messages to one
// bot as fast as this machine takes them, on the AWS build's delivery path
// and (-local) the local platform's; it prints each path's rate and the
// per-key units both imply at -rate, side by side.
//
//	go run ./scripts/capacity -onebot 4000 -rate 5000 -conversations 200 -table-queries 0
//
// With -listeners it models open Chat API streams instead, on both stream
// tiers (docs/deploy.md "Stream tiers"): monthly cost per 1,000 idle
// listeners, each tier's ceiling and the crossover, from the code's
// settings and the bench's numbers (shared/capacity/listeners.go); no
// replay runs.
//
//	go run ./scripts/capacity -listeners 100000 -signals 50
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/botforge/platform/shared/capacity"
	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/taskrelay"
)

func main() {
	var (
		load      capacity.Load
		a         = capacity.DefaultAssumptions
		turns     = flag.Int("turns", 4, "turns (a bot message and a user message) per conversation in the replay")
		maxConv   = flag.Int("replay-conversations", 400, "at most this many conversations are replayed (per-conversation keys are scaled to the load's)")
		tableRows = flag.Int("table-rows", 2000, "rows of the table the table queries read")
		userOnly  = flag.Bool("user-only", false, "replay users' messages only (each delivered to the bot as an event), for the units of one user message and its delivery")
		breakdown = flag.Bool("breakdown", false, "also print the units per message by operation and by kind of key, at 1x and as billed")
		withLocal = flag.Bool("local", true, "also replay the local platform's delivery path (no lease, the sparse sweep index) and print its counts beside AWS's; the cost is AWS's either way")
		oneBot    = flag.Int("onebot", 0, "the one-bot load test: write this many users' messages to one bot as fast as this machine takes them (over -replay-conversations conversations at once), report the rate reached and the units per key that -rate implies (-bots is 1); on the AWS build's delivery path and, with -local, the local platform's beside it")
	)
	flag.Float64Var(&load.MessagesPerSecond, "rate", 100, "messages written per second, platform-wide")
	flag.IntVar(&load.Bots, "bots", 10, "bots")
	flag.IntVar(&load.Conversations, "conversations", 100, "conversations active at once")
	flag.Float64Var(&load.TableQueriesPerSecond, "table-queries", 10, "selective findTableRows calls per second")
	flag.Float64Var(&a.DeliveryMillis, "delivery-ms", a.DeliveryMillis, "mean time a bot or integration takes to answer a delivery")
	flag.Float64Var(&a.APIMillis, "api-ms", a.APIMillis, "mean duration of an API call")
	flag.Float64Var(&a.FilesPerMessage, "files-per-message", a.FilesPerMessage, "file uploads per message")
	utilization := flag.Float64("utilization", a.Utilization*100, "target utilization (percent, 20 to 90) of the table's provisioned capacity under auto scaling, for the provisioned cost (the stack's TableTargetUtilization)")
	var ll capacity.ListenerLoad
	tiers := capacity.DefaultTiers
	tiers.LambdaPoll, tiers.TaskPoll, tiers.Lease = chatrelay.PollEvery, taskrelay.DefaultPollEvery, taskrelay.DefaultLease
	tiers.TaskPollFast, tiers.TaskHotFor = taskrelay.DefaultPollFast, taskrelay.DefaultHotFor
	flag.Float64Var(&ll.Listeners, "listeners", 0, "open Chat API streams to model on both stream tiers (no replay)")
	flag.Float64Var(&ll.SignalsPerSecond, "signals", 0, "signals per second delivered to the streams, platform-wide (with -listeners)")
	flag.DurationVar(&ll.Session, "session", 0, "how long a listener stays before another replaces it (0: they stay)")
	flag.Float64Var(&tiers.LambdaConcurrency, "lambda-concurrency", tiers.LambdaConcurrency, "concurrency the Lambda tier's streams may take (the account's, or the stream function's reserved)")
	flag.Float64Var(&tiers.StreamsPerTask, "streams-per-task", tiers.StreamsPerTask, "streams one container task holds")
	flag.Float64Var(&tiers.TaskVCPU, "task-vcpu", tiers.TaskVCPU, "a task's vCPU")
	flag.Float64Var(&tiers.TaskMemoryGB, "task-memory-gb", tiers.TaskMemoryGB, "a task's memory (GB)")
	flag.Float64Var(&tiers.MinTasks, "min-tasks", tiers.MinTasks, "tasks kept at least")
	flag.Float64Var(&tiers.MaxTasks, "max-tasks", tiers.MaxTasks, "tasks at most (the service's autoscaling maximum)")
	flag.Parse()
	if a.Utilization = *utilization / 100; !capacity.ValidUtilization(a.Utilization) {
		fmt.Fprintln(os.Stderr, "capacity: -utilization must be from 20 to 90 (percent), auto scaling's bounds")
		os.Exit(2)
	}
	if ll.Listeners > 0 {
		if ll.SignalsPerSecond < 0 || tiers.StreamsPerTask <= 0 || tiers.MinTasks < 1 {
			fmt.Fprintln(os.Stderr, "capacity: -signals must be at least 0, -streams-per-task positive, -min-tasks at least 1")
			os.Exit(2)
		}
		capacity.ModelListeners(ll, tiers, capacity.OnDemand).Print(os.Stdout)
		return
	}
	if *oneBot > 0 {
		load.Bots = 1 // the one-bot load test's
	}
	if load.MessagesPerSecond <= 0 || load.Bots < 1 || load.Conversations < load.Bots {
		fmt.Fprintln(os.Stderr, "capacity: -rate must be positive, -bots at least 1 and -conversations at least -bots")
		os.Exit(2)
	}
	if *oneBot > 0 {
		oneBotTest(load, a, min(load.Conversations, *maxConv), *oneBot, *withLocal, *breakdown)
		return
	}
	shape := capacity.Shape{Bots: load.Bots, Conversations: min(load.Conversations, *maxConv), Turns: *turns, UserOnly: *userOnly}
	if shape.Bots > shape.Conversations {
		shape.Bots = shape.Conversations
	}
	if load.TableQueriesPerSecond > 0 {
		shape.TableRows, shape.TableQueries = *tableRows, 50
	}
	// AWS's bill is priced from the AWS build's delivery path (a lease per
	// delivery, the full sweep index: Shape.AWS); the local platform's
	// counts are printed beside it.
	aws := shape
	aws.AWS = true
	c, err := capacity.Replay(context.Background(), aws)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var lc capacity.Counted
	if *withLocal {
		if lc, err = capacity.Replay(context.Background(), shape); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Printf("AWS (the dispatcher function's path: a lease per delivery, the sweep index %s); the costs below are AWS's\n", sweepIndexMode())
	e := capacity.Model(c, load, a, capacity.OnDemand)
	e.Print(os.Stdout)
	ab := capacity.Break(c)
	fmt.Println()
	printPath("AWS  ", ab, e)
	if *withLocal {
		printPath("local", capacity.Break(lc), capacity.Model(lc, load, a, capacity.OnDemand))
	}
	if *breakdown {
		fmt.Println("\nAWS:")
		ab.Print(os.Stdout)
		if *withLocal {
			fmt.Println("\nLocal platform (make run: no lease, the sparse sweep index):")
			capacity.Break(lc).Print(os.Stdout)
		}
	}
}

// oneBotTest is -onebot: the one-bot load test on the AWS build's delivery
// path (the dispatcher function's handler fed the table's stream, a lease
// per delivery, the sweep index as PLATFORM_OUTBOX_SWEEP_INDEX sets it) and, with -local,
// on the local platform's; each path's rate on this machine, AWS's full
// estimate at -rate, and the peak units per key that each path's counts
// imply at -rate, side by side.
func oneBotTest(load capacity.Load, a capacity.Assumptions, convs, messages int, withLocal, breakdown bool) {
	load.Bots = 1
	type path struct {
		name string
		aws  bool
	}
	paths := []path{{"AWS", true}}
	if withLocal {
		paths = append(paths, path{"local", false})
	}
	var side []capacity.Path
	var counted []capacity.Counted
	for _, p := range paths {
		c, err := capacity.OneBot(context.Background(), convs, messages, p.aws)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("One-bot load test, %s path: %d users' messages over %d conversations of one bot, written and delivered in %.1f s: %.0f messages/s on this machine (%d cores, load average %s)\n",
			p.name, c.Messages, convs, c.Elapsed.Seconds(), float64(c.Messages)/c.Elapsed.Seconds(), runtime.NumCPU(), loadAverage())
		side = append(side, capacity.Path{Name: p.name, Estimate: capacity.Model(c, load, a, capacity.OnDemand)})
		counted = append(counted, c)
	}
	fmt.Printf("\nAWS (the dispatcher function's path: a lease per delivery, the sweep index %s); the costs below are AWS's\n", sweepIndexMode())
	side[0].Estimate.Print(os.Stdout)
	fmt.Printf("\nPer key at %.0f messages/s of one bot (limits: %d WCU, %d RCU a key):\n", load.MessagesPerSecond, capacity.PartitionWCU, capacity.PartitionRCU)
	capacity.PrintKeysBeside(os.Stdout, side)
	if breakdown {
		for i, p := range paths {
			fmt.Printf("\n%s:\n", p.name)
			capacity.Break(counted[i]).Print(os.Stdout)
		}
	}
}

// loadAverage is the machine's 1-, 5- and 15-minute load averages, where
// the system tells them (Linux).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// printPath prints one delivery path's counts per message, and what they
// would cost at AWS's prices.
func printPath(name string, b capacity.Breakdown, e capacity.Estimate) {
	total := 0.0
	for _, v := range e.CostPerMillion {
		total += v
	}
	fmt.Printf("Per message, %s: %.2f write units at 1x (%.2f base table, %.2f indexes), %.2f billed, %.2f read units, %.2f write calls; priced: $%.2f per million (DynamoDB $%.2f)\n",
		name, b.Write1x, b.BaseWrite1x, b.IndexWrite, b.WriteBilled, b.Read, b.WriteCalls, total, e.CostPerMillion["DynamoDB"])
}

// sweepIndexMode names the AWS replay's sweep index, as the functions'
// PLATFORM_OUTBOX_SWEEP_INDEX sets it (runtime.NewStore: sparse unless
// full).
func sweepIndexMode() string {
	if os.Getenv("PLATFORM_OUTBOX_SWEEP_INDEX") == "full" {
		return "full (PLATFORM_OUTBOX_SWEEP_INDEX=full: every outbox entry in it)"
	}
	return "sparse (an entry due at once in none; PLATFORM_OUTBOX_SWEEP_INDEX=full for the full index)"
}
