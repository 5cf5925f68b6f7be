package tracing

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// AWSCalls is an AWS SDK client option (APIOptions) giving each call made
// within a recorded trace a client span of its own, "<Service>.<Operation>"
// (DynamoDB.TransactWriteItems, say), with its retries inside. Calls made
// outside a trace, or in one not recorded, cost one check.
func AWSCalls(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("PlatformTrace", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if !trace.SpanFromContext(ctx).IsRecording() {
			return next.HandleInitialize(ctx, in)
		}
		svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
		ctx, span := Start(ctx, svc+"."+op, trace.SpanKindClient)
		span.SetAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", svc), attribute.String("rpc.method", op))
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return out, md, err
	}), middleware.After)
}
