package logstore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
)

// fakeCW is a CloudWatch Logs endpoint speaking the service's JSON protocol
// (awsJson1.1, X-Amz-Target: Logs_20140328.<Op>) for the calls the adapter
// makes. It stores the events put, and runs Insights queries with a strict
// interpreter of the query language's subset the adapter writes: the
// commands are split as Insights splits them (on | outside string and
// regex literals; # starts a comment), and any command or literal it does
// not know is a MalformedQueryException. A filter value that escaped its
// literal would show up here as a malformed or different query.
type fakeCW struct {
	t *testing.T

	mu      sync.Mutex
	streams map[string]map[string][]fakeEvent // group → stream → events
	queries map[string]*fakeRun
	// Sent records every query string, in order.
	sent []string
	// runningPolls is how many GetQueryResults calls see a query Running
	// before it is Complete; chunk is how many rows a GetQueryResults
	// answer carries at most (more come with a nextToken).
	runningPolls int
	chunk        int
	// never keeps queries Running forever (to test the timeout).
	never bool
	// busy answers StartQuery with LimitExceededException.
	busy                          bool
	polls, stops, puts, creations int
	lastStart                     map[string]any
}

type fakeEvent struct {
	ts  int64
	msg string
}

type fakeRun struct {
	rows  [][]map[string]string
	polls int
}

func newFakeCW(t *testing.T) (*fakeCW, *cloudwatchlogs.Client) {
	f := &fakeCW{t: t, streams: map[string]map[string][]fakeEvent{}, queries: map[string]*fakeRun{}, chunk: 1000}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := cloudwatchlogs.New(cloudwatchlogs.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AK", "SK", ""),
		RetryMaxAttempts: 1,
	})
	return f, client
}

