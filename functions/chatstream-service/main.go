// Command chatstream-service is the container stream tier of the Chat
// API (docs/deploy.md "Stream tiers"): the streaming function's chat area
// as a long-running HTTP server holding many streams in one process, run
// as an ECS Fargate service behind an Application Load Balancer when the
// stack's StreamTier is container. It listens on $PORT (default 8080).
package main

import (
	"context"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/botforge/platform/shared/runtime"
)

func main() {
	runtime.UseJSONLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", runtime.ServiceAddr())
	if err != nil {
		log.Fatal(err)
	}
	if err := runtime.ServeChatStream(ctx, ln); err != nil {
		log.Fatal(err)
	}
}
