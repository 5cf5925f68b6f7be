package runtime

import (
	"context"
	"net/http"
	"net/url"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
	"github.com/aws/smithy-go/middleware"
)

// embeddedEndpoint is the in-process DynamoDB's address: requests never
// leave the process (InProcess), the host only has to parse.
var embeddedEndpoint = url.URL{Scheme: "http", Host: "dynamodb.local"}

// embeddedDynamo points a DynamoDB client at the local platform's
// in-process store (shared/localdynamo) and leaves out what only a remote
// DynamoDB needs: the store checks no signature, and a request that never
// leaves the process cannot be altered on the way or skew a clock. So no
// SigV4 (anonymous credentials: the SDK resolves the noAuth scheme and
// signs nothing), no payload SHA-256, no endpoint rules (one fixed
// address), no user agent, invocation id or recursion header, no response
// CRC32 or timing. About 40% of the platform's CPU on a round trip went to
// the SDK's client, most of it this (docs/runtime.md). What stays: input
// validation, retries, the error mapping and every option the caller
// added (usage counting, tracing). Only ever for the in-process handler:
// DYNAMODB_ENDPOINT and AWS keep the full, signed client
// (TestEmbeddedDynamoClientSignsNothing, TestRemoteDynamoClientSigns).
func embeddedDynamo(o *dynamodb.Options, handler http.Handler) {
	o.BaseEndpoint = aws.String(embeddedEndpoint.String())
	o.HTTPClient = &http.Client{Transport: InProcess(handler)}
	o.Region = "us-east-1"
	o.Credentials = aws.AnonymousCredentials{}
	o.EndpointResolverV2 = fixedEndpoint{}
	o.APIOptions = append(o.APIOptions, trimForEmbedded)
	// The item operations run in-process on the store, without JSON and
	// HTTP (shared/localdynamo/inprocess.go), unless the switch forces
	// the HTTP path (A/B measurements, a fallback).
	if ip, ok := handler.(inProcessStore); ok && os.Getenv(EnvLocalDynamoHTTP) == "" {
		o.APIOptions = append(o.APIOptions, ip.InProcess)
	}
}

// EnvLocalDynamoHTTP, set to anything, sends every call of the local
// platform's DynamoDB client over the in-process HTTP path (JSON), as
// before the in-process path (docs/embedded-dynamodb.md).
const EnvLocalDynamoHTTP = "PLATFORM_LOCAL_DYNAMO_HTTP"

// inProcessStore is a store that runs the client's operations in-process
// (*localdynamo.Server).
type inProcessStore interface {
	InProcess(*middleware.Stack) error
}

// fixedEndpoint resolves every call to the embedded store's address,
// without the SDK's endpoint rules.
type fixedEndpoint struct{}

func (fixedEndpoint) ResolveEndpoint(context.Context, dynamodb.EndpointParameters) (smithyendpoints.Endpoint, error) {
	return smithyendpoints.Endpoint{URI: embeddedEndpoint}, nil
}

// embeddedUnneeded are the SDK's middlewares (by step and id) that serve a
// remote DynamoDB only. A name an SDK upgrade changes is skipped (the
// tests above then fail on the header it still sends).
var embeddedUnneeded = []struct{ step, id string }{
	{"build", "ClientRequestID"},
	{"build", "UserAgent"},
	{"build", "RecursionDetection"},
	{"finalize", "DisableAcceptEncodingGzip"},
	{"finalize", "ComputePayloadHash"},
	{"deserialize", "RecordResponseTiming"},
	{"deserialize", "DynamoDB:ResponseChecksumValidation"},
}

func trimForEmbedded(stack *middleware.Stack) error {
	for _, m := range embeddedUnneeded {
		switch m.step {
		case "build":
			_, _ = stack.Build.Remove(m.id)
		case "finalize":
			_, _ = stack.Finalize.Remove(m.id)
		case "deserialize":
			_, _ = stack.Deserialize.Remove(m.id)
		}
	}
	return nil
}
