package platform

import "encoding/json"

// Tasks: the reference's (legacy) unit of work a bot tracks within a
// conversation, with its activities (docs/chat.md, "Tasks").

// PrefixTask starts task ids; PrefixActivity activity ids.
const (
	PrefixTask     = "task_"
	PrefixActivity = "activity_"
)

// Task statuses (the reference's enumeration).
const (
	TaskPending    = "pending"
	TaskInProgress = "in_progress"
	TaskFailed     = "failed"
	TaskCompleted  = "completed"
	TaskBlocked    = "blocked"
	TaskPaused     = "paused"
	TaskTimeout    = "timeout"
	TaskCancelled  = "cancelled"
)

// TaskStatuses lists the reference's task statuses.
var TaskStatuses = []string{TaskPending, TaskInProgress, TaskFailed, TaskCompleted, TaskBlocked, TaskPaused, TaskTimeout, TaskCancelled}

// TaskDone reports a status a task never leaves.
func TaskDone(status string) bool {
	switch status {
	case TaskFailed, TaskCompleted, TaskTimeout, TaskCancelled:
		return true
	}
	return false
}

// EventTaskUpdate is the event telling a bot what happened to one of its
// tasks (payload.type: task_created, task_updated, task_timedout).
const EventTaskUpdate = "task_update"

// DeliverTaskTimeout fails a task with the status timeout when its
// timeoutAt comes and it has not ended.
const DeliverTaskTimeout = "task_timeout"

// Task is a bot's task (the reference's shape).
type Task struct {
	ID             string            `json:"id"`
	Title          string            `json:"title"`
	Description    string            `json:"description"`
	Type           string            `json:"type"`
	Data           json.RawMessage   `json:"data"`
	Status         string            `json:"status"`
	ParentTaskID   string            `json:"parentTaskId,omitempty"`
	ConversationID string            `json:"conversationId,omitempty"`
	UserID         string            `json:"userId,omitempty"`
	TimeoutAt      string            `json:"timeoutAt"`
	CreatedAt      string            `json:"createdAt"`
	UpdatedAt      string            `json:"updatedAt"`
	FailureReason  string            `json:"failureReason,omitempty"`
	Tags           map[string]string `json:"tags"`
}

// Activity categories the platform records (the reference's enumeration
// has more: capture, bot_message, ...; nothing here records those).
const (
	ActivityTaskStatus = "task_status"
)

// Activity is one entry of a task's history (the reference's shape).
type Activity struct {
	ID          string          `json:"id"`
	Description string          `json:"description"`
	TaskID      string          `json:"taskId"`
	Category    string          `json:"category"`
	Data        json.RawMessage `json:"data"`
	CreatedAt   string          `json:"createdAt"`
}
