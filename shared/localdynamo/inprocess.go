package localdynamo

import (
	"bytes"
	"context"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	sdk "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sdktypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/truora/minidyn/types"

	"github.com/botforge/platform/shared/writelane"
)

// The in-process path: the platform's own DynamoDB client (the SDK's
// *dynamodb.Client, unchanged for its callers) runs the item operations
// directly on this server with the SDK's typed values, without JSON and
// without HTTP: about a third of the local platform's CPU per round trip
// went to encoding each call to JSON, serving it over an in-process HTTP
// round trip, decoding it, and the same back (docs/runtime.md, lat37).
//
// Where it hooks, in the SDK's middleware stack of each operation (an
// API option, InProcess):
//
//   - Serialize: the operation's serializer is wrapped. An input this path
//     takes (Prepare) is converted to the engine's input struct and put in
//     the context; the serializer is skipped (no body). Any other input
//     (a legacy parameter, a nil or unknown attribute value, a string that
//     is not UTF-8) is serialized as ever and goes over HTTP.
//   - Deserialize, first: the operation runs on the engine (serveIn, the
//     same code, locks, durability waits and lanes as ServeHTTP). Its
//     output is converted to the SDK's typed output and answered; the SDK's
//     deserializer and the transport are not reached.
//   - An error is answered as the HTTP path answers it: DynamoDB's JSON
//     error response, handed by the innermost Deserialize middleware to
//     the SDK's own deserializer in place of the transport, so the caller
//     gets the very errors (types, codes, messages, cancellation reasons,
//     HTTP status) of the HTTP path, and the retryer (in Finalize, around
//     Deserialize) sees each attempt as before: an error it retries is
//     retried, each attempt running the operation again.
//
// Everything above Deserialize runs as before (input validation, usage
// counting, tracing, the retryer). Table operations and any operation not
// in inProcessOps go over HTTP.

// inProcessOps are the operations the in-process path runs.
var inProcessOps = map[string]bool{
	"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"Query": true, "Scan": true, "BatchGetItem": true, "BatchWriteItem": true,
	"TransactGetItems": true, "TransactWriteItems": true,
}

// InProcessCalls is how many requests the in-process path answered
// (Calls counts them too, with those of the HTTP path).
func (s *Server) InProcessCalls() int64 { return s.inProcess.Load() }

// InProcess is an API option (dynamodb.Options.APIOptions) that makes a
// DynamoDB client whose requests reach this server run the item
// operations in-process (see above).
func (s *Server) InProcess(stack *middleware.Stack) error {
	if !inProcessOps[stack.ID()] {
		return nil
	}
	ser, ok := stack.Serialize.Get("OperationSerializer")
	if !ok {
		return nil // an SDK that names it otherwise: the HTTP path
	}
	if _, err := stack.Serialize.Swap("OperationSerializer", &skipSerialize{orig: ser}); err != nil {
		return err
	}
	if err := stack.Deserialize.Add(&runInProcess{s: s}, middleware.Before); err != nil {
		return err
	}
	return stack.Deserialize.Add(errorResponseIn{}, middleware.After)
}

type callKey struct{}

type errorKey struct{}

// skipSerialize is the operation's serializer, skipped for an input the
// in-process path takes.
type skipSerialize struct {
	orig middleware.SerializeMiddleware
}

func (*skipSerialize) ID() string { return "OperationSerializer" }

func (m *skipSerialize) HandleSerialize(ctx context.Context, in middleware.SerializeInput, next middleware.SerializeHandler) (middleware.SerializeOutput, middleware.Metadata, error) {
	c, ok := Prepare(in.Parameters)
	if !ok {
		return m.orig.HandleSerialize(ctx, in, next)
	}
	return next.HandleSerialize(context.WithValue(ctx, callKey{}, c), in)
}

// runInProcess runs a prepared call on the server.
type runInProcess struct{ s *Server }

func (*runInProcess) ID() string { return "LocalDynamoInProcess" }

