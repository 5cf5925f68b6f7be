package platform

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Id prefixes of the integrations work.
const (
	PrefixIntegration       = "intver_" // an integration version
	PrefixIntegrationAPIKey = "iak_"
	PrefixOperation         = "intop_" // a call made to an integration
	PrefixWebhook           = "whk_"
)

// Integration visibilities. Unlisted integrations are reachable by every
// workspace (by id or name) but only listed to their own.
const (
	VisibilityPublic   = "public"
	VisibilityPrivate  = "private"
	VisibilityUnlisted = "unlisted"
)

// SharedVisibility reports whether a version of visibility v (an
// integration or plugin version) is reachable from other workspaces:
// public and unlisted ones are, by id and name.
func SharedVisibility(v string) bool { return v == VisibilityPublic || v == VisibilityUnlisted }

// Verification statuses of an integration version.
const (
	VerificationUnapproved = "unapproved"
	VerificationPending    = "pending"
	VerificationApproved   = "approved"
	VerificationRejected   = "rejected"
)

// Integration is an integration version in the full form of the reference
// (and the spec, which adds signingSecret and maxConcurrency). Definitions
// are kept as raw JSON: what a developer declares is what is read back.
type Integration struct {
	ID                 string                     `json:"id"`
	CreatedAt          string                     `json:"createdAt"`
	UpdatedAt          string                     `json:"updatedAt"`
	Identifier         json.RawMessage            `json:"identifier"`
	Sandbox            json.RawMessage            `json:"sandbox,omitempty"`
	MaxExecutionTime   *float64                   `json:"maxExecutionTime,omitempty"`
	MaxConcurrency     *int64                     `json:"maxConcurrency,omitempty"`
	URL                string                     `json:"url"`
	SigningSecret      string                     `json:"signingSecret,omitempty"`
	Name               string                     `json:"name"`
	Version            string                     `json:"version"`
	Interfaces         map[string]json.RawMessage `json:"interfaces"`
	Configuration      json.RawMessage            `json:"configuration"`
	Configurations     map[string]json.RawMessage `json:"configurations"`
	Channels           map[string]json.RawMessage `json:"channels"`
	States             map[string]json.RawMessage `json:"states"`
	Events             map[string]json.RawMessage `json:"events"`
	Actions            map[string]json.RawMessage `json:"actions"`
	User               json.RawMessage            `json:"user"`
	Entities           map[string]json.RawMessage `json:"entities"`
	Attributes         map[string]string          `json:"attributes,omitempty"`
	Dev                bool                       `json:"dev"`
	Title              string                     `json:"title"`
	Description        string                     `json:"description"`
	IconURL            string                     `json:"iconUrl"`
	ReadmeURL          string                     `json:"readmeUrl"`
	Public             bool                       `json:"public"`
	Visibility         string                     `json:"visibility"`
	VerificationStatus string                     `json:"verificationStatus"`
	LifecycleStatus    string                     `json:"lifecycleStatus"`
	Secrets            []string                   `json:"secrets"`

	// Not on the wire: the owning workspace, the secrets' values, and how
	// many bots have it installed.
	WorkspaceID  string            `json:"-"`
	SecretValues map[string]string `json:"-"`
	InstallCount int64             `json:"-"`
	// The objects of the file storage holding the deployed code, the icon
	// and the readme (code/integrations/<id>/...); iconUrl and readmeUrl
	// serve the latter two.
	CodeKey, IconKey, ReadmeKey string `json:"-"`
}

// VisibleTo reports whether workspace ws may see the integration: its own
// workspace always, others only when it is public or unlisted.
func (i Integration) VisibleTo(ws string) bool {
	return i.WorkspaceID == ws || SharedVisibility(i.Visibility)
}

// ChannelRequiredTags returns the conversation tags a channel requires at
// creation (channels.<name>.conversation.creation.requiredTags), and whether
// the channel exists.
func (i Integration) ChannelRequiredTags(channel string) ([]string, bool) {
	raw, ok := i.Channels[channel]
	if !ok {
		return nil, false
	}
	var ch struct {
		Conversation struct {
			Creation struct {
				RequiredTags []string `json:"requiredTags"`
			} `json:"creation"`
		} `json:"conversation"`
	}
	_ = json.Unmarshal(raw, &ch)
	return ch.Conversation.Creation.RequiredTags, true
}

// IntegrationSummary is an integration as listIntegrations answers it.
type IntegrationSummary struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Version            string            `json:"version"`
	CreatedAt          string            `json:"createdAt"`
	UpdatedAt          string            `json:"updatedAt"`
	Title              string            `json:"title"`
	Description        string            `json:"description"`
	IconURL            string            `json:"iconUrl"`
	Public             bool              `json:"public"`
	Visibility         string            `json:"visibility"`
	VerificationStatus string            `json:"verificationStatus"`
	LifecycleStatus    string            `json:"lifecycleStatus"`
	MatchedOn          *MatchedOn        `json:"matchedOn,omitempty"`
	OwnerWorkspace     *OwnerWorkspace   `json:"ownerWorkspace,omitempty"`
	Attributes         map[string]string `json:"attributes,omitempty"`
}

