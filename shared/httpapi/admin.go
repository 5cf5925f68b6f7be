package httpapi

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// adminRoutes is the route table of the Admin API. Roles follow the matrix of
// docs/security.md: viewers read, developers change bots and keys,
// administrators manage members and settings, owners delete workspaces.
func (s *server) adminRoutes() []route {
	const (
		viewer    = platform.RoleViewer
		developer = platform.RoleDeveloper
		admin     = platform.RoleAdministrator
		owner     = platform.RoleOwner
	)
	return []route{
		// Account and personal access tokens.
		{pattern: "GET /v1/admin/account/me", op: "getAccount", scope: scopeAccount, handle: s.getAccount},
		{pattern: "GET /v1/admin/account/pats", op: "listPersonalAccessTokens", scope: scopeAccount, handle: s.listPATs},
		{pattern: "POST /v1/admin/account/pats", op: "createPersonalAccessToken", scope: scopeAccount, handle: s.createPAT},
		{pattern: "DELETE /v1/admin/account/pats/{id}", op: "deletePersonalAccessToken", scope: scopeAccount, handle: s.deletePAT},

		// Workspaces.
		{pattern: "POST /v1/admin/workspaces", op: "createWorkspace", scope: scopeAccount, handle: s.createWorkspace},
		{pattern: "GET /v1/admin/workspaces", op: "listWorkspaces", scope: scopeAccount, handle: s.listWorkspaces},
		// Before {id} in meaning (ServeMux prefers the literal segment): not
		// updateWorkspace of a workspace named "handle-availability".
		{pattern: "PUT /v1/admin/workspaces/handle-availability", op: "checkHandleAvailability", scope: scopeAccount, handle: s.checkHandleAvailability},
		{pattern: "GET /v1/admin/workspaces/{id}", op: "getWorkspace", scope: scopeWorkspacePath, role: viewer, handle: s.getWorkspace},
		{pattern: "PUT /v1/admin/workspaces/{id}", op: "updateWorkspace", scope: scopeWorkspacePath, role: admin, handle: s.updateWorkspace},
		{pattern: "DELETE /v1/admin/workspaces/{id}", op: "deleteWorkspace", scope: scopeWorkspacePath, role: owner, handle: s.deleteWorkspace},

		// Workspace members.
		{pattern: "GET /v1/admin/workspace-members", op: "listWorkspaceMembers", scope: scopeWorkspace, role: viewer, handle: s.listMembers},
		{pattern: "POST /v1/admin/workspace-members", op: "createWorkspaceMember", scope: scopeWorkspace, role: admin, handle: s.createMember},
		{pattern: "GET /v1/admin/workspace-members/me", op: "getWorkspaceMember", scope: scopeWorkspace, role: viewer, handle: s.getMemberMe},
		{pattern: "PUT /v1/admin/workspace-members/{id}", op: "updateWorkspaceMember", scope: scopeWorkspace, role: admin, handle: s.updateMember},
		// Any member may leave; removing others needs administrator (checked in the handler).
		{pattern: "DELETE /v1/admin/workspace-members/{id}", op: "deleteWorkspaceMember", scope: scopeWorkspace, role: viewer, handle: s.deleteMember},

		// Bots.
		{pattern: "POST /v1/admin/bots", op: "createBot", scope: scopeWorkspace, role: developer, maxBody: maxDeployBody, handle: s.createBot},
		{pattern: "GET /v1/admin/bots", op: "listBots", scope: scopeWorkspace, role: viewer, handle: s.listBots},
		{pattern: "GET /v1/admin/bots/{id}", op: "getBot", scope: scopeWorkspace, role: viewer, botSelf: true, handle: s.getBot},
		{pattern: "DELETE /v1/admin/bots/{id}", op: "deleteBot", scope: scopeWorkspace, role: developer, handle: s.deleteBot},

		// Bot API keys.
		{pattern: "GET /v1/admin/bots/baks", op: "listBotApiKeys", scope: scopeWorkspace, role: developer, handle: s.listBotAPIKeys},
		{pattern: "POST /v1/admin/bots/baks", op: "createBotApiKey", scope: scopeWorkspace, role: developer, handle: s.createBotAPIKey},
		{pattern: "DELETE /v1/admin/bots/baks/{id}", op: "deleteBotApiKey", scope: scopeWorkspace, role: developer, handle: s.deleteBotAPIKey},

		// Bot definition (updateBot), integrations, integration API keys,
		// integration operations (handlers in admin_bots.go, admin_integrations.go).
		// -- begin bots-and-integrations routes --
		{pattern: "PUT /v1/admin/bots/{id}", op: "updateBot", scope: scopeWorkspace, role: developer, maxBody: maxDeployBody, handle: s.updateBot},

		// Integrations: the catalogue and versions.
		{pattern: "POST /v1/admin/integrations", op: "createIntegration", scope: scopeWorkspace, role: developer, maxBody: maxDeployBody, handle: s.createIntegration},
		{pattern: "GET /v1/admin/integrations", op: "listIntegrations", scope: scopeWorkspace, role: viewer, handle: s.listIntegrations},
		{pattern: "GET /v1/admin/integrations/{id}", op: "getIntegration", scope: scopeWorkspace, role: viewer, integrationSelf: true, handle: s.getIntegration},
		{pattern: "PUT /v1/admin/integrations/{id}", op: "updateIntegration", scope: scopeWorkspace, role: developer, integrationSelf: true, maxBody: maxDeployBody, handle: s.updateIntegration},
		{pattern: "DELETE /v1/admin/integrations/{id}", op: "deleteIntegration", scope: scopeWorkspace, role: developer, handle: s.deleteIntegration},
		{pattern: "GET /v1/admin/integrations/{name}/{version}", op: "getIntegrationByName", scope: scopeWorkspace, role: viewer, handle: s.getIntegrationByName},
		// Dry runs of create and update (bp deploy --dryRun): same checks and roles, no write.
		{pattern: "POST /v1/admin/integrations/validate", op: "validateIntegrationCreation", scope: scopeWorkspace, role: developer, maxBody: maxDeployBody, handle: s.validateIntegrationCreation},
		{pattern: "PUT /v1/admin/integrations/{id}/validate", op: "validateIntegrationUpdate", scope: scopeWorkspace, role: developer, integrationSelf: true, maxBody: maxDeployBody, handle: s.validateIntegrationUpdate},
		{pattern: "POST /v1/admin/integrations/request-verification", op: "requestIntegrationVerification", scope: scopeWorkspace, role: developer, handle: s.requestIntegrationVerification},

		// The hub: every workspace's public integrations (admin_hub.go).
		{pattern: "GET /v1/admin/hub/integrations", op: "listPublicIntegrations", scope: scopeAnyone, handle: s.listPublicIntegrations},
		{pattern: "GET /v1/admin/hub/integrations/{id}", op: "getPublicIntegrationById", scope: scopeAnyone, handle: s.getPublicIntegrationByID},
		{pattern: "GET /v1/admin/hub/integrations/{name}/{version}", op: "getPublicIntegration", scope: scopeAnyone, handle: s.getPublicIntegration},

		// Interfaces (admin_interfaces.go), and the hub's public ones.
		{pattern: "POST /v1/admin/interfaces", op: "createInterface", scope: scopeWorkspace, role: developer, handle: s.createInterface},
		{pattern: "GET /v1/admin/interfaces", op: "listInterfaces", scope: scopeWorkspace, role: viewer, handle: s.listInterfaces},
		{pattern: "GET /v1/admin/interfaces/{id}", op: "getInterface", scope: scopeWorkspace, role: viewer, handle: s.getInterface},
		{pattern: "PUT /v1/admin/interfaces/{id}", op: "updateInterface", scope: scopeWorkspace, role: developer, handle: s.updateInterface},
		{pattern: "DELETE /v1/admin/interfaces/{id}", op: "deleteInterface", scope: scopeWorkspace, role: developer, handle: s.deleteInterface},
		{pattern: "GET /v1/admin/interfaces/{name}/{version}", op: "getInterfaceByName", scope: scopeWorkspace, role: viewer, handle: s.getInterfaceByName},
		{pattern: "GET /v1/admin/hub/interfaces", op: "listPublicInterfaces", scope: scopeAnyone, handle: s.listPublicInterfaces},
		{pattern: "GET /v1/admin/hub/interfaces/{id}", op: "getPublicInterfaceById", scope: scopeAnyone, handle: s.getPublicInterfaceByID},
		{pattern: "GET /v1/admin/hub/interfaces/{name}/{version}", op: "getPublicInterface", scope: scopeAnyone, handle: s.getPublicInterface},

		// Integration API keys.
		{pattern: "GET /v1/admin/integrations/iaks", op: "listIntegrationApiKeys", scope: scopeWorkspace, role: developer, handle: s.listIntegrationAPIKeys},
		{pattern: "POST /v1/admin/integrations/iaks", op: "createIntegrationApiKey", scope: scopeWorkspace, role: developer, handle: s.createIntegrationAPIKey},
		{pattern: "DELETE /v1/admin/integrations/iaks/{id}", op: "deleteIntegrationApiKey", scope: scopeWorkspace, role: developer, handle: s.deleteIntegrationAPIKey},

		// The operations ledger of calls to integrations (ours: the reference has none).
		{pattern: "GET /v1/admin/integration-operations/{id}", op: "getIntegrationOperation", scope: scopeWorkspace, role: viewer, handle: s.getIntegrationOperation},
		{pattern: "POST /v1/admin/integration-operations/{id}/reconcile", op: "reconcileIntegrationOperation", scope: scopeWorkspace, role: admin, handle: s.reconcileIntegrationOperation},
		{pattern: "GET /v1/admin/bots/{id}/integration-operations", op: "listBotIntegrationOperations", scope: scopeWorkspace, role: viewer, handle: s.listBotIntegrationOperations},
		// -- end bots-and-integrations routes --

		// Plugins (admin_plugins.go) and the hub's public ones.
		{pattern: "POST /v1/admin/plugins", op: "createPlugin", scope: scopeWorkspace, role: developer, maxBody: maxDeployBody, handle: s.createPlugin},
		{pattern: "GET /v1/admin/plugins", op: "listPlugins", scope: scopeWorkspace, role: viewer, handle: s.listPlugins},
		{pattern: "GET /v1/admin/plugins/{id}", op: "getPlugin", scope: scopeWorkspace, role: viewer, handle: s.getPlugin},
		{pattern: "PUT /v1/admin/plugins/{id}", op: "updatePlugin", scope: scopeWorkspace, role: developer, maxBody: maxDeployBody, handle: s.updatePlugin},
		{pattern: "DELETE /v1/admin/plugins/{id}", op: "deletePlugin", scope: scopeWorkspace, role: developer, handle: s.deletePlugin},
		// More specific than {name}/{version}: ServeMux prefers the literal.
		{pattern: "GET /v1/admin/plugins/{id}/dereferenced", op: "getDereferencedPlugin", scope: scopeWorkspace, role: viewer, handle: s.getDereferencedPlugin},
		{pattern: "GET /v1/admin/plugins/{name}/{version}", op: "getPluginByName", scope: scopeWorkspace, role: viewer, handle: s.getPluginByName},
		{pattern: "GET /v1/admin/plugins/{id}/code/{platform}", op: "getPluginCode", scope: scopeWorkspace, role: viewer, handle: s.getPluginCode},
		{pattern: "GET /v1/admin/hub/plugins", op: "listPublicPlugins", scope: scopeAnyone, handle: s.listPublicPlugins},
		{pattern: "GET /v1/admin/hub/plugins/{id}", op: "getPublicPluginById", scope: scopeAnyone, handle: s.getPublicPluginByID},
		{pattern: "GET /v1/admin/hub/plugins/{id}/dereferenced", op: "getDereferencedPublicPluginById", scope: scopeAnyone, handle: s.getDereferencedPublicPluginByID},
		{pattern: "GET /v1/admin/hub/plugins/{name}/{version}", op: "getPublicPlugin", scope: scopeAnyone, handle: s.getPublicPlugin},
		{pattern: "GET /v1/admin/hub/plugins/{id}/code/{platform}", op: "getPublicPluginCode", scope: scopeAnyone, handle: s.getPublicPluginCode},

		// Bot versions, bot JSON, transfer, allowlist, shareable ids, action
		// runs (admin_bot_extras.go).
		{pattern: "POST /v1/admin/bots/{id}/versions", op: "createBotVersion", scope: scopeWorkspace, role: developer, handle: s.createBotVersion},
		{pattern: "GET /v1/admin/bots/{id}/versions", op: "listBotVersions", scope: scopeWorkspace, role: viewer, handle: s.listBotVersions},
		{pattern: "GET /v1/admin/bots/{id}/versions/{versionId}", op: "getBotVersion", scope: scopeWorkspace, role: viewer, handle: s.getBotVersion},
		{pattern: "POST /v1/admin/bots/{id}/versions/deploy", op: "deployBotVersion", scope: scopeWorkspace, role: developer, handle: s.deployBotVersion},
		{pattern: "GET /v1/admin/bots/{id}/bot-json", op: "getBotJson", scope: scopeWorkspace, role: developer, handle: s.getBotJSON},
		{pattern: "POST /v1/admin/bots/{id}/publish-from-bot-json", op: "publishFromBotJson", scope: scopeWorkspace, role: developer, maxBody: maxDeployBody, handle: s.publishFromBotJSON},
		// Administrator of the bot's workspace here; of the target's, in the handler.
		{pattern: "POST /v1/admin/bots/{id}/transfer", op: "transferBot", scope: scopeWorkspace, role: admin, handle: s.transferBot},
		{pattern: "GET /v1/admin/bots/{botId}/allowlist", op: "getBotAllowlist", scope: scopeWorkspace, role: viewer, handle: s.getBotAllowlist},
		{pattern: "PUT /v1/admin/bots/{botId}/allowlist", op: "updateBotAllowlist", scope: scopeWorkspace, role: admin, handle: s.updateBotAllowlist},
		{pattern: "POST /v1/admin/bots/{botId}/integrations/{integrationId}/shareable-id", op: "createIntegrationShareableId", scope: scopeWorkspace, role: developer, handle: s.createIntegrationShareableID},
		{pattern: "GET /v1/admin/bots/{botId}/integrations/{integrationId}/shareable-id", op: "getIntegrationShareableId", scope: scopeWorkspace, role: viewer, handle: s.getIntegrationShareableID},
		{pattern: "DELETE /v1/admin/bots/{botId}/integrations/{integrationId}/shareable-id", op: "deleteIntegrationShareableId", scope: scopeWorkspace, role: developer, handle: s.deleteIntegrationShareableID},
		{pattern: "DELETE /v1/admin/bots/{botId}/integrations/{integrationId}/sandboxed-conversations", op: "unlinkSandboxedConversations", scope: scopeWorkspace, role: developer, handle: s.unlinkSandboxedConversations},
		{pattern: "GET /v1/admin/bots/{id}/action-runs", op: "listActionRuns", scope: scopeWorkspace, role: viewer, handle: s.listActionRuns},

		// Bot and integration logs, bot issues (handlers in admin_logs.go).
		// -- begin logs-and-issues routes --
		{pattern: "GET /v1/admin/bots/{id}/logs", op: "getBotLogs", scope: scopeWorkspace, role: viewer, botSelf: true, handle: s.getBotLogs},
		{pattern: "GET /v1/admin/integrations/{id}/logs", op: "getIntegrationLogs", scope: scopeWorkspace, role: viewer, integrationSelf: true, handle: s.getIntegrationLogs},
		{pattern: "GET /v1/admin/bots/{id}/issues", op: "listBotIssues", scope: scopeWorkspace, role: viewer, botSelf: true, handle: s.listBotIssues},
		{pattern: "GET /v1/admin/bots/{id}/issues/{issueId}", op: "getBotIssue", scope: scopeWorkspace, role: viewer, botSelf: true, handle: s.getBotIssue},
		{pattern: "DELETE /v1/admin/bots/{id}/issues/{issueId}", op: "deleteBotIssue", scope: scopeWorkspace, role: developer, handle: s.deleteBotIssue},
		{pattern: "GET /v1/admin/bots/{id}/issues/{issueId}/events", op: "listBotIssueEvents", scope: scopeWorkspace, role: viewer, botSelf: true, handle: s.listBotIssueEvents},
		// -- end logs-and-issues routes --

		// Task activities (chat_tasks.go), audit records (audit.go).
		{pattern: "GET /v1/admin/activities", op: "listActivities", scope: scopeWorkspace, role: viewer, handle: s.listActivities},
		{pattern: "GET /v1/admin/workspaces/{id}/audit-records", op: "getAuditRecords", scope: scopeWorkspacePath, role: admin, handle: s.getAuditRecords},
	}
}

