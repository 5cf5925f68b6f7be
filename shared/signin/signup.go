package signin

import (
	"context"
	"fmt"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Self sign-up by single sign-on (docs/signin.md, off by default): an
// identity linked to no account whose provider says its email is
// verified, at one of the operator's allowed domains, gets an account on
// its first sign-in, and joins the operator's workspace (if named) with
// the sign-up role. Identities stay linked by (iss, sub): an email that
// already has an account here is refused, never taken over.

// Environment variables of self sign-up.
const (
	// EnvOIDCAllowedDomains: comma-separated email domains whose verified
	// addresses may sign up (empty: no self sign-up).
	EnvOIDCAllowedDomains = "PLATFORM_OIDC_ALLOWED_DOMAINS"
	// EnvOIDCWorkspace: the workspace (id or handle) that self-signed-up
	// accounts join.
	EnvOIDCWorkspace = "PLATFORM_OIDC_WORKSPACE"
	// EnvOIDCSignUpRole: their role there (default viewer; not owner).
	EnvOIDCSignUpRole = "PLATFORM_OIDC_SIGNUP_ROLE"
)

// signUpFromEnv reads self sign-up's settings into c.
func signUpFromEnv(c *Config, get func(string) string) error {
	for _, d := range strings.Split(get(EnvOIDCAllowedDomains), ",") {
		d = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "@")))
		if d == "" {
			continue
		}
		if strings.ContainsAny(d, "@/: ") || !strings.Contains(d, ".") && d != "localhost" {
			return fmt.Errorf("%s: %q is not an email domain (want e.g. example.com,example.org)", EnvOIDCAllowedDomains, d)
		}
		c.OIDC.AllowedDomains = append(c.OIDC.AllowedDomains, d)
	}
	c.OIDC.Workspace = strings.TrimSpace(get(EnvOIDCWorkspace))
	if v := strings.TrimSpace(get(EnvOIDCSignUpRole)); v != "" {
		r := platform.Role(v)
		if !r.Valid() || r == platform.RoleOwner {
			return fmt.Errorf("%s=%q: want viewer, billing, developer, manager or administrator", EnvOIDCSignUpRole, v)
		}
		c.OIDC.SignUpRole = r
	}
	if len(c.OIDC.AllowedDomains) > 0 && c.OIDC.Issuer == "" {
		return fmt.Errorf("%s is set but %s is not", EnvOIDCAllowedDomains, EnvOIDCIssuer)
	}
	return nil
}

// identityClaims are what the sign-in reads of an identity: the ID
// token's claims, completed by the provider's userinfo answer when a
// setting needs one the ID token lacks (many providers put the email only
// there).
func (s *Service) identityClaims(ctx context.Context, p *oidc.Provider, tok *oauth2.Token, idt *oidc.IDToken) (map[string]any, error) {
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("the ID token's claims could not be read: %v", err)
	}
	need := len(s.cfg.OIDC.AllowedDomains) > 0 && (claims["email"] == nil || claims["email_verified"] == nil) ||
		s.cfg.OIDC.RoleClaim != "" && claims[s.cfg.OIDC.RoleClaim] == nil
	if !need {
		return claims, nil
	}
	ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, fmt.Errorf("the provider's userinfo could not be read: %v", err)
	}
	// OpenID Connect Core 5.3.2: the answer's sub must be the ID token's.
	if ui.Subject != idt.Subject {
		return nil, fmt.Errorf("the provider's userinfo names another subject than the ID token: refused")
	}
	more := map[string]any{}
	if err := ui.Claims(&more); err != nil {
		return nil, fmt.Errorf("the provider's userinfo could not be read: %v", err)
	}
	for k, v := range more {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return claims, nil
}

func claimString(claims map[string]any, name string) string {
	s, _ := claims[name].(string)
	return s
}

// verified reads email_verified, a boolean (some providers send "true").
func verified(claims map[string]any) bool {
	switch v := claims["email_verified"].(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

// signUp creates the account of an identity linked to none, when self
// sign-up allows it.
func (s *Service) signUp(ctx context.Context, iss, sub string, claims map[string]any, address string) (string, error) {
	name := s.cfg.OIDC.Name
	email := dynamo.NormalizeEmail(claimString(claims, "email"))
	if email == "" {
		return "", platform.Forbidden("no account here is linked to this %s identity, and %s gave no email address to sign up with: ask an administrator for an invitation", name, name)
	}
	_, domain, _ := strings.Cut(email, "@")
	allowed := false
	for _, d := range s.cfg.OIDC.AllowedDomains {
		allowed = allowed || d == domain
	}
	if !allowed {
		return "", platform.Forbidden("no account here is linked to this %s identity, and self sign-up is open only to email addresses at %s, not %s: ask an administrator for an invitation",
			name, strings.Join(s.cfg.OIDC.AllowedDomains, ", "), email)
	}
	if !verified(claims) {
		return "", platform.Forbidden("%s says your email address %s is not verified: self sign-up needs a verified address; verify it at %s and sign in again, or ask an administrator for an invitation", name, email, name)
	}
	if err := platform.ValidateEmail(email); err != nil {
		return "", platform.Forbidden("self sign-up refused: %s", messageOf(err))
	}
	// Never a takeover: an email with an account here links its identity
	// only through that account's setup or invitation link.
	if _, ok, err := s.store.AccountByEmail(ctx, email); err != nil {
		return "", err
	} else if ok {
		return "", platform.Forbidden("an account for %s already exists here but is not linked to this %s identity: sign in with its password (or accept its invitation link with \"Sign in with %s\")", email, name, name)
	}
	var acctID string
	if s.cfg.OIDC.Workspace != "" {
		ws, err := s.signUpWorkspace(ctx)
		if err != nil {
			return "", err
		}
		role := s.cfg.OIDC.SignUpRole
		if role == "" {
			role = platform.RoleViewer
		}
		m, _, err := s.store.InviteMember(ctx, ws, email, role, false)
		if err != nil {
			return "", err
		}
		acctID = m.UserID
	} else {
		a, created, err := s.store.EnsureAccount(ctx, email)
		if err != nil {
			return "", err
		}
		if !created {
			return "", platform.Forbidden("an account for %s was created meanwhile: sign in again", email)
		}
		acctID = a.ID
	}
	if err := s.store.LinkIdentity(ctx, dynamo.Identity{Issuer: iss, Subject: sub, AccountID: acctID, Email: email, LinkedAt: fmtTime(s.now())}); err != nil {
		return "", err
	}
	s.audit(ctx, Event{AccountID: acctID, Email: email, Action: "SIGN_UP", Detail: "account created by self sign-up with " + name + " (domain " + domain + ")", Address: address})
	return acctID, nil
}

// signUpWorkspace resolves PLATFORM_OIDC_WORKSPACE, a handle or an id.
func (s *Service) signUpWorkspace(ctx context.Context) (string, error) {
	v := s.cfg.OIDC.Workspace
	if id, ok, err := s.store.WorkspaceByHandle(ctx, v); err != nil {
		return "", err
	} else if ok {
		return id, nil
	}
	if _, err := s.store.GetWorkspace(ctx, v); err != nil {
		return "", fmt.Errorf("%s=%q names no workspace here (an id or a handle): the operator must fix it", EnvOIDCWorkspace, v)
	}
	return v, nil
}
