package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/openapi"
	"github.com/botforge/platform/shared/platform"
)

// The rest of a bot's admin operations (docs/bots.md): its JSON export and
// import (getBotJson, publishFromBotJson), versions (snapshots of that
// JSON), transferBot, the allowlist, the shareable ids of its
// installations, unlinkSandboxedConversations and listActionRuns.

// botJSONFormat names the bot JSON this platform writes and reads.
const botJSONFormat = "botforge.bot/v1"

// botJSON is a bot's whole definition, as getBotJson exports it and
// publishFromBotJson imports it: what updateBot takes, with the code
// inline, installations by alias and plugins by alias. Secrets are named,
// never valued: an import keeps the bot's own.
type botJSON struct {
	Format           string                     `json:"format"`
	Name             string                     `json:"name"`
	Description      string                     `json:"description"`
	Dev              bool                       `json:"dev"`
	URL              string                     `json:"url,omitempty"`
	Tags             map[string]string          `json:"tags"`
	Configuration    json.RawMessage            `json:"configuration"`
	States           map[string]json.RawMessage `json:"states"`
	Events           map[string]json.RawMessage `json:"events"`
	Actions          map[string]json.RawMessage `json:"actions"`
	RecurringEvents  map[string]json.RawMessage `json:"recurringEvents"`
	Subscriptions    json.RawMessage            `json:"subscriptions,omitempty"`
	User             platform.TagDefinitions    `json:"user"`
	Conversation     platform.TagDefinitions    `json:"conversation"`
	Message          platform.TagDefinitions    `json:"message"`
	Integrations     map[string]botJSONInstall  `json:"integrations"`
	Plugins          map[string]pluginPatch     `json:"plugins"`
	Medias           []platform.Media           `json:"medias"`
	MaxExecutionTime *float64                   `json:"maxExecutionTime,omitempty"`
	AlwaysAlive      bool                       `json:"alwaysAlive"`
	Secrets          []string                   `json:"secrets,omitempty"`
	Code             *string                    `json:"code,omitempty"`
}

type botJSONInstall struct {
	IntegrationID     string          `json:"integrationId"`
	Enabled           bool            `json:"enabled"`
	ConfigurationType *string         `json:"configurationType"`
	Configuration     json.RawMessage `json:"configuration"`
	DisabledChannels  []string        `json:"disabledChannels"`
}

// exportBot is bot b's JSON, its code read from the file storage.
func (s *server) exportBot(c *call, b platform.Bot) (botJSON, error) {
	out := botJSON{
		Format: botJSONFormat, Name: b.Name, Description: b.Description, Dev: b.Dev, URL: b.URL,
		Tags: orEmpty(b.Tags), Configuration: b.Configuration, States: orEmpty(b.States), Events: orEmpty(b.Events),
		Actions: orEmpty(b.Actions), RecurringEvents: map[string]json.RawMessage{}, Subscriptions: b.Subscriptions,
		User: b.User, Conversation: b.Conversation, Message: b.Message,
		Integrations: map[string]botJSONInstall{}, Plugins: map[string]pluginPatch{},
		Medias: b.Medias, MaxExecutionTime: b.MaxExecutionTime, AlwaysAlive: b.AlwaysAlive, Secrets: b.Secrets,
	}
	if out.Medias == nil {
		out.Medias = []platform.Media{}
	}
	for name, raw := range b.RecurringEvents {
		var ev platform.RecurringEvent
		if json.Unmarshal(raw, &ev) == nil {
			out.RecurringEvents[name], _ = json.Marshal(map[string]any{"schedule": ev.Schedule, "type": ev.Type, "payload": ev.Payload})
		}
	}
	for alias, in := range b.Installs {
		out.Integrations[alias] = botJSONInstall{IntegrationID: in.IntegrationID, Enabled: in.Enabled, ConfigurationType: in.ConfigurationType,
			Configuration: in.Configuration, DisabledChannels: append([]string{}, in.DisabledChannels...)}
	}
	for alias, raw := range b.Plugins {
		var inst pluginInstance
		if json.Unmarshal(raw, &inst) != nil || inst.ID == "" {
			continue
		}
		en := inst.Enabled
		p := pluginPatch{ID: inst.ID, Enabled: &en, Configuration: inst.Configuration, Interfaces: map[string]pluginInterface{}, Integrations: orEmpty(inst.Integrations)}
		for name, pi := range inst.Interfaces {
			pi.InterfaceID = ""
			p.Interfaces[name] = pi
		}
		out.Plugins[alias] = p
	}
	code, err := s.botCode(c, b)
	if err != nil {
		return out, err
	}
	if code != "" {
		out.Code = &code
	}
	return out, nil
}

