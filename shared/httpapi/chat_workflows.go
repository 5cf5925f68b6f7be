package httpapi

import (
	"encoding/json"
	"time"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// DefaultWorkflowTimeout is a workflow's timeout when it names none.
const DefaultWorkflowTimeout = 5 * time.Minute

// workflowBody is the body of createWorkflow and getOrCreateWorkflow.
type workflowBody struct {
	Name               string            `json:"name"`
	Input              json.RawMessage   `json:"input"`
	ParentWorkflowID   string            `json:"parentWorkflowId"`
	ConversationID     string            `json:"conversationId"`
	UserID             string            `json:"userId"`
	TimeoutAt          *string           `json:"timeoutAt"`
	Tags               map[string]string `json:"tags"`
	Status             string            `json:"status"`
	EventID            string            `json:"eventId"`
	DiscriminateByTags []string          `json:"discriminateByTags"`
}

// newWorkflow validates a creation body and builds the workflow.
func newWorkflow(in workflowBody) (platform.Workflow, error) {
	now := platform.Clock()
	if in.Name == "" || len(in.Name) > 200 {
		return platform.Workflow{}, platform.Invalid("invalid body: field %q: 1 to 200 characters", "name")
	}
	if in.Status == platform.WorkflowInProgress && in.EventID == "" {
		return platform.Workflow{}, platform.Invalid("invalid body: field %q: an event id must be given when the workflow starts in_progress", "eventId")
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return platform.Workflow{}, err
	}
	w := platform.Workflow{
		ID: platform.NewID(platform.PrefixWorkflow), Name: in.Name, Status: in.Status, Input: in.Input, Output: json.RawMessage(`{}`),
		ParentWorkflowID: in.ParentWorkflowID, ConversationID: in.ConversationID, UserID: in.UserID,
		CreatedAt: platform.FormatTime(now), UpdatedAt: platform.FormatTime(now),
		TimeoutAt: platform.FormatTime(now.Add(DefaultWorkflowTimeout)), Tags: chat.ApplyTags(nil, in.Tags),
	}
	if len(w.Input) == 0 || string(w.Input) == "null" {
		w.Input = json.RawMessage(`{}`)
	}
	if in.TimeoutAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *in.TimeoutAt)
		if err != nil {
			return platform.Workflow{}, platform.Invalid("invalid body: field %q: must be an ISO 8601 date-time", "timeoutAt")
		}
		w.TimeoutAt = platform.FormatTime(t)
	}
	return w, nil
}

func (s *server) createWorkflow(c *call) (any, error) {
	var in workflowBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.DiscriminateByTags != nil {
		return nil, platform.Invalid("invalid body: field %q: only getOrCreateWorkflow takes it", "discriminateByTags")
	}
	w, err := newWorkflow(in)
	if err != nil {
		return nil, err
	}
	if err := s.Store.CreateWorkflow(c.ctx, c.bot.ID, w); err != nil {
		return nil, err
	}
	return map[string]any{"workflow": w}, nil
}

func (s *server) getOrCreateWorkflow(c *call) (any, error) {
	var in workflowBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	w, err := newWorkflow(in)
	if err != nil {
		return nil, err
	}
	keys, err := chat.Discriminators(w.Tags, in.DiscriminateByTags)
	if err != nil {
		return nil, err
	}
	w, _, err = s.Store.GetOrCreateWorkflow(c.ctx, c.bot.ID, w, keys)
	if err != nil {
		return nil, err
	}
	return map[string]any{"workflow": w}, nil
}

func (s *server) getWorkflow(c *call) (any, error) {
	w, err := s.Store.GetWorkflow(c.ctx, c.bot.ID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"workflow": w}, nil
}

func (s *server) updateWorkflow(c *call) (any, error) {
	var in struct {
		Output        json.RawMessage   `json:"output"`
		TimeoutAt     *string           `json:"timeoutAt"`
		Status        string            `json:"status"`
		FailureReason *string           `json:"failureReason"`
		Tags          map[string]string `json:"tags"`
		UserID        *string           `json:"userId"`
		EventID       string            `json:"eventId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	if in.Status == platform.WorkflowInProgress && in.EventID == "" {
		return nil, platform.Invalid("invalid body: field %q: an event id must be given when the workflow goes in_progress", "eventId")
	}
	var timeoutAt string
	if in.TimeoutAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *in.TimeoutAt)
		if err != nil {
			return nil, platform.Invalid("invalid body: field %q: must be an ISO 8601 date-time", "timeoutAt")
		}
		timeoutAt = platform.FormatTime(t)
	}
	w, err := s.Store.UpdateWorkflow(c.ctx, c.bot.ID, c.PathValue("id"), func(w *platform.Workflow) (string, error) {
		if platform.WorkflowDone(w.Status) && in.Status != "" && in.Status != w.Status {
			return "", platform.Errorf(platform.ErrInvalidPayload, "the workflow is %s: its status cannot change any more", w.Status)
		}
		now := platform.FormatTime(platform.Clock())
		update := ""
		if in.Status != "" && in.Status != w.Status {
			// A paused or listening workflow picked up again.
			if (w.Status == platform.WorkflowListening || w.Status == platform.WorkflowPaused) && in.Status == platform.WorkflowInProgress {
				update = "workflow_continued"
			}
			w.Status = in.Status
			if platform.WorkflowDone(w.Status) {
				w.CompletedAt = now
			}
		}
		if len(in.Output) > 0 && string(in.Output) != "null" {
			w.Output = in.Output
		}
		if in.FailureReason != nil {
			w.FailureReason = *in.FailureReason
		}
		if timeoutAt != "" {
			w.TimeoutAt = timeoutAt
		}
		if in.UserID != nil {
			w.UserID = *in.UserID
		}
		w.Tags = chat.ApplyTags(w.Tags, in.Tags)
		w.UpdatedAt = now
		return update, nil
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"workflow": w}, nil
}

func (s *server) deleteWorkflow(c *call) (any, error) {
	return nil, s.Store.DeleteWorkflow(c.ctx, c.bot.ID, c.PathValue("id"))
}

func (s *server) listWorkflows(c *call) (any, error) {
	q := c.query()
	f := dynamo.WorkflowFilter{BotID: c.bot.ID, Tags: q.object("tags"), Statuses: q.v["statuses"]}
	if len(f.Statuses) == 0 {
		f.Statuses = q.v["statuses[]"]
	}
	for _, st := range f.Statuses {
		switch st {
		case platform.WorkflowPending, platform.WorkflowInProgress, platform.WorkflowFailed, platform.WorkflowCompleted,
			platform.WorkflowListening, platform.WorkflowPaused, platform.WorkflowTimedOut, platform.WorkflowCancelled:
		default:
			return nil, platform.Invalid("query parameter %q: unknown status %q", "statuses", st)
		}
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"conversationId", &f.ConversationID}, {"userId", &f.UserID}, {"parentWorkflowId", &f.ParentWorkflowID}, {"name", &f.Name}} {
		v, err := q.str(p.name)
		if err != nil {
			return nil, err
		}
		*p.dst = v
	}
	return listPage(c, "workflows", listKey(f), func(p dynamo.Page) ([]platform.Workflow, map[string]string, error) {
		return s.Store.ListWorkflows(c.ctx, f, p)
	})
}
