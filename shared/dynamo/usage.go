package dynamo

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

// Usage counts the DynamoDB calls and consumed capacity of one unit of work
// (an API request), for tests, benchmarks and the x-dynamodb-calls header.
type Usage struct {
	mu         sync.Mutex
	calls      map[string]int
	ReadUnits  float64
	WriteUnits float64
	ItemsRead  int
	total      int
	// guarded counts the write calls made under guardedByConversation.
	guarded int
}

type guardedKey struct{}

// guardedByConversation marks the writes made with ctx as conditional on
// their conversation being live (not marked for deletion): a bot's
// deletion marks each of its conversations before it lists what they
// hold (purgeBot), so such a write, racing deleteBot, either commits
// before the mark, and the deletion finds all it wrote, or is refused. It
// needs no re-read of its bot after it (WroteUnguarded).
func guardedByConversation(ctx context.Context) context.Context {
	return context.WithValue(ctx, guardedKey{}, true)
}

// WroteUnguarded tells whether a write call was made that is not
// guarded by its conversation (guardedByConversation): the call must
// re-read its bot after it (RecheckBot).
func (u *Usage) WroteUnguarded() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for op, c := range u.calls {
		if isWrite(op) {
			n += c
		}
	}
	return n > u.guarded
}

type usageKey struct{}

// WithUsage returns a context whose DynamoDB calls are counted into the
// returned Usage.
func WithUsage(ctx context.Context) (context.Context, *Usage) {
	u := &Usage{calls: map[string]int{}}
	return context.WithValue(ctx, usageKey{}, u), u
}

// Calls returns how many calls of op (e.g. "GetItem") were made; op "" counts all.
func (u *Usage) Calls(op string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if op == "" {
		return u.total
	}
	return u.calls[op]
}

// Wrote tells whether any write call was made.
func (u *Usage) Wrote() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for op, n := range u.calls {
		if n > 0 && isWrite(op) {
			return true
		}
	}
	return false
}

// isWrite tells whether a DynamoDB operation writes items.
func isWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

// String renders the counts, e.g. "GetItem=2 TransactWriteItems=1".
func (u *Usage) String() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	parts := make([]string, 0, len(u.calls))
	for op, n := range u.calls {
		parts = append(parts, op+"="+strconv.Itoa(n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (u *Usage) record(op string, cc []types.ConsumedCapacity, items int, guarded bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	writes := isWrite(op)
	if writes && guarded {
		u.guarded++
	}
	u.calls[op]++
	u.total++
	u.ItemsRead += items
	for _, c := range cc {
		if c.ReadCapacityUnits != nil {
			u.ReadUnits += *c.ReadCapacityUnits
		}
		if c.WriteCapacityUnits != nil {
			u.WriteUnits += *c.WriteCapacityUnits
		}
		// An answer giving only the total: the operation says which kind.
		if c.CapacityUnits != nil && c.ReadCapacityUnits == nil && c.WriteCapacityUnits == nil {
			if writes {
				u.WriteUnits += *c.CapacityUnits
			} else {
				u.ReadUnits += *c.CapacityUnits
			}
		}
	}
}

// CountUsage is a DynamoDB client option: it asks every call to return its
// consumed capacity and records calls and capacity into the Usage of the
// call's context, if any.
func CountUsage(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountUsage",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				askCapacity(in.Parameters)
				out, md, err := next.HandleInitialize(ctx, in)
				recordCall(ctx, awsmiddleware.GetOperationName(ctx), out.Result, err)
				return out, md, err
			}), middleware.Before)
	})
}

// recordCall counts call op's units (from its result) into the metrics and
// into the Usage of ctx, if any.
func recordCall(ctx context.Context, op string, result any, err error) {
	cc, items := capacityOf(result)
	countMetrics(op, cc, err)
	if u, _ := ctx.Value(usageKey{}).(*Usage); u != nil {
		guarded, _ := ctx.Value(guardedKey{}).(bool)
		u.record(op, cc, items, guarded)
	}
}

// countMetrics counts a call's consumed units and a throttled call in the
// platform's metrics (docs/metrics.md), whatever its context.
func countMetrics(op string, cc []types.ConsumedCapacity, err error) {
	writes := isWrite(op)
	var read, write float64
	for _, c := range cc {
		switch {
		case c.ReadCapacityUnits != nil || c.WriteCapacityUnits != nil:
			read += aws.ToFloat64(c.ReadCapacityUnits)
			write += aws.ToFloat64(c.WriteCapacityUnits)
		case writes:
			write += aws.ToFloat64(c.CapacityUnits)
		default:
			read += aws.ToFloat64(c.CapacityUnits)
		}
	}
	if read > 0 {
		metrics.DynamoUnits.Add(read, op, "read")
	}
	if write > 0 {
		metrics.DynamoUnits.Add(write, op, "write")
	}
	if throttled(err) {
		metrics.DynamoThrottles.Inc(op)
	}
}

// throttled tells whether DynamoDB refused a call for throughput (after
// the SDK's own retries).
func throttled(err error) bool {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		return true
	case "TransactionCanceledException":
		return strings.Contains(ae.ErrorMessage(), "ThrottlingError")
	}
	return false
}

func askCapacity(p any) {
	total := types.ReturnConsumedCapacityTotal
	switch in := p.(type) {
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.ScanInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.BatchGetItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.BatchWriteItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.TransactWriteItemsInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.TransactGetItemsInput:
		in.ReturnConsumedCapacity = total
	}
}

func capacityOf(r any) ([]types.ConsumedCapacity, int) {
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	switch out := r.(type) {
	case *dynamodb.GetItemOutput:
		n := 0
		if len(out.Item) > 0 {
			n = 1
		}
		return one(out.ConsumedCapacity), n
	case *dynamodb.PutItemOutput:
		return one(out.ConsumedCapacity), 0
	case *dynamodb.UpdateItemOutput:
		return one(out.ConsumedCapacity), 0
	case *dynamodb.DeleteItemOutput:
		return one(out.ConsumedCapacity), 0
	case *dynamodb.QueryOutput:
		// ScannedCount >= Count in DynamoDB; the embedded one leaves it 0.
		return one(out.ConsumedCapacity), int(max(out.ScannedCount, out.Count))
	case *dynamodb.ScanOutput:
		return one(out.ConsumedCapacity), int(max(out.ScannedCount, out.Count))
	case *dynamodb.BatchGetItemOutput:
		n := 0
		for _, items := range out.Responses {
			n += len(items)
		}
		return out.ConsumedCapacity, n
	case *dynamodb.BatchWriteItemOutput:
		return out.ConsumedCapacity, 0
	case *dynamodb.TransactWriteItemsOutput:
		return out.ConsumedCapacity, 0
	case *dynamodb.TransactGetItemsOutput:
		return out.ConsumedCapacity, len(out.Responses)
	}
	return nil, 0
}

// MapStorageFull is a DynamoDB client option: the embedded DynamoDB's
// refusal to write on a full disk becomes a platform error the API answers
// with 507 InsufficientStorage (real DynamoDB never says it).
func MapStorageFull(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("MapStorageFull",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				var ae smithy.APIError
				if err != nil && errors.As(err, &ae) && ae.ErrorCode() == "InsufficientStorageException" {
					// The store's words: the free space, the reserve, how to change it.
					err = platform.Errorf(platform.ErrInsufficientStorage, "%s", ae.ErrorMessage())
				}
				return out, md, err
			}), middleware.After)
	})
}
