package logstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

const (
	testBot = "bot_01HZZZZZZZZZZZZZZZZZZZZZZ1"
	testInt = "intver_01HZZZZZZZZZZZZZZZZZZZZZZ1"
)

var botSrc = platform.LogSource{Kind: platform.LogBot, ID: testBot}

func newCW(t *testing.T) (*CloudWatch, *fakeCW) {
	f, client := newFakeCW(t)
	return &CloudWatch{Client: client, BotGroup: DefaultBotGroup, IntegrationGroup: DefaultIntegrationGroup,
		PollInterval: time.Millisecond, QueryTimeout: 5 * time.Second}, f
}

// TestInsightsQueryString pins the query sent for a page with every filter.
func TestInsightsQueryString(t *testing.T) {
	cw, f := newCW(t)
	start := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	_, err := cw.Query(context.Background(), platform.LogQuery{
		Source: botSrc, Start: start, End: end, Limit: 20,
		Level: "error", UserID: "user_1", ConversationID: "conv_2", WorkflowID: "wf_3", MessageContains: `a "b" | c`,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `fields @timestamp, id, level, message, userId, conversationId, workflowId
| filter botId = "` + testBot + `"
| filter toMillis(@timestamp) >= 1740823200000 and toMillis(@timestamp) <= 1740826800000
| filter level = "error"
| filter userId = "user_1"
| filter conversationId = "conv_2"
| filter workflowId = "wf_3"
| filter message like /a\x{20}\x{22}b\x{22}\x{20}\x{7C}\x{20}c/
| sort @timestamp desc
| limit 21`
	if len(f.sent) != 1 || f.sent[0] != want {
		t.Fatalf("query sent:\n%s\nwant:\n%s", strings.Join(f.sent, "\n---\n"), want)
	}
	if g := f.lastStart["logGroupName"]; g != DefaultBotGroup {
		t.Errorf("log group %v", g)
	}
	if s, e := num(f.lastStart, "startTime"), num(f.lastStart, "endTime"); s != start.Unix() || e != end.Unix()+1 {
		t.Errorf("startTime %d endTime %d", s, e)
	}
	if l := num(f.lastStart, "limit"); l != 21 {
		t.Errorf("limit %d", l)
	}

	// Integrations query their own group and field.
	_, err = cw.Query(context.Background(), platform.LogQuery{Source: platform.LogSource{Kind: platform.LogIntegration, ID: testInt}, Start: start, End: end, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.sent[1], `| filter integrationId = "`+testInt+`"`) || f.lastStart["logGroupName"] != DefaultIntegrationGroup {
		t.Fatalf("integration query: %s (group %v)", f.sent[1], f.lastStart["logGroupName"])
	}
}

// hostile are filter values meant to break out of a query literal.
var hostile = []string{
	`"`, `\`, `\"`, `"|`, `|`, `| limit 1`, `" | filter level = "info`, `/`, `\/`, `/ or 1=1 /`,
	`.*`, `^`, `$`, `(`, `)`, `[a-z]`, `{2}`, `+?`, `a|b`, `#`, `# comment`, "\n| limit 1", "\t",
	`'`, "`", `%`, `\x{41}`, `\Q`, `\E`, `\\`, `'; drop`, "é", "日本", "🙂", `\u0022`,
}

// TestInsightsHostileMessageContains proves, on the fake's strict parser
// and Go's regexp, that no messageContains value changes the query: the
// query always parses into the same commands, and the page holds exactly
// the lines whose message contains the value.
func TestInsightsHostileMessageContains(t *testing.T) {
	cw, f := newCW(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var lines []platform.LogLine
	for i, h := range hostile {
		lines = append(lines,
			platform.LogLine{Source: botSrc, Time: now.Add(time.Duration(-i) * time.Second), Level: "info", Message: "before " + h + " after"},
			platform.LogLine{Source: botSrc, Time: now.Add(time.Duration(-i)*time.Second - time.Millisecond), Level: "info", Message: "plain line " + fmt.Sprint(i)},
		)
	}
	if err := cw.Write(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
	for _, h := range hostile {
		t.Run(fmt.Sprintf("%q", h), func(t *testing.T) {
			n := len(f.sent)
			page, err := cw.Query(context.Background(), platform.LogQuery{Source: botSrc, Start: now.Add(-time.Hour), End: now, Limit: 100, MessageContains: h})
			if err != nil {
				t.Fatal(err)
			}
			qs := f.sent[n]
			cmds, err := splitCommands(qs)
			if err != nil || len(cmds) != 6 {
				t.Fatalf("query does not split into its 6 commands (%v): %s", err, qs)
			}
			like := cmds[3]
			if !strings.HasPrefix(like, "filter message like /") || strings.ContainsAny(like[len("filter message like /"):len(like)-1], `"'/|# `+"\n\t`") {
				t.Fatalf("the value leaked into the query: %s", like)
			}
			want := 0
			for _, l := range lines {
				if strings.Contains(l.Message, h) {
					want++
				}
			}
			if len(page.Lines) != want || want == 0 {
				t.Fatalf("%d lines, want %d", len(page.Lines), want)
			}
			for _, l := range page.Lines {
				if !strings.Contains(l.Message, h) {
					t.Fatalf("line %q does not contain %q", l.Message, h)
				}
			}
		})
	}
	// Values of the id filters that are not ids are refused before any call.
	n := len(f.sent)
	for _, h := range hostile {
		for _, q := range []platform.LogQuery{{UserID: h}, {ConversationID: h}, {WorkflowID: h}, {Level: h}} {
			q.Source, q.Start, q.End, q.Limit = botSrc, now.Add(-time.Hour), now, 10
			if _, err := cw.Query(context.Background(), q); platform.TypeOf(err) != platform.ErrInvalidPayload {
				t.Fatalf("filter %+v: %v, want InvalidPayload", q, err)
			}
		}
	}
	if len(f.sent) != n {
		t.Fatalf("a refused filter still sent a query")
	}
}

// TestContainsRegex checks the regex of many values against Go's RE2: it
// is made of safe characters only and matches exactly the texts holding
// the value.
func TestContainsRegex(t *testing.T) {
	for _, h := range append(hostile, "abc", "A1", "x y", "a.b", "100%") {
		re := containsRegex(h)
		body := re[1 : len(re)-1]
		for _, c := range body {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(`\{}`, c)) {
				t.Fatalf("%q: regex %s holds %q", h, re, c)
			}
		}
		q := &fakeQuery{}
		var err error
		if q, err = parseInsights("fields @timestamp, id, level, message, userId, conversationId, workflowId | filter toMillis(@timestamp) >= 1 and toMillis(@timestamp) <= 2 | filter message like " + re + " | limit 1"); err != nil {
			t.Fatalf("%q: %v", h, err)
		}
		for _, text := range []string{h, "x" + h + "y", h + h} {
			if !q.re.MatchString(text) {
				t.Errorf("%q: %s does not match %q", h, re, text)
			}
		}
		for _, text := range []string{"", "unrelated", strings.ToUpper(h) + "?"} {
			if q.re.MatchString(text) != strings.Contains(text, h) {
				t.Errorf("%q: %s on %q", h, re, text)
			}
		}
	}
}

// TestCloudWatchPagingAndPolling writes lines with many in the same
// millisecond and pages through them: every line once, newest first,
// queries polled until complete and results read through their nextToken.
func TestCloudWatchPagingAndPolling(t *testing.T) {
	cw, f := newCW(t)
	f.runningPolls = 2
	f.chunk = 4
	base := time.Now().UTC().Truncate(time.Second).Add(-10 * time.Minute)
	var lines []platform.LogLine
	for i := 0; i < 37; i++ {
		// Groups of five lines share a millisecond.
		lines = append(lines, platform.LogLine{Source: botSrc, Time: base.Add(time.Duration(i/5) * time.Millisecond), Level: "info", Message: fmt.Sprintf("line %02d", i)})
	}
	// Another bot's lines are in the same group, not in this bot's pages.
	other := platform.LogSource{Kind: platform.LogBot, ID: "bot_01HZZZZZZZZZZZZZZZZZZZZZZ2"}
	lines = append(lines, platform.LogLine{Source: other, Time: base, Message: "line of another bot"})
	if err := cw.Write(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
	if f.creations != 2 || len(f.streams[DefaultBotGroup]) != 2 {
		t.Fatalf("streams created: %d, %v", f.creations, len(f.streams[DefaultBotGroup]))
	}
	// A second write to existing streams creates none.
	if err := cw.Write(context.Background(), platform.LogLine{Source: other, Time: base, Message: "again"}); err != nil || f.creations != 2 {
		t.Fatalf("second write: %v, %d creations", err, f.creations)
	}

	q := platform.LogQuery{Source: botSrc, Start: base.Add(-time.Minute), End: base.Add(time.Minute), Limit: 7}
	seen := map[string]bool{}
	var got []platform.LogLine
	pages := 0
	for {
		polls := f.polls
		page, err := cw.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		// Two Running answers, the Complete one, and the result parts.
		if p := f.polls - polls; p < 3 {
			t.Fatalf("page %d: %d GetQueryResults calls, want the polling and the parts", pages, p)
		}
		for _, l := range page.Lines {
			if seen[l.ID] {
				t.Fatalf("line %s (%s) answered twice", l.ID, l.Message)
			}
			seen[l.ID] = true
			got = append(got, l)
		}
		if page.Next == nil {
			break
		}
		if len(page.Lines) != 7 {
			t.Fatalf("page %d holds %d lines", pages, len(page.Lines))
		}
		q.Cursor = page.Next
	}
	if len(got) != 37 || pages != 6 {
		t.Fatalf("%d lines in %d pages, want 37 in 6", len(got), pages)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time.After(got[i-1].Time) {
			t.Fatalf("not newest first at %d", i)
		}
	}
	if got[0].Message != "line 35" && got[0].Message != "line 36" {
		t.Fatalf("first line %q", got[0].Message)
	}
}

func TestCloudWatchTimeoutAndBusy(t *testing.T) {
	cw, f := newCW(t)
	f.never = true
	cw.QueryTimeout = 50 * time.Millisecond
	now := time.Now()
	q := platform.LogQuery{Source: botSrc, Start: now.Add(-time.Hour), End: now, Limit: 10}
	start := time.Now()
	_, err := cw.Query(context.Background(), q)
	if err != errQueryTimeout || f.stops != 1 {
		t.Fatalf("timeout: %v, %d stops", err, f.stops)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
	f.never, f.busy = false, true
	if _, err := cw.Query(context.Background(), q); platform.TypeOf(err) != platform.ErrRateLimited {
		t.Fatalf("busy: %v", err)
	}
	// A tampered cursor is refused.
	f.busy = false
	q.Cursor = map[string]string{"t": "x"}
	if _, err := cw.Query(context.Background(), q); platform.TypeOf(err) != platform.ErrInvalidPayload {
		t.Fatalf("bad cursor: %v", err)
	}
}