// MatchedOn tells which fields of an integration a search term matched.
type MatchedOn struct {
	Name        bool     `json:"name"`
	Title       bool     `json:"title"`
	Description bool     `json:"description"`
	Actions     []string `json:"actions"`
	Interfaces  []string `json:"interfaces"`
}

// OwnerWorkspace names the workspace publishing an integration.
type OwnerWorkspace struct {
	ID     string  `json:"id"`
	Handle *string `json:"handle"`
	Name   string  `json:"name"`
}

// Summary is the list form of the integration.
func (i Integration) Summary() IntegrationSummary {
	return IntegrationSummary{
		ID: i.ID, Name: i.Name, Version: i.Version, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt,
		Title: i.Title, Description: i.Description, IconURL: i.IconURL, Public: i.Public,
		Visibility: i.Visibility, VerificationStatus: i.VerificationStatus, LifecycleStatus: i.LifecycleStatus,
		Attributes: i.Attributes,
	}
}

// Registration statuses of an integration installed on a bot.
const (
	InstallRegistrationPending = "registration_pending"
	InstallRegistered          = "registered"
	InstallRegistrationFailed  = "registration_failed"
)

// IntegrationInstance is an integration installed on a bot, as stored; the
// wire form adds the integration's own fields (see BotIntegration).
type IntegrationInstance struct {
	Alias             string          `json:"alias"`
	IntegrationID     string          `json:"integrationId"`
	Enabled           bool            `json:"enabled"`
	ConfigurationType *string         `json:"configurationType"`
	Configuration     json.RawMessage `json:"configuration"`
	DisabledChannels  []string        `json:"disabledChannels"`
	Status            string          `json:"status"`
	StatusReason      *string         `json:"statusReason"`
	WebhookID         string          `json:"webhookId"`
	Identifier        string          `json:"identifier,omitempty"`
	// RegisterSchedule is the configureIntegration scheduleRegisterCall
	// (hourly ... yearly) on which register() is called again;
	// RegisterTicket names the schedule's current run of DeliverRegister
	// entries (a new schedule starts a new ticket, leaving older entries
	// stale).
	RegisterSchedule string `json:"scheduleRegisterCall,omitempty"`
	RegisterTicket   string `json:"registerTicket,omitempty"`
	CreatedAt        string `json:"createdAt"`
	UpdatedAt        string `json:"updatedAt"`
	// OperationID is the registration in flight or last run: a result
	// updates the instance only while it still names that operation.
	OperationID string `json:"operationId,omitempty"`
}

// BotIntegration is an installed integration as getBot answers it.
type BotIntegration struct {
	Enabled            bool            `json:"enabled"`
	Name               string          `json:"name"`
	Version            string          `json:"version"`
	WebhookURL         string          `json:"webhookUrl"`
	WebhookID          string          `json:"webhookId"`
	Identifier         string          `json:"identifier,omitempty"`
	ConfigurationType  *string         `json:"configurationType"`
	Configuration      json.RawMessage `json:"configuration"`
	Status             string          `json:"status"`
	StatusReason       *string         `json:"statusReason"`
	DisabledChannels   []string        `json:"disabledChannels"`
	ID                 string          `json:"id"`
	CreatedAt          string          `json:"createdAt"`
	UpdatedAt          string          `json:"updatedAt"`
	Title              string          `json:"title"`
	Description        string          `json:"description"`
	IconURL            string          `json:"iconUrl"`
	Public             bool            `json:"public"`
	Visibility         string          `json:"visibility"`
	VerificationStatus string          `json:"verificationStatus"`
	LifecycleStatus    string          `json:"lifecycleStatus"`
}

// Render combines an instance with its integration into the wire form.
// webhookBase is where integrations' webhooks are received.
func (in IntegrationInstance) Render(i Integration, webhookBase string) BotIntegration {
	cfg := in.Configuration
	if len(cfg) == 0 {
		cfg = json.RawMessage(`{}`)
	}
	dc := in.DisabledChannels
	if dc == nil {
		dc = []string{}
	}
	return BotIntegration{
		Enabled: in.Enabled, Name: i.Name, Version: i.Version,
		WebhookURL: strings.TrimSuffix(webhookBase, "/") + "/" + in.WebhookID, WebhookID: in.WebhookID,
		Identifier: in.Identifier, ConfigurationType: in.ConfigurationType, Configuration: cfg,
		Status: in.Status, StatusReason: in.StatusReason, DisabledChannels: dc,
		ID: i.ID, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt, Title: i.Title, Description: i.Description,
		IconURL: i.IconURL, Public: i.Public, Visibility: i.Visibility,
		VerificationStatus: i.VerificationStatus, LifecycleStatus: i.LifecycleStatus,
	}
}

