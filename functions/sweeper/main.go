// Command sweeper is the Lambda function that finishes, on a schedule, the
// deletions a request left pending (shared/dynamo.Sweeper): a deleted
// bot's data and its files' contents beyond deleteBot's time budget, a
// deletion a crash or a failed S3 delete cut short.
package main

import "github.com/botforge/platform/shared/runtime"

func main() { runtime.StartSweeper() }
