// Package replay re-delivers what the table-stream mappings gave up
// (docs/runbook.md "Failure queues"). A mapping's on-failure destination
// (an SQS queue) receives Lambda's on-failure record of each batch it gives
// up: the invocation (requestContext: the function's ARN, the condition,
// RetryAttemptsExhausted or RecordAgeExceeded) and the batch's place in
// the table's stream (DDBStreamBatchInfo: stream ARN, shard id, first and
// last sequence numbers, batch size), not its records. Replay re-reads
// that range from the stream (DynamoDB Streams keeps 24 hours) and invokes
// the function again with those records; past the stream's retention it
// re-derives the work from the table instead: the function is invoked
// without records, which makes the dispatcher pass over the whole outbox
// (an undelivered entry stays there until delivered) and the chat fan-out
// do nothing (a signal that old has no listener left). A message is
// deleted once its replay succeeded; a failed one stays for the next run.
//
// That pass finds the outbox entries in the sweep index only; OutboxScan
// (outbox.go) finds those outside it, whose stream records are gone
// (docs/runbook.md "Outbox scan").
package replay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// OnFailureRecord is the part of Lambda's on-failure record replay uses.
type OnFailureRecord struct {
	RequestContext struct {
		FunctionARN            string `json:"functionArn"`
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	BatchInfo *struct {
		ShardID             string `json:"shardId"`
		StartSequenceNumber string `json:"startSequenceNumber"`
		EndSequenceNumber   string `json:"endSequenceNumber"`
		BatchSize           int    `json:"batchSize"`
		StreamARN           string `json:"streamArn"`
	} `json:"DDBStreamBatchInfo"`
}

// Outcomes of a message.
const (
	Replayed  = "replayed"  // its records re-read and delivered
	Rederived = "rederived" // past the stream's retention: the function invoked without records
	Failed    = "failed"    // the invocation failed again: the message stays
	Skipped   = "skipped"   // not a stream batch's on-failure record: the message stays
	DryRun    = "dry-run"   // described only
)

// Result is what became of one message.
type Result struct {
	MessageID string
	Function  string
	Condition string
	Start     string
	End       string
	Records   int // records of the range re-read and delivered
	Outcome   string
	Err       error
}

func (r Result) String() string {
	s := fmt.Sprintf("%s %s %s [%s..%s] %d records: %s", r.MessageID, r.Function, r.Condition, r.Start, r.End, r.Records, r.Outcome)
	if r.Err != nil {
		s += ": " + r.Err.Error()
	}
	return s
}

// Replayer replays failure queues with the operator's AWS clients.
type Replayer struct {
	SQS     *sqs.Client
	Streams *dynamodbstreams.Client
	Lambda  *lambda.Client
	Log     *slog.Logger
	// DryRun describes each message without invoking or deleting.
	DryRun bool
	// Visibility hides a message being replayed from other readers
	// (default 5 minutes: a dispatcher pass is at most that).
	Visibility time.Duration
}

// Queue replays every message of the queue at url once.
func (r *Replayer) Queue(ctx context.Context, url string) ([]Result, error) {
	if r.Visibility == 0 {
		r.Visibility = 5 * time.Minute
	}
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	var out []Result
	seen := map[string]bool{}
	for {
		got, err := r.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			VisibilityTimeout: int32(r.Visibility / time.Second)})
		if err != nil {
			return out, fmt.Errorf("receive from %s: %w", url, err)
		}
		fresh := 0
		for _, m := range got.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				// A message this run left (failed, skipped) came back:
				// visible again for the next run.
				_, _ = r.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
				continue
			}
			seen[id], fresh = true, fresh+1
			res := r.message(ctx, aws.ToString(m.Body))
			res.MessageID = id
			log.Info("replay: "+res.Outcome, "queue", url, "message", id, "function", res.Function, "start", res.Start, "end", res.End, "records", res.Records, "err", res.Err)
			if res.Outcome == Replayed || res.Outcome == Rederived {
				if _, err := r.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
					res.Err = fmt.Errorf("replayed, but not deleted (it will be replayed again): %w", err)
				}
			} else {
				// Visible again at once: the next run (or reader) sees it.
				_, _ = r.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			}
			out = append(out, res)
		}
		if fresh == 0 {
			return out, nil
		}
	}
}