func (f *fakeCW) fail(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(400)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

func (f *fakeCW) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "Logs_20140328.")
	if r.Method != "POST" || !ok || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.1") {
		f.fail(w, "UnknownOperationException", "bad request "+r.Method+" "+target)
		return
	}
	if !strings.Contains(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
		f.fail(w, "UnrecognizedClientException", "unsigned request")
		return
	}
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		f.fail(w, "SerializationException", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out, errType, errMsg := f.call(op, in)
	if errType != "" {
		f.fail(w, errType, errMsg)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func str(in map[string]any, k string) string { s, _ := in[k].(string); return s }
func num(in map[string]any, k string) int64  { n, _ := in[k].(float64); return int64(n) }

func (f *fakeCW) call(op string, in map[string]any) (any, string, string) {
	switch op {
	case "CreateLogStream":
		g, s := str(in, "logGroupName"), str(in, "logStreamName")
		if f.streams[g] == nil {
			f.streams[g] = map[string][]fakeEvent{}
		}
		if _, ok := f.streams[g][s]; ok {
			return nil, "ResourceAlreadyExistsException", "The specified log stream already exists"
		}
		f.streams[g][s] = []fakeEvent{}
		f.creations++
		return map[string]any{}, "", ""
	case "PutLogEvents":
		g, s := str(in, "logGroupName"), str(in, "logStreamName")
		evs, ok := f.streams[g][s]
		if !ok {
			return nil, "ResourceNotFoundException", "The specified log stream does not exist."
		}
		list, _ := in["logEvents"].([]any)
		last := int64(0)
		for _, e := range list {
			m := e.(map[string]any)
			ts := num(m, "timestamp")
			if ts < last {
				return nil, "InvalidParameterException", "Log events in a single PutLogEvents request must be in chronological order."
			}
			last = ts
			evs = append(evs, fakeEvent{ts: ts, msg: str(m, "message")})
		}
		f.streams[g][s] = evs
		f.puts++
		return map[string]any{"nextSequenceToken": "x"}, "", ""
	case "StartQuery":
		f.lastStart = in
		if f.busy {
			return nil, "LimitExceededException", "too many concurrent queries"
		}
		qs := str(in, "queryString")
		f.sent = append(f.sent, qs)
		q, err := parseInsights(qs)
		if err != nil {
			return nil, "MalformedQueryException", err.Error()
		}
		rows := f.run(str(in, "logGroupName"), num(in, "startTime"), num(in, "endTime"), q)
		id := fmt.Sprintf("q%d", len(f.queries)+1)
		f.queries[id] = &fakeRun{rows: rows}
		return map[string]any{"queryId": id}, "", ""
	case "GetQueryResults":
		f.polls++
		run := f.queries[str(in, "queryId")]
		if run == nil {
			return nil, "ResourceNotFoundException", "no such query"
		}
		off := 0
		if tok := str(in, "nextToken"); tok != "" {
			off, _ = strconv.Atoi(tok)
		} else {
			run.polls++
			if f.never || run.polls <= f.runningPolls {
				return map[string]any{"status": "Running", "results": []any{}}, "", ""
			}
		}
		end := min(off+f.chunk, len(run.rows))
		out := map[string]any{"status": "Complete", "results": run.rows[off:end],
			"statistics": map[string]any{"recordsMatched": len(run.rows), "recordsScanned": len(run.rows)}}
		if end < len(run.rows) {
			out["nextToken"] = strconv.Itoa(end)
		}
		return out, "", ""
	case "StopQuery":
		f.stops++
		return map[string]any{"success": true}, "", ""
	}
	return nil, "UnknownOperationException", op
}

// fakeQuery is a parsed query of the subset the adapter writes.
type fakeQuery struct {
	eq       map[string]string
	from, to int64
	re       *regexp.Regexp
	limit    int
}

// splitCommands splits a query into its commands as Insights does: on |
// outside "..." strings and /.../ regexes (where a backslash escapes the
// next character); a # outside them starts a comment, which this fake
// refuses.
func splitCommands(q string) ([]string, error) {
	var cmds []string
	var cur strings.Builder
	state := 0 // 0 plain, 1 string, 2 regex
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch state {
		case 0:
			switch c {
			case '|':
				cmds = append(cmds, strings.TrimSpace(cur.String()))
				cur.Reset()
				continue
			case '"':
				state = 1
			case '/':
				state = 2
			case '#':
				return nil, fmt.Errorf("comment at %d", i)
			case '\'', '`':
				return nil, fmt.Errorf("unexpected quote %q at %d", c, i)
			}
		case 1, 2:
			if c == '\\' && i+1 < len(q) {
				cur.WriteByte(c)
				i++
				c = q[i]
			} else if state == 1 && c == '"' || state == 2 && c == '/' {
				state = 0
			}
		}
		cur.WriteByte(c)
	}
	if state != 0 {
		return nil, fmt.Errorf("unterminated literal")
	}
	return append(cmds, strings.TrimSpace(cur.String())), nil
}

var (
	reFields = regexp.MustCompile(`^fields @timestamp, id, level, message, userId, conversationId, workflowId$`)
	reEq     = regexp.MustCompile(`^filter (botId|integrationId|level|userId|conversationId|workflowId) = "([A-Za-z0-9_.:@-]+)"$`)
	reTime   = regexp.MustCompile(`^filter toMillis\(@timestamp\) >= (\d+) and toMillis\(@timestamp\) <= (\d+)$`)
	reLike   = regexp.MustCompile(`^filter message like /(.*)/$`)
	reSort   = regexp.MustCompile(`^sort @timestamp desc$`)
	reLimit  = regexp.MustCompile(`^limit (\d+)$`)
)

func parseInsights(q string) (*fakeQuery, error) {
	cmds, err := splitCommands(q)
	if err != nil {
		return nil, err
	}
	fq := &fakeQuery{eq: map[string]string{}}
	if len(cmds) < 4 || !reFields.MatchString(cmds[0]) {
		return nil, fmt.Errorf("unexpected query shape: %q", cmds)
	}
	for _, c := range cmds[1:] {
		switch {
		case reEq.MatchString(c):
			m := reEq.FindStringSubmatch(c)
			if _, dup := fq.eq[m[1]]; dup {
				return nil, fmt.Errorf("duplicate filter %s", m[1])
			}
			fq.eq[m[1]] = m[2]
		case reTime.MatchString(c):
			m := reTime.FindStringSubmatch(c)
			fq.from, _ = strconv.ParseInt(m[1], 10, 64)
			fq.to, _ = strconv.ParseInt(m[2], 10, 64)
		case reLike.MatchString(c):
			body := reLike.FindStringSubmatch(c)[1]
			re, err := regexp.Compile(body)
			if err != nil {
				return nil, fmt.Errorf("bad regex %q: %v", body, err)
			}
			fq.re = re
		case reSort.MatchString(c):
		case reLimit.MatchString(c):
			fq.limit, _ = strconv.Atoi(reLimit.FindStringSubmatch(c)[1])
		default:
			return nil, fmt.Errorf("unknown command %q", c)
		}
	}
	if fq.limit == 0 || fq.to == 0 {
		return nil, fmt.Errorf("query without limit or time filter")
	}
	return fq, nil
}

// run evaluates a query over a group's events: the StartTime/EndTime
// seconds (inclusive), then the filters, newest first with ties in random
// order (Insights does not order them), then the limit.
func (f *fakeCW) run(group string, start, end int64, q *fakeQuery) [][]map[string]string {
	type hit struct {
		ts  int64
		rec map[string]string
	}
	var hits []hit
	for _, evs := range f.streams[group] {
		for _, e := range evs {
			if e.ts < start*1000 || e.ts > end*1000+999 || e.ts < q.from || e.ts > q.to {
				continue
			}
			var rec map[string]string
			if err := json.Unmarshal([]byte(e.msg), &rec); err != nil {
				continue
			}
			ok := true
			for k, v := range q.eq {
				if rec[k] != v {
					ok = false
				}
			}
			if q.re != nil && !q.re.MatchString(rec["message"]) {
				ok = false
			}
			if ok {
				hits = append(hits, hit{e.ts, rec})
			}
		}
	}
	rand.Shuffle(len(hits), func(i, j int) { hits[i], hits[j] = hits[j], hits[i] })
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].ts > hits[j].ts })
	if len(hits) > q.limit {
		hits = hits[:q.limit]
	}
	rows := make([][]map[string]string, 0, len(hits))
	for i, h := range hits {
		row := []map[string]string{{"field": "@timestamp", "value": time.UnixMilli(h.ts).UTC().Format("2006-01-02 15:04:05.000")}}
		for _, k := range []string{"id", "level", "message", "userId", "conversationId", "workflowId"} {
			if v, ok := h.rec[k]; ok {
				row = append(row, map[string]string{"field": k, "value": v})
			}
		}
		row = append(row, map[string]string{"field": "@ptr", "value": fmt.Sprintf("ptr%d", i)})
		rows = append(rows, row)
	}
	return rows
}
