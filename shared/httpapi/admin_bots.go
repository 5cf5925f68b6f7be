package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/scheduler"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bots: createBot, getBot, listBots, updateBot, deleteBot. A bot's
// definition is stored as given; getBot renders the installed integrations
// (keyed by alias with x-multiple-integrations: true, else by integration
// id). See docs/bots.md for the update rules.

// botBody is the definition a createBot call may carry.
type botBody struct {
	States          map[string]json.RawMessage `json:"states"`
	Events          map[string]json.RawMessage `json:"events"`
	RecurringEvents map[string]json.RawMessage `json:"recurringEvents"`
	Subscriptions   json.RawMessage            `json:"subscriptions"`
	Actions         map[string]json.RawMessage `json:"actions"`
	Configuration   json.RawMessage            `json:"configuration"`
	User            *platform.TagDefinitions   `json:"user"`
	Conversation    *platform.TagDefinitions   `json:"conversation"`
	Message         *platform.TagDefinitions   `json:"message"`
	Tags            map[string]string          `json:"tags"`
	Code            *string                    `json:"code"`
	Name            *string                    `json:"name"`
	Description     *string                    `json:"description"`
	Medias          []platform.Media           `json:"medias"`
	URL             *string                    `json:"url"`
	Dev             *bool                      `json:"dev"`
}

func tagDefs(t *platform.TagDefinitions) platform.TagDefinitions {
	if t == nil {
		return platform.TagDefinitions{Tags: map[string]json.RawMessage{}}
	}
	return platform.TagDefinitions{Tags: orEmpty(t.Tags)}
}

// Limits of a bot definition.
const (
	maxRecurringEvents = 100
	maxInstalls        = 50
	maxBotExecution    = 900 // seconds
)

func (s *server) createBot(c *call) (any, error) {
	var in botBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	now := platform.Now()
	id := platform.NewID(platform.PrefixBot)
	b := platform.Bot{
		ID: id, CreatedAt: now, UpdatedAt: now, WorkspaceID: c.workspaceID,
		SigningSecret:   platform.NewSecret(),
		Integrations:    map[string]json.RawMessage{},
		Plugins:         map[string]json.RawMessage{},
		User:            tagDefs(in.User),
		Conversation:    tagDefs(in.Conversation),
		Message:         tagDefs(in.Message),
		States:          orEmpty(in.States),
		Configuration:   in.Configuration,
		Events:          orEmpty(in.Events),
		RecurringEvents: map[string]json.RawMessage{},
		Subscriptions:   in.Subscriptions,
		Actions:         orEmpty(in.Actions),
		Tags:            orEmpty(in.Tags),
		Name:            "bot-" + strings.ToLower(id[len(id)-8:]),
		CreatedBy:       c.principal.AccountID,
		Status:          "active",
		Medias:          in.Medias,
		Installs:        map[string]platform.IntegrationInstance{},
	}
	if len(in.RecurringEvents) > maxRecurringEvents {
		return nil, platform.Invalid("invalid body: field \"recurringEvents\": at most %d entries", maxRecurringEvents)
	}
	for name, raw := range in.RecurringEvents {
		ev, err := s.recurringEntry(name, raw, nil)
		if err != nil {
			return nil, err
		}
		b.RecurringEvents[name] = ev
	}
	b.Configuration = normalizeConfiguration(in.Configuration)
	if len(b.Subscriptions) == 0 {
		b.Subscriptions = json.RawMessage(`{"events":null}`)
	}
	if b.Medias == nil {
		b.Medias = []platform.Media{}
	}
	if in.Name != nil {
		b.Name = *in.Name
	}
	if in.Description != nil {
		b.Description = *in.Description
	}
	if in.Dev != nil {
		b.Dev = *in.Dev
	}
	if in.URL != nil {
		if err := checkURL("url", *in.URL); err != nil {
			return nil, err
		}
		b.URL = *in.URL
	}
	if in.Code != nil {
		var err error
		if b.CodeKey, err = s.storeBotCode(c.ctx, b.ID, *in.Code); err != nil {
			return nil, err
		}
		if b.CodeKey != "" {
			b.DeployedAt = now
		}
	}
	// Schedules first: a committed definition always has its schedules (a
	// schedule without its definition deletes itself when it fires).
	if err := s.putSchedules(c.ctx, b, keysOf(b.RecurringEvents)); err != nil {
		return nil, err
	}
	if err := s.Store.CreateBot(c.ctx, b); err != nil {
		return nil, err
	}
	out := map[string]any{"bot": s.botView(c, b, nil)}
	if err := s.deployBot(c, b); err != nil {
		return nil, committed(err, out)
	}
	return out, nil
}

