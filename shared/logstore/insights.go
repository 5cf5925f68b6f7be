package logstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// The CloudWatch Logs Insights query of a page. No filter value can change
// its meaning, because none is ever written into it as given:
//
//   - the log's id and the level, userId, conversationId and workflowId
//     filters are tokens of id characters only ([A-Za-z0-9_.:@-], checked
//     by platform.LogQuery.Check and again here), written between double
//     quotes, where such characters cannot end the string, start a command
//     (|), a comment (#) or a regex;
//   - messageContains, which may be any text, becomes a regular expression
//     in which only ASCII letters and digits stand for themselves and every
//     other character is written as the escape \x{HEX} of its code point:
//     the expression holds no quote, pipe, slash, hash, space or regex
//     operator of the caller's, and matches exactly the lines whose message
//     contains the text (a substring match, case-sensitive);
//   - times and the limit are integers the platform computes.
//
// The query:
//
//	fields @timestamp, id, level, message, userId, conversationId, workflowId
//	| filter botId = "<bot id>"              (integrationId for integrations)
//	| filter toMillis(@timestamp) >= <ms> and toMillis(@timestamp) <= <ms>
//	| filter level = "<level>"               (each filter only when given)
//	| filter userId = "<userId>"
//	| filter conversationId = "<conversationId>"
//	| filter workflowId = "<workflowId>"
//	| filter message like /<escaped messageContains>/
//	| sort @timestamp desc
//	| limit <n>
func insightsQuery(q platform.LogQuery, start, end time.Time, limit int) (string, error) {
	idField := "botId"
	if q.Source.Kind == platform.LogIntegration {
		idField = "integrationId"
	}
	var b strings.Builder
	b.WriteString("fields @timestamp, id, level, message, userId, conversationId, workflowId")
	eq := func(field, v string) error {
		if v == "" {
			return nil
		}
		if !platform.IsLogToken(v) {
			return platform.Invalid("invalid %s filter", field)
		}
		fmt.Fprintf(&b, "\n| filter %s = \"%s\"", field, v)
		return nil
	}
	if err := eq(idField, q.Source.ID); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "\n| filter toMillis(@timestamp) >= %d and toMillis(@timestamp) <= %d", start.UnixMilli(), end.UnixMilli())
	if q.Level != "" && !platform.IsLogLevel(q.Level) {
		return "", platform.Invalid("invalid level filter")
	}
	for _, f := range []struct{ field, v string }{
		{"level", q.Level}, {"userId", q.UserID}, {"conversationId", q.ConversationID}, {"workflowId", q.WorkflowID},
	} {
		if err := eq(f.field, f.v); err != nil {
			return "", err
		}
	}
	if q.MessageContains != "" {
		b.WriteString("\n| filter message like ")
		b.WriteString(containsRegex(q.MessageContains))
	}
	fmt.Fprintf(&b, "\n| sort @timestamp desc\n| limit %d", limit)
	return b.String(), nil
}

// containsRegex is the /regex/ literal matching any text containing s:
// ASCII letters and digits as themselves, every other code point as
// \x{HEX} (an escape RE2, Java and PCRE all read as that literal code
// point). The result is made of [A-Za-z0-9\\x{}] and the two slashes only.
func containsRegex(s string) string {
	var b strings.Builder
	b.WriteByte('/')
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			continue
		}
		fmt.Fprintf(&b, `\x{%X}`, r)
	}
	b.WriteByte('/')
	return b.String()
}