func (m *runInProcess) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	c, _ := ctx.Value(callKey{}).(*Call)
	if c == nil {
		return next.HandleDeserialize(ctx, in)
	}
	if a, _ := ctx.Value(answeredKey{}).(*answered); a != nil && a.used.CompareAndSwap(false, true) {
		// RunDirect ran this attempt: its error, as if run now.
		return next.HandleDeserialize(context.WithValue(ctx, errorKey{}, a.res), in)
	}
	out, res, err := m.s.Invoke(ctx, c)
	if err != nil {
		return middleware.DeserializeOutput{}, middleware.Metadata{}, err
	}
	if out != nil {
		return middleware.DeserializeOutput{Result: out}, middleware.Metadata{}, nil
	}
	// DynamoDB's error response, read by the SDK's deserializer below.
	return next.HandleDeserialize(context.WithValue(ctx, errorKey{}, res), in)
}

// errorResponseIn stands in for the transport: it answers the error
// response runInProcess put in the context.
type errorResponseIn struct{}

func (errorResponseIn) ID() string { return "LocalDynamoErrorResponse" }

func (errorResponseIn) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	res, ok := ctx.Value(errorKey{}).(response)
	if !ok {
		return next.HandleDeserialize(ctx, in)
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(res.body)), 10))
	return middleware.DeserializeOutput{RawResponse: &smithyhttp.Response{Response: &http.Response{
		StatusCode: res.status, Status: strconv.Itoa(res.status) + " " + http.StatusText(res.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: int64(len(res.body)), Body: io.NopCloser(bytes.NewReader(res.body)),
	}}}, middleware.Metadata{}, nil
}

// RunDirect runs an item operation for a caller that skips the SDK's
// operation stack altogether (dynamo.Store.RunDirect): the SDK's typed
// output, ok true. ok false: the caller makes the call through its SDK
// client with ctx as returned, and gets what that path gives. Either the
// path does not take the input (the SDK's call runs it, in-process or over
// HTTP, as ever), or the operation ran and failed: then the returned ctx
// carries its error response, which the SDK call's first attempt answers
// without running it again (runInProcess), so the caller gets the very
// error the in-process path gives (its type, code, message, cancellation
// reasons), the SDK's retryer retries it as ever (each further attempt
// running the operation), and the store counts the call once. The same
// engine, locks, durability and lanes as every other path.
func (s *Server) RunDirect(ctx context.Context, params any) (out any, sdkCtx context.Context, ok bool) {
	c, ok := Prepare(params)
	if !ok {
		return nil, ctx, false
	}
	out, res, err := s.Invoke(ctx, c)
	switch {
	case err != nil: // a canceled context: the SDK's call says so
		return nil, ctx, false
	case out == nil:
		return nil, context.WithValue(ctx, answeredKey{}, &answered{res: res}), false
	}
	s.direct.Add(1)
	return out, ctx, true
}

// answered is an operation's failure RunDirect already met, for the SDK
// call that follows to answer on its first attempt.
type answered struct {
	res  response
	used atomic.Bool
}

type answeredKey struct{}

// DirectCalls is how many calls RunDirect answered (InProcessCalls
// counts them too).
func (s *Server) DirectCalls() int64 { return s.direct.Load() }

// Call is one SDK operation ready to run in-process: the operation and
// its input as the engine takes it.
type Call struct {
	op string
	in any // a pointer to the handler's input type
}

// Invoke runs a call: the SDK's typed output (*dynamodb.GetItemOutput,
// ...), or, when the operation fails, DynamoDB's error response as the
// HTTP path sends it (out nil). err is a canceled context's.
func (s *Server) Invoke(ctx context.Context, c *Call) (out any, res response, err error) {
	if err := ctx.Err(); err != nil {
		return nil, response{}, &smithy.CanceledError{Err: err}
	}
	s.count(c.op)
	s.inProcess.Add(1)
	lane, visible := writelane.From(ctx)
	v, err := s.serveIn(c.op, request{in: c.in}, lane, visible)
	if err == nil {
		if out, err = sdkOutput(c.op, v); err == nil {
			return out, response{}, nil
		}
	}
	return nil, toResponse(nil, err), nil
}

