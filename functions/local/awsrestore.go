package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/botforge/platform/shared/awsrestore"
	"github.com/botforge/platform/shared/command"
	"github.com/botforge/platform/shared/runtime"
)

// aws-restore: one bot or workspace of an AWS deployment put back from the
// table's point-in-time copy and the bucket's versions (shared/awsrestore,
// docs/backup.md "On AWS"). AWS credentials and region as the AWS CLI's
// (environment, profile); DYNAMODB_ENDPOINT / S3_ENDPOINT point elsewhere
// (moto, tests).
var awsRestoreCommand = command.Command{
	Name:    "aws-restore",
	Summary: "restore one bot or workspace on AWS from a point-in-time copy of the table and the bucket's versions",
	Run:     runAWSRestore,
}

func runAWSRestore(ctx context.Context, env command.Env, args []string) error {
	fs := command.FlagSet(env, "--from <restored table> --at <time> (--bot <id> | --workspace <id>) [flags]")
	e := runtime.FromEnv()
	from := fs.String("from", "", "the table the point-in-time recovery restored into (aws dynamodb restore-table-to-point-in-time)")
	table := fs.String("table", e.Table, "the live table ($PLATFORM_TABLE)")
	bucket := fs.String("bucket", "", "the live bucket, versioning enabled; empty: no file contents restored")
	at := fs.String("at", "", "the point in time the table was restored to (RFC 3339, e.g. 2026-11-28T13:00:00Z): the object versions current then are restored")
	bot := fs.String("bot", "", "the bot to restore")
	ws := fs.String("workspace", "", "the workspace to restore (with its bots)")
	dry := fs.Bool("dry-run", false, "report what would change, write nothing")
	if err := command.Parse(fs, args, 0); err != nil {
		return err
	}
	o := awsrestore.Options{From: *from, Table: *table, Bucket: *bucket, BotID: *bot, WorkspaceID: *ws, DryRun: *dry}
	if *from == "" || (*bot == "") == (*ws == "") {
		fs.Usage()
		return command.Usagef("--from and exactly one of --bot and --workspace are required")
	}
	if *bucket != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return command.Usagef("--at %q: want an RFC 3339 time, e.g. 2026-11-28T13:00:00Z", *at)
		}
		o.At = t
	}
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		return err
	}
	o.DB = runtime.DynamoClient(cfg, e, nil)
	if *bucket != "" {
		o.S3 = runtime.S3Client(cfg, e)
	}
	r, err := awsrestore.Run(ctx, o)
	if err != nil {
		return err
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Fprintln(env.Stdout, string(out))
	if n := len(r.ItemConflicts) + len(r.ObjectConflicts); n > 0 {
		fmt.Fprintf(env.Stderr, "%d conflicts: changed since the point in time, left as they are (listed above)\n", n)
	}
	return nil
}