// Install finds an integration installed on the bot by alias, or else by
// integration id (the first alias in order holding it).
func (b Bot) Install(aliasOrID string) (IntegrationInstance, bool) {
	if in, ok := b.Installs[aliasOrID]; ok {
		return in, true
	}
	var found IntegrationInstance
	ok := false
	for alias, in := range b.Installs {
		if in.IntegrationID == aliasOrID && (!ok || alias < found.Alias) {
			found, ok = in, true
		}
	}
	return found, ok
}

// Operation statuses. An operation is pending until its request is sent,
// running while the integration handles it, then ends succeeded or failed.
// outcome_unknown means the request was sent but no answer came (timeout,
// connection lost): the integration may or may not have acted, so it is
// never retried automatically; an operator resolves it (reconcile).
const (
	OperationPending        = "pending"
	OperationRunning        = "running"
	OperationSucceeded      = "succeeded"
	OperationFailed         = "failed"
	OperationOutcomeUnknown = "outcome_unknown"
)

// Operation kinds: the calls the platform makes to an integration.
const (
	OperationRegister   = "register"
	OperationUnregister = "unregister"
	OperationAction     = "action"
)

// Operation is one call made to an integration, persisted with its status,
// progress and result or error (the operations ledger).
type Operation struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	Status        string          `json:"status"`
	Progress      float64         `json:"progress"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         *OperationError `json:"error,omitempty"`
	BotID         string          `json:"botId"`
	IntegrationID string          `json:"integrationId"`
	Alias         string          `json:"integrationAlias"`
	CreatedAt     string          `json:"createdAt"`
	UpdatedAt     string          `json:"updatedAt"`
	StartedAt     string          `json:"startedAt,omitempty"`
	EndedAt       string          `json:"endedAt,omitempty"`
	// Deadline is when the call is given up. An operation still pending or
	// running after it is outcome_unknown.
	Deadline string `json:"deadline"`
	// Reconciliation, when an operator resolved an outcome_unknown operation.
	Reconciliation *Reconciliation `json:"reconciliation,omitempty"`

	WorkspaceID string `json:"-"`
}

// OperationError describes why an operation failed or could not be known.
type OperationError struct {
	Message    string `json:"message"`
	StatusCode int    `json:"statusCode,omitempty"`
}

// Reconciliation records who resolved an outcome_unknown operation, and how.
type Reconciliation struct {
	By     string `json:"by"`
	At     string `json:"at"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// Done reports whether the operation reached a final status.
func (o Operation) Done() bool {
	return o.Status == OperationSucceeded || o.Status == OperationFailed
}

// Semver is a parsed semantic version (major.minor.patch[-pre][+build]).
type Semver struct {
	Major, Minor, Patch int
	Pre                 string
}

// ParseSemver parses a semantic version; ok is false when v is not one.
func ParseSemver(v string) (Semver, bool) {
	var s Semver
	core := v
	if i := strings.IndexByte(core, '+'); i >= 0 {
		core = core[:i]
	}
	if i := strings.IndexByte(core, '-'); i >= 0 {
		s.Pre = core[i+1:]
		core = core[:i]
		if s.Pre == "" {
			return s, false
		}
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return s, false
	}
	nums := [3]*int{&s.Major, &s.Minor, &s.Patch}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || (len(p) > 1 && p[0] == '0') {
			return s, false
		}
		*nums[i] = n
	}
	return s, true
}

// Less orders versions by precedence: a pre-release comes before its release.
func (a Semver) Less(b Semver) bool {
	switch {
	case a.Major != b.Major:
		return a.Major < b.Major
	case a.Minor != b.Minor:
		return a.Minor < b.Minor
	case a.Patch != b.Patch:
		return a.Patch < b.Patch
	case a.Pre == b.Pre:
		return false
	case a.Pre == "":
		return false
	case b.Pre == "":
		return true
	}
	return a.Pre < b.Pre
}

// Effective is the operation as of now: one still pending or running past
// its deadline is outcome_unknown (whatever became of the call, nobody
// recorded it), until an operator reconciles it.
func (o Operation) Effective(now string) Operation {
	if (o.Status == OperationPending || o.Status == OperationRunning) && o.Deadline != "" && now > o.Deadline {
		o.Status = OperationOutcomeUnknown
		if o.Error == nil {
			o.Error = &OperationError{Message: "no result was recorded by the deadline " + o.Deadline}
		}
	}
	return o
}
