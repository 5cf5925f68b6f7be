package awslocal

// The table-stream mappings' on-failure destinations: a batch given up
// (retries exhausted, records too old) is described to the mapping's SQS
// queue as Lambda describes it: its shard and sequence-number range, not
// its records (DDBStreamBatchInfo). The mapping sends it with the
// function's role (sqs:SendMessage on the queue), as on AWS.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botforge/platform/shared/runtime"
)

// OnFailureRecord is what Lambda sends to a stream mapping's on-failure
// destination (AWS Lambda developer guide, "Retaining discarded records
// of a stream"): the invocation and the batch's place in the stream.
type OnFailureRecord struct {
	RequestContext struct {
		RequestID              string `json:"requestId"`
		FunctionARN            string `json:"functionArn"`
		Condition              string `json:"condition"` // RetryAttemptsExhausted, RecordAgeExceeded
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	ResponseContext struct {
		StatusCode      int    `json:"statusCode"`
		ExecutedVersion string `json:"executedVersion"`
		FunctionError   string `json:"functionError,omitempty"`
	} `json:"responseContext"`
	Version   string             `json:"version"`
	Timestamp string             `json:"timestamp"`
	BatchInfo DDBStreamBatchInfo `json:"DDBStreamBatchInfo"`
}

// DDBStreamBatchInfo is a batch's range in the table's stream.
type DDBStreamBatchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamARN                       string `json:"streamArn"`
}

// arrival is a record's ApproximateCreationDateTime.
func arrival(rec map[string]any) time.Time {
	d, _ := rec["dynamodb"].(map[string]any)
	switch v := d["ApproximateCreationDateTime"].(type) {
	case int64:
		return time.Unix(v, 0)
	case float64:
		return time.Unix(int64(v), 0)
	}
	return time.Now()
}

// giveUp sends the batch's on-failure record to the mapping's queue (none:
// the batch is dropped, as Lambda drops it).
func (m *streamMapping) giveUp(ctx context.Context, batch []map[string]any, condition string, invokes int, res invokeResult) {
	if m.gaveUp != nil {
		m.gaveUp(batch, condition, invokes)
		return
	}
	var r OnFailureRecord
	r.RequestContext.RequestID = randomHex(16)
	r.RequestContext.FunctionARN = m.fn.ARN
	r.RequestContext.Condition = condition
	r.RequestContext.ApproximateInvokeCount = invokes
	r.ResponseContext.StatusCode, r.ResponseContext.ExecutedVersion = 200, "$LATEST"
	if res.FunctionError {
		r.ResponseContext.FunctionError = "Unhandled"
	}
	r.Version, r.Timestamp = "1.0", time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	first, last := batch[0], batch[len(batch)-1]
	r.BatchInfo = DDBStreamBatchInfo{ShardID: ShardID, StartSequenceNumber: seqString(seqOf(first)), EndSequenceNumber: seqString(seqOf(last)),
		ApproximateArrivalOfFirstRecord: arrival(first).UTC().Format(time.RFC3339), ApproximateArrivalOfLastRecord: arrival(last).UTC().Format(time.RFC3339),
		BatchSize: len(batch), StreamARN: m.src.StreamARN}
	body, _ := json.Marshal(r)
	log := m.stack.log.With("function", m.fn.LogicalID, "records", len(batch), "condition", condition, "answer", string(res.Payload), "err", res.Err)
	if m.src.OnFailure == "" {
		log.Warn("aws-local: stream batch dropped (no on-failure destination)")
		return
	}
	if !m.stack.authorize(m.fn, "sqs", "sqs:SendMessage", m.src.OnFailure) {
		log.Error("aws-local: the function's role may not send to its on-failure destination: the batch is dropped", "destination", m.src.OnFailure)
		return
	}
	if err := m.stack.sendToQueue(ctx, m.src.OnFailure, string(body)); err != nil {
		log.Error("aws-local: the on-failure record was not sent: the batch is dropped", "destination", m.src.OnFailure, "sendError", err)
		return
	}
	log.Warn("aws-local: stream batch given up: its range is in the on-failure destination", "destination", m.src.OnFailure, "record", string(body))
}

// sqsClient is an SQS client of the stack's SQS stand-in.
func (s *Stack) sqsClient(h http.Handler) *sqs.Client {
	return sqs.New(sqs.Options{Region: Region, BaseEndpoint: aws.String(s.queueBase),
		Credentials: credentials.NewStaticCredentialsProvider(s.accessKey, s.secretKey, ""),
		HTTPClient:  &http.Client{Transport: runtime.InProcess(h)}})
}

// queueURL is the URL of the queue of arn at the stack's SQS stand-in.
func (s *Stack) queueURL(arn string) string {
	return s.queueBase + "/" + Account + "/" + path.Base(strings.ReplaceAll(arn, ":", "/"))
}

// sendToQueue sends body to the queue of arn.
func (s *Stack) sendToQueue(ctx context.Context, arn, body string) error {
	if s.sqs == nil {
		return fmt.Errorf("no SQS stand-in")
	}
	_, err := s.sqsClient(s.sqs).SendMessage(context.WithoutCancel(ctx), &sqs.SendMessageInput{QueueUrl: aws.String(s.queueURL(arn)), MessageBody: aws.String(body)})
	return err
}

// ensureQueues creates the template's queues in the SQS stand-in.
func (s *Stack) ensureQueues(ctx context.Context) error {
	c := s.sqsClient(s.sqs)
	for _, name := range s.Template.Queues() {
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
			return fmt.Errorf("queue %s: %w", name, err)
		}
	}
	return nil
}
