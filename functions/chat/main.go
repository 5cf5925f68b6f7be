// Command chat is the Lambda function serving the Chat API and the webhook
// ingress (/webhooks/...) behind API Gateway (HTTP API, payload format 2.0);
// its routes are in shared/httpapi/chat.go and shared/httpapi/webhooks.go.
package main

import (
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/runtime"
)

func main() { runtime.StartLambda(httpapi.AreaChat) }
