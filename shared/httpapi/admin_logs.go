package httpapi

import (
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Bot and integration logs (getBotLogs, getIntegrationLogs) and bot issues
// (listBotIssues, getBotIssue, deleteBotIssue, listBotIssueEvents). A bot's
// logs and issues are reached only through the bot's workspace, an
// integration's logs only through the workspace that owns it: any other
// id answers 404. See docs/logs.md.

var errNoLogs = platform.Errorf(platform.ErrInternal, "logs are not configured on this server")

func (s *server) getBotLogs(c *call) (any, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.logs(c, platform.LogSource{Kind: platform.LogBot, ID: b.ID})
}

func (s *server) getIntegrationLogs(c *call) (any, error) {
	id := c.PathValue("id")
	i, err := s.Store.GetIntegration(c.ctx, id)
	if err != nil {
		return nil, err
	}
	// Public integrations are readable by every workspace; their logs only
	// by the workspace that owns them.
	if i.WorkspaceID != c.workspaceID {
		return nil, platform.NotFound("integration", id)
	}
	return s.logs(c, platform.LogSource{Kind: platform.LogIntegration, ID: i.ID})
}

// logsPage is the answer of both log operations.
type logsPage struct {
	Logs      []platform.LogEntry `json:"logs"`
	NextToken string              `json:"nextToken,omitempty"`
}

// logs answers one page of a log, reading the query's window and filters.
func (s *server) logs(c *call, src platform.LogSource) (any, error) {
	q := c.query()
	var err error
	get := func(name string) string {
		v, e := q.str(name)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	lq := platform.LogQuery{
		Source: src, Level: get("level"), UserID: get("userId"), ConversationID: get("conversationId"),
		MessageContains: get("messageContains"),
	}
	start, end := get("timeStart"), get("timeEnd")
	workflow := get("workflowId")
	if err != nil {
		return nil, err
	}
	if workflow != "" && src.Kind != platform.LogBot {
		return nil, platform.Invalid("query parameter \"workflowId\" filters bot logs only")
	}
	lq.WorkflowID = workflow
	if start == "" {
		return nil, platform.Invalid("query parameter \"timeStart\" is required: an ISO 8601 timestamp, e.g. 2025-01-31T09:00:00.000Z")
	}
	if lq.Start, err = parseLogTime("timeStart", start); err != nil {
		return nil, err
	}
	lq.End = platform.Clock()
	if end != "" {
		if lq.End, err = parseLogTime("timeEnd", end); err != nil {
			return nil, err
		}
	}
	if lq.End.Before(lq.Start) {
		return nil, platform.Invalid("query parameter \"timeEnd\" must not be before \"timeStart\"")
	}
	// The token is bound to the log and to every filter as given.
	list := listKey(src.Kind, src.ID, start, end, lq.Level, lq.UserID, lq.ConversationID, lq.WorkflowID, lq.MessageContains)
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	lq.Limit, lq.Cursor = int(p.Limit), p.Start
	if err := lq.Check(); err != nil {
		return nil, err
	}
	if s.Logs == nil {
		return nil, errNoLogs
	}
	page, err := s.Logs.Query(c.ctx, lq)
	if err != nil {
		return nil, err
	}
	out := logsPage{Logs: make([]platform.LogEntry, 0, len(page.Lines))}
	for _, l := range page.Lines {
		out.Logs = append(out.Logs, l.Entry())
	}
	out.NextToken = c.meta(list, page.Next).NextToken
	return out, nil
}

// parseLogTime reads an ISO 8601 timestamp (RFC 3339, with or without
// fractional seconds, any offset).
func parseLogTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.Year() < 1970 || t.Year() > 9999 {
		return time.Time{}, platform.Invalid("query parameter %q must be an ISO 8601 timestamp, e.g. 2025-01-31T09:00:00.000Z", name)
	}
	return t.UTC(), nil
}

// --- Bot issues ---

func (s *server) listBotIssues(c *call) (any, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	p, err := c.page(b.ID)
	if err != nil {
		return nil, err
	}
	issues, next, err := s.Store.ListBotIssues(c.ctx, b.ID, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"issues": issues, "meta": c.meta(b.ID, next)}, nil
}

func (s *server) getBotIssue(c *call) (any, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	is, err := s.Store.GetBotIssue(c.ctx, b.ID, c.PathValue("issueId"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"issue": is}, nil
}

func (s *server) deleteBotIssue(c *call) (any, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return nil, s.Store.DeleteBotIssue(c.ctx, b.ID, c.PathValue("issueId"))
}

func (s *server) listBotIssueEvents(c *call) (any, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	is, err := s.Store.GetBotIssue(c.ctx, b.ID, c.PathValue("issueId"))
	if err != nil {
		return nil, err
	}
	evs, err := s.Store.ListBotIssueEvents(c.ctx, is.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"issueEvents": evs}, nil
}
