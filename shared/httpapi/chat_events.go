package httpapi

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

func (s *server) createEvent(c *call) (any, error) {
	var in struct {
		Type     string          `json:"type"`
		Payload  json.RawMessage `json:"payload"`
		Schedule *struct {
			DateTime *string  `json:"dateTime"`
			Delay    *float64 `json:"delay"`
		} `json:"schedule"`
		ConversationID string `json:"conversationId"`
		UserID         string `json:"userId"`
		WorkflowID     string `json:"workflowId"`
		MessageID      string `json:"messageId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	now := platform.Clock()
	e := platform.Event{
		ID: platform.NewID(platform.PrefixEvent), CreatedAt: platform.FormatTime(now),
		Type: in.Type, Payload: in.Payload, Status: platform.EventPending,
		ConversationID: in.ConversationID, UserID: in.UserID, MessageID: in.MessageID,
		WorkflowID: in.WorkflowID,
	}
	if sc := in.Schedule; sc != nil {
		switch {
		case (sc.DateTime == nil) == (sc.Delay == nil):
			return nil, platform.Invalid("invalid body: field %q: give either dateTime or delay", "schedule")
		case sc.DateTime != nil:
			t, err := time.Parse(time.RFC3339Nano, *sc.DateTime)
			if err != nil {
				return nil, platform.Invalid("invalid body: field %q: must be an ISO 8601 date-time", "schedule.dateTime")
			}
			e.ScheduledFor = platform.FormatTime(t)
		default:
			if *sc.Delay < 0 {
				return nil, platform.Invalid("invalid body: field %q: must not be negative", "schedule.delay")
			}
			e.ScheduledFor = platform.FormatTime(now.Add(time.Duration(*sc.Delay * float64(time.Millisecond))))
		}
		e.Status = platform.EventScheduled
	}
	// An integration's events reach the bot as <alias>:<type>.
	if alias := integrationOf(c, nil); alias != "" && !strings.HasPrefix(e.Type, alias+":") {
		e.Type = alias + ":" + e.Type
	}
	if err := s.Store.EmitEventWithinQuota(c.ctx, c.bot.ID, e); err != nil {
		return nil, err
	}
	return map[string]any{"event": e}, nil
}

func (s *server) getEvent(c *call) (any, error) {
	e, err := s.Store.ReadEvent(c.ctx, c.bot.ID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"event": e}, nil
}

func (s *server) listEvents(c *call) (any, error) {
	q := c.query()
	f := dynamo.EventFilter{BotID: c.bot.ID}
	for _, p := range []struct {
		name string
		dst  *string
	}{
		{"type", &f.Type}, {"conversationId", &f.ConversationID}, {"userId", &f.UserID},
		{"messageId", &f.MessageID}, {"workflowId", &f.WorkflowID},
	} {
		v, err := q.str(p.name)
		if err != nil {
			return nil, err
		}
		*p.dst = v
	}
	var err error
	if f.Status, err = q.oneOf("status", "", "pending", "ignored", "processed", "failed", "scheduled", "canceled"); err != nil {
		return nil, err
	}
	return listPage(c, "events", listKey(f), func(p dynamo.Page) ([]platform.Event, map[string]string, error) {
		return s.Store.ListEvents(c.ctx, f, p)
	})
}

func (s *server) cancelScheduledEvent(c *call) (any, error) {
	return nil, s.Store.CancelScheduledEvent(c.ctx, c.bot.ID, c.PathValue("id"))
}
