// Command local runs the whole platform on this machine: all four API areas
// on one port, with embedded DynamoDB and S3 stand-ins keeping their state in
// --data-dir. Ctrl-C shuts it down cleanly.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/botforge/platform/shared/local"
)

func main() {
	// Loopback only unless told otherwise: the first start prints the admin
	// token, and nothing else on the network should reach the platform.
	addr := flag.String("addr", local.DefaultAddr, "address to listen on (e.g. :8080 for every interface)")
	dataDir := flag.String("data-dir", "./.data", "directory holding the platform's state")
	reserve := flag.Int64("disk-reserve-mib", -1, "free space (MiB) below which writes are refused with 507 (0 keeps none; default: $"+local.DiskReserveEnv+" or 64)")
	flag.Parse()
	o := local.Options{Addr: *addr, DataDir: *dataDir}
	if *reserve >= 0 {
		o.DiskReserveMiB = reserve
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := local.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "local platform:", err)
		os.Exit(1)
	}
}
