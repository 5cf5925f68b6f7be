package awslocal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// cwLogs is the CloudWatch Logs of the stack: log streams and their events
// (appended to a file, so they survive a restart), and CloudWatch Logs
// Insights queries over them. The query language is the part the platform
// writes (shared/logstore/insights.go): fields, filter with = on a field,
// toMillis(@timestamp) comparisons and like /regex/, joined by and; sort
// @timestamp; limit. Anything else is a MalformedQueryException, as an
// unknown command is on AWS.
type cwLogs struct {
	mu      sync.Mutex
	file    *os.File
	streams map[string]bool      // group \x00 stream
	events  map[string][]cwEvent // by group
	queries map[string][][]map[string]string
}

type cwEvent struct {
	Group, Stream string
	Time          int64 // milliseconds
	Message       string
}

func openCWLogs(path string) (*cwLogs, error) {
	l := &cwLogs{streams: map[string]bool{}, events: map[string][]cwEvent{}, queries: map[string][][]map[string]string{}}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			var e cwEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				l.streams[e.Group+"\x00"+e.Stream] = true
				if e.Time != 0 || e.Message != "" {
					l.events[e.Group] = append(l.events[e.Group], e)
				}
			}
		}
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	l.file = f
	return l, nil
}

func (l *cwLogs) Close() error { return l.file.Close() }

func logsError(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

// put appends events to a stream (the stream made when missing: how the
// Lambda service writes a function's output).
func (l *cwLogs) put(group, stream string, create bool, evs []cwEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := group + "\x00" + stream
	if !l.streams[key] {
		if !create {
			return errors.New("ResourceNotFoundException")
		}
		l.streams[key] = true
		b, _ := json.Marshal(cwEvent{Group: group, Stream: stream})
		_, _ = l.file.Write(append(b, '\n'))
	}
	var buf []byte
	for _, e := range evs {
		e.Group, e.Stream = group, stream
		b, _ := json.Marshal(e)
		buf = append(append(buf, b...), '\n')
		l.events[group] = append(l.events[group], e)
	}
	_, err := l.file.Write(buf)
	return err
}

func (l *cwLogs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	var in struct {
		LogGroupName  string `json:"logGroupName"`
		LogGroupNames []string
		LogStreamName string `json:"logStreamName"`
		LogEvents     []struct {
			Timestamp int64  `json:"timestamp"`
			Message   string `json:"message"`
		} `json:"logEvents"`
		StartTime   int64  `json:"startTime"`
		EndTime     int64  `json:"endTime"`
		QueryString string `json:"queryString"`
		Limit       int    `json:"limit"`
		QueryID     string `json:"queryId"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		logsError(w, "InvalidParameterException", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch op {
	case "CreateLogStream":
		l.mu.Lock()
		key := in.LogGroupName + "\x00" + in.LogStreamName
		exists := l.streams[key]
		l.mu.Unlock()
		if exists {
			logsError(w, "ResourceAlreadyExistsException", "The specified log stream already exists")
			return
		}
		if err := l.put(in.LogGroupName, in.LogStreamName, true, nil); err != nil {
			logsError(w, "ServiceUnavailableException", err.Error())
			return
		}
		fmt.Fprint(w, "{}")
	case "PutLogEvents":
		evs := make([]cwEvent, 0, len(in.LogEvents))
		for _, e := range in.LogEvents {
			evs = append(evs, cwEvent{Time: e.Timestamp, Message: e.Message})
		}
		if err := l.put(in.LogGroupName, in.LogStreamName, false, evs); err != nil {
			logsError(w, "ResourceNotFoundException", "The specified log stream does not exist.")
			return
		}
		fmt.Fprintf(w, `{"nextSequenceToken":"%d"}`, time.Now().UnixNano())
	case "StartQuery":
		groups := in.LogGroupNames
		if in.LogGroupName != "" {
			groups = append(groups, in.LogGroupName)
		}
		rows, err := l.query(groups, in.StartTime*1000, in.EndTime*1000, in.QueryString, in.Limit)
		if err != nil {
			logsError(w, "MalformedQueryException", err.Error())
			return
		}
		id := uuid.NewString()
		l.mu.Lock()
		l.queries[id] = rows
		l.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"queryId": id})
	case "GetQueryResults":
		l.mu.Lock()
		rows, ok := l.queries[in.QueryID]
		l.mu.Unlock()
		if !ok {
			logsError(w, "ResourceNotFoundException", "Query does not exist")
			return
		}
		results := make([][]map[string]string, 0, len(rows))
		results = append(results, rows...)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "Complete", "results": results,
			"statistics": map[string]float64{"recordsMatched": float64(len(rows))}})
	case "StopQuery":
		fmt.Fprint(w, `{"success":true}`)
	default:
		logsError(w, "InvalidAction", "aws-local does not serve "+op)
	}
}

var (
	fieldEq  = regexp.MustCompile(`^([\w@]+) = "([^"]*)"$`)
	millisCm = regexp.MustCompile(`^toMillis\(@timestamp\) (>=|<=|>|<) (\d+)$`)
	likeRe   = regexp.MustCompile(`^([\w@]+) like /(.*)/$`)
	sortCmd  = regexp.MustCompile(`^sort @timestamp (asc|desc)$`)
	limitCmd = regexp.MustCompile(`^limit (\d+)$`)
)