// --- Account and personal access tokens ---

func (s *server) getAccount(c *call) (any, error) {
	a, err := s.Store.GetAccount(c.ctx, c.principal.AccountID)
	return map[string]any{"account": a}, err
}

func (s *server) listPATs(c *call) (any, error) {
	pats, err := s.Store.ListPATs(c.ctx, c.principal.AccountID)
	return map[string]any{"pats": pats}, err
}

func (s *server) createPAT(c *call) (any, error) {
	var in struct {
		Note string `json:"note"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	t, err := s.Store.CreatePAT(c.ctx, c.principal.AccountID, in.Note)
	return map[string]any{"pat": t}, err
}

func (s *server) deletePAT(c *call) (any, error) {
	return nil, s.Store.DeletePAT(c.ctx, c.principal.AccountID, c.PathValue("id"))
}

// --- Workspaces ---

func (s *server) createWorkspace(c *call) (any, error) {
	var in struct {
		Name string `json:"name"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := checkName(in.Name); err != nil {
		return nil, err
	}
	a, err := s.Store.GetAccount(c.ctx, c.principal.AccountID)
	if err != nil {
		return nil, err
	}
	return s.Store.CreateWorkspace(c.ctx, a, in.Name)
}

func checkName(name string) error {
	if n := len([]rune(strings.TrimSpace(name))); n < 1 || n > 64 {
		return platform.Invalid("invalid body: field \"name\": must be 1 to 64 characters")
	}
	return nil
}

func (s *server) listWorkspaces(c *call) (any, error) {
	q := c.query()
	handle, err := q.str("handle")
	if err != nil {
		return nil, err
	}
	p, err := c.page(c.principal.AccountID)
	if err != nil {
		return nil, err
	}
	type out struct {
		Workspaces []platform.Workspace `json:"workspaces"`
		Meta       meta                 `json:"meta"`
	}
	if handle != "" {
		// A handle names at most one workspace: list it if the caller is a member.
		res := out{Workspaces: []platform.Workspace{}}
		id, ok, err := s.Store.WorkspaceByHandle(c.ctx, handle)
		if err != nil || !ok {
			return res, err
		}
		if _, member, err := s.Store.GetMember(c.ctx, id, c.principal.AccountID); err != nil || !member {
			return res, err
		}
		w, err := s.Store.GetWorkspace(c.ctx, id)
		if err != nil {
			return res, err
		}
		res.Workspaces = append(res.Workspaces, w.Workspace)
		return res, nil
	}
	ws, next, err := s.Store.ListWorkspacesOf(c.ctx, c.principal.AccountID, p)
	if err != nil {
		return nil, err
	}
	return out{Workspaces: ws, Meta: c.meta(c.principal.AccountID, next)}, nil
}

func (s *server) getWorkspace(c *call) (any, error) {
	w, err := s.Store.GetWorkspace(c.ctx, c.workspaceID)
	return w.Workspace, err
}

func (s *server) updateWorkspace(c *call) (any, error) {
	var p dynamo.WorkspacePatch
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	if p.Name != nil {
		if err := checkName(*p.Name); err != nil {
			return nil, err
		}
	}
	return s.Store.UpdateWorkspace(c.ctx, c.workspaceID, p)
}

func (s *server) deleteWorkspace(c *call) (any, error) {
	return nil, s.Store.DeleteWorkspace(c.ctx, c.workspaceID)
}

// --- Members ---

func (s *server) listMembers(c *call) (any, error) {
	p, err := c.page(c.workspaceID)
	if err != nil {
		return nil, err
	}
	ms, next, err := s.Store.ListMembers(c.ctx, c.workspaceID, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"members": ms, "meta": c.meta(c.workspaceID, next)}, nil
}

func (s *server) getMemberMe(c *call) (any, error) { return c.member, nil }

// canGrant reports whether a caller of role actor may give or take role
// target: only owners touch owners; administrators manage everyone else.
func canGrant(actor, target platform.Role) error {
	if target == platform.RoleOwner && actor != platform.RoleOwner {
		return platform.Forbidden("only an owner can grant, change or remove the owner role")
	}
	return nil
}

func (s *server) createMember(c *call) (any, error) {
	m, _, err := s.addMember(c)
	return m, err
}

// addMember adds a member, and answers its invitation link when its
// account cannot sign in yet (signin.go).
func (s *server) addMember(c *call) (platform.Member, *invitation, error) {
	var in struct {
		Email string        `json:"email"`
		Role  platform.Role `json:"role"`
	}
	if err := c.decode(&in); err != nil {
		return platform.Member{}, nil, err
	}
	if !in.Role.Valid() {
		return platform.Member{}, nil, platform.Invalid("invalid body: field \"role\": must be one of viewer, billing, developer, manager, administrator, owner")
	}
	if err := canGrant(c.role, in.Role); err != nil {
		return platform.Member{}, nil, err
	}
	// Everything is checked before anything is written: a refused
	// invitation leaves no account, membership or token behind.
	if err := platform.ValidateEmail(in.Email); err != nil {
		return platform.Member{}, nil, err
	}
	m, first, err := s.Store.InviteMember(c.ctx, c.workspaceID, in.Email, in.Role, s.Invite != nil)
	if err != nil {
		return m, nil, err
	}
	if first != nil {
		// The invitation carries the new account's first token.
		if err := s.Invite(c.ctx, m.Email, first.Value); err != nil {
			return m, nil, err
		}
	}
	inv, err := s.invite(c, m)
	return m, inv, committed(err, m)
}

func (s *server) updateMember(c *call) (any, error) {
	var in struct {
		Role *platform.Role `json:"role"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	m, err := s.Store.GetMemberByID(c.ctx, c.workspaceID, c.PathValue("id"))
	if err != nil || in.Role == nil {
		return m, err
	}
	if err := canGrant(c.role, m.Role); err != nil {
		return nil, err
	}
	if err := canGrant(c.role, *in.Role); err != nil {
		return nil, err
	}
	return s.Store.SetMemberRole(c.ctx, m, *in.Role)
}

func (s *server) deleteMember(c *call) (any, error) {
	m, err := s.Store.GetMemberByID(c.ctx, c.workspaceID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if m.UserID != c.principal.AccountID {
		if err := checkRole(c.role, platform.RoleAdministrator); err != nil {
			return nil, err
		}
		if err := canGrant(c.role, m.Role); err != nil {
			return nil, err
		}
	}
	if err := s.Store.RemoveMember(c.ctx, m); err != nil {
		return nil, err
	}
	return nil, committed(s.memberRemoved(c, m), nil) // its sessions end (signin.go)
}

// --- Helpers shared by the admin handlers ---

func orEmpty[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// listKey identifies a list with its filters, for its nextTokens.
func listKey(parts ...any) string {
	b, _ := json.Marshal(parts)
	return string(b)
}

// --- Bot API keys ---

func (s *server) botOfWorkspace(c *call, id string) (dynamo.BotRecord, error) {
	if id == "" {
		return dynamo.BotRecord{}, platform.Invalid("botId is required")
	}
	b, err := s.Store.GetBot(c.ctx, id)
	if err == nil && b.WorkspaceID != c.workspaceID {
		err = platform.NotFound("bot", id)
	}
	return b, err
}

func (s *server) listBotAPIKeys(c *call) (any, error) {
	id, err := c.query().str("botId")
	if err != nil {
		return nil, err
	}
	if _, err := s.botOfWorkspace(c, id); err != nil {
		return nil, err
	}
	keys, err := s.Store.ListBotAPIKeys(c.ctx, id)
	sort.Slice(keys, func(i, j int) bool { return keys[i].CreatedAt < keys[j].CreatedAt })
	return map[string]any{"baks": keys}, err
}

func (s *server) createBotAPIKey(c *call) (any, error) {
	var in struct {
		BotID string `json:"botId"`
		Note  string `json:"note"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	b, err := s.botOfWorkspace(c, in.BotID)
	if err != nil {
		return nil, err
	}
	return s.Store.CreateBotAPIKey(c.ctx, b.Bot, in.Note)
}

func (s *server) deleteBotAPIKey(c *call) (any, error) {
	return nil, s.Store.DeleteBotAPIKey(c.ctx, c.workspaceID, c.PathValue("id"))
}
