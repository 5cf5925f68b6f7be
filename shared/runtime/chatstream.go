package runtime

import (
	"context"
	"log"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/httpapi"
)

// ChatStreamHandler is the handler of the streaming function
// (functions/chatstream): the Chat area (the webhook routes, so the Chat
// API of the built-in chat integration and its listen streams) over a
// chatrelay.Relay, each request holding the relay for its invocation.
// Lambda serves it through a function URL with response streaming
// (lambdaurl), so a stream lasts up to the function's timeout (15
// minutes at most) instead of API Gateway's 30 s.
func ChatStreamHandler(ctx context.Context) (http.Handler, *chatrelay.Relay, error) {
	env := FromEnv()
	cfg, err := AWSConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	relay := chatrelay.New(DynamoClient(cfg, env, nil), env.Table, slog.Default())
	h, err := areaHandler(ctx, httpapi.AreaChat, relay)
	if err != nil {
		return nil, nil, err
	}
	return relay.Streaming(h), relay, nil
}

// StartChatStream serves the streaming function. It never returns.
func StartChatStream() {
	UseJSONLogs()
	h, _, err := ChatStreamHandler(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	lambdaurl.Start(metricsHTTP(h))
}

// StartChatFanout serves the fan-out function (functions/chatfanout): the
// table's stream invokes it with inserted chat signals
// (chatrelay.StreamFilter). It never returns.
func StartChatFanout() {
	UseJSONLogs()
	env := FromEnv()
	cfg, err := AWSConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	f := &chatrelay.Fanout{DB: DynamoClient(cfg, env, nil), Table: env.Table}
	startLambdaHandler(f.Handle)
}
