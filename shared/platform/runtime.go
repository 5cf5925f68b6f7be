package platform

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
)

// Delivery is one entry of the outbox: written in the same transaction as
// what it delivers, removed once delivered or given up. Deliveries of one
// conversation go out in the order they were written.
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
}
