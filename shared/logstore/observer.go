package logstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/platform"
)

// Observer returns the delivery.Observer that logs every delivery and call
// the platform makes (to the bot's log and, for calls to an integration,
// to the integration's log too) and records each failed delivery to a
// bot's url as an event of a bot issue. Either sink may be nil. It never
// fails the delivery: what it cannot record it reports to log.
func Observer(logs platform.LogStore, issues platform.IssueRecorder, log *slog.Logger) delivery.Observer {
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, r delivery.Result) {
		// Recorded even when the request that caused it has gone away.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if logs != nil {
			if lines := LinesOf(r); len(lines) > 0 {
				if err := logs.Write(ctx, lines...); err != nil {
					log.Error("could not write log lines", "bot", r.BotID, "integration", r.IntegrationID, "kind", r.Kind, "err", err)
				}
			}
		}
		if issues != nil {
			if f, ok := FailureOf(r); ok {
				if _, err := issues.RecordBotFailure(ctx, r.BotID, f); err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
					log.Error("could not record a bot issue", "bot", r.BotID, "code", f.Code, "err", err)
				}
			}
		}
	}
}

// toBot reports whether r is a delivery to a bot's own url (as opposed to
// a call to an integration on a bot's behalf).
func toBot(r delivery.Result) bool { return r.IntegrationID == "" && r.BotID != "" && !toEmulator(r) }

// toEmulator reports whether r is a bot's reply in a conversation of the
// console's emulator, acknowledged by the dispatcher without a call
// (platform.EmulatorIntegration).
func toEmulator(r delivery.Result) bool {
	return r.IntegrationID == "" && r.Kind == "message_created" && r.Name == platform.EmulatorIntegration
}

// what names the delivery or call in a log line.
func what(r delivery.Result) string {
	switch {
	case r.Kind == "recurring_event":
		s := fmt.Sprintf("recurring event %q", r.Name)
		if r.EventID != "" {
			s += fmt.Sprintf(": event %s (type %q)", r.EventID, r.EventType)
		}
		return s
	case r.EventID != "":
		return fmt.Sprintf("%s: event %s (type %q)", r.Kind, r.EventID, r.EventType)
	default:
		return r.Kind
	}
}

// outcome describes how a call ended, and its level.
func outcome(r delivery.Result, to string) (string, string) {
	took := fmt.Sprintf("%d ms", r.Duration.Milliseconds())
	switch r.Outcome {
	case delivery.Delivered:
		return fmt.Sprintf("delivered to %s (HTTP %d, %s)", to, r.StatusCode, took), platform.LevelInfo
	case delivery.OutcomeUnknown:
		return fmt.Sprintf("sent to %s, outcome unknown: %s (%s)", to, r.Error, took), platform.LevelError
	default:
		return fmt.Sprintf("not delivered to %s: %s", to, r.Error), platform.LevelError
	}
}

// LinesOf is the log lines of a delivery result: one in the bot's log and,
// for a call to an integration, one in the integration's log.
func LinesOf(r delivery.Result) []platform.LogLine {
	at := r.At
	if at.IsZero() {
		at = time.Now()
	}
	var out []platform.LogLine
	if toEmulator(r) {
		return []platform.LogLine{{
			Source: platform.LogSource{Kind: platform.LogBot, ID: r.BotID},
			Time:   at, Level: platform.LevelInfo,
			Message: "message_created: the bot's message is in the emulator's conversation (the console reads it; no call made)",
		}}
	}
	if toBot(r) {
		msg, level := outcome(r, "the bot")
		out = append(out, platform.LogLine{
			Source: platform.LogSource{Kind: platform.LogBot, ID: r.BotID},
			Time:   at, Level: level, Message: what(r) + " " + msg,
		})
		return out
	}
	if r.IntegrationID != "" {
		msg, level := outcome(r, "the integration")
		op := ""
		if r.OperationID != "" {
			op = " [operation " + r.OperationID + "]"
		}
		if r.BotID != "" {
			out = append(out, platform.LogLine{
				Source: platform.LogSource{Kind: platform.LogBot, ID: r.BotID},
				Time:   at, Level: level,
				Message: fmt.Sprintf("integration %q %s %s%s", r.Name, what(r), msg, op),
			})
		}
		out = append(out, platform.LogLine{
			Source: platform.LogSource{Kind: platform.LogIntegration, ID: r.IntegrationID},
			Time:   at, Level: level,
			Message: fmt.Sprintf("%s for bot %s (alias %q) %s%s", what(r), r.BotID, r.Name, msg, op),
		})
	}
	var valid []platform.LogLine
	for _, l := range out {
		if l.Source.Valid() {
			valid = append(valid, l)
		}
	}
	return valid
}

