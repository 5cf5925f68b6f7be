// Command files is the Lambda function serving the Files API behind API Gateway
// (HTTP API, payload format 2.0).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/runtime"
)

func main() {
	h, err := runtime.AreaHandler(context.Background(), httpapi.AreaFiles)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}
