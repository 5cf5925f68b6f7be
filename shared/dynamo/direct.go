package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/tracing"
)

// client is the DynamoDB client the store calls: the SDK's own, or, on
// the local platform, the SDK's with the item calls run directly on the
// embedded store (direct).
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

// DirectRunner runs an item operation on an in-process DynamoDB without
// the SDK's operation stack (*localdynamo.Server): the SDK's typed output,
// or ok false for the caller to make the call through its SDK client with
// sdkCtx (which may carry the operation's failure, for that call to answer
// as the SDK's path would).
type DirectRunner interface {
	RunDirect(ctx context.Context, params any) (out any, sdkCtx context.Context, ok bool)
}

// RunDirect makes the store's item calls run directly on r, the local
// platform's embedded DynamoDB, instead of through the SDK client's
// operation stack, which built some thirty middlewares for every call: 40%
// of the local platform's allocations and about a tenth of its CPU on the
// real-SDK round trip, reads and writes together (docs/runtime.md,
// session 11). What the stack did for a call that succeeds is kept: its
// units counted into its context's Usage and the metrics, its span in the
// trace. A call r does not take goes through the SDK client as before; one
// that fails goes through it too, answered there with the failure r met
// (not run again), so the caller gets the very error, and the retries, of
// the SDK's path. Call before the store serves.
func (s *Store) RunDirect(r DirectRunner) {
	s.db = direct{Client: s.sdk, r: r}
}

// direct is the SDK client with the store's item calls run on a
// DirectRunner first.
type direct struct {
	*dynamodb.Client
	r DirectRunner
}

func (d direct) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return directCall(d, ctx, "GetItem", in, opts, d.Client.GetItem)
}

func (d direct) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return directCall(d, ctx, "Query", in, opts, d.Client.Query)
}

func (d direct) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return directCall(d, ctx, "BatchGetItem", in, opts, d.Client.BatchGetItem)
}

func (d direct) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return directCall(d, ctx, "Scan", in, opts, d.Client.Scan)
}

func (d direct) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return directCall(d, ctx, "PutItem", in, opts, d.Client.PutItem)
}

func (d direct) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return directCall(d, ctx, "UpdateItem", in, opts, d.Client.UpdateItem)
}

func (d direct) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return directCall(d, ctx, "DeleteItem", in, opts, d.Client.DeleteItem)
}

func (d direct) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return directCall(d, ctx, "BatchWriteItem", in, opts, d.Client.BatchWriteItem)
}

func (d direct) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return directCall(d, ctx, "TransactWriteItems", in, opts, d.Client.TransactWriteItems)
}

// directCall runs one call of op on d's runner, or else through the SDK
// client's method sdk.
func directCall[I, O any](d direct, ctx context.Context, op string, in *I, opts []func(*dynamodb.Options),
	sdk func(context.Context, *I, ...func(*dynamodb.Options)) (*O, error)) (*O, error) {
	out, ctx, ok := d.run(ctx, op, in, opts)
	if ok {
		return out.(*O), nil
	}
	return sdk(ctx, in, opts...)
}

// run runs one call on the DirectRunner, counted and traced as the SDK
// client's options (CountUsage, tracing.AWSCalls) count and trace a
// call. ok false: the caller makes the call through the SDK client with
// the returned context (a call with options of its own, an input the
// runner leaves to it, a failure it met), which counts and traces it.
func (d direct) run(ctx context.Context, op string, in any, opts []func(*dynamodb.Options)) (any, context.Context, bool) {
	if len(opts) > 0 {
		return nil, ctx, false
	}
	askCapacity(in)
	start := time.Now()
	out, sdkCtx, ok := d.r.RunDirect(ctx, in)
	if !ok {
		return nil, sdkCtx, false
	}
	tracing.AWSCallDone(ctx, "DynamoDB", op, start)
	recordCall(ctx, op, out, nil)
	return out, ctx, true
}
