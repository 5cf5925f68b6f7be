// Command chatfanout hands the Chat API's signals to the streaming
// invocations that listen for them: the table's stream invokes it with the
// keys of inserted signals (shared/chatrelay).
package main

import "github.com/botforge/platform/shared/runtime"

func main() { runtime.StartChatFanout() }
