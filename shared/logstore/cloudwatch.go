package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"

	"github.com/botforge/platform/shared/platform"
)

// CloudWatchAPI is what CloudWatch needs of the CloudWatch Logs client
// (*cloudwatchlogs.Client): the calls its IAM policy allows.
type CloudWatchAPI interface {
	PutLogEvents(ctx context.Context, in *cloudwatchlogs.PutLogEventsInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error)
	CreateLogStream(ctx context.Context, in *cloudwatchlogs.CreateLogStreamInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.CreateLogStreamOutput, error)
	StartQuery(ctx context.Context, in *cloudwatchlogs.StartQueryInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.StartQueryOutput, error)
	GetQueryResults(ctx context.Context, in *cloudwatchlogs.GetQueryResultsInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.GetQueryResultsOutput, error)
	StopQuery(ctx context.Context, in *cloudwatchlogs.StopQueryInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.StopQueryOutput, error)
}

// CloudWatch is platform.LogStore over CloudWatch Logs. Lines go to one log
// group for bots and one for integrations, one log stream per bot or
// integration (named by its id), each line a JSON object (see cwLine).
// Queries are CloudWatch Logs Insights queries (insightsQuery), polled until
// complete within QueryTimeout.
//
// Why a stream per bot (not per day): a stream is one owner's history, so
// an operator can read or tail one bot's lines without Insights
// (GetLogEvents, `aws logs tail --log-stream-names <botId>`) and see each
// bot's volume; streams are created once per bot, not once per bot per
// day; and PutLogEvents batches are per stream, which is what a delivery
// writes. Queries do not depend on streams: they filter on the botId or
// integrationId field (which a field index policy can index).
type CloudWatch struct {
	Client                     CloudWatchAPI
	BotGroup, IntegrationGroup string
	// QueryTimeout bounds a query, polling included (default 20s, within
	// API Gateway's 30s); PollInterval is the first wait between polls
	// (default 150ms), growing by half each poll up to one second.
	QueryTimeout, PollInterval time.Duration
	Logger                     *slog.Logger
}

var _ platform.LogStore = (*CloudWatch)(nil)

// Default log group names (PLATFORM_BOT_LOG_GROUP, PLATFORM_INTEGRATION_LOG_GROUP).
const (
	DefaultBotGroup         = "/platform/bots"
	DefaultIntegrationGroup = "/platform/integrations"
)

