// Command chatstream is the streaming Lambda function of the Chat API's
// listen streams (docs/chat-api.md "Where it runs"): a function URL with
// InvokeMode RESPONSE_STREAM serves the webhook routes, so a stream lasts
// up to the function's timeout rather than API Gateway's 30 s; the
// signals written by the other functions reach it through the table
// (shared/chatrelay).
package main

import "github.com/botforge/platform/shared/runtime"

func main() { runtime.StartChatStream() }