// Codes of the bot issues of failed deliveries: stable per kind of
// failure, so that the same failure groups into one issue.
const (
	CodeBotNoURL       = "bot_url_missing"
	CodeBotUnreachable = "bot_url_unreachable"
	CodeBotNoAnswer    = "bot_no_answer"
	codeBotStatus      = "bot_http_" // + status code, e.g. bot_http_500
)

// FailureOf is the bot failure a delivery result records, if it is a failed
// delivery to a bot's url.
func FailureOf(r delivery.Result) (platform.BotFailure, bool) {
	if !toBot(r) || r.Outcome == delivery.Delivered || !platform.HasPrefix(r.BotID, platform.PrefixBot) {
		return platform.BotFailure{}, false
	}
	f := platform.BotFailure{
		Category:    platform.IssueUserCode,
		GroupedData: map[string]platform.IssueValue{},
		Data: map[string]platform.IssueValue{
			"error": {Raw: r.Error},
		},
		At: r.At,
	}
	if r.URL != "" {
		f.GroupedData["url"] = platform.IssueValue{Raw: r.URL}
	}
	put := func(m map[string]platform.IssueValue, k, v, pretty string) {
		if v != "" {
			m[k] = platform.IssueValue{Raw: v, Pretty: pretty}
		}
	}
	put(f.Data, "kind", r.Kind, "")
	put(f.Data, "eventId", r.EventID, "")
	put(f.Data, "eventType", r.EventType, "")
	if r.Kind == "recurring_event" {
		put(f.Data, "recurringEvent", r.Name, "")
	}
	if r.Duration > 0 {
		put(f.Data, "durationMs", strconv.FormatInt(r.Duration.Milliseconds(), 10), r.Duration.Round(time.Millisecond).String())
	}
	switch {
	case r.Outcome == delivery.OutcomeUnknown:
		f.Code = CodeBotNoAnswer
		f.Title = "The bot did not answer a delivery"
		f.Description = "An event was sent to the bot's url, but no answer came back in time (or the connection was lost). " +
			"The bot may or may not have handled it. Make sure the bot answers every delivery within its maximum execution time."
	case r.StatusCode > 0:
		code := strconv.Itoa(r.StatusCode)
		f.Code = codeBotStatus + code
		f.Title = fmt.Sprintf("The bot answered a delivery with HTTP %d", r.StatusCode)
		f.Description = fmt.Sprintf("An event delivered to the bot's url was answered with HTTP %d instead of a 2xx status: "+
			"the bot's code failed to handle it. See the bot's logs for the events and errors.", r.StatusCode)
		f.GroupedData["statusCode"] = platform.IssueValue{Raw: code, Pretty: code + " " + http.StatusText(r.StatusCode)}
	case r.URL == "":
		f.Code = CodeBotNoURL
		f.Category = platform.IssueConfiguration
		f.Title = "The bot has no url to deliver events to"
		f.Description = "An event could not be delivered because the bot has no url. Deploy the bot, or set its url with updateBot."
	default:
		f.Code = CodeBotUnreachable
		f.Title = "The bot's url could not be reached"
		f.Description = "An event could not be sent to the bot's url (connection refused, unknown host or address not allowed). " +
			"Check that the bot is deployed and its url is right."
	}
	return f, true
}
