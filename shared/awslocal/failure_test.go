package awslocal_test

// The table-stream mappings' failure destinations on the AWS-shaped local
// stack: a batch that keeps failing is retried as the template bounds it,
// then its on-failure record (Lambda's format) lands in the mapping's SQS
// queue; functions/replay's package re-reads its range from the stream
// and re-delivers it once the fault is gone.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/botforge/platform/shared/awslocal"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/replay"
)

// operatorConfig is the AWS configuration operator.env describes: every
// service at the stack's operator endpoint.
func operatorConfig(t *testing.T, dataDir string) aws.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "aws-local", "operator.env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return aws.Config{Region: env["AWS_REGION"], BaseEndpoint: aws.String(env["AWS_ENDPOINT_URL"]),
		Credentials: credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], "")}
}

func TestStreamFailureQueueAndReplay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sqs     func(t *testing.T) string
		command bool // replay with functions/replay rather than its package
	}{
		{"moto SQS", func(t *testing.T) string { return mototest.Start(t) }, false},
		{"embedded SQS", func(*testing.T) string { return "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := tc.sqs(t)
			dir := t.TempDir()
			s := startStackWith(t, awslocal.Options{DataDir: dir, SQSEndpoint: endpoint})
			cfg := operatorConfig(t, dir)
			ctx := context.Background()
			db, q := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
			queue := s.Template.Outputs()["ChatFanoutFailureQueueUrl"]
			if !strings.HasSuffix(queue, "/bot-platform-chatfanout-failures") {
				t.Fatalf("ChatFanoutFailureQueueUrl %q", queue)
			}
			depth := func() (visible, hidden string) {
				a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue),
					AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
				if err != nil {
					t.Fatal(err)
				}
				return a.Attributes["ApproximateNumberOfMessages"], a.Attributes["ApproximateNumberOfMessagesNotVisible"]
			}
			calls := func(op string) int {
				n := 0
				for _, r := range s.Calls.Requests() {
					if r.Function == "ChatFanoutFunction" && r.Operation == op {
						n++
					}
				}
				return n
			}

			// The fan-out cannot read signals (an outage of its table
			// reads): every delivery of the batch fails.
			s.InjectFault(func(fn, op string) bool { return fn == "ChatFanoutFunction" && op == "GetItem" })
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Template.TableName), Item: map[string]dtypes.AttributeValue{
				"pk": &dtypes.AttributeValueMemberS{Value: "CHATSIG#replay-test"}, "sk": &dtypes.AttributeValueMemberS{Value: "0001"},
			}}); err != nil {
				t.Fatal(err)
			}
			// The mapping gives the batch up: its record lands in the queue.
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if v, _ := depth(); v == "1" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no on-failure record in %s within 60 s (fan-out GetItem calls: %d)", queue, calls("GetItem"))
				}
			}
			// Retried exactly as bounded: the first invocation and
			// MaximumRetryAttempts (2) more; never reaching its Query.
			if n := calls("GetItem"); n != 3 || calls("Query") != 0 {
				t.Fatalf("the fan-out read the signal %d times (want 3: 1 + MaximumRetryAttempts 2), queried %d times", n, calls("Query"))
			}
			got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), VisibilityTimeout: 30})
			if err != nil || len(got.Messages) != 1 {
				t.Fatalf("receive: %v, %d messages", err, len(got.Messages))
			}
			var rec awslocal.OnFailureRecord
			if err := json.Unmarshal([]byte(aws.ToString(got.Messages[0].Body)), &rec); err != nil {
				t.Fatal(err)
			}
			b := rec.BatchInfo
			if rec.RequestContext.Condition != "RetryAttemptsExhausted" || rec.RequestContext.ApproximateInvokeCount != 3 ||
				!strings.HasSuffix(rec.RequestContext.FunctionARN, ":function:bot-platform-chatfanout") || rec.ResponseContext.FunctionError != "Unhandled" ||
				b.ShardID != awslocal.ShardID || b.StreamARN != s.Template.StreamARN || b.BatchSize != 1 || b.StartSequenceNumber != b.EndSequenceNumber || b.StartSequenceNumber == "" {
				t.Fatalf("on-failure record: %s", aws.ToString(got.Messages[0].Body))
			}
			if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queue), ReceiptHandle: got.Messages[0].ReceiptHandle}); err != nil {
				t.Fatal(err)
			}

			r := &replay.Replayer{SQS: q, Streams: dynamodbstreams.NewFromConfig(cfg), Lambda: lambda.NewFromConfig(cfg)}
			// Still failing: the replay fails and the message stays.
			res, err := r.Queue(ctx, queue)
			if err != nil || len(res) != 1 || res[0].Outcome != replay.Failed || res[0].Records != 0 && res[0].Outcome != replay.Failed {
				t.Fatalf("replay while the fault lasts: %v %v", res, err)
			}
			if v, h := depth(); v != "1" || h != "0" {
				t.Fatalf("after a failed replay the message is not back: visible %s, in flight %s", v, h)
			}

			// Fixed: the replay re-reads the range and re-delivers it; with
			// the embedded SQS through the command itself, as the operator
			// runs it (operator.env).
			s.InjectFault(nil)
			if tc.command {
				cmd := exec.Command("go", "run", "./functions/replay", "-queue-url", queue)
				cmd.Dir = "../.."
				cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+aws.ToString(cfg.BaseEndpoint), "AWS_REGION="+cfg.Region,
					"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
				creds, _ := cfg.Credentials.Retrieve(ctx)
				cmd.Env = append(cmd.Env, "AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey)
				out, err := cmd.Output()
				if err != nil || !strings.Contains(string(out), "1 records: replayed\n") || !strings.Contains(string(out), ": 1 messages") {
					t.Fatalf("go run ./functions/replay: %v\n%s", err, out)
				}
			} else {
				res, err = r.Queue(ctx, queue)
				if err != nil || len(res) != 1 || res[0].Outcome != replay.Replayed || res[0].Records != 1 || res[0].Err != nil {
					t.Fatalf("replay once fixed: %v %v", res, err)
				}
			}
			if calls("Query") != 1 {
				t.Fatalf("the re-delivered signal was not handled: the fan-out queried its listeners %d times", calls("Query"))
			}
			if v, h := depth(); v != "0" || h != "0" {
				t.Fatalf("the replayed message is still queued: visible %s, in flight %s", v, h)
			}
			// Past the stream's retention (here: a range before its first
			// record, TrimmedDataAccessException): the work is re-derived,
			// the function invoked without records.
			rec.BatchInfo.StartSequenceNumber = "000000000000000000000"
			old, _ := json.Marshal(rec)
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(string(old))}); err != nil {
				t.Fatal(err)
			}
			res, err = r.Queue(ctx, queue)
			if err != nil || len(res) != 1 || res[0].Outcome != replay.Rederived || res[0].Records != 0 || res[0].Err != nil {
				t.Fatalf("replay of a trimmed range: %v %v", res, err)
			}
			if v, h := depth(); v != "0" || h != "0" {
				t.Fatalf("the re-derived message is still queued: visible %s, in flight %s", v, h)
			}
			if d := s.Calls.Denied(); len(d) > 0 {
				t.Fatalf("calls refused by the roles: %+v", d)
			}
		})
	}
}
