// Command scheduler is the Lambda function EventBridge Scheduler invokes
// for a bot's recurring event: it fires the event (shared/delivery.Recurring).
package main

import "github.com/botforge/platform/shared/runtime"

func main() { runtime.StartScheduler() }
