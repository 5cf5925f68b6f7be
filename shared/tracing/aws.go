package tracing

import (
	"context"
	"time"

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
		ctx, end := AWSCall(ctx, awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx))
		out, md, err := next.HandleInitialize(ctx, in)
		end(err)
		return out, md, err
	}), middleware.After)
}

// AWSCall starts the client span of one call of AWS service svc's operation
// op, "<svc>.<op>", when ctx's trace is recorded (one check otherwise); end
// ends it with the call's error.
func AWSCall(ctx context.Context, svc, op string) (_ context.Context, end func(error)) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, func(error) {}
	}
	ctx, span := awsSpan(ctx, svc, op)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// AWSCallDone records the span of a call of svc's op that began at start
// and has just succeeded, as AWSCall would have (a call made without the
// SDK's stack: dynamo.Store.RunDirect).
func AWSCallDone(ctx context.Context, svc, op string, start time.Time) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	_, span := awsSpan(ctx, svc, op, trace.WithTimestamp(start))
	span.End()
}

func awsSpan(ctx context.Context, svc, op string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	setup()
	ctx, span := tracer.Start(ctx, svc+"."+op, append(opts, trace.WithSpanKind(trace.SpanKindClient))...)
	span.SetAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", svc), attribute.String("rpc.method", op))
	return ctx, span
}
