package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/tracing"
)

// client is the DynamoDB client the store calls: the SDK's own, or, on
// the local platform, the SDK's with its reads run directly on the
// embedded store (directReads).
type client interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// DirectReader runs a read on an in-process DynamoDB without the SDK's
// operation stack (*localdynamo.Server): the SDK's typed output, or ok
// false when it does not take the input or the read fails.
type DirectReader interface {
	RunDirect(ctx context.Context, params any) (out any, ok bool)
}

// ReadDirect makes the store's reads (GetItem, Query, BatchGetItem) run
// directly on r, the local platform's embedded DynamoDB, instead of through
// the SDK client's operation stack, which built some thirty middlewares for
// every call: 40% of the local platform's allocations and about a tenth
// of its CPU on the real-SDK round trip (docs/runtime.md, session 11).
// What the stack did for a read is kept: the call's units counted into
// its context's Usage and the metrics, its span in the trace. A read r
// does not take or that fails goes through the SDK client as before, which
// answers its error (and retries) as ever: a read has no effect, so
// running it again is harmless. Writes always go through the SDK client.
// Call before the store serves.
func (s *Store) ReadDirect(r DirectReader) {
	s.db = directReads{Client: s.sdk, r: r}
}

// directReads is the SDK client with GetItem, Query and BatchGetItem run
// on a DirectReader first.
type directReads struct {
	*dynamodb.Client
	r DirectReader
}

func (d directReads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if out, ok := d.run(ctx, "GetItem", in, opts); ok {
		return out.(*dynamodb.GetItemOutput), nil
	}
	return d.Client.GetItem(ctx, in, opts...)
}

func (d directReads) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if out, ok := d.run(ctx, "Query", in, opts); ok {
		return out.(*dynamodb.QueryOutput), nil
	}
	return d.Client.Query(ctx, in, opts...)
}

func (d directReads) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if out, ok := d.run(ctx, "BatchGetItem", in, opts); ok {
		return out.(*dynamodb.BatchGetItemOutput), nil
	}
	return d.Client.BatchGetItem(ctx, in, opts...)
}

// run runs one read on the DirectReader, counted and traced as the SDK
// client's options (CountUsage, tracing.AWSCalls) count and trace a
// call. ok false: the caller makes the call through the SDK client (a call
// with options of its own, an input or a failure the reader leaves to it),
// which counts and traces it.
func (d directReads) run(ctx context.Context, op string, in any, opts []func(*dynamodb.Options)) (any, bool) {
	if len(opts) > 0 {
		return nil, false
	}
	askCapacity(in)
	start := time.Now()
	out, ok := d.r.RunDirect(ctx, in)
	if !ok {
		return nil, false
	}
	tracing.AWSCallDone(ctx, "DynamoDB", op, start)
	recordCall(ctx, op, out, nil)
	return out, true
}