func normalizeConfiguration(raw json.RawMessage) json.RawMessage {
	var cfg struct {
		Data   json.RawMessage `json:"data"`
		Schema json.RawMessage `json:"schema"`
	}
	_ = json.Unmarshal(raw, &cfg)
	if len(cfg.Data) == 0 || string(cfg.Data) == "null" {
		cfg.Data = json.RawMessage(`{}`)
	}
	if len(cfg.Schema) == 0 || string(cfg.Schema) == "null" {
		cfg.Schema = json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(cfg)
	return b
}

func checkURL(field, u string) error {
	if u == "" {
		return nil
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return platform.Invalid("invalid body: field %q: must be an http or https url", field)
	}
	// .invalid never resolves (RFC 6761); the platform's own addresses of
	// deployed code use it (shared/lambdarunner), and are not a user's to set.
	if h := strings.TrimSuffix(strings.ToLower(p.Hostname()), "."); h == "invalid" || strings.HasSuffix(h, ".invalid") {
		return platform.Invalid("invalid body: field %q: a host under .invalid never resolves", field)
	}
	return nil
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// recurringEntry validates a recurring event entry and gives it its run
// bookkeeping: kept from old when the entry is unchanged, else reset.
func (s *server) recurringEntry(name string, raw, old json.RawMessage) (json.RawMessage, error) {
	var ev platform.RecurringEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, platform.Invalid("invalid body: field %q: %v", "recurringEvents."+name, err)
	}
	if err := s.checkCron(ev.Schedule.Cron); err != nil {
		return nil, platform.Invalid("invalid body: field %q: %s", "recurringEvents."+name+".schedule.cron", errMessage(err))
	}
	if strings.TrimSpace(ev.Type) == "" {
		return nil, platform.Invalid("invalid body: field %q: must not be empty", "recurringEvents."+name+".type")
	}
	if len(ev.Payload) == 0 || string(ev.Payload) == "null" {
		ev.Payload = json.RawMessage(`{}`)
	}
	ev.FailedAttempts, ev.LastFailureReason = 0, nil
	if old != nil {
		var prev platform.RecurringEvent
		if json.Unmarshal(old, &prev) == nil && prev.Schedule.Cron == ev.Schedule.Cron &&
			prev.Type == ev.Type && jsonEqual(prev.Payload, ev.Payload) {
			ev.FailedAttempts, ev.LastFailureReason = prev.FailedAttempts, prev.LastFailureReason
		}
	}
	return json.Marshal(ev)
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// checkCron validates a cron expression for the configured scheduler (or,
// with none, syntactically).
func (s *server) checkCron(expr string) error {
	if s.Scheduler != nil {
		return s.Scheduler.CheckCron(expr)
	}
	c, err := scheduler.ParseCron(expr)
	if err == nil {
		err = c.CheckFrequency()
	}
	return err
}

// putSchedules creates or updates the schedules of the named recurring
// events of b (idempotent, so a retried request converges).
func (s *server) putSchedules(ctx context.Context, b platform.Bot, names []string) error {
	if s.Scheduler == nil {
		return nil
	}
	at := time.Now().UTC().Format(time.RFC3339Nano)
	for _, name := range names {
		var ev platform.RecurringEvent
		if err := json.Unmarshal(b.RecurringEvents[name], &ev); err != nil {
			return err
		}
		sch := platform.Schedule{
			Name: platform.ScheduleName(b.ID, name), Cron: ev.Schedule.Cron,
			Input: platform.RecurringInput{BotID: b.ID, Event: name, Cron: ev.Schedule.Cron, ScheduledAt: at},
		}
		if err := platform.PutSchedule(ctx, s.Scheduler, sch); err != nil {
			return err
		}
	}
	return nil
}

// deleteSchedules deletes the schedules of the named recurring events of a
// bot. Failures are logged only: an orphan schedule deletes itself when it
// fires (delivery.Recurring).
func (s *server) deleteSchedules(ctx context.Context, botID string, names []string) {
	if s.Scheduler == nil {
		return
	}
	for _, name := range names {
		if err := platform.DeleteScheduleIfAny(ctx, s.Scheduler, platform.ScheduleName(botID, name)); err != nil {
			s.Logger.Warn("could not delete a schedule; it will delete itself when it fires", "bot", botID, "recurringEvent", name, "err", err)
		}
	}
}

// workspaceBot reads the bot of path {id}, answering 404 for a bot of
// another workspace.
func (s *server) workspaceBot(c *call) (dynamo.BotRecord, error) {
	id := c.PathValue("id")
	b, err := s.Store.GetBot(c.ctx, id)
	if err == nil && b.WorkspaceID != c.workspaceID {
		err = platform.NotFound("bot", id)
	}
	return b, err
}

func (s *server) getBot(c *call) (any, error) {
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	ints, err := s.installedIntegrations(c.ctx, b.Bot)
	if err != nil {
		return nil, err
	}
	return map[string]any{"bot": s.botView(c, b.Bot, ints)}, nil
}

// installedIntegrations reads the integration versions installed on b
// (one BatchGetItem, none without installs).
func (s *server) installedIntegrations(ctx context.Context, b platform.Bot) (map[string]platform.Integration, error) {
	if len(b.Installs) == 0 {
		return map[string]platform.Integration{}, nil
	}
	ids := make([]string, 0, len(b.Installs))
	for _, in := range b.Installs {
		ids = append(ids, in.IntegrationID)
	}
	return s.Store.IntegrationsByID(ctx, ids)
}

// webhookBase is where integrations' webhooks are addressed: this API's
// origin, /webhooks.
func webhookBase(c *call) string {
	proto := c.Header.Get("X-Forwarded-Proto")
	if proto == "" {
		proto = "http"
		if c.TLS != nil {
			proto = "https"
		}
	}
	return proto + "://" + c.Host + "/webhooks"
}

// botView is the bot as the caller may see it: integrations rendered and
// keyed as asked, the signing secret only for developers and above (and
// the bot itself).
func (s *server) botView(c *call, b platform.Bot, ints map[string]platform.Integration) platform.Bot {
	out := b
	out.Integrations = map[string]json.RawMessage{}
	byAlias := strings.EqualFold(c.Header.Get("x-multiple-integrations"), "true")
	base := webhookBase(c)
	for _, alias := range keysOf(b.Installs) {
		in := b.Installs[alias]
		i, ok := ints[in.IntegrationID]
		if !ok {
			s.Logger.Warn("installed integration not found", "bot", b.ID, "alias", alias, "integration", in.IntegrationID)
			continue
		}
		k := in.IntegrationID
		if byAlias {
			k = alias
		} else if _, taken := out.Integrations[k]; taken {
			continue // keyed by id, the first alias of an integration shows
		}
		out.Integrations[k], _ = json.Marshal(in.Render(i, base))
	}
	if !c.role.AtLeast(platform.RoleDeveloper) {
		out.SigningSecret = ""
	}
	return out
}

func (s *server) listBots(c *call) (any, error) {
	q := c.query()
	f := dynamo.BotFilter{WorkspaceID: c.workspaceID, Tags: q.object("tags")}
	var err error
	if f.SortField, err = q.oneOf("sortField", "createdAt", "createdAt", "updatedAt"); err != nil {
		return nil, err
	}
	dir, err := q.oneOf("sortDirection", "desc", "asc", "desc")
	if err != nil {
		return nil, err
	}
	f.Descending = dir == "desc"
	dev, err := q.boolean("dev")
	if err != nil {
		return nil, err
	}
	f.Dev = dev != nil && *dev
	list := listKey(c.workspaceID, f.SortField, dir, f.Dev, f.Tags)
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	bots, next, err := s.Store.ListBots(c.ctx, f, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"bots": bots, "meta": c.meta(list, next)}, nil
}

// deleteBot deletes the bot, then its schedules, and unregisters its
// integrations (each call recorded in the operations ledger).
func (s *server) deleteBot(c *call) (any, error) {
	b, err := s.Store.DeleteBot(c.ctx, c.workspaceID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	s.deleteSchedules(c.ctx, b.ID, keysOf(b.RecurringEvents))
	s.removeCode(c, "bot", b.ID)
	s.dropReplaced(c.ctx, []string{b.CodeKey}, nil, nil)
	// The bot's data (conversations, messages, users, states, events,
	// files, tables, issues) is the sweeper's, from the marker DeleteBot
	// wrote.
	s.sweep(c, b.ID)
	if len(b.Installs) == 0 {
		return nil, nil
	}
	ints, err := s.installedIntegrations(c.ctx, b)
	if err != nil {
		s.Logger.Error("deleteBot: reading installed integrations", "bot", b.ID, "err", err)
		return nil, nil
	}
	var calls []integrationCall
	for _, alias := range keysOf(b.Installs) {
		in := b.Installs[alias]
		if i, ok := ints[in.IntegrationID]; ok {
			op := newOperation(platform.OperationUnregister, b, in, i)
			if err := s.Store.CreateOperation(c.ctx, op); err != nil {
				s.Logger.Error("deleteBot: recording an unregistration", "bot", b.ID, "err", err)
				continue
			}
			calls = append(calls, integrationCall{op: op, call: s.callFor(c, "unregister", b, in, i)})
		}
	}
	s.runCalls(c.ctx, calls)
	return nil, nil
}

// --- updateBot ---

// updateBotBody is updateBot's body: the reference's, plus the spec's
// secrets and dev. Maps are patched entry by entry (null removes an entry);
// see docs/bots.md.
type updateBotBody struct {
	URL                json.RawMessage            `json:"url"`
	Authentication     *string                    `json:"authentication"`
	Configuration      *botConfigPatch            `json:"configuration"`
	Tags               map[string]string          `json:"tags"`
	Blocked            *bool                      `json:"blocked"`
	MaxExecutionTime   *float64                   `json:"maxExecutionTime"`
	AlwaysAlive        *bool                      `json:"alwaysAlive"`
	User               *tagsPatch                 `json:"user"`
	Message            *tagsPatch                 `json:"message"`
	Conversation       *tagsPatch                 `json:"conversation"`
	Events             map[string]json.RawMessage `json:"events"`
	Actions            map[string]json.RawMessage `json:"actions"`
	States             map[string]json.RawMessage `json:"states"`
	RecurringEvents    map[string]json.RawMessage `json:"recurringEvents"`
	Integrations       map[string]json.RawMessage `json:"integrations"`
	Plugins            map[string]json.RawMessage `json:"plugins"`
	Subscriptions      json.RawMessage            `json:"subscriptions"`
	Code               *string                    `json:"code"`
	Name               *string                    `json:"name"`
	Description        *string                    `json:"description"`
	Medias             *[]platform.Media          `json:"medias"`
	Layers             []string                   `json:"layers"`
	ShouldMergePlugins *bool                      `json:"shouldMergePlugins"`
	Secrets            map[string]*string         `json:"secrets"`
	Dev                *bool                      `json:"dev"`

	// codeKey is where code was stored (admin_code.go), before the update.
	codeKey string
	// replace makes the body the bot's whole definition (bot JSON): what
	// it leaves out is removed (withRemovals).
	replace bool
}

type botConfigPatch struct {
	Data   json.RawMessage `json:"data"`
	Schema json.RawMessage `json:"schema"`
}

type tagsPatch struct {
	Tags map[string]json.RawMessage `json:"tags"`
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// patchEntries applies an entry-by-entry patch: null removes, anything
// else replaces.
func patchEntries(dst map[string]json.RawMessage, patch map[string]json.RawMessage) map[string]json.RawMessage {
	if dst == nil {
		dst = map[string]json.RawMessage{}
	}
	for k, v := range patch {
		if isNull(v) {
			delete(dst, k)
		} else {
			dst[k] = v
		}
	}
	return dst
}

var secretName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// integrationCall is a call to an integration started by a change, to run
// once the change is committed.
type integrationCall struct {
	op    platform.Operation
	call  delivery.IntegrationCall
	alias string // the instance a registration result updates
}

// botChange is what applying an update produced besides the bot.
type botChange struct {
	calls            []integrationCall
	removedSchedules []string
}

func (s *server) updateBot(c *call) (any, error) {
	var in updateBotBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return s.updateBotWith(c, c.PathValue("id"), &in)
}

// updateBotWith applies an updateBot body to bot id of the caller's
// workspace (updateBot; publishFromBotJson and deployBotVersion, which
// replace the definition) and answers the bot.
func (s *server) updateBotWith(c *call, id string, in *updateBotBody) (any, error) {
	if err := checkUpdateBot(in); err != nil {
		return nil, err
	}
	if in.Code != nil && *in.Code != "" {
		// The code goes to the file storage first (the record names it),
		// for a bot the caller may change.
		if rec, err := s.Store.GetBot(c.ctx, id); err != nil || rec.WorkspaceID != c.workspaceID {
			if err == nil {
				err = platform.NotFound("bot", id)
			}
			return nil, err
		}
		var err error
		if in.codeKey, err = s.storeBotCode(c.ctx, id, *in.Code); err != nil {
			return nil, err
		}
	}
	var ch botChange
	var ints map[string]platform.Integration
	var oldCode string
	b, err := s.Store.UpdateBot(c.ctx, c.workspaceID, id, func(b *platform.Bot) (dynamo.BotEffects, error) {
		ch = botChange{}
		oldCode = b.CodeKey
		fx := dynamo.BotEffects{Installs: map[string]int64{}, Plugins: map[string]int64{}}
		body := *in
		if in.replace {
			body = withRemovals(in, b)
		}
		var err error
		ints, err = s.applyBotPatch(c, b, &body, &fx, &ch)
		return fx, err
	})
	if err != nil {
		return nil, err
	}
	s.deleteSchedules(c.ctx, b.ID, ch.removedSchedules)
	s.dropReplaced(c.ctx, []string{oldCode}, []string{b.CodeKey}, s.botKeysNow(b.ID))
	// Committed: from here a failure is answered as such but the write
	// stands (the audit log records it), and the register and unregister
	// operations the change committed run whatever the deployment did.
	deployErr := s.deployBot(c, b)
	if len(ch.calls) > 0 {
		s.runCalls(c.ctx, ch.calls)
		if deployErr == nil {
			// The registrations moved the instances: answer their outcome.
			rec, err := s.Store.GetBot(c.ctx, b.ID)
			if err != nil {
				return nil, committed(err, nil)
			}
			b = rec.Bot
		}
	}
	out := map[string]any{"bot": s.botView(c, b, ints)}
	if deployErr != nil {
		return nil, committed(deployErr, out)
	}
	return out, nil
}

// checkUpdateBot validates what the reference schema cannot.
func checkUpdateBot(in *updateBotBody) error {
	if in.Name != nil && strings.TrimSpace(*in.Name) == "" {
		return platform.Invalid("invalid body: field \"name\": must not be empty")
	}
	if len(in.URL) > 0 && !isNull(in.URL) {
		var u string
		if err := json.Unmarshal(in.URL, &u); err != nil {
			return platform.Invalid("invalid body: field \"url\": must be a string or null")
		}
		if err := checkURL("url", u); err != nil {
			return err
		}
	}
	if in.MaxExecutionTime != nil && (*in.MaxExecutionTime < 1 || *in.MaxExecutionTime > maxBotExecution) {
		return platform.Invalid("invalid body: field \"maxExecutionTime\": must be from 1 to %d seconds", maxBotExecution)
	}
	for name := range in.Secrets {
		if !secretName.MatchString(name) {
			return platform.Invalid("invalid body: field %q: secret names are SCREAMING_SNAKE_CASE", "secrets."+name)
		}
	}
	return nil
}

// applyBotPatch applies an update to b (as just read) and returns the
// integration versions the bot has installed afterwards. It may run more
// than once (on a concurrent change), so it derives everything from b.
func (s *server) applyBotPatch(c *call, b *platform.Bot, in *updateBotBody, fx *dynamo.BotEffects, ch *botChange) (map[string]platform.Integration, error) {
	if in.Name != nil {
		b.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		b.Description = *in.Description
	}
	if in.Code != nil {
		b.Code, b.CodeKey = "", in.codeKey
		b.DeployedAt = platform.Now() // new code is a deployment
	}
	if len(in.URL) > 0 {
		b.URL = ""
		if !isNull(in.URL) {
			_ = json.Unmarshal(in.URL, &b.URL)
		}
	}
	if in.AlwaysAlive != nil {
		b.AlwaysAlive = *in.AlwaysAlive
	}
	if in.Dev != nil {
		b.Dev = *in.Dev
	}
	if in.MaxExecutionTime != nil {
		v := *in.MaxExecutionTime
		b.MaxExecutionTime = &v
	}
	if in.Medias != nil {
		b.Medias = *in.Medias
		if b.Medias == nil {
			b.Medias = []platform.Media{}
		}
	}
	if in.Configuration != nil {
		var cfg botConfigPatch
		_ = json.Unmarshal(b.Configuration, &cfg)
		if len(in.Configuration.Data) > 0 {
			cfg.Data = in.Configuration.Data
		}
		if len(in.Configuration.Schema) > 0 {
			cfg.Schema = in.Configuration.Schema
		}
		raw, _ := json.Marshal(cfg)
		b.Configuration = normalizeConfiguration(raw)
	}
	if len(in.Subscriptions) > 0 {
		b.Subscriptions = in.Subscriptions
	}
	if in.Tags != nil {
		if b.Tags == nil {
			b.Tags = map[string]string{}
		}
		// An empty value removes a tag (tags cannot be null).
		for k, v := range in.Tags {
			if v == "" {
				delete(b.Tags, k)
			} else {
				b.Tags[k] = v
			}
		}
	}
	for _, p := range []struct {
		dst   *platform.TagDefinitions
		patch *tagsPatch
	}{{&b.User, in.User}, {&b.Conversation, in.Conversation}, {&b.Message, in.Message}} {
		if p.patch != nil {
			p.dst.Tags = patchEntries(p.dst.Tags, p.patch.Tags)
		}
	}
	b.States = patchEntries(b.States, in.States)
	b.Events = patchEntries(b.Events, in.Events)
	b.Actions = patchEntries(b.Actions, in.Actions)
	if in.Secrets != nil {
		if b.SecretValues == nil {
			b.SecretValues = map[string]string{}
		}
		for k, v := range in.Secrets {
			if v == nil {
				delete(b.SecretValues, k)
			} else {
				b.SecretValues[k] = *v
			}
		}
		b.Secrets = keysOf(b.SecretValues)
		if len(b.Secrets) == 0 {
			b.Secrets = nil
		}
	}
	if err := s.patchRecurringEvents(c, b, in.RecurringEvents, ch); err != nil {
		return nil, err
	}
	ints, err := s.patchIntegrations(c, b, in.Integrations, fx, ch)
	if err != nil {
		return nil, err
	}
	if err := s.patchPlugins(c, b, in.Plugins, ints, fx); err != nil {
		return nil, err
	}
	return ints, nil
}

// patchRecurringEvents applies the recurringEvents patch and writes the
// schedules of every entry given (before the definition is committed);
// removed entries' schedules are deleted after the commit.
func (s *server) patchRecurringEvents(c *call, b *platform.Bot, patch map[string]json.RawMessage, ch *botChange) error {
	if b.RecurringEvents == nil {
		b.RecurringEvents = map[string]json.RawMessage{}
	}
	var put []string
	for _, name := range keysOf(patch) {
		raw := patch[name]
		if isNull(raw) {
			delete(b.RecurringEvents, name)
			ch.removedSchedules = append(ch.removedSchedules, name)
			continue
		}
		ev, err := s.recurringEntry(name, raw, b.RecurringEvents[name])
		if err != nil {
			return err
		}
		b.RecurringEvents[name] = ev
		put = append(put, name)
	}
	if len(b.RecurringEvents) > maxRecurringEvents {
		return platform.Invalid("invalid body: field \"recurringEvents\": at most %d entries", maxRecurringEvents)
	}
	return s.putSchedules(c.ctx, *b, put)
}

// installPatch is an entry of updateBot's integrations.
type installPatch struct {
	Enabled           *bool           `json:"enabled"`
	IntegrationID     *string         `json:"integrationId"`
	ConfigurationType json.RawMessage `json:"configurationType"`
	Configuration     json.RawMessage `json:"configuration"`
	DisabledChannels  *[]string       `json:"disabledChannels"`
}

// resolveInstall finds the installed instance a key names: an alias, or an
// integration id.
func resolveInstall(b *platform.Bot, key string) (string, bool) {
	if _, ok := b.Installs[key]; ok {
		return key, true
	}
	in, ok := b.Install(key)
	return in.Alias, ok
}

// patchIntegrations installs, configures, enables, disables and removes
// integrations. Keys are aliases, or (without integrationId) the id of an
// integration; see docs/bots.md. New or reconfigured enabled instances get a
// registration operation; removed ones an unregistration.
func (s *server) patchIntegrations(c *call, b *platform.Bot, patch map[string]json.RawMessage, fx *dynamo.BotEffects, ch *botChange) (map[string]platform.Integration, error) {
	if b.Installs == nil {
		b.Installs = map[string]platform.IntegrationInstance{}
	}
	// Read every integration the bot has or the patch names, at once.
	ids := []string{}
	for _, in := range b.Installs {
		ids = append(ids, in.IntegrationID)
	}
	patches := map[string]installPatch{}
	for _, k := range keysOf(patch) {
		if isNull(patch[k]) {
			continue
		}
		var p installPatch
		if err := json.Unmarshal(patch[k], &p); err != nil {
			return nil, platform.Invalid("invalid body: field %q: %v", "integrations."+k, err)
		}
		patches[k] = p
		if p.IntegrationID != nil {
			ids = append(ids, *p.IntegrationID)
		} else {
			ids = append(ids, k)
		}
	}
	ints, err := s.Store.IntegrationsByID(c.ctx, ids)
	if err != nil {
		return nil, err
	}
	now := platform.Now()
	var register []string // aliases to (re)register
	for _, k := range keysOf(patch) {
		field := "integrations." + k
		if isNull(patch[k]) {
			alias, ok := resolveInstall(b, k)
			if !ok {
				continue // removing what is not there: nothing to do
			}
			old := b.Installs[alias]
			delete(b.Installs, alias)
			fx.Installs[old.IntegrationID]--
			if i, ok := ints[old.IntegrationID]; ok {
				op := newOperation(platform.OperationUnregister, *b, old, i)
				fx.Operations = append(fx.Operations, op)
				ch.calls = append(ch.calls, integrationCall{op: op, call: s.callFor(c, "unregister", *b, old, i)})
			}
			continue
		}
		p := patches[k]
		// Which instance, of which integration.
		alias, intID := k, ""
		existing, exists := b.Installs[k]
		switch {
		case p.IntegrationID != nil:
			intID = *p.IntegrationID
		case exists:
			intID = existing.IntegrationID
		default:
			if a, ok := resolveInstall(b, k); ok {
				alias, existing, exists, intID = a, b.Installs[a], true, k
			} else if platform.HasPrefix(k, platform.PrefixIntegration) {
				intID = k
				i, ok := ints[k]
				if !ok || !i.VisibleTo(b.WorkspaceID) {
					return nil, platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: integration %q not found", field, k)
				}
				alias = defaultAlias(b, i)
				if other, taken := b.Installs[alias]; taken && other.IntegrationID != k {
					return nil, platform.Errorf(platform.ErrAlreadyExists, "invalid body: field %q: the alias %q is taken by another integration; give an alias and integrationId", field, alias)
				}
				existing, exists = b.Installs[alias]
			} else {
				return nil, platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: no integration is installed under the alias %q (give integrationId to install one)", field, k)
			}
		}
		i, ok := ints[intID]
		if !ok || !i.VisibleTo(b.WorkspaceID) {
			return nil, platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: integration %q not found", field, intID)
		}
		if exists && existing.IntegrationID != intID {
			// The alias moves to another integration (e.g. a new version):
			// the old instance goes, a new one comes.
			fx.Installs[existing.IntegrationID]--
			if oi, ok := ints[existing.IntegrationID]; ok {
				op := newOperation(platform.OperationUnregister, *b, existing, oi)
				fx.Operations = append(fx.Operations, op)
				ch.calls = append(ch.calls, integrationCall{op: op, call: s.callFor(c, "unregister", *b, existing, oi)})
			}
			exists = false
		}
		inst := existing
		if !exists {
			if i.LifecycleStatus == "deprecated" {
				return nil, platform.Invalid("invalid body: field %q: integration %s %s is deprecated and cannot be installed", field, i.Name, i.Version)
			}
			if i.Dev && !b.Dev {
				return nil, platform.Invalid("invalid body: field %q: a dev integration can only be installed on a dev bot", field)
			}
			inst = platform.IntegrationInstance{
				Alias: alias, IntegrationID: intID, Enabled: true, Configuration: json.RawMessage(`{}`),
				DisabledChannels: []string{}, WebhookID: platform.NewUnguessableID(platform.PrefixWebhook),
				CreatedAt: now, Status: platform.InstallRegistrationPending,
			}
			fx.Installs[intID]++
		}
		wasEnabled, oldType, oldCfg := inst.Enabled, inst.ConfigurationType, inst.Configuration
		if p.Enabled != nil {
			inst.Enabled = *p.Enabled
		}
		if len(p.ConfigurationType) > 0 {
			inst.ConfigurationType = nil
			if !isNull(p.ConfigurationType) {
				var t string
				if err := json.Unmarshal(p.ConfigurationType, &t); err != nil {
					return nil, platform.Invalid("invalid body: field %q: must be a string or null", field+".configurationType")
				}
				inst.ConfigurationType = &t
			}
		}
		if len(p.Configuration) > 0 {
			inst.Configuration = p.Configuration
		}
		if p.DisabledChannels != nil {
			inst.DisabledChannels = append([]string{}, *p.DisabledChannels...)
			for _, chn := range inst.DisabledChannels {
				if _, ok := i.Channels[chn]; !ok {
					return nil, platform.Invalid("invalid body: field %q: integration %s has no channel %q", field+".disabledChannels", i.Name, chn)
				}
			}
		}
		if err := checkInstanceConfiguration(field, i, inst); err != nil {
			return nil, err
		}
		reconfigured := !exists || !sameType(oldType, inst.ConfigurationType) || !jsonEqual(oldCfg, inst.Configuration)
		retry := exists && inst.Status == platform.InstallRegistrationFailed
		if inst.Enabled && (reconfigured || !wasEnabled || retry) {
			register = append(register, alias)
		}
		inst.UpdatedAt = now
		b.Installs[alias] = inst
	}
	if len(b.Installs) > maxInstalls {
		return nil, platform.Invalid("invalid body: field \"integrations\": at most %d integrations per bot", maxInstalls)
	}
	if !b.Dev {
		for _, alias := range keysOf(b.Installs) {
			if ints[b.Installs[alias].IntegrationID].Dev {
				return nil, platform.Invalid("invalid body: field \"dev\": the bot has the dev integration %q installed: a production bot cannot", alias)
			}
		}
	}
	seen := map[string]bool{}
	for _, alias := range register {
		if seen[alias] {
			continue
		}
		seen[alias] = true
		inst := b.Installs[alias]
		i := ints[inst.IntegrationID]
		op := newOperation(platform.OperationRegister, *b, inst, i)
		inst.Status, inst.StatusReason, inst.OperationID = platform.InstallRegistrationPending, nil, op.ID
		b.Installs[alias] = inst
		fx.Operations = append(fx.Operations, op)
		ch.calls = append(ch.calls, integrationCall{op: op, alias: alias, call: s.callFor(c, "register", *b, inst, i)})
	}
	return ints, nil
}

func sameType(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// checkInstanceConfiguration checks an instance's configuration type and
// data against the integration's declared configuration schema.
func checkInstanceConfiguration(field string, i platform.Integration, in platform.IntegrationInstance) error {
	def := i.Configuration
	if in.ConfigurationType != nil {
		d, ok := i.Configurations[*in.ConfigurationType]
		if !ok {
			return platform.Invalid("invalid body: field %q: integration %s has no configuration %q", field+".configurationType", i.Name, *in.ConfigurationType)
		}
		def = d
	}
	var cfg struct {
		Schema json.RawMessage `json:"schema"`
	}
	_ = json.Unmarshal(def, &cfg)
	return validateJSON(field+".configuration", cfg.Schema, in.Configuration)
}

// newOperation is a pending operation of a call to integration i for
// instance in of bot b, with its deadline.
func newOperation(kind string, b platform.Bot, in platform.IntegrationInstance, i platform.Integration) platform.Operation {
	now := platform.Clock()
	return platform.Operation{
		ID: platform.NewID(platform.PrefixOperation), Type: kind, Status: platform.OperationPending,
		BotID: b.ID, IntegrationID: i.ID, Alias: in.Alias,
		CreatedAt: platform.FormatTime(now), UpdatedAt: platform.FormatTime(now),
		Deadline:    platform.FormatTime(now.Add(callTimeout(i) + operationGrace)),
		WorkspaceID: b.WorkspaceID,
	}
}

// operationGrace is how long past its call's timeout an operation may take
// to be recorded before it counts as outcome_unknown.
const operationGrace = 30 * time.Second

// maxCallTimeout bounds a call to an integration made during an API call,
// so the call ends within API Gateway's 29 seconds.
const maxCallTimeout = 20 * time.Second

// callTimeout is how long an integration gets to answer: its
// maxExecutionTime, within bounds.
func callTimeout(i platform.Integration) time.Duration {
	if i.MaxExecutionTime != nil && *i.MaxExecutionTime > 0 {
		return min(time.Duration(*i.MaxExecutionTime*float64(time.Second)), maxCallTimeout)
	}
	return delivery.DefaultTimeout
}

// callFor builds the signed call of an operation to integration i.
func (s *server) callFor(c *call, operation string, b platform.Bot, in platform.IntegrationInstance, i platform.Integration) delivery.IntegrationCall {
	webhookURL := strings.TrimSuffix(webhookBase(c), "/") + "/" + in.WebhookID
	return delivery.IntegrationCall{
		Operation: operation, URL: i.URL, Secret: i.SigningSecret,
		BotID: b.ID, Alias: in.Alias, IntegrationID: i.ID, WebhookID: in.WebhookID,
		ConfigurationType: in.ConfigurationType, Configuration: in.Configuration,
		Body: map[string]any{"webhookUrl": webhookURL}, Timeout: callTimeout(i),
	}
}

// runCalls runs committed operations in parallel, each once, and records
// registration outcomes on the instances.
func (s *server) runCalls(ctx context.Context, calls []integrationCall) {
	s.resolveCalls(ctx, calls)
	client := s.Outbound
	if client == nil {
		client = delivery.Client(false)
	}
	var wg sync.WaitGroup
	for _, ic := range calls {
		wg.Add(1)
		go func(ic integrationCall) {
			defer wg.Done()
			ctx := context.WithoutCancel(ctx)
			op, res, builtIn, err := s.runBuiltinOperation(ctx, ic)
			if !builtIn {
				op, res, err = delivery.RunOperation(ctx, s.Store, client, ic.op, ic.call)
			}
			if err != nil {
				s.Logger.Error("recording an integration operation", "operation", ic.op.ID, "err", err)
			}
			if ic.op.Type == platform.OperationRegister {
				status, reason := delivery.RegistrationStatus(op, res)
				if err := s.Store.SetInstallStatus(ctx, ic.op.BotID, ic.alias, ic.op.ID, status, reason); err != nil {
					s.Logger.Error("recording a registration result", "operation", ic.op.ID, "err", err)
				}
			}
			if s.OnDelivery != nil {
				s.OnDelivery(ctx, delivery.Result{
					Kind: ic.op.Type, BotID: ic.op.BotID, WorkspaceID: ic.op.WorkspaceID, IntegrationID: ic.op.IntegrationID,
					Name: ic.op.Alias, OperationID: ic.op.ID, URL: ic.call.URL, Outcome: res.Outcome,
					StatusCode: res.StatusCode, Error: res.Err, At: time.Now(), Duration: res.Duration,
				})
			}
		}(ic)
	}
	wg.Wait()
}

// pluginPatch is an entry of updateBot's plugins.
type pluginPatch struct {
	ID            string                       `json:"id"`
	Enabled       *bool                        `json:"enabled"`
	Configuration json.RawMessage              `json:"configuration"`
	Interfaces    map[string]pluginInterface   `json:"interfaces"`
	Integrations  map[string]pluginIntegration `json:"integrations"`
}

type pluginInterface struct {
	IntegrationID             string `json:"integrationId"`
	IntegrationAlias          string `json:"integrationAlias,omitempty"`
	IntegrationInterfaceAlias string `json:"integrationInterfaceAlias,omitempty"`
	InterfaceID               string `json:"interfaceId"`
}

type pluginIntegration struct {
	IntegrationID    string `json:"integrationId"`
	IntegrationAlias string `json:"integrationAlias"`
}

// pluginInstance is a plugin as a bot stores and answers it (the
// reference's shape): the catalogue version's description, as of when the
// entry was last written, and how the bot backs its dependencies.
type pluginInstance struct {
	Enabled         bool                         `json:"enabled"`
	Name            string                       `json:"name"`
	Version         string                       `json:"version"`
	Configuration   json.RawMessage              `json:"configuration"`
	Interfaces      map[string]pluginInterface   `json:"interfaces"`
	Integrations    map[string]pluginIntegration `json:"integrations"`
	ID              string                       `json:"id"`
	CreatedAt       string                       `json:"createdAt"`
	UpdatedAt       string                       `json:"updatedAt"`
	Title           string                       `json:"title"`
	Description     string                       `json:"description"`
	IconURL         string                       `json:"iconUrl"`
	ReadmeURL       string                       `json:"readmeUrl"`
	Public          bool                         `json:"public"`
	Visibility      string                       `json:"visibility"`
	LifecycleStatus string                       `json:"lifecycleStatus"`
}

// patchPlugins applies the plugins patch: each entry names a plugin version
// of the catalogue the bot's workspace may read (its own or a shared one),
// its configuration is checked against the version's configuration schema,
// and each of the version's interface and integration dependencies must be
// backed by an integration installed on the bot (implementing that
// interface, or of that integration's name). A missing plugin, version or
// backing is a 400 naming the entry. Entries not in the patch are checked
// again (an integration they rely on may just have been removed). Install
// counts of plugin versions move in fx.
func (s *server) patchPlugins(c *call, b *platform.Bot, patch map[string]json.RawMessage, ints map[string]platform.Integration, fx *dynamo.BotEffects) error {
	if b.Plugins == nil {
		b.Plugins = map[string]json.RawMessage{}
	}
	if fx.Plugins == nil {
		fx.Plugins = map[string]int64{}
	}
	ids := []string{}
	patches := map[string]pluginPatch{}
	for _, alias := range keysOf(patch) {
		if isNull(patch[alias]) {
			continue
		}
		var p pluginPatch
		if err := json.Unmarshal(patch[alias], &p); err != nil {
			return platform.Invalid("invalid body: field %q: %v", "plugins."+alias, err)
		}
		patches[alias] = p
		ids = append(ids, p.ID)
	}
	if len(patch) == 0 {
		return s.checkPluginBackings(b, ints)
	}
	found, err := s.Store.PluginsByID(c.ctx, ids)
	if err != nil {
		return err
	}
	now := platform.Now()
	for _, alias := range keysOf(patch) {
		field := "plugins." + alias
		var old pluginInstance
		hadOld := json.Unmarshal(b.Plugins[alias], &old) == nil && old.ID != ""
		if isNull(patch[alias]) {
			if hadOld {
				fx.Plugins[old.ID]--
			}
			delete(b.Plugins, alias)
			continue
		}
		p := patches[alias]
		pv, ok := found[p.ID]
		if !ok || !pv.VisibleTo(b.WorkspaceID) {
			return platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: plugin %q not found", field+".id", p.ID)
		}
		same := hadOld && old.ID == p.ID
		if !same && pv.LifecycleStatus == "deprecated" {
			return platform.Invalid("invalid body: field %q: plugin %s %s is deprecated and cannot be added", field+".id", pv.Name, pv.Version)
		}
		inst := pluginInstance{
			Enabled: true, Name: pv.Name, Version: pv.Version, Configuration: json.RawMessage(`{}`),
			Interfaces: map[string]pluginInterface{}, Integrations: map[string]pluginIntegration{},
			ID: pv.ID, CreatedAt: now, UpdatedAt: now, Title: pv.Title, Description: pv.Description,
			IconURL: pv.IconURL, ReadmeURL: pv.ReadmeURL, Public: pv.Public, Visibility: pv.Visibility, LifecycleStatus: pv.LifecycleStatus,
		}
		if same {
			inst.CreatedAt, inst.Enabled, inst.Configuration = old.CreatedAt, old.Enabled, old.Configuration
			inst.Interfaces, inst.Integrations = orEmpty(old.Interfaces), orEmpty(old.Integrations)
		}
		if p.Enabled != nil {
			inst.Enabled = *p.Enabled
		}
		if len(p.Configuration) > 0 && !isNull(p.Configuration) {
			inst.Configuration = p.Configuration
		}
		var cfg struct {
			Schema json.RawMessage `json:"schema"`
		}
		_ = json.Unmarshal(pv.Configuration, &cfg)
		if err := validateJSON(field+".configuration", cfg.Schema, inst.Configuration); err != nil {
			return err
		}
		if p.Interfaces != nil {
			inst.Interfaces = map[string]pluginInterface{}
			for _, name := range keysOf(p.Interfaces) {
				pi := p.Interfaces[name]
				f := field + ".interfaces." + name
				dep, ok := pv.Dependencies.Interfaces[name]
				if !ok {
					return platform.Invalid("invalid body: field %q: plugin %s %s has no interface %q", f, pv.Name, pv.Version, name)
				}
				in, ok := installFor(b, pi.IntegrationID, pi.IntegrationAlias)
				if !ok {
					return platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: integration %q is not installed on the bot", f, pi.IntegrationID)
				}
				i := ints[in.IntegrationID]
				impl, ifAlias, ok := implementationOf(i, dep, pi.IntegrationInterfaceAlias)
				if !ok {
					return platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: integration %s %s does not implement interface %s %s", f, i.Name, i.Version, dep.Name, dep.Version)
				}
				_ = impl
				inst.Interfaces[name] = pluginInterface{IntegrationID: in.IntegrationID, IntegrationAlias: in.Alias, IntegrationInterfaceAlias: ifAlias, InterfaceID: dep.ID}
			}
		}
		if p.Integrations != nil {
			inst.Integrations = map[string]pluginIntegration{}
			for _, name := range keysOf(p.Integrations) {
				pi := p.Integrations[name]
				f := field + ".integrations." + name
				dep, ok := pv.Dependencies.Integrations[name]
				if !ok {
					return platform.Invalid("invalid body: field %q: plugin %s %s has no integration %q", f, pv.Name, pv.Version, name)
				}
				in, ok := b.Installs[pi.IntegrationAlias]
				if !ok || in.IntegrationID != pi.IntegrationID {
					return platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: no integration %q is installed under the alias %q", f, pi.IntegrationID, pi.IntegrationAlias)
				}
				if i := ints[in.IntegrationID]; i.Name != dep.Name {
					return platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: the plugin needs integration %s, not %s", f, dep.Name, i.Name)
				}
				inst.Integrations[name] = pi
			}
		}
		raw, err := json.Marshal(inst)
		if err != nil {
			return err
		}
		b.Plugins[alias] = raw
		if !same {
			if hadOld {
				fx.Plugins[old.ID]--
			}
			fx.Plugins[pv.ID]++
		}
	}
	return s.checkPluginBackings(b, ints)
}

// checkPluginBackings checks that every plugin of b is backed: each
// dependency the version declared when the entry was written has an
// installed integration (a removed integration is refused while a plugin
// relies on it).
func (s *server) checkPluginBackings(b *platform.Bot, ints map[string]platform.Integration) error {
	for _, alias := range keysOf(b.Plugins) {
		var inst pluginInstance
		if json.Unmarshal(b.Plugins[alias], &inst) != nil || inst.ID == "" {
			continue
		}
		for name, pi := range inst.Interfaces {
			if in, ok := b.Installs[pi.IntegrationAlias]; !ok || in.IntegrationID != pi.IntegrationID {
				return platform.Invalid("invalid body: field %q: plugin %q relies on the integration installed as %q for its interface %q: change the plugin first", "plugins."+alias, alias, pi.IntegrationAlias, name)
			}
		}
		for name, pi := range inst.Integrations {
			if in, ok := b.Installs[pi.IntegrationAlias]; !ok || in.IntegrationID != pi.IntegrationID {
				return platform.Invalid("invalid body: field %q: plugin %q relies on the integration installed as %q (its %q): change the plugin first", "plugins."+alias, alias, pi.IntegrationAlias, name)
			}
		}
	}
	return nil
}

// implementationOf finds integration i's implementation of interface dep:
// under ifAlias when given, else any (by interface id, else name). It
// returns the alias the integration declares it under.
func implementationOf(i platform.Integration, dep platform.PluginDependency, ifAlias string) (interfaceImpl, string, bool) {
	match := func(k string) (interfaceImpl, bool) {
		var im interfaceImpl
		if json.Unmarshal(i.Interfaces[k], &im) != nil {
			return im, false
		}
		return im, (im.ID != "" && im.ID == dep.ID) || im.Name == dep.Name || (im.Name == "" && k == dep.Name)
	}
	if ifAlias != "" {
		im, ok := match(ifAlias)
		return im, ifAlias, ok
	}
	for _, k := range keysOf(i.Interfaces) {
		if im, ok := match(k); ok {
			return im, k, true
		}
	}
	return interfaceImpl{}, "", false
}

// installFor finds the instance of integration id (under alias, when given).
func installFor(b *platform.Bot, id, alias string) (platform.IntegrationInstance, bool) {
	if alias != "" {
		in, ok := b.Installs[alias]
		return in, ok && in.IntegrationID == id
	}
	return b.Install(id)
}

// errMessage is the caller-facing message of an error.
func errMessage(err error) string {
	var pe *platform.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// validateJSON checks data against a JSON schema a developer declared. A
// schema that does not compile does not block (it is the integration's
// own); remote references are never loaded.
func validateJSON(field string, schema, data json.RawMessage) error {
	if len(schema) == 0 || isNull(schema) {
		return nil
	}
	var sv any
	if err := json.Unmarshal(schema, &sv); err != nil {
		return nil
	}
	if m, ok := sv.(map[string]any); !ok || len(m) == 0 {
		return nil
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const loc = "mem:///schema.json"
	if err := c.AddResource(loc, sv); err != nil {
		return nil
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil
	}
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var dv any
	if err := dec.Decode(&dv); err != nil {
		return platform.Invalid("invalid body: field %q: %v", field, err)
	}
	if err := sch.Validate(dv); err != nil {
		var ve *jsonschema.ValidationError
		msg := err.Error()
		if errors.As(err, &ve) {
			msg = firstLeaf(ve)
		}
		return platform.Invalid("invalid body: field %q: does not match the configuration schema: %s", field, msg)
	}
	return nil
}

// firstLeaf is the most specific message of a validation error: the one
// at the longest instance location.
func firstLeaf(ve *jsonschema.ValidationError) string {
	var walk func(u *jsonschema.OutputUnit) (string, string)
	walk = func(u *jsonschema.OutputUnit) (string, string) {
		loc, msg := u.InstanceLocation, ""
		if u.Error != nil {
			msg = u.Error.String()
		}
		for i := range u.Errors {
			l, m := walk(&u.Errors[i])
			if m != "" && (msg == "" || len(l) > len(loc)) {
				loc, msg = l, m
			}
		}
		return loc, msg
	}
	loc, msg := walk(ve.BasicOutput())
	if loc = strings.Trim(strings.ReplaceAll(loc, "/", "."), "."); loc != "" {
		return loc + ": " + msg
	}
	return msg
}

// sweep has a deleted bot's data deleted: by the running sweeper loop when
// the process outlives its requests, else before answering (in Lambda),
// within sweepBudget so the answer beats the function's timeout; what is
// left then stays marked for the next sweep.
func (s *server) sweep(c *call, botID string) {
	sw := s.Sweeper
	if sw == nil {
		return
	}
	if s.BackgroundJobs {
		sw.Kick()
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), sweepBudget)
	defer cancel()
	if _, err := sw.RunBot(ctx, botID); err != nil {
		s.Logger.Error("deleteBot: deleting the bot's data (left for the next sweep)", "bot", botID, "err", err)
		return
	}
	// With budget left, whatever else is pending (deletions a crash or a
	// timeout cut short): nothing else sweeps in Lambda.
	if _, err := sw.Run(ctx); err != nil {
		s.Logger.Error("deleteBot: sweeping pending deletions", "err", err)
	}
}

// sweepBudget bounds deleteBot's own sweep in Lambda (API Gateway answers
// 504 after 29 s).
const sweepBudget = 20 * time.Second

// defaultAlias is the alias an integration installed by its id (as CLI
// 0.8.59's bp deploy installs a bot's integrations) gets: its name without
// the publisher's workspace handle ("acme/telegram" installs as
// "telegram"). The CLI prepends the handle to every integration a workspace
// that is not one of Botpress's own deploys, so Botpress's open-source
// integrations deployed from source are "<handle>/telegram"; under the
// official name as alias, a bot sees them exactly as it would Botpress's
// (tags telegram:chatId, events webhook:event). Where that alias is taken
// by another integration the full name is used, as before.
func defaultAlias(b *platform.Bot, i platform.Integration) string {
	_, name, ok := strings.Cut(i.Name, "/")
	if !ok {
		return i.Name
	}
	if other, taken := b.Installs[name]; taken && other.IntegrationID != i.ID {
		return i.Name
	}
	return name
}
