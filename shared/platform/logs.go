package platform

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// LogStore writes and queries bot and integration log lines: CloudWatch Logs
// (Insights) in AWS (shared/logstore.CloudWatch), an embedded file store
// locally (shared/logstore.Local). Both answer the same queries the same way
// (see docs/logs.md).
type LogStore interface {
	// Write appends lines durably. Each line names its log (Source); lines
	// without an ID or Time get one.
	Write(ctx context.Context, lines ...LogLine) error
	// Query returns one page of the lines of q.Source within [q.Start,
	// q.End] matching q's filters, newest first, and the cursor of the next
	// page (nil when there is none).
	Query(ctx context.Context, q LogQuery) (LogPage, error)
}

// LogKind says whose log a line belongs to.
type LogKind string

const (
	LogBot         LogKind = "bot"
	LogIntegration LogKind = "integration"
)

// LogSource is one log: a bot's or an integration version's.
type LogSource struct {
	Kind LogKind
	ID   string
}

// Valid reports whether s names a log: a known kind and an id of its shape
// (the id is used in file paths, stream names and queries, so it must be
// exactly an id).
func (s LogSource) Valid() bool {
	switch s.Kind {
	case LogBot:
		return HasPrefix(s.ID, PrefixBot)
	case LogIntegration:
		return HasPrefix(s.ID, PrefixIntegration)
	}
	return false
}

// Log levels. A line has one of these; the level filter takes one of them.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// LogLevels lists the levels, least severe first.
var LogLevels = []string{LevelDebug, LevelInfo, LevelWarn, LevelError}

// LogLine is one log line.
type LogLine struct {
	Source LogSource
	// ID identifies the line (unique); it breaks ties between lines of the
	// same millisecond when paging.
	ID      string
	Time    time.Time // millisecond precision
	Level   string
	Message string
	// What the line is about, where known.
	UserID, ConversationID, WorkflowID string
}

// PrefixLogLine is the prefix of log line ids.
const PrefixLogLine = "log_"

// MaxLogMessageBytes caps a line's message: longer ones are cut (on a rune
// boundary) and marked with "…". CloudWatch takes events of up to 256 KiB;
// a log line is a diagnostic, not a payload store.
const MaxLogMessageBytes = 8 << 10

// Normalize fills a line's missing ID, Time and Level, rounds Time to the
// millisecond and cuts an overlong message. Stores call it on write.
func (l *LogLine) Normalize() {
	if l.ID == "" {
		l.ID = NewID(PrefixLogLine)
	}
	if l.Time.IsZero() {
		l.Time = Clock()
	}
	l.Time = l.Time.UTC().Truncate(time.Millisecond)
	if l.Level == "" {
		l.Level = LevelInfo
	}
	if len(l.Message) > MaxLogMessageBytes {
		cut := MaxLogMessageBytes
		for cut > 0 && !utf8.RuneStart(l.Message[cut]) {
			cut--
		}
		l.Message = l.Message[:cut] + "…"
	}
	l.Message = strings.ToValidUTF8(l.Message, "\uFFFD")
}

// LogQuery asks for one page of a log.
type LogQuery struct {
	Source LogSource
	// Start and End bound the lines' times, both inclusive.
	Start, End time.Time
	// Filters; empty means any. Level, UserID, ConversationID and
	// WorkflowID match exactly; MessageContains is a case-sensitive
	// substring of the message.
	Level, UserID, ConversationID, WorkflowID string
	MessageContains                           string
	// Limit is the page size (1..MaxLogPage).
	Limit int
	// Cursor is LogPage.Next of the previous page (nil for the first).
	Cursor map[string]string
}

// MaxLogPage is the largest page of log lines.
const MaxLogPage = 100

// MaxMessageContains caps the messageContains filter (in runes).
const MaxMessageContains = 500

// LogPage is one page of log lines, newest first.
type LogPage struct {
	Lines []LogLine
	// Next continues the list; nil at its end.
	Next map[string]string
	// Scanned counts the lines the store read to make the page (the
	// embedded store; CloudWatch reports its own statistics).
	Scanned int
}

// Check validates a query: the source, the window, the page size and every
// filter. Filter values other than MessageContains are ids or levels: they
// must be made of id characters (letters, digits, _ - . : @), which keeps
// every store's query unambiguous; MessageContains may be any text.
func (q LogQuery) Check() error {
	if !q.Source.Valid() {
		return NotFound(string(q.Source.Kind), q.Source.ID)
	}
	if q.Start.IsZero() || q.End.IsZero() {
		return Invalid("timeStart is required")
	}
	if q.End.Before(q.Start) {
		return Invalid("timeEnd must not be before timeStart")
	}
	if q.Limit < 1 || q.Limit > MaxLogPage {
		return Invalid("pageSize must be an integer from 1 to %d", MaxLogPage)
	}
	if q.Level != "" && !IsLogLevel(q.Level) {
		return Invalid("query parameter \"level\" must be one of %s", strings.Join(LogLevels, ", "))
	}
	for _, f := range []struct{ name, v string }{
		{"userId", q.UserID}, {"conversationId", q.ConversationID}, {"workflowId", q.WorkflowID},
	} {
		if f.v != "" && !IsLogToken(f.v) {
			return Invalid("query parameter %q must be an id (at most 128 letters, digits or _ - . : @)", f.name)
		}
	}
	if !utf8.ValidString(q.MessageContains) {
		return Invalid("query parameter \"messageContains\" must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(q.MessageContains); n > MaxMessageContains {
		return Invalid("query parameter \"messageContains\" must be at most %d characters", MaxMessageContains)
	}
	return nil
}

// IsLogLevel reports whether s is a log level.
func IsLogLevel(s string) bool {
	for _, l := range LogLevels {
		if s == l {
			return true
		}
	}
	return false
}

// IsLogToken reports whether s can be a filter value of an id field: 1 to
// 128 characters of [A-Za-z0-9_.:@-].
func IsLogToken(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.' || c == ':' || c == '@') {
			return false
		}
	}
	return true
}

// Matches reports whether l passes q's filters and window (the embedded
// store's filter; CloudWatch applies the same in its query).
func (q LogQuery) Matches(l LogLine) bool {
	if l.Time.Before(q.Start) || l.Time.After(q.End) {
		return false
	}
	return (q.Level == "" || l.Level == q.Level) &&
		(q.UserID == "" || l.UserID == q.UserID) &&
		(q.ConversationID == "" || l.ConversationID == q.ConversationID) &&
		(q.WorkflowID == "" || l.WorkflowID == q.WorkflowID) &&
		(q.MessageContains == "" || strings.Contains(l.Message, q.MessageContains))
}

// LogEntry is a log line on the wire (getBotLogs, getIntegrationLogs).
type LogEntry struct {
	Timestamp      string `json:"timestamp"`
	Level          string `json:"level"`
	Message        string `json:"message"`
	WorkflowID     string `json:"workflowId,omitempty"`
	UserID         string `json:"userId,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
}

// Entry is l on the wire.
func (l LogLine) Entry() LogEntry {
	return LogEntry{
		Timestamp: FormatTime(l.Time), Level: l.Level, Message: l.Message,
		WorkflowID: l.WorkflowID, UserID: l.UserID, ConversationID: l.ConversationID,
	}
}

// String renders a line for debugging.
func (l LogLine) String() string {
	return fmt.Sprintf("%s %s/%s %s %s", FormatTime(l.Time), l.Source.Kind, l.Source.ID, l.Level, l.Message)
}