// message replays one on-failure record.
func (r *Replayer) message(ctx context.Context, body string) Result {
	var rec OnFailureRecord
	if err := json.Unmarshal([]byte(body), &rec); err != nil || rec.BatchInfo == nil || rec.BatchInfo.StreamARN == "" || rec.RequestContext.FunctionARN == "" {
		return Result{Outcome: Skipped, Err: errors.New("not a table-stream batch's on-failure record")}
	}
	b := rec.BatchInfo
	res := Result{Function: rec.RequestContext.FunctionARN, Condition: rec.RequestContext.Condition, Start: b.StartSequenceNumber, End: b.EndSequenceNumber}
	records, err := r.read(ctx, b.StreamARN, b.ShardID, b.StartSequenceNumber, b.EndSequenceNumber)
	var trimmed *stypes.TrimmedDataAccessException
	var expired *stypes.ExpiredIteratorException
	var gone *stypes.ResourceNotFoundException
	payload := []byte(`{"Records":[]}`)
	switch {
	case errors.As(err, &trimmed), errors.As(err, &expired), errors.As(err, &gone), err == nil && len(records) == 0:
		res.Outcome = Rederived
	case err != nil:
		res.Outcome, res.Err = Failed, fmt.Errorf("re-reading the stream: %w", err)
		return res
	default:
		res.Outcome, res.Records = Replayed, len(records)
		payload, _ = json.Marshal(map[string]any{"Records": records})
	}
	if r.DryRun {
		res.Outcome += " (" + DryRun + ")"
		return res
	}
	out, err := r.Lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(res.Function), Payload: payload})
	switch {
	case err != nil:
		res.Outcome, res.Err = Failed, err
	case out.FunctionError != nil:
		res.Outcome, res.Err = Failed, fmt.Errorf("function error %s: %s", aws.ToString(out.FunctionError), out.Payload)
	}
	return res
}

// read re-reads the records of the range [start, end] of a shard, as the
// mapping gave them to the function (Lambda's DynamoDB event records).
// Records of the range the mapping's filter had not let through are read
// too: both functions fed by the stream skip records that are not theirs.
func (r *Replayer) read(ctx context.Context, stream, shard, start, end string) ([]map[string]any, error) {
	last, ok := new(big.Int).SetString(end, 10)
	if !ok {
		return nil, fmt.Errorf("end sequence number %q", end)
	}
	it, err := r.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(stream), ShardId: aws.String(shard),
		ShardIteratorType: stypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(start)})
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	iter, empty := it.ShardIterator, 0
	for calls := 0; iter != nil && calls < 1000; calls++ {
		page, err := r.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			return nil, err
		}
		if len(page.Records) == 0 {
			// An open shard's tip (or a gap DynamoDB Streams skips over):
			// a few empty pages end the range.
			if empty++; empty == 3 {
				return out, nil
			}
		}
		for _, rec := range page.Records {
			seq, _ := new(big.Int).SetString(aws.ToString(rec.Dynamodb.SequenceNumber), 10)
			if seq == nil || seq.Cmp(last) > 0 {
				return out, nil
			}
			out = append(out, lambdaRecord(rec, stream))
		}
		iter = page.NextShardIterator
	}
	return out, nil
}

// lambdaRecord is a stream record as Lambda gives it to a function.
func lambdaRecord(rec stypes.Record, stream string) map[string]any {
	d := rec.Dynamodb
	keys := map[string]any{}
	for k, v := range d.Keys {
		keys[k] = attributeJSON(v)
	}
	dyn := map[string]any{"Keys": keys, "SequenceNumber": aws.ToString(d.SequenceNumber), "SizeBytes": aws.ToInt64(d.SizeBytes),
		"StreamViewType": string(d.StreamViewType)}
	if d.ApproximateCreationDateTime != nil {
		dyn["ApproximateCreationDateTime"] = d.ApproximateCreationDateTime.Unix()
	}
	return map[string]any{"eventID": aws.ToString(rec.EventID), "eventName": string(rec.EventName), "eventVersion": aws.ToString(rec.EventVersion),
		"eventSource": aws.ToString(rec.EventSource), "awsRegion": aws.ToString(rec.AwsRegion), "dynamodb": dyn, "eventSourceARN": stream}
}

// attributeJSON renders a key attribute in DynamoDB's JSON (keys are
// strings, numbers or binary).
func attributeJSON(v stypes.AttributeValue) map[string]any {
	switch a := v.(type) {
	case *stypes.AttributeValueMemberS:
		return map[string]any{"S": a.Value}
	case *stypes.AttributeValueMemberN:
		return map[string]any{"N": a.Value}
	case *stypes.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(a.Value)}
	}
	return map[string]any{"NULL": true}
}