// Prepare converts an SDK input to a Call; ok false when the in-process
// path does not take it (the HTTP path serves it: its refusals of legacy
// parameters, values the SDK's JSON would send differently).
func Prepare(params any) (*Call, bool) {
	var c conv
	var call *Call
	switch in := params.(type) {
	case *sdk.GetItemInput:
		if in.AttributesToGet != nil {
			return nil, false
		}
		call = &Call{"GetItem", &getItemInput{
			TableName: c.str(in.TableName), Key: c.item(in.Key), ProjectionExpression: c.str(in.ProjectionExpression),
			ConsistentRead: c.flag(in.ConsistentRead), ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity)),
			exprInput: exprInput{Names: c.names(in.ExpressionAttributeNames)},
		}}
	case *sdk.PutItemInput:
		if in.Expected != nil || in.ConditionalOperator != "" {
			return nil, false
		}
		call = &Call{"PutItem", &putInput{
			TableName: c.str(in.TableName), Item: c.item(in.Item), ConditionExpression: c.strp(in.ConditionExpression),
			ReturnValues: c.enum(string(in.ReturnValues)), ReturnValuesOnConditionCheckFailure: c.enum(string(in.ReturnValuesOnConditionCheckFailure)),
			ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity)),
			exprInput:              c.expr(in.ExpressionAttributeNames, in.ExpressionAttributeValues),
		}}
	case *sdk.DeleteItemInput:
		if in.Expected != nil || in.ConditionalOperator != "" {
			return nil, false
		}
		call = &Call{"DeleteItem", &deleteInput{
			TableName: c.str(in.TableName), Key: c.item(in.Key), ConditionExpression: c.strp(in.ConditionExpression),
			ReturnValues: c.enum(string(in.ReturnValues)), ReturnValuesOnConditionCheckFailure: c.enum(string(in.ReturnValuesOnConditionCheckFailure)),
			ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity)),
			exprInput:              c.expr(in.ExpressionAttributeNames, in.ExpressionAttributeValues),
		}}
	case *sdk.UpdateItemInput:
		if in.Expected != nil || in.ConditionalOperator != "" || in.AttributeUpdates != nil {
			return nil, false
		}
		call = &Call{"UpdateItem", &updateInput{
			TableName: c.str(in.TableName), Key: c.item(in.Key), UpdateExpression: c.strp(in.UpdateExpression),
			ConditionExpression: c.strp(in.ConditionExpression),
			ReturnValues:        c.enum(string(in.ReturnValues)), ReturnValuesOnConditionCheckFailure: c.enum(string(in.ReturnValuesOnConditionCheckFailure)),
			ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity)),
			exprInput:              c.expr(in.ExpressionAttributeNames, in.ExpressionAttributeValues),
		}}
	case *sdk.QueryInput:
		if in.AttributesToGet != nil || in.ConditionalOperator != "" || in.KeyConditions != nil || in.QueryFilter != nil {
			return nil, false
		}
		call = &Call{"Query", &readInput{
			TableName: c.str(in.TableName), IndexName: c.str(in.IndexName), KeyConditionExpression: c.str(in.KeyConditionExpression),
			FilterExpression: c.str(in.FilterExpression), ProjectionExpression: c.str(in.ProjectionExpression),
			Select: c.enum(string(in.Select)), Limit: c.int(in.Limit), ExclusiveStartKey: c.item(in.ExclusiveStartKey),
			ScanIndexForward: in.ScanIndexForward, ConsistentRead: c.flag(in.ConsistentRead),
			ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity)),
			exprInput:              c.expr(in.ExpressionAttributeNames, in.ExpressionAttributeValues),
		}}
	case *sdk.ScanInput:
		if in.AttributesToGet != nil || in.ConditionalOperator != "" || in.ScanFilter != nil {
			return nil, false
		}
		call = &Call{"Scan", &readInput{
			TableName: c.str(in.TableName), IndexName: c.str(in.IndexName),
			FilterExpression: c.str(in.FilterExpression), ProjectionExpression: c.str(in.ProjectionExpression),
			Select: c.enum(string(in.Select)), Limit: c.int(in.Limit), ExclusiveStartKey: c.item(in.ExclusiveStartKey),
			ConsistentRead: c.flag(in.ConsistentRead), Segment: c.int(in.Segment), TotalSegments: c.int(in.TotalSegments),
			ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity)),
			exprInput:              c.expr(in.ExpressionAttributeNames, in.ExpressionAttributeValues),
		}}
	case *sdk.BatchGetItemInput:
		b := &batchGetInput{ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity))}
		if in.RequestItems != nil {
			b.RequestItems = make(map[string]keysAndAttributes, len(in.RequestItems))
		}
		for name, ka := range in.RequestItems {
			if ka.AttributesToGet != nil {
				return nil, false
			}
			var keys []wireItem
			if ka.Keys != nil {
				keys = make([]wireItem, len(ka.Keys))
				for i, k := range ka.Keys {
					keys[i] = c.item(k)
				}
			}
			b.RequestItems[c.str(&name)] = keysAndAttributes{Keys: keys, ProjectionExpression: c.str(ka.ProjectionExpression),
				ConsistentRead: c.flag(ka.ConsistentRead), exprInput: exprInput{Names: c.names(ka.ExpressionAttributeNames)}}
		}
		call = &Call{"BatchGetItem", b}
	case *sdk.BatchWriteItemInput:
		b := &batchWriteInput{ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity))}
		if in.RequestItems != nil {
			b.RequestItems = make(map[string][]batchWriteRequest, len(in.RequestItems))
		}
		for name, reqs := range in.RequestItems {
			var out []batchWriteRequest
			if reqs != nil {
				out = make([]batchWriteRequest, len(reqs))
			}
			for i, r := range reqs {
				if r.PutRequest != nil {
					out[i].PutRequest = &struct{ Item wireItem }{c.item(r.PutRequest.Item)}
				}
				if r.DeleteRequest != nil {
					out[i].DeleteRequest = &struct{ Key wireItem }{c.item(r.DeleteRequest.Key)}
				}
			}
			b.RequestItems[c.str(&name)] = out
		}
		call = &Call{"BatchWriteItem", b}
	case *sdk.TransactWriteItemsInput:
		t := &transactWriteInput{ClientRequestToken: c.str(in.ClientRequestToken), ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity))}
		if in.TransactItems != nil {
			t.TransactItems = make([]transactWriteItem, len(in.TransactItems))
		}
		for i, ti := range in.TransactItems {
			o := &t.TransactItems[i]
			if x := ti.ConditionCheck; x != nil {
				o.ConditionCheck = &transactCommon{TableName: c.str(x.TableName), Key: c.item(x.Key), ConditionExpression: c.strp(x.ConditionExpression),
					ReturnValuesOnConditionCheckFailure: c.enum(string(x.ReturnValuesOnConditionCheckFailure)), exprInput: c.expr(x.ExpressionAttributeNames, x.ExpressionAttributeValues)}
			}
			if x := ti.Put; x != nil {
				o.Put = &struct {
					transactCommon
					Item wireItem
				}{transactCommon{TableName: c.str(x.TableName), ConditionExpression: c.strp(x.ConditionExpression),
					ReturnValuesOnConditionCheckFailure: c.enum(string(x.ReturnValuesOnConditionCheckFailure)), exprInput: c.expr(x.ExpressionAttributeNames, x.ExpressionAttributeValues)},
					c.item(x.Item)}
			}
			if x := ti.Delete; x != nil {
				o.Delete = &transactCommon{TableName: c.str(x.TableName), Key: c.item(x.Key), ConditionExpression: c.strp(x.ConditionExpression),
					ReturnValuesOnConditionCheckFailure: c.enum(string(x.ReturnValuesOnConditionCheckFailure)), exprInput: c.expr(x.ExpressionAttributeNames, x.ExpressionAttributeValues)}
			}
			if x := ti.Update; x != nil {
				o.Update = &struct {
					transactCommon
					UpdateExpression *string
				}{transactCommon{TableName: c.str(x.TableName), Key: c.item(x.Key), ConditionExpression: c.strp(x.ConditionExpression),
					ReturnValuesOnConditionCheckFailure: c.enum(string(x.ReturnValuesOnConditionCheckFailure)), exprInput: c.expr(x.ExpressionAttributeNames, x.ExpressionAttributeValues)},
					c.strp(x.UpdateExpression)}
			}
		}
		call = &Call{"TransactWriteItems", t}
	case *sdk.TransactGetItemsInput:
		t := &transactGetInput{ReturnConsumedCapacity: c.enum(string(in.ReturnConsumedCapacity))}
		if in.TransactItems != nil {
			t.TransactItems = make([]struct{ Get *getItemInput }, len(in.TransactItems))
		}
		for i, ti := range in.TransactItems {
			if g := ti.Get; g != nil {
				t.TransactItems[i].Get = &getItemInput{TableName: c.str(g.TableName), Key: c.item(g.Key),
					ProjectionExpression: c.str(g.ProjectionExpression), exprInput: exprInput{Names: c.names(g.ExpressionAttributeNames)}}
			}
		}
		call = &Call{"TransactGetItems", t}
	default:
		return nil, false
	}
	if c.bad {
		return nil, false
	}
	return call, true
}

