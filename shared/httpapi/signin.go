package httpapi

import (
	"context"
	"net/http"

	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/signin"
)

// People's sign-in (shared/signin, docs/signin.md): its own endpoints
// under /auth/ (no token), and the Admin operations of a signed-in
// account (sessions, password, two-factor) and of a workspace's
// administrators (invitations, ending a member's sessions).

// signinRawRoutes are the sign-in's endpoints without a token.
func (s *server) signinRawRoutes() map[string]http.Handler {
	if s.signin == nil {
		return nil
	}
	return s.signin.Routes()
}

// signinRoutes are the Admin operations of sign-in.
func (s *server) signinRoutes() []route {
	if s.signin == nil {
		return nil
	}
	const admin = platform.RoleAdministrator
	return []route{
		{pattern: "GET /v1/admin/account/signin", op: "getAccountSignIn", scope: scopeAccount, ownBody: true, handle: s.getAccountSignIn},
		{pattern: "PUT /v1/admin/account/password", op: "setAccountPassword", scope: scopeAccount, ownBody: true, handle: s.setAccountPassword},
		{pattern: "GET /v1/admin/account/sessions", op: "listAccountSessions", scope: scopeAccount, ownBody: true, handle: s.listAccountSessions},
		{pattern: "DELETE /v1/admin/account/sessions/{id}", op: "deleteAccountSession", scope: scopeAccount, ownBody: true, handle: s.deleteAccountSession},
		{pattern: "POST /v1/admin/account/sessions/end", op: "endAccountSessions", scope: scopeAccount, ownBody: true, handle: s.endAccountSessions},
		{pattern: "POST /v1/admin/account/totp", op: "startAccountTotp", scope: scopeAccount, ownBody: true, handle: s.startAccountTotp},
		{pattern: "POST /v1/admin/account/totp/enable", op: "enableAccountTotp", scope: scopeAccount, ownBody: true, handle: s.enableAccountTotp},
		{pattern: "POST /v1/admin/account/totp/disable", op: "disableAccountTotp", scope: scopeAccount, ownBody: true, handle: s.disableAccountTotp},
		{pattern: "GET /v1/admin/workspace-invitations", op: "listWorkspaceInvitations", scope: scopeWorkspace, role: admin, ownBody: true, handle: s.listWorkspaceInvitations},
		{pattern: "POST /v1/admin/workspace-invitations", op: "createWorkspaceInvitation", scope: scopeWorkspace, role: admin, ownBody: true, handle: s.createWorkspaceInvitation},
		{pattern: "POST /v1/admin/workspace-invitations/{id}/renew", op: "renewWorkspaceInvitation", scope: scopeWorkspace, role: admin, ownBody: true, handle: s.renewWorkspaceInvitation},
		{pattern: "DELETE /v1/admin/workspace-invitations/{id}", op: "deleteWorkspaceInvitation", scope: scopeWorkspace, role: admin, ownBody: true, handle: s.deleteWorkspaceInvitation},
		{pattern: "POST /v1/admin/workspace-members/{id}/sessions/end", op: "endWorkspaceMemberSessions", scope: scopeWorkspace, role: admin, ownBody: true, handle: s.endMemberSessions},
	}
}

// sessionAuth authenticates a call by its session cookie (and CSRF
// token) when it has no Authorization header.
func (s *server) sessionAuth(c *call) (platform.Principal, bool, error) {
	if s.signin == nil || c.Header.Get("Authorization") != "" || !signin.HasCookie(c.Request) {
		return platform.Principal{}, false, nil
	}
	p, err := s.signin.Authenticate(c.ctx, c.Request)
	return p, err == nil, err
}

func (s *server) getAccountSignIn(c *call) (any, error) {
	return s.signin.Status(c.ctx, c.principal.AccountID)
}

