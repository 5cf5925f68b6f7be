package platform

import (
	"context"
	"time"
)

// Bot issues: failures of a bot's own code (a delivery to the bot's url
// answered with an error, or not answered) are recorded as issue events and
// grouped, by a stable code, into issues (listBotIssues, getBotIssue,
// deleteBotIssue, listBotIssueEvents). See docs/logs.md.

// Id prefixes of bot issues and their events.
const (
	PrefixIssue      = "iss_"
	PrefixIssueEvent = "issevt_"
)

// Issue categories of the reference. Failures of deliveries to the bot's
// url are user_code.
const (
	IssueUserCode      = "user_code"
	IssueLimits        = "limits"
	IssueConfiguration = "configuration"
	IssueOther         = "other"
)

// IssueValue is a value of an issue's groupedData or an event's data: the
// raw value and, optionally, a human-readable rendering.
type IssueValue struct {
	Raw    string `json:"raw"`
	Pretty string `json:"pretty,omitempty"`
}

// BotIssue is an issue in the reference's shape.
type BotIssue struct {
	ID             string                `json:"id"`
	Code           string                `json:"code"`
	CreatedAt      string                `json:"createdAt"`
	LastSeenAt     string                `json:"lastSeenAt"`
	Title          string                `json:"title"`
	Description    string                `json:"description"`
	GroupedData    map[string]IssueValue `json:"groupedData"`
	EventsCount    int64                 `json:"eventsCount"`
	Category       string                `json:"category"`
	ResolutionLink *string               `json:"resolutionLink"`
}

// BotIssueEvent is one occurrence of an issue.
type BotIssueEvent struct {
	ID        string                `json:"id"`
	CreatedAt string                `json:"createdAt"`
	Data      map[string]IssueValue `json:"data"`
}

// BotFailure is one failure of a bot to record: it becomes an event of the
// bot's issue of the same Code (created at the first occurrence).
type BotFailure struct {
	// Code groups failures: the same kind of failure has the same code
	// (at most MaxIssueCode bytes).
	Code string
	// Title, Description, Category, ResolutionLink and GroupedData describe
	// the issue; they are kept from its first occurrence.
	Title, Description string
	Category           string // default IssueUserCode
	ResolutionLink     string // optional
	GroupedData        map[string]IssueValue
	// Data describes this occurrence (the issue event).
	Data map[string]IssueValue
	// At is when it happened (default now).
	At time.Time
}

// MaxIssueCode caps an issue code.
const MaxIssueCode = 200

// IssueRecorder records bot failures (dynamo.Store implements it).
// Recording is concurrency-safe: simultaneous failures of one code make
// one issue whose eventsCount counts them all.
type IssueRecorder interface {
	RecordBotFailure(ctx context.Context, botID string, f BotFailure) (BotIssue, error)
}

// IssueEventRetention is how long an issue event is kept after it was
// recorded (DynamoDB's TTL deletes it; reads treat an older one as gone).
// An issue keeps at most MaxIssueEvents of its latest events anyway.
const IssueEventRetention = 90 * 24 * time.Hour

// Expired reports whether the issue event is past its retention at now.
func (e BotIssueEvent) Expired(now time.Time) bool {
	at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
	return err == nil && !now.Before(at.Add(IssueEventRetention))
}

// MaxIssueEvents is how many of its latest events an issue keeps (and
// listBotIssueEvents answers); eventsCount counts them all.
const MaxIssueEvents = 100