// conv converts the SDK's input values to the engine's, noting (bad) a
// value the SDK's JSON would not carry as it is: a nil or unknown
// attribute value, a string that is not UTF-8 (JSON replaces its bytes).
type conv struct{ bad bool }

func (c *conv) check(s string) {
	if !c.bad && !utf8.ValidString(s) {
		c.bad = true
	}
}

func (c *conv) str(p *string) string {
	if p == nil {
		return ""
	}
	c.check(*p)
	return *p
}

func (c *conv) strp(p *string) *string {
	if p == nil {
		return nil
	}
	s := c.str(p)
	return &s
}

func (c *conv) enum(s string) string { c.check(s); return s }

func (c *conv) flag(p *bool) bool { return p != nil && *p }

func (c *conv) int(p *int32) *int64 {
	if p == nil {
		return nil
	}
	n := int64(*p)
	return &n
}

func (c *conv) names(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		c.check(k)
		c.check(v)
		out[k] = v
	}
	return out
}

func (c *conv) expr(names map[string]string, values map[string]sdktypes.AttributeValue) exprInput {
	in := exprInput{Names: c.names(names)}
	if values != nil {
		in.Values = c.values(values)
	}
	return in
}

func (c *conv) item(m map[string]sdktypes.AttributeValue) wireItem {
	if m == nil {
		return wireItem{}
	}
	return wireItem{it: c.values(m), set: true}
}

