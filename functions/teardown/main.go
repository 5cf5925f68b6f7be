// Command teardown is the Lambda function behind the stack's CodeTeardown
// custom resource: when the stack is deleted, it deletes the functions and
// roles the admin function made for deployed code (shared/teardown), which
// CloudFormation does not know.
package main

import "github.com/botforge/platform/shared/runtime"

func main() { runtime.StartTeardown() }
