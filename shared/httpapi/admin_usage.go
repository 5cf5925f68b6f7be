package httpapi

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/platform"
)

// usageRoutes: usage and quotas, read-only, from the counts the platform
// keeps (docs/account.md). No quota is enforced beyond the platform's own
// limits, so a quota is 0 ("none") except file_max_size_bytes.
func (s *server) usageRoutes() []route {
	const viewer = platform.RoleViewer
	return []route{
		// The subject ({id}: a workspace or a bot) is authorized by the handler.
		{pattern: "GET /v1/admin/usages/{id}", op: "getUsage", scope: scopeAnyone, handle: s.getUsage},
		{pattern: "GET /v1/admin/usages/multiple", op: "getMultipleUsages", scope: scopeAnyone, handle: s.getMultipleUsages},
		{pattern: "GET /v1/admin/usages/{id}/history", op: "listUsageHistory", scope: scopeAnyone, handle: s.listUsageHistory},
		{pattern: "GET /v1/admin/usages/{id}/activity", op: "listUsageActivity", scope: scopeAnyone, handle: s.listUsageActivity},
		{pattern: "GET /v1/admin/usages/{id}/daily-activity", op: "listUsageActivityDaily", scope: scopeAnyone, handle: s.listUsageActivity},
		{pattern: "GET /v1/admin/workspaces/{id}/quota", op: "getWorkspaceQuota", scope: scopeWorkspacePath, role: viewer, handle: s.getWorkspaceQuota},
		{pattern: "GET /v1/admin/workspaces/{id}/quotas", op: "listWorkspaceQuotas", scope: scopeWorkspacePath, role: viewer, handle: s.listWorkspaceQuotas},
		{pattern: "GET /v1/admin/workspaces/{id}/usages", op: "listWorkspaceUsages", scope: scopeWorkspacePath, role: viewer, handle: s.listWorkspaceUsages},
		{pattern: "GET /v1/admin/workspaces/{id}/usages/by-bot", op: "breakDownWorkspaceUsageByBot", scope: scopeWorkspacePath, role: viewer, handle: s.breakDownWorkspaceUsageByBot},
		{pattern: "GET /v1/admin/workspaces/usages/quota-completion", op: "getAllWorkspaceQuotaCompletion", scope: scopeAccount, handle: s.getAllWorkspaceQuotaCompletion},
	}
}

// usageTypes are the reference's usage types, each counted per workspace
// or per bot.
var usageTypes = []string{
	"invocation_timeout", "invocation_calls", "storage_count", "bot_count", "knowledgebase_vector_storage",
	"workspace_ratelimit", "table_row_count", "workspace_member_count", "integrations_owned_count", "ai_spend",
	"openai_spend", "bing_search_spend", "always_alive", "indexed_file_count", "file_max_size_bytes",
}

// workspaceUsage: the types counted per workspace; the others are per bot
// (and, for a workspace, the sum over its bots).
var workspaceUsage = map[string]bool{
	"bot_count": true, "workspace_ratelimit": true, "workspace_member_count": true,
	"integrations_owned_count": true, "ai_spend": true, "openai_spend": true, "bing_search_spend": true,
}

// usage is the reference's Usage.
type usage struct {
	ID     string  `json:"id"`
	Period string  `json:"period"`
	Value  float64 `json:"value"`
	Quota  float64 `json:"quota"`
	Type   string  `json:"type"`
}

type quota struct {
	Period string  `json:"period"`
	Value  float64 `json:"value"`
	Type   string  `json:"type"`
}

func currentPeriod() string { return platform.Clock().Format("2006-01") }

