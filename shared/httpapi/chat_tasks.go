package httpapi

import (
	"encoding/json"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// DefaultTaskTimeout is a task's timeout when its creation names none.
const DefaultTaskTimeout = 24 * time.Hour

// The reference's Task answers a title of at most 64 characters and a
// description of at most 256 (its request bodies allow more): longer ones
// are refused, so every task answered conforms.
const (
	maxTaskTitle       = 64
	maxTaskDescription = 256
)

func checkTaskText(title, description *string) error {
	if title != nil && utf8.RuneCountInString(*title) > maxTaskTitle {
		return platform.Invalid("invalid body: field %q: at most %d characters", "title", maxTaskTitle)
	}
	if description != nil && utf8.RuneCountInString(*description) > maxTaskDescription {
		return platform.Invalid("invalid body: field %q: at most %d characters", "description", maxTaskDescription)
	}
	return nil
}

func taskTime(field string, v *string) (string, error) {
	if v == nil {
		return "", nil
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		return "", platform.Invalid("invalid body: field %q: must be an ISO 8601 date-time", field)
	}
	return platform.FormatTime(t), nil
}

func objectOrEmpty(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return json.RawMessage(`{}`)
	}
	return v
}

func (s *server) createTask(c *call) (any, error) {
	var in struct {
		Title          *string           `json:"title"`
		Description    *string           `json:"description"`
		Type           string            `json:"type"`
		Data           json.RawMessage   `json:"data"`
		ParentTaskID   string            `json:"parentTaskId"`
		ConversationID string            `json:"conversationId"`
		UserID         string            `json:"userId"`
		TimeoutAt      *string           `json:"timeoutAt"`
		Tags           map[string]string `json:"tags"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.Type == "" {
		return nil, platform.Invalid("invalid body: field %q: must not be empty", "type")
	}
	if in.ConversationID == "" {
		return nil, platform.Invalid("invalid body: field %q: must not be empty", "conversationId")
	}
	if err := checkTaskText(in.Title, in.Description); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	now := platform.Clock()
	t := platform.Task{
		ID: platform.NewID(platform.PrefixTask), Type: in.Type, Data: objectOrEmpty(in.Data), Status: platform.TaskPending,
		ParentTaskID: in.ParentTaskID, ConversationID: in.ConversationID, UserID: in.UserID,
		TimeoutAt: platform.FormatTime(now.Add(DefaultTaskTimeout)), CreatedAt: platform.FormatTime(now), UpdatedAt: platform.FormatTime(now),
		Tags: chat.ApplyTags(nil, in.Tags),
	}
	if in.Title != nil {
		t.Title = *in.Title
	}
	if in.Description != nil {
		t.Description = *in.Description
	}
	at, err := taskTime("timeoutAt", in.TimeoutAt)
	if err != nil {
		return nil, err
	}
	if at != "" {
		t.TimeoutAt = at
	}
	if err := s.Store.CreateTask(c.ctx, c.bot.ID, t); err != nil {
		return nil, err
	}
	return map[string]any{"task": t}, nil
}

func (s *server) getTask(c *call) (any, error) {
	t, err := s.Store.GetTask(c.ctx, c.bot.ID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"task": t}, nil
}

func (s *server) updateTask(c *call) (any, error) {
	var in struct {
		Title       *string           `json:"title"`
		Description *string           `json:"description"`
		Data        json.RawMessage   `json:"data"`
		TimeoutAt   *string           `json:"timeoutAt"`
		Status      string            `json:"status"`
		Tags        map[string]string `json:"tags"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := checkTaskText(in.Title, in.Description); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	timeoutAt, err := taskTime("timeoutAt", in.TimeoutAt)
	if err != nil {
		return nil, err
	}
	t, err := s.Store.UpdateTask(c.ctx, c.bot.ID, c.PathValue("id"), func(t *platform.Task) (string, error) {
		if platform.TaskDone(t.Status) && in.Status != "" && in.Status != t.Status {
			return "", platform.Errorf(platform.ErrInvalidPayload, "the task is %s: its status cannot change any more", t.Status)
		}
		if in.Status != "" {
			t.Status = in.Status
		}
		if in.Title != nil {
			t.Title = *in.Title
		}
		if in.Description != nil {
			t.Description = *in.Description
		}
		if len(in.Data) > 0 && string(in.Data) != "null" {
			t.Data = in.Data
		}
		if timeoutAt != "" {
			t.TimeoutAt = timeoutAt
		}
		t.Tags = chat.ApplyTags(t.Tags, in.Tags)
		t.UpdatedAt = platform.FormatTime(platform.Clock())
		return "task_updated", nil
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"task": t}, nil
}

func (s *server) deleteTask(c *call) (any, error) {
	return nil, s.Store.DeleteTask(c.ctx, c.bot.ID, c.PathValue("id"))
}

func (s *server) listTasks(c *call) (any, error) {
	q := c.query()
	tags, err := tagQuery(c)
	if err != nil {
		return nil, err
	}
	f := dynamo.TaskFilter{BotID: c.bot.ID, Tags: tags}
	f.Statuses, err = listQuery(c, "status")
	if err != nil {
		return nil, err
	}
	for _, st := range f.Statuses {
		if !slices.Contains(platform.TaskStatuses, st) {
			return nil, platform.Invalid("query parameter %q: unknown status %q", "status", st)
		}
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"conversationId", &f.ConversationID}, {"userId", &f.UserID}, {"parentTaskId", &f.ParentTaskID}, {"type", &f.Type}} {
		v, err := q.str(p.name)
		if err != nil {
			return nil, err
		}
		*p.dst = v
	}
	return listPage(c, "tasks", listKey(f), func(p dynamo.Page) ([]platform.Task, map[string]string, error) {
		return s.Store.ListTasks(c.ctx, f, p)
	})
}

// listActivities (admin): the activities of a task of a bot of the
// workspace, newest first.
func (s *server) listActivities(c *call) (any, error) {
	q := c.query()
	taskID, err := q.str("taskId")
	if err != nil {
		return nil, err
	}
	botID, err := q.str("botId")
	if err != nil {
		return nil, err
	}
	if taskID == "" || botID == "" {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "query parameters %q and %q are required", "taskId", "botId")
	}
	if _, err := s.botOfWorkspace(c, botID); err != nil {
		return nil, err
	}
	return listPage(c, "activities", listKey(botID, taskID), func(p dynamo.Page) ([]platform.Activity, map[string]string, error) {
		return s.Store.ListActivities(c.ctx, botID, taskID, p)
	})
}
