package platform

import "encoding/json"

// Account is a person who signs in; personal access tokens belong to it.
type Account struct {
	ID             string `json:"id"`
	Email          string `json:"email"`
	DisplayName    string `json:"displayName,omitempty"`
	EmailVerified  bool   `json:"emailVerified"`
	ProfilePicture string `json:"profilePicture,omitempty"`
	CreatedAt      string `json:"createdAt"`
}

// TokenInfo describes a personal access token or bot API key without its value.
type TokenInfo struct {
	ID        string `json:"id"`
	CreatedAt string `json:"createdAt"`
	Note      string `json:"note"`
}

// NewToken is a token as answered once, at creation: the only time its value is shown.
type NewToken struct {
	TokenInfo
	Value string `json:"value"`
}

// Workspace groups bots and members. Fields as the reference's Workspace.
type Workspace struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	OwnerID        string   `json:"ownerId"`
	CreatedAt      string   `json:"createdAt"`
	UpdatedAt      string   `json:"updatedAt"`
	BotCount       int      `json:"botCount"`
	BillingVersion string   `json:"billingVersion"`
	Plan           string   `json:"plan"`
	Blocked        bool     `json:"blocked"`
	SpendingLimit  float64  `json:"spendingLimit"`
	About          string   `json:"about"`
	ProfilePicture string   `json:"profilePicture"`
	ContactEmail   string   `json:"contactEmail"`
	Website        string   `json:"website"`
	SocialAccounts []string `json:"socialAccounts"`
	IsPublic       bool     `json:"isPublic"`
	Handle         string   `json:"handle,omitempty"`
	ActiveTrialID  *string  `json:"activeTrialId"`
}

// Member is an account's membership of a workspace, with its role.
type Member struct {
	ID             string `json:"id"`
	UserID         string `json:"userId"`
	Email          string `json:"email"`
	CreatedAt      string `json:"createdAt"`
	Role           Role   `json:"role"`
	ProfilePicture string `json:"profilePicture,omitempty"`
	DisplayName    string `json:"displayName,omitempty"`
	WorkspaceID    string `json:"-"`
}

// TagDefinitions is the {tags: {name: {title, description}}} object a bot
// declares for its users, conversations and messages.
type TagDefinitions struct {
	Tags map[string]json.RawMessage `json:"tags"`
}

// Media is a file attached to a bot's profile.
type Media struct {
	URL  string `json:"url"`
	Name string `json:"name"`
}

// Bot is a bot and its definition, in the reference's shape. Definition
// entries are kept as raw JSON so what a caller stores is what it reads back.
type Bot struct {
	ID               string                     `json:"id"`
	CreatedAt        string                     `json:"createdAt"`
	UpdatedAt        string                     `json:"updatedAt"`
	DeployedAt       string                     `json:"deployedAt,omitempty"`
	SigningSecret    string                     `json:"signingSecret"`
	Integrations     map[string]json.RawMessage `json:"integrations"`
	Plugins          map[string]json.RawMessage `json:"plugins"`
	User             TagDefinitions             `json:"user"`
	Conversation     TagDefinitions             `json:"conversation"`
	Message          TagDefinitions             `json:"message"`
	States           map[string]json.RawMessage `json:"states"`
	Configuration    json.RawMessage            `json:"configuration"`
	Events           map[string]json.RawMessage `json:"events"`
	RecurringEvents  map[string]json.RawMessage `json:"recurringEvents"`
	Subscriptions    json.RawMessage            `json:"subscriptions"`
	Actions          map[string]json.RawMessage `json:"actions"`
	Tags             map[string]string          `json:"tags"`
	Name             string                     `json:"name"`
	Description      string                     `json:"description,omitempty"`
	CreatedBy        string                     `json:"createdBy,omitempty"`
	Dev              bool                       `json:"dev"`
	AlwaysAlive      bool                       `json:"alwaysAlive"`
	Status           string                     `json:"status"`
	Medias           []Media                    `json:"medias"`
	MaxExecutionTime *float64                   `json:"maxExecutionTime,omitempty"`

	// Not part of the Bot's wire shape (the reference forbids extra fields),
	// but kept: the workspace owning the bot, and the bot's url and code.
	WorkspaceID string `json:"-"`
	URL         string `json:"-"`
	// Code is deployed code kept inline by earlier versions of the
	// platform; CodeKey names the object holding the code in the file
	// storage (code/bots/<id>/<sha256>.js), as bp deploy's bundles are far
	// larger than a DynamoDB item.
	Code    string `json:"-"`
	CodeKey string `json:"-"`

	// Secrets lists the names of the bot's secrets (the spec's Bot.secrets);
	// SecretValues holds their values, never answered.
	Secrets      []string          `json:"secrets,omitempty"`
	SecretValues map[string]string `json:"-"`
	// Installs are the integrations installed on the bot, by alias; the wire
	// field Integrations is rendered from them (see docs/bots.md).
	Installs map[string]IntegrationInstance `json:"-"`
}

// BotSummary is a bot as listBots answers it.
type BotSummary struct {
	ID         string            `json:"id"`
	CreatedAt  string            `json:"createdAt"`
	UpdatedAt  string            `json:"updatedAt"`
	Name       string            `json:"name"`
	DeployedAt string            `json:"deployedAt,omitempty"`
	Tags       map[string]string `json:"tags"`
}

// Principal is who a bearer token authenticates: an account (through a
// personal access token) or a bot (through a bot API key).
type Principal struct {
	Kind        PrincipalKind
	TokenID     string
	AccountID   string // Kind == PrincipalAccount
	BotID       string // Kind == PrincipalBot
	WorkspaceID string // Kind == PrincipalBot or PrincipalIntegration: the owner's workspace
	// IntegrationID is the integration version an integration API key acts as.
	IntegrationID string // Kind == PrincipalIntegration
}

// PrincipalKind tells what kind of token authenticated a call.
type PrincipalKind string

const (
	PrincipalAccount PrincipalKind = "account"
	PrincipalBot     PrincipalKind = "bot"
	// PrincipalIntegration is an integration API key (bp_iak_).
	PrincipalIntegration PrincipalKind = "integration"
)