// cwLine is a line as stored in CloudWatch: the event's message is this
// object as JSON (Insights discovers its fields), its timestamp the line's.
type cwLine struct {
	ID             string `json:"id"`
	BotID          string `json:"botId,omitempty"`
	IntegrationID  string `json:"integrationId,omitempty"`
	Level          string `json:"level"`
	Message        string `json:"message"`
	UserID         string `json:"userId,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
	WorkflowID     string `json:"workflowId,omitempty"`
}

func (c *CloudWatch) group(k platform.LogKind) string {
	if k == platform.LogIntegration {
		return c.IntegrationGroup
	}
	return c.BotGroup
}

// PutLogEvents limits: events per call, bytes per call (each event counts
// its message plus 26 bytes), and the time span of one call.
const (
	maxBatchEvents = 10000
	maxBatchBytes  = 1000000
	maxBatchSpan   = 24 * time.Hour
)

// Write sends the lines with PutLogEvents, one batch per stream (split at
// the service's limits), creating a stream the first time it is missing.
func (c *CloudWatch) Write(ctx context.Context, lines ...platform.LogLine) error {
	type stream struct{ group, name string }
	batches := map[stream][]types.InputLogEvent{}
	for _, l := range lines {
		l.Normalize()
		if !l.Source.Valid() {
			return fmt.Errorf("log line of an invalid source %q/%q", l.Source.Kind, l.Source.ID)
		}
		rec := cwLine{ID: l.ID, Level: l.Level, Message: l.Message, UserID: l.UserID, ConversationID: l.ConversationID, WorkflowID: l.WorkflowID}
		if l.Source.Kind == platform.LogBot {
			rec.BotID = l.Source.ID
		} else {
			rec.IntegrationID = l.Source.ID
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		s := stream{c.group(l.Source.Kind), l.Source.ID}
		batches[s] = append(batches[s], types.InputLogEvent{Message: aws.String(string(b)), Timestamp: aws.Int64(l.Time.UnixMilli())})
	}
	var errs []error
	for s, evs := range batches {
		// Events of a call must be in time order.
		sort.SliceStable(evs, func(i, j int) bool { return *evs[i].Timestamp < *evs[j].Timestamp })
		for len(evs) > 0 {
			n, size := 0, 0
			for n < len(evs) && n < maxBatchEvents {
				sz := len(*evs[n].Message) + 26
				if size+sz > maxBatchBytes || *evs[n].Timestamp-*evs[0].Timestamp >= maxBatchSpan.Milliseconds() {
					break
				}
				size += sz
				n++
			}
			if err := c.put(ctx, s.group, s.name, evs[:n]); err != nil {
				errs = append(errs, err)
			}
			evs = evs[n:]
		}
	}
	return errors.Join(errs...)
}

func (c *CloudWatch) put(ctx context.Context, group, stream string, evs []types.InputLogEvent) error {
	in := &cloudwatchlogs.PutLogEventsInput{LogGroupName: &group, LogStreamName: &stream, LogEvents: evs}
	out, err := c.Client.PutLogEvents(ctx, in)
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		// The stream's first line: create it (a concurrent writer may have).
		_, cerr := c.Client.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: &group, LogStreamName: &stream})
		var exists *types.ResourceAlreadyExistsException
		if cerr != nil && !errors.As(cerr, &exists) {
			return fmt.Errorf("create log stream %s/%s: %w", group, stream, cerr)
		}
		out, err = c.Client.PutLogEvents(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("put log events to %s/%s: %w", group, stream, err)
	}
	if r := out.RejectedLogEventsInfo; r != nil && c.Logger != nil {
		// Lines too old or too new for the group are dropped, as the
		// service does; the platform writes lines as things happen.
		c.Logger.Warn("CloudWatch Logs rejected log lines", "group", group, "stream", stream,
			"tooOldEnd", aws.ToInt32(r.TooOldLogEventEndIndex), "tooNewStart", aws.ToInt32(r.TooNewLogEventStartIndex),
			"expiredEnd", aws.ToInt32(r.ExpiredLogEventEndIndex))
	}
	return nil
}

// Errors of queries the caller can act on.
var (
	errQueryTimeout = platform.Errorf(platform.ErrInternal, "the log query did not complete in time: narrow the time window or add filters, then retry")
	errQueryBusy    = platform.Errorf(platform.ErrRateLimited, "too many log queries are running: retry in a few seconds")
)

// Query answers one page with an Insights query: StartQuery, then
// GetQueryResults until the query is complete (or QueryTimeout passes, when
// the query is stopped). The query asks for one line more than the page
// (to know whether another page exists) plus the lines of the cursor's
// millisecond already answered (which are dropped).
func (c *CloudWatch) Query(ctx context.Context, q platform.LogQuery) (platform.LogPage, error) {
	if err := q.Check(); err != nil {
		return platform.LogPage{}, err
	}
	cur, err := parseCursor(q.Cursor)
	if err != nil {
		return platform.LogPage{}, err
	}
	end := cur.upper(q.End)
	if end.Before(q.Start) {
		return platform.LogPage{Lines: []platform.LogLine{}}, nil
	}
	limit := q.Limit + 1
	if cur != nil {
		limit += len(cur.seen)
	}
	qs, err := insightsQuery(q, q.Start, end, limit)
	if err != nil {
		return platform.LogPage{}, err
	}
	timeout := c.QueryTimeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// StartTime and EndTime are whole seconds, inclusive: the second of
	// the window's end is included whole and the query's own filter cuts
	// at the millisecond.
	started, err := c.Client.StartQuery(ctx, &cloudwatchlogs.StartQueryInput{
		LogGroupName: aws.String(c.group(q.Source.Kind)),
		StartTime:    aws.Int64(q.Start.Unix()),
		EndTime:      aws.Int64(end.Unix() + 1),
		QueryString:  aws.String(qs),
		Limit:        aws.Int32(int32(limit)),
	})
	if err != nil {
		return platform.LogPage{}, c.queryError(ctx, err)
	}
	rows, err := c.results(ctx, aws.ToString(started.QueryId))
	if err != nil {
		return platform.LogPage{}, err
	}
	cands := make([]platform.LogLine, 0, len(rows))
	for _, row := range rows {
		l, ok := lineOf(q.Source, row)
		if ok && cur.allows(l) {
			cands = append(cands, l)
		}
	}
	sortNewestFirst(cands)
	page, next := paginate(cands, q.Limit, cur)
	if page == nil {
		page = []platform.LogLine{}
	}
	return platform.LogPage{Lines: page, Next: next}, nil
}

// results polls GetQueryResults until the query completes and returns its
// rows (following nextToken when the results come in parts).
func (c *CloudWatch) results(ctx context.Context, id string) ([][]types.ResultField, error) {
	wait := c.PollInterval
	if wait <= 0 {
		wait = 150 * time.Millisecond
	}
	for {
		select {
		case <-ctx.Done():
			c.stop(id)
			return nil, errQueryTimeout
		case <-time.After(wait):
		}
		wait = min(wait*3/2, time.Second)
		out, err := c.Client.GetQueryResults(ctx, &cloudwatchlogs.GetQueryResultsInput{QueryId: &id})
		if err != nil {
			if ctx.Err() != nil {
				c.stop(id)
				return nil, errQueryTimeout
			}
			return nil, c.queryError(ctx, err)
		}
		switch out.Status {
		case types.QueryStatusScheduled, types.QueryStatusRunning:
			continue
		case types.QueryStatusComplete:
		default:
			return nil, fmt.Errorf("log query %s ended %s", id, out.Status)
		}
		rows := out.Results
		for tok := out.NextToken; tok != nil && *tok != ""; {
			more, err := c.Client.GetQueryResults(ctx, &cloudwatchlogs.GetQueryResultsInput{QueryId: &id, NextToken: tok})
			if err != nil {
				return nil, c.queryError(ctx, err)
			}
			rows = append(rows, more.Results...)
			tok = more.NextToken
		}
		return rows, nil
	}
}

// stop stops a query that is no longer awaited (it would otherwise run on,
// and count against the account's concurrent queries).
func (c *CloudWatch) stop(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = c.Client.StopQuery(ctx, &cloudwatchlogs.StopQueryInput{QueryId: &id})
}

func (c *CloudWatch) queryError(ctx context.Context, err error) error {
	var le *types.LimitExceededException
	if errors.As(err, &le) {
		return errQueryBusy
	}
	if ctx.Err() != nil {
		return errQueryTimeout
	}
	return fmt.Errorf("log query: %w", err)
}

// Insights renders @timestamp as "2006-01-02 15:04:05.000" (UTC).
var insightsTimeLayouts = []string{"2006-01-02 15:04:05.000", "2006-01-02 15:04:05", time.RFC3339Nano}

// lineOf reads a result row; rows lacking a time or an id are skipped.
func lineOf(src platform.LogSource, row []types.ResultField) (platform.LogLine, bool) {
	l := platform.LogLine{Source: src}
	var ts string
	for _, f := range row {
		v := aws.ToString(f.Value)
		switch aws.ToString(f.Field) {
		case "@timestamp":
			ts = v
		case "id":
			l.ID = v
		case "level":
			l.Level = v
		case "message":
			l.Message = v
		case "userId":
			l.UserID = v
		case "conversationId":
			l.ConversationID = v
		case "workflowId":
			l.WorkflowID = v
		}
	}
	for _, layout := range insightsTimeLayouts {
		if t, err := time.Parse(layout, strings.TrimSpace(ts)); err == nil {
			l.Time = t.UTC()
			break
		}
	}
	if l.Time.IsZero() || !platform.IsLogToken(l.ID) {
		return l, false
	}
	return l, true
}
