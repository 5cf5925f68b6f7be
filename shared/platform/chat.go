package platform

import (
	"encoding/json"
	"time"
)

// Id prefixes of the Chat API's records (prefix + ULID: 30 to 32 characters,
// within the reference's 28..36).
const (
	PrefixConversation = "conv_"
	PrefixUser         = "user_"
	PrefixMessage      = "msg_"
	PrefixEvent        = "evt_"
	PrefixState        = "state_"
)

// Conversation is an exchange of messages in one channel of an integration.
// MessageCount is kept exact by the store (an atomic counter changed in the
// transaction that creates or deletes a message). Properties is part of the
// specification's shape; no operation of the reference sets it yet.
type Conversation struct {
	ID           string            `json:"id"`
	CreatedAt    string            `json:"createdAt"`
	UpdatedAt    string            `json:"updatedAt"`
	Channel      string            `json:"channel"`
	Integration  string            `json:"integration"`
	Tags         map[string]string `json:"tags"`
	MessageCount int64             `json:"messageCount"`
	Properties   map[string]string `json:"properties"`
}

// User is someone talking to a bot through one integration.
type User struct {
	ID         string            `json:"id"`
	CreatedAt  string            `json:"createdAt"`
	UpdatedAt  string            `json:"updatedAt"`
	Tags       map[string]string `json:"tags"`
	Name       string            `json:"name,omitempty"`
	PictureURL string            `json:"pictureUrl,omitempty"`
	// Integration is the integration the user belongs to (not on the wire;
	// getOrCreateUser matches users within one integration).
	Integration string `json:"-"`
}

// Message directions.
const (
	DirectionIncoming = "incoming" // written by an integration (a user spoke)
	DirectionOutgoing = "outgoing" // written by the bot
)

// Message is one message of a conversation.
type Message struct {
	ID             string            `json:"id"`
	CreatedAt      string            `json:"createdAt"`
	UpdatedAt      string            `json:"updatedAt"`
	Type           string            `json:"type"`
	Payload        json.RawMessage   `json:"payload"`
	Direction      string            `json:"direction"`
	UserID         string            `json:"userId"`
	ConversationID string            `json:"conversationId"`
	Tags           map[string]string `json:"tags"`
	Origin         string            `json:"origin,omitempty"`
}

// Event statuses (the reference's enumeration).
const (
	EventPending   = "pending"
	EventScheduled = "scheduled"
	EventCanceled  = "canceled"
)

// Event is something that happened to a bot, optionally linked to a
// conversation, user and message.
type Event struct {
	ID             string          `json:"id"`
	CreatedAt      string          `json:"createdAt"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	ConversationID string          `json:"conversationId,omitempty"`
	UserID         string          `json:"userId,omitempty"`
	MessageID      string          `json:"messageId,omitempty"`
	Status         string          `json:"status"`
	FailureReason  *string         `json:"failureReason"`
	// Not on the wire (the reference's Event has no such fields).
	WorkflowID   string `json:"-"`
	ScheduledFor string `json:"-"`
}

// EventRetention is how long an event is kept after it was created, or
// after the time it is scheduled for when that is later: recurring events
// create one per firing, and none may accumulate for good. DynamoDB's TTL
// deletes expired events; until then (and locally, where nothing deletes
// them) reads treat them as gone.
const EventRetention = 30 * 24 * time.Hour

// ExpiresAt is when the event stops being kept (see EventRetention).
func (e Event) ExpiresAt() time.Time {
	at, _ := time.Parse(time.RFC3339Nano, e.CreatedAt)
	if s, err := time.Parse(time.RFC3339Nano, e.ScheduledFor); err == nil && s.After(at) {
		at = s
	}
	return at.Add(EventRetention)
}

// Expired reports whether the event is past its retention at now.
func (e Event) Expired(now time.Time) bool { return !now.Before(e.ExpiresAt()) }

// StateType is what a state is attached to.
type StateType string

const (
	StateConversation StateType = "conversation"
	StateUser         StateType = "user"
	StateBot          StateType = "bot"
	StateIntegration  StateType = "integration"
	StateWorkflow     StateType = "workflow"
)

// Valid reports whether t is one of the specification's state types.
func (t StateType) Valid() bool {
	switch t {
	case StateConversation, StateUser, StateBot, StateIntegration, StateWorkflow:
		return true
	}
	return false
}

// State is a named JSON payload attached to a conversation, user, bot,
// integration or workflow, declared (with its JSON schema) by the bot
// definition. Expiry is in milliseconds of idleness; ExpiresAt is when the
// state disappears unless written again.
type State struct {
	ID             string          `json:"id"`
	CreatedAt      string          `json:"createdAt"`
	UpdatedAt      string          `json:"updatedAt"`
	BotID          string          `json:"botId"`
	ConversationID string          `json:"conversationId,omitempty"`
	UserID         string          `json:"userId,omitempty"`
	Name           string          `json:"name"`
	Type           StateType       `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	Expiry         *int64          `json:"expiry,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
}

// StateKey names a state: its type, the id of what it is attached to, and
// its declared name, within a bot.
type StateKey struct {
	BotID   string    `json:"botId"`
	Type    StateType `json:"type"`
	OwnerID string    `json:"ownerId"`
	Name    string    `json:"name"`
}

// TagType is a kind of record carrying tags (listTagValues' type).
type TagType string

const (
	TagsOfUser         TagType = "user"
	TagsOfConversation TagType = "conversation"
	TagsOfMessage      TagType = "message"
)