func (c *conv) values(m map[string]sdktypes.AttributeValue) item {
	out := make(item, len(m))
	for k, v := range m {
		c.check(k)
		out[k] = c.value(v)
	}
	return out
}

func (c *conv) strs(ss []string) []*string {
	out := make([]*string, len(ss))
	for i := range ss {
		out[i] = c.strp(&ss[i])
	}
	return out
}

func (c *conv) value(v sdktypes.AttributeValue) *types.Item {
	switch v := v.(type) {
	case *sdktypes.AttributeValueMemberS:
		return &types.Item{S: c.strp(&v.Value)}
	case *sdktypes.AttributeValueMemberN:
		return &types.Item{N: c.strp(&v.Value)}
	case *sdktypes.AttributeValueMemberB:
		if v.Value == nil {
			return &types.Item{} // JSON null: no type
		}
		return &types.Item{B: bytes.Clone(v.Value)}
	case *sdktypes.AttributeValueMemberBOOL:
		b := v.Value
		return &types.Item{BOOL: &b}
	case *sdktypes.AttributeValueMemberNULL:
		b := v.Value
		return &types.Item{NULL: &b}
	case *sdktypes.AttributeValueMemberSS:
		return &types.Item{SS: c.strs(v.Value)}
	case *sdktypes.AttributeValueMemberNS:
		return &types.Item{NS: c.strs(v.Value)}
	case *sdktypes.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			if b == nil {
				c.bad = true
			}
			bs[i] = bytes.Clone(b)
		}
		return &types.Item{BS: bs}
	case *sdktypes.AttributeValueMemberL:
		l := make([]*types.Item, len(v.Value))
		for i, e := range v.Value {
			l[i] = c.value(e)
		}
		return &types.Item{L: l}
	case *sdktypes.AttributeValueMemberM:
		return &types.Item{M: c.values(v.Value)}
	}
	c.bad = true // nil or a member this SDK does not know
	return nil
}