// query runs an Insights query over the groups' events in [start, end]
// (milliseconds).
func (l *cwLogs) query(groups []string, start, end int64, qs string, limit int) ([][]map[string]string, error) {
	var fields []string
	var preds []func(fs map[string]string, ts int64) bool
	desc := false
	for _, cmd := range strings.Split(qs, "|") {
		cmd = strings.TrimSpace(cmd)
		switch {
		case cmd == "":
		case strings.HasPrefix(cmd, "fields "):
			for _, f := range strings.Split(strings.TrimPrefix(cmd, "fields "), ",") {
				fields = append(fields, strings.TrimSpace(f))
			}
		case strings.HasPrefix(cmd, "filter "):
			for _, c := range strings.Split(strings.TrimPrefix(cmd, "filter "), " and ") {
				c = strings.TrimSpace(c)
				if m := fieldEq.FindStringSubmatch(c); m != nil {
					preds = append(preds, func(fs map[string]string, _ int64) bool { return fs[m[1]] == m[2] })
				} else if m := millisCm.FindStringSubmatch(c); m != nil {
					n, _ := strconv.ParseInt(m[2], 10, 64)
					op := m[1]
					preds = append(preds, func(_ map[string]string, ts int64) bool {
						switch op {
						case ">=":
							return ts >= n
						case "<=":
							return ts <= n
						case ">":
							return ts > n
						}
						return ts < n
					})
				} else if m := likeRe.FindStringSubmatch(c); m != nil {
					re, err := regexp.Compile(m[2])
					if err != nil {
						return nil, fmt.Errorf("invalid regex %q: %v", m[2], err)
					}
					preds = append(preds, func(fs map[string]string, _ int64) bool { return re.MatchString(fs[m[1]]) })
				} else {
					return nil, fmt.Errorf("unexpected filter %q (aws-local knows =, like and toMillis(@timestamp) comparisons)", c)
				}
			}
		case sortCmd.MatchString(cmd):
			desc = sortCmd.FindStringSubmatch(cmd)[1] == "desc"
		case limitCmd.MatchString(cmd):
			limit, _ = strconv.Atoi(limitCmd.FindStringSubmatch(cmd)[1])
		default:
			return nil, fmt.Errorf("unexpected command %q", cmd)
		}
	}
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	type hit struct {
		ts int64
		fs map[string]string
	}
	var hits []hit
	l.mu.Lock()
	for _, g := range groups {
		for _, e := range l.events[g] {
			if e.Time < start || e.Time > end {
				continue
			}
			fs := map[string]string{"@message": e.Message, "@logStream": e.Stream}
			var obj map[string]any
			if json.Unmarshal([]byte(e.Message), &obj) == nil {
				for k, v := range obj {
					if s, ok := v.(string); ok {
						fs[k] = s
					} else if v != nil {
						b, _ := json.Marshal(v)
						fs[k] = string(b)
					}
				}
			}
			ok := true
			for _, p := range preds {
				if !p(fs, e.Time) {
					ok = false
					break
				}
			}
			if ok {
				fs["@timestamp"] = time.UnixMilli(e.Time).UTC().Format("2006-01-02 15:04:05.000")
				hits = append(hits, hit{e.Time, fs})
			}
		}
	}
	l.mu.Unlock()
	sort.SliceStable(hits, func(i, j int) bool {
		if desc {
			return hits[i].ts > hits[j].ts
		}
		return hits[i].ts < hits[j].ts
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	rows := make([][]map[string]string, 0, len(hits))
	for _, h := range hits {
		row := []map[string]string{}
		for _, f := range fields {
			if v, ok := h.fs[f]; ok {
				row = append(row, map[string]string{"field": f, "value": v})
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
