package httpapi

import (
	"github.com/botforge/platform/shared/webchat"
	"strings"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Bot analytics and webchat (docs/account.md).

func (s *server) analyticsRoutes() []route {
	return []route{
		{pattern: "GET /v1/admin/bots/{id}/analytics", op: "getBotAnalytics", scope: scopeWorkspace, role: platform.RoleViewer, botSelf: true, handle: s.getBotAnalytics},
		{pattern: "GET /v1/admin/bots/{id}/webchat", op: "getBotWebchat", scope: scopeWorkspace, role: platform.RoleViewer, botSelf: true, handle: s.getBotWebchat},
	}
}

// referenceChatRoutes are the Chat operations added for issue 15.
func (s *server) referenceChatRoutes() []route {
	return []route{
		{pattern: "POST /v1/chat/analytics", op: "trackAnalytics", scope: scopeBot, role: platform.RoleDeveloper, handle: s.trackAnalytics},
	}
}

// trackAnalytics adds count to the bot's custom counter name for today
// (UTC), an atomic ADD: concurrent calls all count.
func (s *server) trackAnalytics(c *call) (any, error) {
	var in struct {
		Name  string `json:"name"`
		Count int64  `json:"count"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if n := len([]rune(in.Name)); n < 1 || n > 200 {
		return nil, platform.Invalid("invalid body: field \"name\": must be 1 to 200 characters")
	}
	if in.Count < 1 || in.Count > 1e9 {
		return nil, platform.Invalid("invalid body: field \"count\": must be an integer from 1 to 1000000000")
	}
	return nil, s.Store.TrackAnalytics(c.ctx, c.bot.ID, platform.Clock().Format(time.DateOnly), in.Name, in.Count)
}

// maxAnalyticsDays bounds one getBotAnalytics call (one record per day).
const maxAnalyticsDays = 366

// analyticsDate reads a startDate/endDate parameter: a date (yyyy-mm-dd)
// or an ISO 8601 date-time, of which the UTC day counts.
func analyticsDate(q queryValues, name string) (time.Time, error) {
	v, err := q.str(name)
	if err != nil {
		return time.Time{}, err
	}
	if v == "" {
		return time.Time{}, platform.Errorf(platform.ErrInvalidQuery, "query parameter %q is required", name)
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, platform.Errorf(platform.ErrInvalidQuery, "query parameter %q must be a date (YYYY-MM-DD) or an ISO 8601 date-time", name)
	}
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
}

// getBotAnalytics answers one record per UTC day from startDate to endDate
// (inclusive, at most 366 days). customEvents holds the counters of
// trackAnalytics; messages (users' and the bot's), events and new users
// come from the bot's usage counters (docs/account.md), and so do the LLM
// calls and tokens of the cognitive API and the llm integration
// (docs/llm.md); returning users, sessions, LLM errors, latencies and
// costs are not kept, so those are 0.
func (s *server) getBotAnalytics(c *call) (any, error) {
	q := c.query()
	from, err := analyticsDate(q, "startDate")
	if err != nil {
		return nil, err
	}
	to, err := analyticsDate(q, "endDate")
	if err != nil {
		return nil, err
	}
	if to.Before(from) {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "endDate is before startDate")
	}
	days := int(to.Sub(from).Hours()/24) + 1
	if days > maxAnalyticsDays {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "at most %d days per call", maxAnalyticsDays)
	}
	bot, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	counts, err := s.Store.BotAnalytics(c.ctx, bot.ID, from.Format(time.DateOnly), to.Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	usage, err := s.Store.BotUsageDays(c.ctx, bot.ID, from.Format(time.DateOnly), to.Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	stats := map[string]any{"mean": 0, "sd": 0, "min": 0, "max": 0}
	records := make([]map[string]any, 0, days)
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		custom := map[string]int64{}
		for name, n := range counts[d.Format(time.DateOnly)] {
			custom[name] = n
		}
		u := usage[d.Format(time.DateOnly)]
		records = append(records, map[string]any{
			"startDateTimeUtc": platform.FormatTime(d),
			"endDateTimeUtc":   platform.FormatTime(d.Add(24*time.Hour - time.Millisecond)),
			"returningUsers":   0, "newUsers": u.NewUsers, "sessions": 0, "messages": u.Messages, "userMessages": u.UserMessages, "botMessages": u.BotMessages,
			"events": u.Events, "eventTypes": map[string]any{}, "customEvents": custom,
			"llm": map[string]any{"calls": u.LLMCalls, "errors": 0, "inputTokens": u.LLMInputTokens, "outputTokens": u.LLMOutputTokens, "latency": stats, "tokensPerSecond": stats,
				"cost": map[string]any{"sum": 0, "mean": 0, "sd": 0, "min": 0, "max": 0}},
		})
	}
	return map[string]any{"records": records}, nil
}

var webchatTypes = []string{"preconfigured", "configurable", "fullscreen", "sharableUrl"}

// getBotWebchat answers the hosted webchat page of the bot's installation
// of the built-in `webchat` integration (shared/webchat, docs/webchat-api.md):
// sharableUrl is the page's absolute URL, the other types embed it (an
// iframe) or, configurable, mount the official component in your own page.
func (s *server) getBotWebchat(c *call) (any, error) {
	t, err := c.query().oneOf("type", "", webchatTypes...)
	if err != nil {
		return nil, err
	}
	if t == "" {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "query parameter \"type\" is required: one of %s", strings.Join(webchatTypes, ", "))
	}
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	ints, err := s.installedIntegrations(c.ctx, b.Bot)
	if err != nil {
		return nil, err
	}
	for _, alias := range keysOf(b.Installs) {
		in := b.Installs[alias]
		i, ok := ints[in.IntegrationID]
		if !ok || !in.Enabled || i.Name != webchat.Name {
			continue
		}
		if _, builtin := s.builtinOf(i); !builtin {
			continue
		}
		hook := strings.TrimSuffix(webhookBase(c), "/") + "/" + in.WebhookID
		// Where the streams are served elsewhere (on AWS), the page and the
		// component's apiUrl are there (webchat.HookOf).
		return map[string]any{"code": webchat.EmbedCode(t, webchat.HookOf(hook, s.ChatStreamURL), in.WebhookID)}, nil
	}
	return nil, platform.Errorf(platform.ErrResourceNotFound, "bot %q has no enabled installation of the built-in webchat integration: install it (getPublicIntegration({name: 'webchat', version: 'latest'}), then updateBot) to get its page", b.ID)
}
