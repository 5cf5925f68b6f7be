package logstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/platform"
)

type recorder struct {
	mu       sync.Mutex
	failures []platform.BotFailure
}

func (r *recorder) RecordBotFailure(_ context.Context, botID string, f platform.BotFailure) (platform.BotIssue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, f)
	return platform.BotIssue{}, nil
}

func TestObserver(t *testing.T) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	rec := func(o delivery.Outcome, status int, url, err string) delivery.Result {
		return delivery.Result{Kind: "recurring_event", BotID: testBot, Name: "tick", EventID: "evt_1", EventType: "ping",
			URL: url, Outcome: o, StatusCode: status, Error: err, At: at, Duration: 42 * time.Millisecond}
	}
	for _, tc := range []struct {
		name      string
		r         delivery.Result
		level     string
		msg       string
		code      string
		category  string
		noFailure bool
	}{
		{"delivered", rec(delivery.Delivered, 200, "https://bot", ""), "info", `recurring event "tick": event evt_1 (type "ping") delivered to the bot (HTTP 200, 42 ms)`, "", "", true},
		{"error status", rec(delivery.Failed, 503, "https://bot", "answered 503: down"), "error", "not delivered to the bot: answered 503: down", "bot_http_503", "user_code", false},
		{"no answer", rec(delivery.OutcomeUnknown, 0, "https://bot", "sent, then no answer within 10s"), "error", "outcome unknown", CodeBotNoAnswer, "user_code", false},
		{"unreachable", rec(delivery.Failed, 0, "https://bot", "not sent: connection refused"), "error", "connection refused", CodeBotUnreachable, "user_code", false},
		{"no url", rec(delivery.Failed, 0, "", "the bot has no url to deliver events to"), "error", "no url", CodeBotNoURL, "configuration", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := LinesOf(tc.r)
			if len(lines) != 1 || lines[0].Source != botSrc || lines[0].Level != tc.level || !strings.Contains(lines[0].Message, tc.msg) || !lines[0].Time.Equal(at) {
				t.Fatalf("lines: %+v", lines)
			}
			f, ok := FailureOf(tc.r)
			if ok == tc.noFailure {
				t.Fatalf("failure recorded: %v", ok)
			}
			if ok && (f.Code != tc.code || f.Category != tc.category || f.Title == "" || f.Description == "" || f.Data["recurringEvent"].Raw != "tick") {
				t.Fatalf("failure: %+v", f)
			}
		})
	}
	// The same kind of failure always has the same code and title.
	a, _ := FailureOf(rec(delivery.Failed, 500, "https://bot", "answered 500: x"))
	b, _ := FailureOf(rec(delivery.Failed, 500, "https://bot", "answered 500: y"))
	if a.Code != b.Code || a.Title != b.Title || a.Description != b.Description {
		t.Fatalf("not stable: %+v / %+v", a, b)
	}

	// A call to an integration: a line in both logs, no bot issue.
	call := delivery.Result{Kind: "register", BotID: testBot, IntegrationID: testInt, Name: "main", OperationID: "intop_1",
		Outcome: delivery.Failed, StatusCode: 500, Error: "answered 500", At: at}
	lines := LinesOf(call)
	if len(lines) != 2 || lines[0].Source != botSrc || lines[1].Source.ID != testInt ||
		!strings.Contains(lines[1].Message, "register for bot "+testBot+` (alias "main") not delivered`) || !strings.Contains(lines[0].Message, "[operation intop_1]") {
		t.Fatalf("integration call lines: %+v", lines)
	}
	if _, ok := FailureOf(call); ok {
		t.Fatal("a failed call to an integration is not a bot issue")
	}

	// Through the observer, into a store and a recorder.
	s := openLocal(t, t.TempDir(), nil)
	r := &recorder{}
	obs := Observer(s, r, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the request is gone: still recorded
	obs(ctx, rec(delivery.Failed, 500, "https://bot", "answered 500"))
	obs(ctx, call)
	got := all(t, s, platform.LogQuery{Source: botSrc, Start: at.Add(-time.Minute), End: at.Add(time.Minute), Limit: 10})
	if len(got) != 2 || len(r.failures) != 1 || r.failures[0].Code != "bot_http_500" {
		t.Fatalf("observer: %d lines, failures %+v", len(got), r.failures)
	}
	Observer(nil, nil, nil)(ctx, call) // no sinks: nothing to do
}

// A bot's reply in an emulator conversation is logged as such, never as a
// delivery to the bot, and never becomes an issue.
func TestObserverEmulatorReply(t *testing.T) {
	r := delivery.Result{Kind: "message_created", BotID: testBot, Name: platform.EmulatorIntegration, Outcome: delivery.Delivered, At: time.Now()}
	lines := LinesOf(r)
	if len(lines) != 1 || lines[0].Source.ID != testBot || !strings.Contains(lines[0].Message, "emulator") || strings.Contains(lines[0].Message, "to the bot") {
		t.Fatalf("lines: %+v", lines)
	}
	if _, ok := FailureOf(r); ok {
		t.Fatal("an emulator reply is not a failure")
	}
}
