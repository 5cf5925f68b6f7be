// Command chatstream-service is the container stream tier of the Chat
// API (docs/deploy.md "Stream tiers"): the streaming function's chat area
// as a long-running HTTP server holding many streams in one process, run
// as an ECS Fargate service behind a load balancer when the stack's
// StreamTier is container. It listens on $PORT (default 8080). Behind a
// Network Load Balancer (StreamLoadBalancer nlb) it ends TLS itself and
// reads each connection's proxy protocol v2 header (shared/streamedge).
package main

import (
	"context"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/streamedge"
)

func main() {
	runtime.UseJSONLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	edge, err := streamedge.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", runtime.ServiceAddr())
	if err != nil {
		log.Fatal(err)
	}
	ln, _, err = streamedge.Listen(ctx, ln, edge)
	if err != nil {
		log.Fatal(err)
	}
	if err := runtime.ServeChatStream(ctx, ln); err != nil {
		log.Fatal(err)
	}
}
