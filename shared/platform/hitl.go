package platform

import "encoding/json"

// Humans in the loop (docs/hitl.md): a session of the built-in hitl
// integration, the downstream conversation a bot opened with startHitl and
// that a workspace member answers from the inbox or the agent API.

// Statuses of a session.
const (
	HitlWaiting  = "waiting"
	HitlAssigned = "assigned"
	HitlClosed   = "closed"
)

// HitlSession is one handover: its id is the downstream conversation's.
type HitlSession struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspaceId"`
	BotID       string `json:"botId"`
	// Alias is the hitl installation's alias in the bot (the bot gets
	// its events as <alias>:hitlAssigned and <alias>:hitlStopped).
	Alias          string `json:"integrationAlias"`
	ConversationID string `json:"conversationId"`
	// UserID is the downstream user (createUser) of the end user.
	UserID      string `json:"userId"`
	UserName    string `json:"userName,omitempty"`
	Status      string `json:"status"`
	Title       string `json:"title"`
	Description string `json:"description"`
	// AssigneeID is the assigned member's account id; AgentUserID the
	// agent's user in the bot (what hitlAssigned names).
	AssigneeID    string `json:"assigneeId,omitempty"`
	AssigneeEmail string `json:"assigneeEmail,omitempty"`
	AgentUserID   string `json:"agentUserId,omitempty"`
	// History is startHitl's messageHistory: what happened before.
	History []json.RawMessage `json:"messageHistory"`
	// Notes are the agents' internal notes (never sent to the bot).
	Notes []HitlNote `json:"notes"`
	// UserMessages counts the end user's messages relayed; ReadBy the
	// count each member (account id) has seen (unread = the difference).
	UserMessages int            `json:"userMessages"`
	ReadBy       map[string]int `json:"readBy,omitempty"`
	// ClosedBy: "agent" (the agent API), "bot" (stopHitl).
	ClosedBy  string `json:"closedBy,omitempty"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	ClosedAt  string `json:"closedAt,omitempty"`
}

// HitlNote is an agent's internal note on a session.
type HitlNote struct {
	ID          string `json:"id"`
	AuthorID    string `json:"authorId"`
	AuthorEmail string `json:"authorEmail,omitempty"`
	Text        string `json:"text"`
	CreatedAt   string `json:"createdAt"`
}
