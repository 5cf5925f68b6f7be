package awslocal

// The table's stream as DynamoDB Streams serves it (DescribeStream,
// ListStreams, GetShardIterator, GetRecords): the records of the last 24
// hours (DynamoDB Streams' retention) in one shard, with the sequence
// numbers the event source mappings gave their batches. What
// functions/replay reads to re-deliver a batch given up (failure.go).

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/botforge/platform/shared/localdynamo"
)

// ShardID is the one shard of the stack's table stream.
const ShardID = "shardId-00000000000000000001-local"

// streamRetention is how long DynamoDB Streams keeps a record.
const streamRetention = 24 * time.Hour

// maxRetained bounds the records kept in memory (the oldest go first, as
// if trimmed).
const maxRetained = 20_000

// streamLog numbers the table's changes (one sequence for the stream,
// whatever mapping delivers them) and keeps the retained ones.
type streamLog struct {
	arn, table string
	mu         sync.Mutex
	seq        int64
	recs       []map[string]any // by increasing sequence number
	times      []time.Time
}

// seqString is a sequence number as DynamoDB Streams writes them: digits,
// compared by value (functions/replay compares them as integers).
func seqString(n int64) string { return fmt.Sprintf("%021d", n) }

// append numbers the changes of the table and keeps them.
func (l *streamLog) append(cs []localdynamo.Change) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var out []map[string]any
	for _, c := range cs {
		if c.Table != l.table {
			continue
		}
		l.seq++
		var keys map[string]any
		_ = json.Unmarshal(c.Keys, &keys)
		rec := map[string]any{
			"eventID": strconv.FormatInt(now.UnixNano(), 16) + strconv.FormatInt(l.seq, 10), "eventName": c.EventName,
			"eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": Region,
			"dynamodb": map[string]any{
				"ApproximateCreationDateTime": now.Unix(), "Keys": keys,
				"SequenceNumber": seqString(l.seq), "SizeBytes": len(c.Keys), "StreamViewType": "KEYS_ONLY",
			},
			"eventSourceARN": l.arn,
		}
		l.recs, l.times = append(l.recs, rec), append(l.times, now)
		out = append(out, rec)
	}
	// Trim what is past the retention (or beyond the bound).
	drop := 0
	for drop < len(l.recs) && (now.Sub(l.times[drop]) > streamRetention || len(l.recs)-drop > maxRetained) {
		drop++
	}
	l.recs, l.times = l.recs[drop:], l.times[drop:]
	return out
}

// first is the sequence number of the oldest retained record (the next
// one's when none is).
func (l *streamLog) first() int64 {
	if len(l.recs) == 0 {
		return l.seq + 1
	}
	return seqOf(l.recs[0])
}

func seqOf(rec map[string]any) int64 {
	d, _ := rec["dynamodb"].(map[string]any)
	n, _ := strconv.ParseInt(fmt.Sprint(d["SequenceNumber"]), 10, 64)
	return n
}

// streamsTarget prefixes the DynamoDB Streams operations (signed for the
// dynamodb service, as DynamoDB's own).
const streamsTarget = "DynamoDBStreams_20120810."

// dynamoOrStreams sends DynamoDB Streams' operations to the stream's API,
// the rest to the table's service.
type dynamoOrStreams struct {
	table   http.Handler
	streams *streamLog
}

func (d dynamoOrStreams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.Header.Get("X-Amz-Target"), streamsTarget) && d.streams != nil {
		d.streams.ServeHTTP(w, r)
		return
	}
	d.table.ServeHTTP(w, r)
}

func (l *streamLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), streamsTarget)
	var in struct {
		StreamArn, ShardId, ShardIteratorType, SequenceNumber, ShardIterator string
		Limit                                                                int
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		streamsError(w, "ValidationException", err.Error())
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if in.StreamArn != "" && in.StreamArn != l.arn {
		streamsError(w, "ResourceNotFoundException", "Requested resource not found: Stream: "+in.StreamArn+" not found")
		return
	}
	switch op {
	case "ListStreams":
		answer(w, map[string]any{"Streams": []any{map[string]any{"StreamArn": l.arn, "TableName": l.table, "StreamLabel": l.arn[strings.LastIndex(l.arn, "/")+1:]}}})
	case "DescribeStream":
		answer(w, map[string]any{"StreamDescription": map[string]any{
			"StreamArn": l.arn, "StreamLabel": l.arn[strings.LastIndex(l.arn, "/")+1:], "StreamStatus": "ENABLED",
			"StreamViewType": "KEYS_ONLY", "TableName": l.table,
			"KeySchema": []any{map[string]string{"AttributeName": "pk", "KeyType": "HASH"}, map[string]string{"AttributeName": "sk", "KeyType": "RANGE"}},
			"Shards":    []any{map[string]any{"ShardId": ShardID, "SequenceNumberRange": map[string]string{"StartingSequenceNumber": seqString(l.first())}}},
		}})
	case "GetShardIterator":
		if in.ShardId != ShardID {
			streamsError(w, "ResourceNotFoundException", "Requested resource not found: Shard: "+in.ShardId+" not found")
			return
		}
		var pos int64
		n, _ := strconv.ParseInt(in.SequenceNumber, 10, 64)
		switch in.ShardIteratorType {
		case "TRIM_HORIZON":
			pos = l.first()
		case "LATEST":
			pos = l.seq + 1
		case "AT_SEQUENCE_NUMBER":
			pos = n
		case "AFTER_SEQUENCE_NUMBER":
			pos = n + 1
		default:
			streamsError(w, "ValidationException", "ShardIteratorType "+in.ShardIteratorType)
			return
		}
		if pos < l.first() && (in.ShardIteratorType == "AT_SEQUENCE_NUMBER" || in.ShardIteratorType == "AFTER_SEQUENCE_NUMBER") {
			streamsError(w, "TrimmedDataAccessException", "the sequence number "+in.SequenceNumber+" is beyond the stream's retention (trimmed)")
			return
		}
		answer(w, map[string]any{"ShardIterator": iterator(l.arn, pos)})
	case "GetRecords":
		arn, pos, ok := parseIterator(in.ShardIterator)
		if !ok || arn != l.arn {
			streamsError(w, "ValidationException", "invalid ShardIterator")
			return
		}
		if pos < l.first() {
			streamsError(w, "TrimmedDataAccessException", "the iterator's position is beyond the stream's retention (trimmed)")
			return
		}
		limit := in.Limit
		if limit <= 0 || limit > 1000 {
			limit = 1000
		}
		recs := []any{}
		next := pos
		for _, rec := range l.recs {
			if s := seqOf(rec); s >= pos && len(recs) < limit {
				out := map[string]any{}
				for k, v := range rec {
					if k != "eventSourceARN" { // not a field of the API's records
						out[k] = v
					}
				}
				recs = append(recs, out)
				next = s + 1
			}
		}
		answer(w, map[string]any{"Records": recs, "NextShardIterator": iterator(l.arn, next)})
	default:
		streamsError(w, "UnknownOperationException", "aws-local: DynamoDB Streams operation "+op+" is not served")
	}
}

func iterator(arn string, pos int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(arn + "|" + strconv.FormatInt(pos, 10)))
}

func parseIterator(it string) (string, int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(it)
	if err != nil {
		return "", 0, false
	}
	arn, p, ok := strings.Cut(string(b), "|")
	n, err := strconv.ParseInt(p, 10, 64)
	return arn, n, ok && err == nil
}

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(v)
}

func streamsError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": msg})
}
