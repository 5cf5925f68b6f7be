// Command migrate-tables builds the column index of the tables a deployed
// stack wrote before the index existed (shared/tablemigrate,
// docs/tables.md). It talks to the stack's DynamoDB table directly with
// your AWS credentials, runs until every table's index is ready (the
// first pass makes row writes maintain the index, a later one fills it
// once the grace has passed) and may be stopped and run again at any time:
//
//	PLATFORM_TABLE=<table> AWS_REGION=<region> go run ./scripts/migrate-tables
//
// The local platform (make run) migrates its data directory by itself.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/tablemigrate"
)

func main() {
	grace := flag.Duration("grace", tablemigrate.DefaultGrace, "wait between row writes maintaining a table's index and its fill (longer than any request)")
	flag.Parse()
	ctx := context.Background()
	env := runtime.FromEnv()
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		fail(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	m := &tablemigrate.Migrator{Store: dynamo.New(runtime.DynamoClient(cfg, env, nil), env.Table), Grace: *grace, Log: log}
	for {
		pending, err := m.Run(ctx)
		if err != nil {
			fail(err)
		}
		if pending == 0 {
			fmt.Fprintln(os.Stderr, "migrate-tables: every table's index is ready")
			return
		}
		log.Info("tables waiting", "pending", pending)
		time.Sleep(min(*grace, 30*time.Second))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "migrate-tables:", err)
	os.Exit(1)
}