// botCode reads a bot's deployed code ("" : none).
func (s *server) botCode(c *call, b platform.Bot) (string, error) {
	if b.CodeKey == "" {
		return b.Code, nil
	}
	if s.Files == nil {
		return "", errors.New("no file storage configured for deployed code")
	}
	body, _, err := s.Files.Open(c.ctx, b.CodeKey, "")
	if err != nil {
		return "", err
	}
	defer body.Close()
	raw, err := io.ReadAll(body)
	return string(raw), err
}

// importBody is the updateBot body that makes a bot what j describes:
// applied with replace, so what j leaves out is removed (withRemovals).
func importBody(j botJSON) (updateBotBody, error) {
	if j.Format != "" && j.Format != botJSONFormat {
		return updateBotBody{}, platform.Invalid("invalid body: field \"botJson.format\": %q is not a bot JSON this platform reads (%s)", j.Format, botJSONFormat)
	}
	name, desc := j.Name, j.Description
	in := updateBotBody{
		Name: &name, Description: &desc, Dev: &j.Dev, AlwaysAlive: &j.AlwaysAlive, Tags: orEmpty(j.Tags),
		States: orEmpty(j.States), Events: orEmpty(j.Events), Actions: orEmpty(j.Actions), RecurringEvents: orEmpty(j.RecurringEvents),
		Integrations: map[string]json.RawMessage{}, Plugins: map[string]json.RawMessage{},
		User: &tagsPatch{Tags: orEmpty(j.User.Tags)}, Conversation: &tagsPatch{Tags: orEmpty(j.Conversation.Tags)}, Message: &tagsPatch{Tags: orEmpty(j.Message.Tags)},
		MaxExecutionTime: j.MaxExecutionTime, Code: j.Code, replace: true,
	}
	if strings.TrimSpace(name) == "" {
		in.Name = nil
	}
	in.URL = json.RawMessage(`null`)
	if j.URL != "" {
		in.URL, _ = json.Marshal(j.URL)
	}
	var cfg botConfigPatch
	_ = json.Unmarshal(normalizeConfiguration(j.Configuration), &cfg)
	in.Configuration = &cfg
	if len(j.Subscriptions) > 0 {
		in.Subscriptions = j.Subscriptions
	}
	medias := j.Medias
	if medias == nil {
		medias = []platform.Media{}
	}
	in.Medias = &medias
	for alias, i := range j.Integrations {
		id, en := i.IntegrationID, i.Enabled
		ct := json.RawMessage(`null`)
		if i.ConfigurationType != nil {
			ct, _ = json.Marshal(*i.ConfigurationType)
		}
		ch := append([]string{}, i.DisabledChannels...)
		cfg := i.Configuration
		if len(cfg) == 0 {
			cfg = json.RawMessage(`{}`)
		}
		in.Integrations[alias], _ = json.Marshal(installPatch{Enabled: &en, IntegrationID: &id, ConfigurationType: ct, Configuration: cfg, DisabledChannels: &ch})
	}
	for alias, p := range j.Plugins {
		if p.ID == "" {
			return in, platform.Invalid("invalid body: field %q: a plugin entry names its plugin version (id)", "botJson.plugins."+alias+".id")
		}
		in.Plugins[alias], _ = json.Marshal(p)
	}
	return in, nil
}

// withRemovals is a replacing body made to patch b: null for every entry b
// has that the body leaves out, an empty value for every tag, and no code
// for a bot that has some when the body has none.
func withRemovals(in *updateBotBody, b *platform.Bot) updateBotBody {
	out := *in
	nulls := func(patch map[string]json.RawMessage, have []string) map[string]json.RawMessage {
		m := make(map[string]json.RawMessage, len(patch)+len(have))
		for k, v := range patch {
			m[k] = v
		}
		for _, k := range have {
			if _, ok := m[k]; !ok {
				m[k] = json.RawMessage(`null`)
			}
		}
		return m
	}
	out.States = nulls(in.States, keysOf(b.States))
	out.Events = nulls(in.Events, keysOf(b.Events))
	out.Actions = nulls(in.Actions, keysOf(b.Actions))
	out.RecurringEvents = nulls(in.RecurringEvents, keysOf(b.RecurringEvents))
	out.Integrations = nulls(in.Integrations, keysOf(b.Installs))
	out.Plugins = nulls(in.Plugins, keysOf(b.Plugins))
	for _, t := range []struct {
		dst  **tagsPatch
		have map[string]json.RawMessage
	}{{&out.User, b.User.Tags}, {&out.Conversation, b.Conversation.Tags}, {&out.Message, b.Message.Tags}} {
		var patch map[string]json.RawMessage
		if *t.dst != nil {
			patch = (*t.dst).Tags
		}
		*t.dst = &tagsPatch{Tags: nulls(patch, keysOf(t.have))}
	}
	tags := make(map[string]string, len(in.Tags)+len(b.Tags))
	for k := range b.Tags {
		tags[k] = ""
	}
	for k, v := range in.Tags {
		tags[k] = v
	}
	out.Tags = tags
	if in.Code == nil && (b.CodeKey != "" || b.Code != "") {
		empty := ""
		out.Code = &empty
	}
	return out
}