var periodFormat = regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])$`)

// period reads the period parameter: the current month, the only one the
// platform has counts for (it keeps no history).
func (c *call) period() (string, error) {
	p, err := c.query().str("period")
	if err != nil {
		return "", err
	}
	cur := currentPeriod()
	switch {
	case p == "" || p == cur:
		return cur, nil
	case !periodFormat.MatchString(p):
		return "", platform.Errorf(platform.ErrInvalidQuery, "query parameter \"period\" must be a month, YYYY-MM")
	}
	return "", platform.Errorf(platform.ErrInvalidQuery, "no usage is kept for period %q: only the current one, %s", p, cur)
}

func checkUsageType(t string) error {
	for _, u := range usageTypes {
		if t == u {
			return nil
		}
	}
	return platform.Errorf(platform.ErrInvalidQuery, "query parameter \"type\" must be one of %s", strings.Join(usageTypes, ", "))
}

func (c *call) usageType() (string, error) {
	t, err := c.query().str("type")
	if err != nil {
		return "", err
	}
	return t, checkUsageType(t)
}

// quotaOf is the limit of a usage type: the operator's per-bot quotas of
// invocations and file storage (docs/account.md; 0: none), the size of one
// file, and none of the reference's other plan quotas.
func (s *server) quotaOf(t string) float64 {
	l := s.Store.Limits()
	switch t {
	case "file_max_size_bytes":
		return float64(files.MaxFileSize)
	case "invocation_calls":
		return float64(l.InvocationsPerMonth)
	case "storage_count":
		return float64(l.StorageBytes)
	}
	return 0
}

// usageSubject checks that the caller may read the usage of id (a
// workspace it is a member of, a bot of such a workspace, or the bot of
// its bot API key) and tells which it is; anything else is a 404.
func (s *server) usageSubject(c *call, id string) (workspaceID, botID string, err error) {
	p := c.principal
	switch {
	case platform.HasPrefix(id, platform.PrefixWorkspace) && p.Kind == platform.PrincipalAccount:
		return id, "", s.authorizeMember(c, id, platform.RoleViewer, func() error { return platform.NotFound("workspace", id) })
	case platform.HasPrefix(id, platform.PrefixBot):
		if p.Kind == platform.PrincipalBot && p.BotID != id || p.Kind == platform.PrincipalIntegration {
			return "", "", platform.NotFound("bot", id)
		}
		bot, err := s.Store.GetBot(c.ctx, id)
		if err != nil {
			return "", "", err
		}
		if p.Kind == platform.PrincipalAccount {
			if err := s.authorizeMember(c, bot.WorkspaceID, platform.RoleViewer, func() error { return platform.NotFound("bot", id) }); err != nil {
				return "", "", err
			}
		}
		return bot.WorkspaceID, id, nil
	}
	return "", "", platform.NotFound("workspace or bot", id)
}

// usageValue counts type t for a workspace or one of its bots. Counts the
// platform does not keep (invocation timeouts, rate limits, indexed files,
// AI spend: the operator's own models bill nothing) are 0.
func (s *server) usageValue(ctx context.Context, workspaceID, botID, t string) (float64, error) {
	if workspaceUsage[t] {
		if botID != "" {
			return 0, platform.Errorf(platform.ErrInvalidQuery, "usage %q is counted per workspace: ask with the workspace's id", t)
		}
		switch t {
		case "bot_count", "workspace_member_count", "integrations_owned_count":
			n, err := s.Store.CountWorkspace(ctx, workspaceID)
			return float64(map[string]int64{"bot_count": n.Bots, "workspace_member_count": n.Members, "integrations_owned_count": n.Integrations}[t]), err
		}
		return 0, nil
	}
	switch t {
	case "table_row_count", "invocation_calls", "storage_count", "knowledgebase_vector_storage":
	default:
		return 0, nil
	}
	bots := []string{botID}
	if botID == "" {
		var err error
		if bots, err = s.Store.WorkspaceBotIDs(ctx, workspaceID); err != nil {
			return 0, err
		}
	}
	var total int64
	for _, b := range bots {
		var n int64
		var err error
		switch t {
		case "table_row_count":
			n, err = s.Store.BotTableRows(ctx, b)
		case "knowledgebase_vector_storage": // bytes of the semantic search's vectors
			n, err = s.Store.BotVectorBytes(ctx, b)
		default:
			var u dynamo.BotUsageCounts
			u, err = s.Store.BotUsage(ctx, b, platform.Clock())
			n = u.Invocations
			if t == "storage_count" {
				n = u.StorageBytes
			}
		}
		if err != nil {
			return 0, err
		}
		total += n
	}
	return float64(total), nil
}

func (s *server) usageOf(c *call, id, t, period string) (usage, error) {
	ws, bot, err := s.usageSubject(c, id)
	if err != nil {
		return usage{}, err
	}
	v, err := s.usageValue(c.ctx, ws, bot, t)
	return usage{ID: id, Period: period, Value: v, Quota: s.quotaOf(t), Type: t}, err
}

func (s *server) getUsage(c *call) (any, error) {
	t, err := c.usageType()
	if err != nil {
		return nil, err
	}
	period, err := c.period()
	if err != nil {
		return nil, err
	}
	u, err := s.usageOf(c, c.PathValue("id"), t, period)
	if err != nil {
		return nil, err
	}
	return map[string]any{"usage": u}, nil
}

// listOf reads a repeatable query parameter (name=a&name=b, or a,b).
func listOf(q queryValues, name string) []string {
	var out []string
	for _, v := range q.v[name] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// getMultipleUsages: every pair of ids and types, at most 100 pairs.
func (s *server) getMultipleUsages(c *call) (any, error) {
	q := c.query()
	ids, types := listOf(q, "ids"), listOf(q, "types")
	if len(ids) == 0 || len(types) == 0 {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "query parameters \"ids\" and \"types\" are required")
	}
	if len(ids)*len(types) > 100 {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "at most 100 (id, type) pairs per call")
	}
	for _, t := range types {
		if err := checkUsageType(t); err != nil {
			return nil, err
		}
	}
	period, err := c.period()
	if err != nil {
		return nil, err
	}
	out := []usage{}
	for _, id := range ids {
		for _, t := range types {
			u, err := s.usageOf(c, id, t, period)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
		}
	}
	return map[string]any{"usages": out}, nil
}

// listUsageHistory answers the usage of each period, newest first: for
// invocation_calls, counted per bot and month, every month the bot (or the
// workspace's bots) has counters for; the other types are values of now,
// with no history kept, so the current period alone.
func (s *server) listUsageHistory(c *call) (any, error) {
	t, err := c.usageType()
	if err != nil {
		return nil, err
	}
	current := currentPeriod()
	u, err := s.usageOf(c, c.PathValue("id"), t, current)
	if err != nil || t != "invocation_calls" {
		return map[string]any{"usages": []usage{u}}, err
	}
	ws, bot, err := s.usageSubject(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	bots := []string{bot}
	if bot == "" {
		if bots, err = s.Store.WorkspaceBotIDs(c.ctx, ws); err != nil {
			return nil, err
		}
	}
	months := map[string]int64{}
	for _, b := range bots {
		m, err := s.Store.BotInvocationsByMonth(c.ctx, b)
		if err != nil {
			return nil, err
		}
		for k, n := range m {
			months[k] += n
		}
	}
	out := []usage{u}
	past := make([]string, 0, len(months))
	for k := range months {
		if k < current {
			past = append(past, k)
		}
	}
	slices.Sort(past)
	for i := len(past) - 1; i >= 0; i-- {
		out = append(out, usage{ID: u.ID, Period: past[i], Value: float64(months[past[i]]), Quota: u.Quota, Type: t})
	}
	return map[string]any{"usages": out}, nil
}

// listUsageActivity (and its daily form): the platform records no usage
// events (invocations, integration actions, indexing), so there is none
// to list, for a subject the caller may read.
func (s *server) listUsageActivity(c *call) (any, error) {
	if _, err := c.usageType(); err != nil {
		return nil, err
	}
	if _, _, err := s.usageSubject(c, c.PathValue("id")); err != nil {
		return nil, err
	}
	return map[string]any{"data": []any{}, "meta": meta{}}, nil
}

func (s *server) getWorkspaceQuota(c *call) (any, error) {
	t, err := c.usageType()
	if err != nil {
		return nil, err
	}
	period, err := c.period()
	if err != nil {
		return nil, err
	}
	return map[string]any{"quota": quota{Period: period, Value: s.quotaOf(t), Type: t}}, nil
}

func (s *server) listWorkspaceQuotas(c *call) (any, error) {
	period, err := c.period()
	if err != nil {
		return nil, err
	}
	out := make([]quota, 0, len(usageTypes))
	for _, t := range usageTypes {
		out = append(out, quota{Period: period, Value: s.quotaOf(t), Type: t})
	}
	return map[string]any{"quotas": out}, nil
}

// listWorkspaceUsages: a workspace's usage of type t; for a per-bot type,
// one usage per bot of the workspace.
func (s *server) listWorkspaceUsages(c *call) (any, error) {
	t, err := c.usageType()
	if err != nil {
		return nil, err
	}
	period, err := c.period()
	if err != nil {
		return nil, err
	}
	if workspaceUsage[t] {
		v, err := s.usageValue(c.ctx, c.workspaceID, "", t)
		return map[string]any{"usages": []usage{{ID: c.workspaceID, Period: period, Value: v, Quota: s.quotaOf(t), Type: t}}}, err
	}
	bots, err := s.Store.WorkspaceBotIDs(c.ctx, c.workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]usage, 0, len(bots))
	for _, b := range bots {
		v, err := s.usageValue(c.ctx, c.workspaceID, b, t)
		if err != nil {
			return nil, err
		}
		out = append(out, usage{ID: b, Period: period, Value: v, Quota: s.quotaOf(t), Type: t})
	}
	return map[string]any{"usages": out}, nil
}

func (s *server) breakDownWorkspaceUsageByBot(c *call) (any, error) {
	t, err := c.usageType()
	if err != nil {
		return nil, err
	}
	if _, err := c.period(); err != nil {
		return nil, err
	}
	if workspaceUsage[t] {
		return nil, platform.Errorf(platform.ErrInvalidQuery, "usage %q is counted per workspace, not per bot", t)
	}
	bots, err := s.Store.WorkspaceBotIDs(c.ctx, c.workspaceID)
	if err != nil {
		return nil, err
	}
	type entry struct {
		BotID string  `json:"botId"`
		Value float64 `json:"value"`
	}
	out := make([]entry, 0, len(bots))
	for _, b := range bots {
		v, err := s.usageValue(c.ctx, c.workspaceID, b, t)
		if err != nil {
			return nil, err
		}
		out = append(out, entry{BotID: b, Value: v})
	}
	return map[string]any{"data": out}, nil
}

// getAllWorkspaceQuotaCompletion: for each workspace of the caller, how
// close it is to a quota. The only enforced quota is per file, which no
// stored count approaches, so each is {bot_count, 0}: nothing is near a
// limit.
func (s *server) getAllWorkspaceQuotaCompletion(c *call) (any, error) {
	out := map[string]any{}
	p, err := c.page("quota-completion")
	if err != nil {
		return nil, err
	}
	p.Limit = 100
	for {
		ws, next, err := s.Store.ListWorkspacesOf(c.ctx, c.principal.AccountID, p)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			out[w.ID] = map[string]any{"type": "bot_count", "completion": 0}
		}
		if next == nil {
			return out, nil
		}
		p.Start = next
	}
}
