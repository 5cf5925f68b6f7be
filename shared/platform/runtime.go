package platform

import (
	"encoding/json"
	"time"
)

// The runtime: what the platform delivers to bots and integrations, and
// how each delivery's life is recorded (docs/runtime.md).

// Event statuses a delivery sets (the reference's enumeration).
const (
	EventProcessed = "processed"
	EventFailed    = "failed"
	EventIgnored   = "ignored"
)

// EventMessageCreated is the event of an incoming message.
const EventMessageCreated = "message_created"

// Delivery kinds.
const (
	// DeliverEvent sends a stored event to its bot (event_received).
	DeliverEvent = "event"
	// DeliverOutgoing sends a message the bot wrote to the integration of
	// its conversation (message_created).
	DeliverOutgoing = "outgoing_message"
	// DeliverStateExpiry checks, when a state with an expiry runs out, that
	// it was not renewed since, and then emits a state_expired event.
	DeliverStateExpiry = "state_expiry"
	// DeliverRegister calls register on an installation again, on the
	// schedule its integration asked for (configureIntegration's
	// scheduleRegisterCall), then queues the next call.
	DeliverRegister = "register"
)

// EmulatorIntegration is the platform's built-in channel: the web
// console's emulator writes a user's messages under this integration alias
// (x-integration-alias: emulator, with the developer's own token) and reads
// the bot's replies back with listMessages. A bot's reply to such a
// conversation has nowhere further to go, so the dispatcher acknowledges it
// in-process (no network call). A bot that installs an integration of its
// own under this alias keeps it: the installation wins (docs/console.md).
const EmulatorIntegration = "emulator"

// EventStateExpired is the event of a state whose expiry ran out.
const EventStateExpired = "state_expired"

// Delivery is one entry of the outbox: written in the same transaction as
// what it delivers, removed once delivered or given up. Deliveries of one
// conversation to one receiver (the bot, or the conversation's
// integration) go out in the order they were written.
type Delivery struct {
	ID             string `json:"id"`
	Kind           string `json:"kind"`
	BotID          string `json:"botId"`
	ConversationID string `json:"conversationId,omitempty"`
	EventID        string `json:"eventId,omitempty"`
	MessageID      string `json:"messageId,omitempty"`
	CreatedAt      string `json:"createdAt"`
	// DueAt is when it may go out (a scheduled event, a retry's backoff).
	DueAt    string `json:"dueAt"`
	Attempts int    `json:"attempts"`
	// LastError is why the last attempt failed.
	LastError string `json:"lastError,omitempty"`
	// Trace is the W3C traceparent of the request that queued it: its
	// delivery continues that trace (shared/tracing).
	Trace string `json:"trace,omitempty"`
	// State and ExpiresAt: the state of a DeliverStateExpiry and the
	// expiry it was written with (for a DeliverWorkflowTimeout, the
	// workflow's timeoutAt, WorkflowID its id).
	WorkflowID string `json:"workflowId,omitempty"`
	// TaskID: the task of a DeliverTaskTimeout (ExpiresAt its timeoutAt).
	TaskID    string    `json:"taskId,omitempty"`
	State     *StateKey `json:"state,omitempty"`
	ExpiresAt string    `json:"expiresAt,omitempty"`
	// Alias, Ticket and WebhookURL: the installation of a DeliverRegister,
	// the schedule ticket it was queued under (a changed schedule makes
	// the entry stale) and the webhookUrl register() is given.
	Alias      string `json:"alias,omitempty"`
	Ticket     string `json:"ticket,omitempty"`
	WebhookURL string `json:"webhookUrl,omitempty"`
	// Settles: the event's status is derived from this entry (pending
	// while it is there, processed once it is removed), so a delivery
	// that succeeds writes nothing on the event; other outcomes are
	// written before the entry is removed.
	Settles bool `json:"settles,omitempty"`
	// EventType is the event's type when the delivery can rebuild the
	// event without reading it (message_created: from its message).
	EventType string `json:"eventType,omitempty"`
	// Prepaid: the bot's invocation for this delivery is already counted,
	// in the usage write of what queued it (a user's message: its
	// message_created delivery); the first attempt that reaches the bot
	// uses it, a delivery that ends with none gives it back as its entry
	// is removed. Held by the outbox entry (an attribute of its own, not
	// its document), so the attempt's retry write can clear it.
	Prepaid bool `json:"-"`
	// PrepaidIn is the usage period (yyyy-mm) that counted a Prepaid
	// delivery's invocation, where a refund goes; "" when unknown (its
	// creation's month then).
	PrepaidIn string `json:"-"`
	// Shard: the outbox partition the entry was read from (set by the
	// store's reads, so that its lease, retry and removal go to where it
	// is: an entry queued before the outbox had a lane per receiver may
	// be in its conversation's bot lane whatever its kind); "" for a new
	// delivery, whose kind and conversation give its shard.
	Shard string `json:"-"`
	// Message: a user's message as its write stored it, carried by its
	// message_created delivery when small, so the delivery need not read
	// it again (unless a message of its conversation changed since).
	Message json.RawMessage `json:"message,omitempty"`
}

