// Command dispatcher is the Lambda function that delivers the runtime's
// outbox (docs/runtime.md): the table's stream invokes it when an outbox
// entry is written, and a one-minute schedule for retries and scheduled
// events. Deliveries never reach private or loopback addresses.
package main

import "github.com/botforge/platform/shared/runtime"

func main() { runtime.StartDispatcher() }
