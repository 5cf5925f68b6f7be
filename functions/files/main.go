// Command files is the Lambda function serving the Files API behind API Gateway
// (HTTP API, payload format 2.0); its routes are in shared/httpapi/files.go.
package main

import (
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/runtime"
)

func main() { runtime.StartLambda(httpapi.AreaFiles) }