// PrefixWorkflow starts workflow ids.
const PrefixWorkflow = "wflow_"

// Workflow statuses (the reference's enumeration).
const (
	WorkflowPending    = "pending"
	WorkflowInProgress = "in_progress"
	WorkflowFailed     = "failed"
	WorkflowCompleted  = "completed"
	WorkflowListening  = "listening"
	WorkflowPaused     = "paused"
	WorkflowTimedOut   = "timedout"
	WorkflowCancelled  = "cancelled"
)

// WorkflowDone reports a status a workflow never leaves.
func WorkflowDone(status string) bool {
	switch status {
	case WorkflowFailed, WorkflowCompleted, WorkflowTimedOut, WorkflowCancelled:
		return true
	}
	return false
}

// EventWorkflowUpdate is the event telling a bot what happened to one of
// its workflows (payload.type: workflow_started, workflow_timedout, ...).
const EventWorkflowUpdate = "workflow_update"

// DeliverWorkflowTimeout times a workflow out when its timeoutAt comes and
// it has not ended.
const DeliverWorkflowTimeout = "workflow_timeout"

// Workflow is a bot's workflow (the reference's shape).
type Workflow struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Status           string            `json:"status"`
	Input            json.RawMessage   `json:"input"`
	Output           json.RawMessage   `json:"output"`
	ParentWorkflowID string            `json:"parentWorkflowId,omitempty"`
	ConversationID   string            `json:"conversationId,omitempty"`
	UserID           string            `json:"userId,omitempty"`
	CreatedAt        string            `json:"createdAt"`
	UpdatedAt        string            `json:"updatedAt"`
	CompletedAt      string            `json:"completedAt,omitempty"`
	FailureReason    string            `json:"failureReason,omitempty"`
	TimeoutAt        string            `json:"timeoutAt"`
	Tags             map[string]string `json:"tags"`
}

// RegisterSchedules are configureIntegration's scheduleRegisterCall values
// (the reference's enumeration), each with its period in months or days.
var RegisterSchedules = map[string]struct{ Months, Days, Hours int }{
	"hourly":     {Hours: 1},
	"daily":      {Days: 1},
	"weekly":     {Days: 7},
	"bi-weekly":  {Days: 14},
	"monthly":    {Months: 1},
	"bi-monthly": {Months: 2},
	"quarterly":  {Months: 3},
	"yearly":     {Months: 12},
}

// NextRegister is when a register() on schedule s is next due after from,
// false for an unknown schedule.
func NextRegister(s string, from time.Time) (time.Time, bool) {
	p, ok := RegisterSchedules[s]
	if !ok {
		return time.Time{}, false
	}
	return from.AddDate(0, p.Months, p.Days).Add(time.Duration(p.Hours) * time.Hour), true
}