func (s *server) setAccountPassword(c *call) (any, error) {
	var in struct {
		CurrentPassword string `json:"currentPassword"`
		NewPassword     string `json:"newPassword"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return nil, s.signin.ChangePassword(c.ctx, c.principal.AccountID, in.CurrentPassword, in.NewPassword, clientip.Of(c.Request))
}

func (s *server) listAccountSessions(c *call) (any, error) {
	ss, err := s.signin.ListSessions(c.ctx, c.principal.AccountID, c.principal.TokenID)
	return map[string]any{"sessions": ss}, err
}

func (s *server) deleteAccountSession(c *call) (any, error) {
	return nil, s.signin.EndSession(c.ctx, c.principal.AccountID, c.PathValue("id"), "revoked by its account", clientip.Of(c.Request))
}

func (s *server) endAccountSessions(c *call) (any, error) {
	return nil, s.signin.EndSessions(c.ctx, c.principal.AccountID, "all sessions ended by their account", clientip.Of(c.Request))
}

func (s *server) startAccountTotp(c *call) (any, error) {
	a, err := s.Store.GetAccount(c.ctx, c.principal.AccountID)
	if err != nil {
		return nil, err
	}
	return s.signin.StartTOTP(c.ctx, a.ID, a.Email)
}

func (s *server) enableAccountTotp(c *call) (any, error) {
	var in struct {
		Code string `json:"code"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	codes, err := s.signin.EnableTOTP(c.ctx, c.principal.AccountID, in.Code)
	return map[string]any{"recoveryCodes": codes}, err
}

func (s *server) disableAccountTotp(c *call) (any, error) {
	var in struct {
		Password string `json:"password"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return nil, s.signin.DisableTOTP(c.ctx, c.principal.AccountID, in.Password)
}

type invitationOut struct {
	ID        string `json:"id"`
	Email     string `json:"email"`
	Role      string `json:"role"`
	InvitedBy string `json:"invitedBy"`
	CreatedAt string `json:"createdAt"`
	ExpiresAt string `json:"expiresAt"`
}

func (s *server) listWorkspaceInvitations(c *call) (any, error) {
	ls, err := s.Store.ListInvitations(c.ctx, c.workspaceID)
	if err != nil {
		return nil, err
	}
	out := []invitationOut{}
	now := platform.Clock()
	for _, l := range ls {
		if platform.FormatTime(now) > l.ExpiresAt {
			continue
		}
		out = append(out, invitationOut{ID: l.ID, Email: l.Email, Role: l.Role, InvitedBy: l.InvitedBy, CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt})
	}
	return map[string]any{"invitations": out}, nil
}

// createWorkspaceInvitation is createWorkspaceMember answering the
// invitation link too (the reference's answer has no room for it): the
// console invites with it and shows the link to copy.
func (s *server) createWorkspaceInvitation(c *call) (any, error) {
	m, inv, err := s.addMember(c)
	if err != nil {
		return nil, err
	}
	return map[string]any{"member": m, "invitation": inv}, nil
}

// renewWorkspaceInvitation replaces a pending invitation's link (the old
// one stops working) and answers the new one.
func (s *server) renewWorkspaceInvitation(c *call) (any, error) {
	ls, err := s.Store.ListInvitations(c.ctx, c.workspaceID)
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if l.ID != c.PathValue("id") {
			continue
		}
		if err := s.Store.DeleteInvitation(c.ctx, c.workspaceID, l.ID); err != nil {
			return nil, err
		}
		by := c.principal.AccountID
		if a, err := s.Store.GetAccount(c.ctx, by); err == nil {
			by = a.Email
		}
		url, exp, err := s.signin.NewInvitation(c.ctx, c.Request, platform.Account{ID: l.AccountID, Email: l.Email}, c.workspaceID, platform.Role(l.Role), by)
		if err != nil {
			return nil, err
		}
		inv := invitation{URL: url, ExpiresAt: exp}
		s.mailInvitation(c, &inv, l.Email, platform.Role(l.Role), by)
		return map[string]any{"invitation": inv}, nil
	}
	return nil, platform.NotFound("invitation", c.PathValue("id"))
}

func (s *server) deleteWorkspaceInvitation(c *call) (any, error) {
	return nil, s.Store.DeleteInvitation(c.ctx, c.workspaceID, c.PathValue("id"))
}

func (s *server) endMemberSessions(c *call) (any, error) {
	m, err := s.Store.GetMemberByID(c.ctx, c.workspaceID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if err := canGrant(c.role, m.Role); err != nil {
		return nil, err
	}
	return nil, s.signin.EndSessions(c.ctx, m.UserID, "ended by an administrator of workspace "+c.workspaceID, clientip.Of(c.Request))
}

// memberRemoved ends the sessions of a removed member's account.
func (s *server) memberRemoved(c *call, m platform.Member) error {
	if s.signin == nil {
		return nil
	}
	if err := s.signin.EndSessions(c.ctx, m.UserID, "removed from workspace "+m.WorkspaceID, clientip.Of(c.Request)); err != nil {
		return err
	}
	// Its pending invitations to the workspace are withdrawn.
	ls, err := s.Store.ListInvitations(c.ctx, m.WorkspaceID)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if l.AccountID == m.UserID {
			if err := s.Store.DeleteInvitation(c.ctx, m.WorkspaceID, l.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// invitation is createWorkspaceMember's answer with, for an account that
// cannot sign in yet, its single-use invitation link (the inviter copies
// it; it is also mailed when the operator configured SMTP: Mailed).
type invitation struct {
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"`
	Mailed    bool   `json:"mailed"`
}

// mailInvitation mails inv's link when mail is configured; a failure is
// logged and leaves the invitation as it is (its link is answered).
func (s *server) mailInvitation(c *call, inv *invitation, email string, role platform.Role, by string) {
	if !s.signin.Mails() {
		return
	}
	if err := s.signin.MailInvitation(c.ctx, email, inv.URL, inv.ExpiresAt, c.workspaceID, role, by); err != nil {
		s.Logger.Error("invitation mail not sent: the link is still answered to the inviter", "workspace", c.workspaceID, "to", email, "err", err)
		return
	}
	inv.Mailed = true
}

// invite creates the invitation link of a new member when its account has
// no way to sign in yet.
func (s *server) invite(c *call, m platform.Member) (*invitation, error) {
	if s.signin == nil {
		return nil, nil
	}
	need, err := s.signin.NeedsInvitation(c.ctx, m.UserID)
	if err != nil || !need {
		return nil, err
	}
	by := c.principal.AccountID
	if a, err := s.Store.GetAccount(c.ctx, by); err == nil {
		by = a.Email
	}
	url, exp, err := s.signin.NewInvitation(c.ctx, c.Request, platform.Account{ID: m.UserID, Email: m.Email}, c.workspaceID, m.Role, by)
	if err != nil {
		return nil, err
	}
	inv := &invitation{URL: url, ExpiresAt: exp}
	s.mailInvitation(c, inv, m.Email, m.Role, by)
	return inv, nil
}

// auditSignIn records a sign-in event in the audit log of every workspace
// of its account; an event of no known account (an unknown email) goes
// to the platform's own partition, "platform" (the same reads and writes
// either way: the two cannot be told apart by their time).
func (s *server) auditSignIn(ctx context.Context, e signin.Event) {
	ctx = context.WithoutCancel(ctx)
	acct := e.AccountID
	if acct == "" {
		acct = "none"
	}
	wss, err := s.Store.AccountWorkspaceIDs(ctx, acct)
	if err != nil {
		s.Logger.Error("sign-in audit", "err", err)
		return
	}
	if len(wss) == 0 {
		wss = []string{"platform"}
	}
	v := e.Action + ": " + e.Detail
	if e.Address != "" {
		v += " from " + e.Address
	}
	for _, ws := range wss {
		rec := platform.AuditRecord{ID: platform.NewID(platform.PrefixAudit), RecordedAt: platform.FormatTime(platform.Clock()), Action: "UNKNOWN", Value: &v}
		if e.AccountID != "" {
			id := e.AccountID
			rec.UserID, rec.ResourceID = &id, &id
		}
		if e.Email != "" {
			em := e.Email
			rec.UserEmail = &em
		}
		if err := s.Store.PutAuditRecord(ctx, ws, rec); err != nil {
			s.Logger.Error("sign-in audit record not written", "workspace", ws, "err", err)
		}
	}
}