// getBotJson answers the bot's JSON (with versionId: a version's).
func (s *server) getBotJSON(c *call) (any, error) {
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	vid, err := c.query().str("versionId")
	if err != nil {
		return nil, err
	}
	if vid != "" {
		v, err := s.Store.GetBotVersion(c.ctx, b.ID, vid)
		if err != nil {
			return nil, err
		}
		return s.versionSnapshot(c, v)
	}
	return s.exportBot(c, b.Bot)
}

// publishFromBotJson makes the bot what the JSON describes (as updateBot
// would, its integrations registered and schedules written), and answers
// the bot.
func (s *server) publishFromBotJSON(c *call) (any, error) {
	var in struct {
		BotJSON json.RawMessage `json:"botJson"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return s.publishJSON(c, c.PathValue("id"), in.BotJSON, "botJson")
}

func (s *server) publishJSON(c *call, id string, raw json.RawMessage, field string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var j botJSON
	if err := dec.Decode(&j); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, platform.Invalid("invalid body: field %q: expected %s", field+"."+te.Field, te.Type)
		}
		return nil, platform.Invalid("invalid body: field %q: %v", field, err)
	}
	if err := checkImport(raw, field); err != nil {
		return nil, err
	}
	body, err := importBody(j)
	if err != nil {
		return nil, err
	}
	return s.updateBotWith(c, id, &body)
}

// importChecked are the bot JSON fields that have updateBot's shape: an
// import is held to updateBot's request schema for them, as updateBot
// would be (installations and plugins go through updateBot's own checks).
var importChecked = []string{"name", "description", "url", "tags", "configuration", "states", "events", "actions",
	"recurringEvents", "subscriptions", "user", "conversation", "message", "medias", "maxExecutionTime", "alwaysAlive", "code"}

// checkImport refuses a bot JSON whose updateBot fields updateBot would
// refuse (400, naming the field), before anything is written.
func checkImport(raw json.RawMessage, field string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return platform.Invalid("invalid body: field %q: must be an object", field)
	}
	sub := map[string]any{}
	for _, k := range importChecked {
		v, ok := m[k]
		if !ok || (isNull(v) && k != "url") {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return platform.Invalid("invalid body: field %q: %v", field+"."+k, err)
		}
		sub[k] = x
	}
	if err := openapi.ValidateBody("updateBot", sub); err != nil {
		var pe *platform.Error
		if errors.As(err, &pe) {
			return platform.Invalid("invalid body: field %q: as updateBot would: %s", field, pe.Message)
		}
		return err
	}
	return nil
}

// --- Versions ---

func (s *server) createBotVersion(c *call) (any, error) {
	var in struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if n := len([]rune(strings.TrimSpace(in.Name))); n < 1 || n > 200 {
		return nil, platform.Invalid("invalid body: field \"name\": must be 1 to 200 characters")
	}
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	snap, err := s.exportBot(c, b.Bot)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		return nil, err
	}
	// The snapshot (code inline) goes to the file storage, content-addressed;
	// the version record names it.
	k := CodeKeyPrefix + "bots/" + b.ID + "/versions/" + contentHash(raw) + ".json"
	if err := s.putObject(c.ctx, k, "application/json", raw); err != nil {
		return nil, err
	}
	v := dynamo.BotVersion{ID: platform.NewID(dynamo.PrefixBotVersion), Name: strings.TrimSpace(in.Name), Description: in.Description, CreatedAt: platform.Now(), Key: k}
	if err := s.Store.CreateBotVersion(c.ctx, b.ID, v); err != nil {
		return nil, err
	}
	return map[string]any{"version": v}, nil
}

func (s *server) listBotVersions(c *call) (any, error) {
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	vs, err := s.Store.ListBotVersions(c.ctx, b.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"versions": vs}, nil
}

// getBotVersion answers where the version's bot JSON is: getBotJson of the
// bot with the version's id (an API call: it takes the caller's token and
// workspace, as every admin call does).
func (s *server) getBotVersion(c *call) (any, error) {
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	v, err := s.Store.GetBotVersion(c.ctx, b.ID, c.PathValue("versionId"))
	if err != nil {
		return nil, err
	}
	origin := strings.TrimSuffix(webhookBase(c), "/webhooks")
	return map[string]any{"url": origin + "/v1/admin/bots/" + url.PathEscape(b.ID) + "/bot-json?versionId=" + url.QueryEscape(v.ID)}, nil
}

func (s *server) versionSnapshot(c *call, v dynamo.BotVersion) (json.RawMessage, error) {
	if s.Files == nil {
		return nil, errors.New("no file storage configured for bot versions")
	}
	body, _, err := s.Files.Open(c.ctx, v.Key, "")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(body)
}

// deployBotVersion makes the version's snapshot the bot's definition (as
// publishFromBotJson does with it).
func (s *server) deployBotVersion(c *call) (any, error) {
	var in struct {
		VersionID string `json:"versionId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	v, err := s.Store.GetBotVersion(c.ctx, b.ID, in.VersionID)
	if err != nil {
		return nil, err
	}
	snap, err := s.versionSnapshot(c, v)
	if err != nil {
		return nil, err
	}
	if _, err := s.publishJSON(c, b.ID, snap, "version"); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// --- Transfer ---

// transferBot moves the bot to another workspace of which the caller is an
// administrator (or owner), as they are of the bot's (the route's role).
// Integrations and plugins installed on the bot must be ones the target
// may use (its own or shared): another workspace's private version is
// refused with its name.
func (s *server) transferBot(c *call) (any, error) {
	var in struct {
		TargetWorkspaceID string `json:"targetWorkspaceId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	to := in.TargetWorkspaceID
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	if to == b.WorkspaceID {
		return nil, platform.Invalid("invalid body: field \"targetWorkspaceId\": the bot is already in workspace %q", to)
	}
	notFound := platform.NotFound("workspace", to)
	if !platform.HasPrefix(to, platform.PrefixWorkspace) {
		return nil, notFound
	}
	m, member, err := s.Store.GetMember(c.ctx, to, c.principal.AccountID)
	if err != nil {
		return nil, err
	}
	if !member {
		return nil, notFound
	}
	if !m.Role.AtLeast(platform.RoleAdministrator) {
		return nil, platform.Forbidden("moving a bot into workspace %q needs the administrator role or above there; yours is %s", to, m.Role)
	}
	ints, err := s.installedIntegrations(c.ctx, b.Bot)
	if err != nil {
		return nil, err
	}
	for _, alias := range keysOf(b.Installs) {
		i, ok := ints[b.Installs[alias].IntegrationID]
		if ok && (i.Dev || i.Visibility == platform.VisibilityPrivate) && i.WorkspaceID != to {
			return nil, platform.Errorf(platform.ErrReferenceConstrain, "the bot's integration %q (%s %s) is private to workspace %q: the target workspace cannot use it; uninstall it first", alias, i.Name, i.Version, i.WorkspaceID)
		}
	}
	pids := keysOf(dynamo.PluginCounts(b.Plugins))
	plugins, err := s.Store.PluginsByID(c.ctx, pids)
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		if p, ok := plugins[pid]; ok && !p.VisibleTo(to) {
			return nil, platform.Errorf(platform.ErrReferenceConstrain, "the bot's plugin %s %s is private to workspace %q: the target workspace cannot use it; remove it first", p.Name, p.Version, p.WorkspaceID)
		}
	}
	if err := s.Store.TransferBot(c.ctx, b, to); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// --- Allowlist ---

// allowlistBot reads the bot of path {botId} of the caller's workspace.
func (s *server) allowlistBot(c *call) (dynamo.BotRecord, error) {
	id := c.PathValue("botId")
	b, err := s.Store.GetBot(c.ctx, id)
	if err == nil && b.WorkspaceID != c.workspaceID {
		err = platform.NotFound("bot", id)
	}
	return b, err
}

type allowlistUser struct {
	ID string `json:"id"`
}

func (s *server) getBotAllowlist(c *call) (any, error) {
	b, err := s.allowlistBot(c)
	if err != nil {
		return nil, err
	}
	a, err := s.Store.GetAllowlist(c.ctx, b.ID)
	if err != nil {
		return nil, err
	}
	users := make([]allowlistUser, 0, len(a.Users))
	for _, u := range a.Users {
		users = append(users, allowlistUser{ID: u})
	}
	return map[string]any{"setting": a.Setting, "users": users}, nil
}

// maxAllowlist bounds a bot's allowlist (one item).
const maxAllowlist = 1000

// updateBotAllowlist sets the setting and adds (true) or removes (false)
// users: the account ids (members' userId) of the bot's workspace. Adding
// someone who is not a member is a 400 naming them; nothing is written.
func (s *server) updateBotAllowlist(c *call) (any, error) {
	var in struct {
		Setting *string         `json:"setting"`
		Users   map[string]bool `json:"users"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	b, err := s.allowlistBot(c)
	if err != nil {
		return nil, err
	}
	if len(in.Users) > maxAllowlist {
		return nil, platform.Invalid("invalid body: field \"users\": at most %d entries", maxAllowlist)
	}
	for _, id := range keysOf(in.Users) {
		if !in.Users[id] {
			continue
		}
		if _, member, err := s.Store.GetMember(c.ctx, b.WorkspaceID, id); err != nil {
			return nil, err
		} else if !member {
			return nil, platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: %q is not a member of the bot's workspace (give a member's userId)", "users."+id, id)
		}
	}
	err = s.Store.UpdateAllowlist(c.ctx, b.ID, func(a *dynamo.Allowlist) error {
		if in.Setting != nil {
			a.Setting = *in.Setting
		}
		set := map[string]bool{}
		for _, u := range a.Users {
			set[u] = true
		}
		for id, add := range in.Users {
			if add {
				set[id] = true
			} else {
				delete(set, id)
			}
		}
		if len(set) > maxAllowlist {
			return platform.Invalid("invalid body: field \"users\": a bot's allowlist holds at most %d users", maxAllowlist)
		}
		a.Users = keysOf(set)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// --- Shareable ids ---

// shareableIDLife is how long a shareable id is good for.
const shareableIDLife = 30 * 24 * time.Hour

// installOf reads the bot of path {botId} and its installation named by
// the query's integrationInstanceAlias, else by path {integrationId}.
func (s *server) installOf(c *call) (dynamo.BotRecord, platform.IntegrationInstance, error) {
	b, err := s.allowlistBot(c)
	if err != nil {
		return b, platform.IntegrationInstance{}, err
	}
	alias, err := c.query().str("integrationInstanceAlias")
	if err != nil {
		return b, platform.IntegrationInstance{}, err
	}
	if alias != "" {
		in, ok := b.Installs[alias]
		if !ok {
			return b, in, platform.Errorf(platform.ErrResourceNotFound, "no integration is installed under the alias %q on bot %q", alias, b.ID)
		}
		return b, in, nil
	}
	in, ok := b.Install(c.PathValue("integrationId"))
	if !ok {
		return b, in, platform.Errorf(platform.ErrResourceNotFound, "integration %q is not installed on bot %q", c.PathValue("integrationId"), b.ID)
	}
	return b, in, nil
}

var shareableEncoding = base32.NewEncoding("abcdefghijkmnpqrstuvwxyz23456789").WithPadding(base32.NoPadding)

// newShareableID is a human-readable id: the alias and 50 random bits.
func newShareableID(alias string) string {
	var b [7]byte
	_, _ = rand.Read(b[:])
	prefix := strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, alias), "-")
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	return prefix + "-" + shareableEncoding.EncodeToString(b[:])[:10]
}

// createIntegrationShareableId answers the installation's shareable id,
// made anew when it has none or it expired.
func (s *server) createIntegrationShareableID(c *call) (any, error) {
	b, in, err := s.installOf(c)
	if err != nil {
		return nil, err
	}
	cur, ok, err := s.Store.GetShareableID(c.ctx, b.ID, in.Alias)
	if err != nil {
		return nil, err
	}
	now := platform.Clock()
	if ok && cur.IntegrationID == in.IntegrationID && cur.ExpiresAt > platform.FormatTime(now) {
		return map[string]any{"shareableId": cur.ID}, nil
	}
	sh := dynamo.ShareableID{ID: newShareableID(in.Alias), IntegrationID: in.IntegrationID, CreatedAt: platform.FormatTime(now), ExpiresAt: platform.FormatTime(now.Add(shareableIDLife))}
	if err := s.Store.PutShareableID(c.ctx, b.ID, in.Alias, cur.ID, sh); err != nil {
		return nil, err
	}
	return map[string]any{"shareableId": sh.ID}, nil
}

func (s *server) getIntegrationShareableID(c *call) (any, error) {
	b, in, err := s.installOf(c)
	if err != nil {
		return nil, err
	}
	cur, ok, err := s.Store.GetShareableID(c.ctx, b.ID, in.Alias)
	if err != nil {
		return nil, err
	}
	if !ok || cur.IntegrationID != in.IntegrationID {
		return nil, platform.NotFound("shareable id of", in.Alias)
	}
	return map[string]any{"shareableId": cur.ID, "isExpired": cur.ExpiresAt <= platform.Now()}, nil
}

func (s *server) deleteIntegrationShareableID(c *call) (any, error) {
	b, in, err := s.installOf(c)
	if err != nil {
		return nil, err
	}
	return struct{}{}, s.Store.DeleteShareableID(c.ctx, b.ID, in.Alias)
}

// unlinkSandboxedConversations: the platform has no channel sandbox (no
// conversation is ever linked to a shareable id), so there is nothing to
// unlink; the bot and its installation are checked as for the other
// operations on them.
func (s *server) unlinkSandboxedConversations(c *call) (any, error) {
	if _, _, err := s.installOf(c); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// --- Action runs ---

// maxRunPayload bounds the input and the output a run record keeps: larger
// ones are recorded as {} with inputTruncated / outputTruncated.
const maxRunPayload = 64 << 10

// recordActionRun records a callAction to an integration (its answer out,
// or err): failures to record are logged, never the caller's.
func (s *server) recordActionRun(c *call, alias, action string, input json.RawMessage, out any, err error, started time.Time, took time.Duration) {
	r := dynamo.ActionRun{
		Timestamp: platform.FormatTime(started), IntegrationName: alias, ActionType: action,
		Input: input, Output: json.RawMessage(`null`), Status: "SUCCESS", DurationMs: took.Milliseconds(),
	}
	if len(r.Input) == 0 || isNull(r.Input) {
		r.Input = json.RawMessage(`{}`)
	}
	if len(r.Input) > maxRunPayload {
		r.Input, r.InputTruncated = json.RawMessage(`{}`), true
	}
	if err != nil {
		msg := errMessage(err)
		r.Status, r.ErrorMessage = "FAILURE", &msg
	} else if m, ok := out.(map[string]any); ok {
		if o, ok := m["output"].(json.RawMessage); ok {
			r.Output = o
		}
	}
	if len(r.Output) > maxRunPayload {
		r.Output, r.OutputTruncated = json.RawMessage(`{}`), true
	}
	if perr := s.Store.PutActionRun(c.ctx, c.bot.ID, r); perr != nil {
		s.Logger.Error("recording an action run", "bot", c.bot.ID, "alias", alias, "action", action, "err", perr)
	}
}

// listActionRuns lists the bot's runs of one installation's actions
// (integrationName: its alias), newest first, within timestampFrom and
// timestampUntil (inclusive, ISO 8601).
func (s *server) listActionRuns(c *call) (any, error) {
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	q := c.query()
	alias, err := q.str("integrationName")
	if err != nil {
		return nil, err
	}
	if alias == "" {
		return nil, platform.Invalid("query parameter \"integrationName\" is required: the alias of the installation")
	}
	bounds := [2]string{}
	for n, name := range []string{"timestampFrom", "timestampUntil"} {
		v, err := q.str(name)
		if err != nil {
			return nil, err
		}
		if v == "" {
			continue
		}
		t, perr := time.Parse(time.RFC3339Nano, v)
		if perr != nil {
			return nil, platform.Invalid("query parameter %q must be an ISO 8601 timestamp (e.g. 2026-01-02T15:04:05.000Z)", name)
		}
		bounds[n] = platform.FormatTime(t)
	}
	if bounds[0] != "" && bounds[1] != "" && bounds[0] > bounds[1] {
		return nil, platform.Invalid("query parameter \"timestampFrom\" is after \"timestampUntil\"")
	}
	list := listKey("action-runs", b.ID, alias, bounds)
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	runs, next, err := s.Store.ListActionRuns(c.ctx, b.ID, alias, bounds[0], bounds[1], p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"data": runs, "meta": c.meta(list, next)}, nil
}
