package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/taskrelay"
)

// ServiceHealthPath answers the load balancer's health check of the
// container stream tier (template.yaml's target group, infra/).
const ServiceHealthPath = "/healthz"

// The container task's inbox poll (shared/taskrelay): while signals
// flow, and while idle.
const EnvStreamPoll = "PLATFORM_STREAM_POLL"
const EnvStreamPollIdle = "PLATFORM_STREAM_POLL_IDLE"

// ChatStreamService is the container stream tier (functions/chatstream-
// service, docs/deploy.md "Stream tiers"): the same chat area as the
// streaming function (ChatStreamHandler) as a plain HTTP server holding
// many streams in one process, over a taskrelay.Relay whose holder is the
// process. Run the relay (relay.Run) for as long as the server serves.
func ChatStreamService(ctx context.Context) (http.Handler, *taskrelay.Relay, error) {
	env := FromEnv()
	cfg, err := AWSConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	relay := taskrelay.New(DynamoClient(cfg, env, nil), env.Table, slog.Default())
	// The task's inbox poll (shared/taskrelay): while signals flow, and
	// while idle.
	for _, p := range []struct {
		env string
		to  *time.Duration
	}{{EnvStreamPoll, &relay.PollFast}, {EnvStreamPollIdle, &relay.PollEvery}} {
		if v := os.Getenv(p.env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, nil, errors.New(p.env + ": a positive duration, e.g. 25ms")
			}
			*p.to = d
		}
	}
	if relay.PollEvery < relay.PollFast {
		relay.PollEvery = relay.PollFast
	}
	h, err := areaHandler(ctx, httpapi.AreaChat, relay)
	if err != nil {
		return nil, nil, err
	}
	return ServiceMux(h, relay), relay, nil
}

// ServiceMux adds the health check to the chat area: 200 with what the
// process holds, so an operator (and the load balancer) sees it.
func ServiceMux(h http.Handler, relay *taskrelay.Relay) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ServiceHealthPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(relay.Stats())
	})
	mux.Handle("/", h)
	return mux
}

// ServiceAddr is where the service listens: PORT (the container's port,
// template.yaml's task definition), else :8080.
func ServiceAddr() string {
	if p := os.Getenv("PORT"); p != "" {
		if _, err := strconv.Atoi(p); err == nil {
			return ":" + p
		}
	}
	return ":8080"
}

// ServeChatStream serves the container stream tier on ln until ctx ends
// (SIGTERM: ECS stops the task), then stops accepting, ends the streams
// (their clients reconnect, through the load balancer, to another task)
// and removes the process's registrations.
func ServeChatStream(ctx context.Context, ln net.Listener) error {
	h, relay, err := ChatStreamService(ctx)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	relayCtx, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan struct{})
	go func() { relay.Run(relayCtx); close(relayDone) }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	slog.Default().Info("chat stream service", "addr", ln.Addr().String(), "holder", relay.Holder)
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	// The streams are hijack-free long responses: Shutdown would wait for
	// them; ending the relay first closes them, then Shutdown returns.
	_ = ln.Close()
	stopRelay()
	<-relayDone
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
