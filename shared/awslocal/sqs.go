package awslocal

// The embedded SQS stand-in of the template's queues (the stream mappings'
// failure destinations) when no external SQS (moto_server) is given: the
// JSON protocol's CreateQueue, GetQueueUrl, SendMessage, ReceiveMessage
// (visibility timeout), ChangeMessageVisibility, DeleteMessage,
// GetQueueAttributes and PurgeQueue, kept in one file of the data
// directory so that a failure record outlives a restart.

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/botforge/platform/shared/fsutil"
)

type queueMessage struct {
	ID        string    `json:"id"`
	Body      string    `json:"body"`
	Sent      time.Time `json:"sent"`
	Receipt   string    `json:"receipt,omitempty"`
	Invisible time.Time `json:"invisibleUntil"`
	Receives  int       `json:"receives"`
}

type queues struct {
	path string
	mu   sync.Mutex
	q    map[string][]*queueMessage // by queue name
}

func openQueues(p string) (*queues, error) {
	qs := &queues{path: p, q: map[string][]*queueMessage{}}
	b, err := os.ReadFile(p)
	if err == nil {
		err = json.Unmarshal(b, &qs.q)
	} else if os.IsNotExist(err) {
		err = nil
	}
	return qs, err
}

// save writes the queues (under mu).
func (qs *queues) save() error {
	b, _ := json.Marshal(qs.q)
	return fsutil.WriteFileAtomic(qs.path, b)
}

func sqsError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
}

func md5Hex(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

func (qs *queues) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	var in struct {
		QueueName, QueueUrl, MessageBody, ReceiptHandle string
		MaxNumberOfMessages, VisibilityTimeout          *int
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		sqsError(w, "InvalidParameterValue", err.Error())
		return
	}
	base := "http://" + r.Host
	name := in.QueueName
	if in.QueueUrl != "" {
		name = path.Base(in.QueueUrl)
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	msgs, exists := qs.q[name]
	if op != "CreateQueue" && !exists {
		sqsError(w, "QueueDoesNotExist", "The specified queue does not exist: "+name)
		return
	}
	now := time.Now()
	switch op {
	case "CreateQueue":
		if !exists {
			qs.q[name] = []*queueMessage{}
			if err := qs.save(); err != nil {
				sqsError(w, "InternalError", err.Error())
				return
			}
		}
		answer(w, map[string]string{"QueueUrl": base + "/" + Account + "/" + name})
	case "GetQueueUrl":
		answer(w, map[string]string{"QueueUrl": base + "/" + Account + "/" + name})
	case "SendMessage":
		m := &queueMessage{ID: randomHex(16), Body: in.MessageBody, Sent: now}
		qs.q[name] = append(msgs, m)
		if err := qs.save(); err != nil {
			sqsError(w, "InternalError", err.Error())
			return
		}
		answer(w, map[string]string{"MessageId": m.ID, "MD5OfMessageBody": md5Hex(m.Body)})
	case "ReceiveMessage":
		n, vis := 1, 30
		if in.MaxNumberOfMessages != nil {
			n = min(max(*in.MaxNumberOfMessages, 1), 10)
		}
		if in.VisibilityTimeout != nil {
			vis = *in.VisibilityTimeout
		}
		out := []any{}
		for _, m := range msgs {
			if len(out) == n || m.Invisible.After(now) {
				continue
			}
			m.Receipt, m.Invisible = randomHex(24), now.Add(time.Duration(vis)*time.Second)
			m.Receives++
			out = append(out, map[string]any{"MessageId": m.ID, "ReceiptHandle": m.Receipt, "MD5OfBody": md5Hex(m.Body), "Body": m.Body,
				"Attributes": map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.Receives), "SentTimestamp": strconv.FormatInt(m.Sent.UnixMilli(), 10)}})
		}
		_ = qs.save()
		answer(w, map[string]any{"Messages": out})
	case "ChangeMessageVisibility", "DeleteMessage":
		for i, m := range msgs {
			if m.Receipt != in.ReceiptHandle || in.ReceiptHandle == "" {
				continue
			}
			if op == "DeleteMessage" {
				qs.q[name] = append(msgs[:i:i], msgs[i+1:]...)
			} else if in.VisibilityTimeout != nil {
				m.Invisible = now.Add(time.Duration(*in.VisibilityTimeout) * time.Second)
			}
			_ = qs.save()
			answer(w, map[string]any{})
			return
		}
		sqsError(w, "ReceiptHandleIsInvalid", "The input receipt handle is invalid.")
	case "GetQueueAttributes":
		visible, hidden := 0, 0
		oldest := now
		for _, m := range msgs {
			if m.Invisible.After(now) {
				hidden++
			} else {
				visible++
			}
			if m.Sent.Before(oldest) {
				oldest = m.Sent
			}
		}
		answer(w, map[string]any{"Attributes": map[string]string{
			"ApproximateNumberOfMessages": strconv.Itoa(visible), "ApproximateNumberOfMessagesNotVisible": strconv.Itoa(hidden),
			"QueueArn": "arn:aws:sqs:" + Region + ":" + Account + ":" + name,
		}})
	case "PurgeQueue":
		qs.q[name] = []*queueMessage{}
		_ = qs.save()
		answer(w, map[string]any{})
	default:
		sqsError(w, "UnsupportedOperation", "aws-local: SQS operation "+op+" is not served")
	}
}

// stackInvoke serves Lambda's Invoke of the stack's own functions (by name
// or ARN) and passes every other request on (deployed code's functions).
type stackInvoke struct {
	s    *Stack
	next http.Handler
}

func (h stackInvoke) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/2015-03-31/functions/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	name, isInvoke := strings.CutSuffix(rest, "/invocations")
	if ok && isInvoke && r.Method == http.MethodPost {
		for _, lf := range h.s.funcs {
			if lf.fn.Name != name && lf.fn.ARN != name {
				continue
			}
			payload, err := readAll(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			res := lf.Invoke(r.Context(), payload)
			if res.Err != nil {
				w.Header().Set("X-Amzn-ErrorType", "ServiceException")
				w.WriteHeader(http.StatusInternalServerError)
				_ = json.NewEncoder(w).Encode(map[string]string{"Message": res.Err.Error()})
				return
			}
			if res.FunctionError {
				w.Header().Set("X-Amz-Function-Error", "Unhandled")
			}
			w.Header().Set("X-Amz-Executed-Version", "$LATEST")
			_, _ = w.Write(res.Payload)
			return
		}
	}
	h.next.ServeHTTP(w, r)
}

func readAll(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }
