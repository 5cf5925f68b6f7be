// Command local runs the whole platform on this machine (serve: all four API
// areas on one port, with embedded DynamoDB and S3 stand-ins keeping their
// state in --data-dir; Ctrl-C shuts it down cleanly), and the operator's other
// commands. "local" alone or with flags only is "local serve".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/botforge/platform/shared/command"
)

// commands is the binary's command table: each command's code lives in its
// own file or package; this is the one place that lists them.
var commands = []command.Command{
	serveCommand,
	assistantCommand,
	backupCommand,
	restoreCommand,
	awsRestoreCommand,
	exportCommand, importCommand, // export.go: portable archives (docs/export-import.md)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := command.Main(ctx, command.Env{Prog: "local", Stdout: os.Stdout, Stderr: os.Stderr}, commands, "serve", os.Args[1:])
	stop()
	os.Exit(code)
}
