package signin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Routes are the sign-in's own endpoints, served without a token (the
// Admin API mounts them: httpapi signinRoutes). Calls that need a signed-in
// account (sessions, password, two-factor) are Admin API operations.
func (s *Service) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /auth/config":         s.json(s.getConfig),
		"POST /auth/password":      s.json(s.passwordSignIn),
		"POST /auth/signout":       s.json(s.signOut),
		"GET /auth/session":        s.json(s.getSession),
		"GET /auth/links/{token}":  s.json(s.getLink),
		"POST /auth/links/{token}": s.json(s.acceptLink),
		"GET /auth/oidc/start":     http.HandlerFunc(s.oidcStart),
		"GET /auth/oidc/callback":  http.HandlerFunc(s.oidcCallback),
	}
}

func (s *Service) json(f func(http.ResponseWriter, *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		// No other site's page signs a browser in or out (login CSRF):
		// JSON bodies already need a CORS preflight; this says so plainly.
		if site := r.Header.Get("Sec-Fetch-Site"); r.Method != http.MethodGet && site != "" && site != "same-origin" && site != "none" {
			s.writeError(w, r, platform.Forbidden("cross-site request refused (Sec-Fetch-Site: %s)", site))
			return
		}
		out, err := f(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		b, _ := json.Marshal(out)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
}

func decode(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.Contains(strings.ToLower(ct), "json") {
		return platform.Errorf(platform.ErrUnsupportedMedia, "content type %q is not supported: send application/json", ct)
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 16<<10+1))
	if err != nil {
		return platform.Invalid("could not read request body: %v", err)
	}
	if len(raw) > 16<<10 {
		return platform.Errorf(platform.ErrPayloadTooLarge, "request body exceeds %d bytes", 16<<10)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return platform.Invalid("invalid body: %v", err)
	}
	return nil
}

// Provider is a sign-in link the console shows.
type Provider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

func (s *Service) getConfig(w http.ResponseWriter, r *http.Request) (any, error) {
	providers := []Provider{}
	if s.oidc != nil {
		providers = append(providers, Provider{ID: "oidc", Name: s.cfg.OIDC.Name, URL: "/auth/oidc/start"})
	}
	return map[string]any{"password": !s.cfg.DisablePassword, "providers": providers}, nil
}

// errSignIn is the one answer to a wrong email or a wrong password.
var errSignIn = platform.Errorf(platform.ErrUnauthorized, "wrong email or password")

// dummyAccount stands for a missing account: its reads cost what a real
// account's do, so an unknown email takes the time a wrong password does.
const dummyAccount = "acc_00000000000000000000000000"

func (s *Service) passwordSignIn(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.cfg.DisablePassword {
		return nil, platform.Forbidden("password sign-in is turned off on this platform: use single sign-on")
	}
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Code     string `json:"code"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	ctx := r.Context()
	email := dynamo.NormalizeEmail(in.Email)
	if email == "" || in.Password == "" {
		return nil, platform.Invalid("email and password are required")
	}
	addr := clientip.Of(r)
	if err := s.throttle(ctx, email, addr); err != nil {
		s.audit(ctx, Event{Email: email, Action: "SIGN_IN_FAILED", Detail: "throttled", Address: addr})
		return nil, err
	}
	acct, found, err := s.store.AccountByEmail(ctx, email)
	if err != nil {
		return nil, err
	}
	id := acct.ID
	if !found {
		// The reads a known account costs (its account item, read by
		// AccountByEmail, and its credentials).
		_, _ = s.store.GetAccount(ctx, dummyAccount)
		id = dummyAccount
	}
	c, ver, err := s.store.GetCredentials(ctx, id)
	if err != nil {
		return nil, err
	}
	hash := c.PasswordHash
	if !found || hash == "" {
		hash = dummyHash
	}
	ok := VerifyPassword(hash, in.Password) && found && c.PasswordHash != ""
	if !ok {
		s.audit(ctx, Event{AccountID: acct.ID, Email: email, Action: "SIGN_IN_FAILED", Detail: "wrong email or password", Address: addr})
		return nil, errSignIn
	}
	if c.TOTPEnabled {
		if strings.TrimSpace(in.Code) == "" {
			return map[string]any{"totpRequired": true}, nil
		}
		if !s.useSecondFactor(ctx, acct.ID, c, ver, in.Code) {
			s.audit(ctx, Event{AccountID: acct.ID, Email: email, Action: "SIGN_IN_FAILED", Detail: "wrong or reused two-factor code", Address: addr})
			return nil, platform.Errorf(platform.ErrUnauthorized, "wrong or already used two-factor code")
		}
	}
	csrf, err := s.NewSession(ctx, w, r, acct.ID, "password")
	if err != nil {
		return nil, err
	}
	return map[string]any{"signedIn": true, "accountId": acct.ID, "email": acct.Email, "csrfToken": csrf}, nil
}

// throttle counts one attempt per account (by email, known or not) and
// per client address; past either limit, the attempt is refused.
func (s *Service) throttle(ctx context.Context, email, addr string) error {
	if s.limits == nil {
		return nil
	}
	mins := int(s.cfg.AttemptWindow / time.Minute)
	return s.limits.Count(ctx, s.cfg.AttemptWindow,
		platform.Scope{Key: "signin/account/" + dynamo.HashToken(email), Max: s.cfg.PerAccount,
			Refusal: "too many sign-in attempts for this account: wait up to " + itoa(mins) + " minutes and try again"},
		platform.Scope{Key: "signin/address/" + addr, Max: s.cfg.PerAddress,
			Refusal: "too many sign-in attempts from this address: wait up to " + itoa(mins) + " minutes and try again"})
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func (s *Service) signOut(w http.ResponseWriter, r *http.Request) (any, error) {
	ctx := r.Context()
	ss, err := s.session(ctx, r)
	clearCookie(w)
	if err != nil {
		return struct{}{}, nil // nothing to end
	}
	if err := s.checkCSRF(r); err != nil {
		return nil, err
	}
	return struct{}{}, s.EndSession(ctx, ss.AccountID, ss.ID, "signed out", clientip.Of(r))
}

// getSession answers the signed-in account and the session's CSRF token.
// Another origin's page cannot read the answer (no CORS with credentials).
func (s *Service) getSession(w http.ResponseWriter, r *http.Request) (any, error) {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return nil, platform.Forbidden("cross-site request refused")
	}
	ctx := r.Context()
	ss, err := s.session(ctx, r)
	if errors.Is(err, errNoSession) {
		// Not signed in is an answer, not an error: the console asks at
		// every load, and a 401 there would be a failed load in every
		// browser's console.
		return map[string]any{"signedIn": false}, nil
	}
	if err != nil {
		return nil, err
	}
	c, _ := r.Cookie(CookieName)
	csrf := csrfOf(c.Value)
	acct, err := s.store.GetAccount(ctx, ss.AccountID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"signedIn": true, "accountId": acct.ID, "email": acct.Email, "sessionId": ss.ID, "csrfToken": csrf, "expiresAt": ss.ExpiresAt}, nil
}

// baseURL is where links point: the public URL, or this request's host.
func (s *Service) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil || os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != "" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// NewInvitation creates a single-use, expiring invitation link for an
// account invited to a workspace, and answers its URL.
func (s *Service) NewInvitation(ctx context.Context, r *http.Request, acct platform.Account, ws string, role platform.Role, invitedBy string) (string, string, error) {
	value := randomValue()
	now := s.now()
	l := dynamo.Link{ID: platform.NewID("inv_"), Kind: "invitation", AccountID: acct.ID, Email: acct.Email, WorkspaceID: ws, Role: string(role),
		InvitedBy: invitedBy, CreatedAt: fmtTime(now), ExpiresAt: fmtTime(now.Add(s.cfg.InvitationTTL)), Hash: dynamo.HashToken(value)}
	if err := s.store.CreateLink(ctx, l); err != nil {
		return "", "", err
	}
	return s.baseURL(r) + "/#/invite/" + value, l.ExpiresAt, nil
}

// NewSetupLink creates the first account's one-time setup link (base: the
// console's URL) and answers it.
func (s *Service) NewSetupLink(ctx context.Context, base string, acct platform.Account) (string, error) {
	value := randomValue()
	now := s.now()
	l := dynamo.Link{ID: platform.NewID("stp_"), Kind: "setup", AccountID: acct.ID, Email: acct.Email,
		CreatedAt: fmtTime(now), ExpiresAt: fmtTime(now.Add(s.cfg.SetupTTL)), Hash: dynamo.HashToken(value)}
	if err := s.store.CreateLink(ctx, l); err != nil {
		return "", err
	}
	if s.cfg.PublicURL != "" {
		base = s.cfg.PublicURL
	}
	return strings.TrimSuffix(base, "/") + "/#/setup/" + value, nil
}

// NeedsInvitation tells whether an account has no way to sign in yet (no
// password, no linked identity): its invitation then carries a link.
func (s *Service) NeedsInvitation(ctx context.Context, accountID string) (bool, error) {
	c, _, err := s.store.GetCredentials(ctx, accountID)
	if err != nil || c.PasswordHash != "" {
		return false, err
	}
	ids, err := s.store.ListIdentities(ctx, accountID)
	return len(ids) == 0, err
}

var errLinkGone = platform.Errorf(platform.ErrResourceNotFound, "this link expired or was already used: ask for a new one")

func (s *Service) liveLink(ctx context.Context, token string) (dynamo.Link, error) {
	if token == "" || len(token) > 200 {
		return dynamo.Link{}, errLinkGone
	}
	l, ok, err := s.store.GetLink(ctx, dynamo.HashToken(token))
	if err != nil {
		return l, err
	}
	if !ok || s.now().After(parseTime(l.ExpiresAt)) {
		return l, errLinkGone
	}
	return l, nil
}

func (s *Service) getLink(w http.ResponseWriter, r *http.Request) (any, error) {
	l, err := s.liveLink(r.Context(), r.PathValue("token"))
	if err != nil {
		return nil, err
	}
	out := map[string]any{"kind": l.Kind, "email": l.Email, "expiresAt": l.ExpiresAt, "password": !s.cfg.DisablePassword}
	if l.WorkspaceID != "" {
		if ws, err := s.store.GetWorkspace(r.Context(), l.WorkspaceID); err == nil {
			out["workspaceName"] = ws.Name
		}
		out["role"] = l.Role
	}
	providers := []Provider{}
	if s.oidc != nil {
		providers = append(providers, Provider{ID: "oidc", Name: s.cfg.OIDC.Name, URL: "/auth/oidc/start?link=" + r.PathValue("token")})
	}
	out["providers"] = providers
	return out, nil
}

// acceptLink spends a setup or invitation link: it sets the account's
// password and signs it in.
func (s *Service) acceptLink(w http.ResponseWriter, r *http.Request) (any, error) {
	var in struct {
		Password string `json:"password"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if s.cfg.DisablePassword {
		return nil, platform.Forbidden("password sign-in is turned off on this platform: use single sign-on")
	}
	if err := CheckPassword(in.Password); err != nil {
		return nil, err
	}
	ctx := r.Context()
	if _, err := s.liveLink(ctx, r.PathValue("token")); err != nil {
		return nil, err
	}
	l, ok, err := s.store.ConsumeLink(ctx, dynamo.HashToken(r.PathValue("token")))
	if err != nil {
		return nil, err
	}
	if !ok || s.now().After(parseTime(l.ExpiresAt)) {
		return nil, errLinkGone
	}
	if err := s.setPassword(ctx, l.AccountID, in.Password); err != nil {
		return nil, err
	}
	csrf, err := s.NewSession(ctx, w, r, l.AccountID, l.Kind)
	if err != nil {
		return nil, err
	}
	return map[string]any{"accountId": l.AccountID, "email": l.Email, "csrfToken": csrf, "workspaceId": l.WorkspaceID}, nil
}

func (s *Service) setPassword(ctx context.Context, accountID, pw string) error {
	hash := HashPassword(pw)
	for attempt := 0; attempt < 3; attempt++ {
		c, ver, err := s.store.GetCredentials(ctx, accountID)
		if err != nil {
			return err
		}
		c.PasswordHash, c.PasswordSetAt = hash, fmtTime(s.now())
		err = s.store.PutCredentials(ctx, accountID, c, ver)
		if !errors.Is(err, dynamo.ErrChanged) {
			return err
		}
	}
	return dynamo.ErrChanged
}

// ChangePassword sets an account's password (the current one is asked
// when there is one) and ends all its sessions.
func (s *Service) ChangePassword(ctx context.Context, accountID, current, next, address string) error {
	if err := CheckPassword(next); err != nil {
		return err
	}
	c, _, err := s.store.GetCredentials(ctx, accountID)
	if err != nil {
		return err
	}
	if c.PasswordHash != "" && !VerifyPassword(c.PasswordHash, current) {
		return platform.Forbidden("the current password is wrong")
	}
	if err := s.setPassword(ctx, accountID, next); err != nil {
		return err
	}
	return s.EndSessions(ctx, accountID, "password changed", address)
}

// AccountStatus is what the account page shows of its sign-in.
type AccountStatus struct {
	HasPassword       bool              `json:"hasPassword"`
	TOTPEnabled       bool              `json:"totpEnabled"`
	RecoveryCodesLeft int               `json:"recoveryCodesLeft"`
	Identities        []dynamo.Identity `json:"identities"`
	Providers         []Provider        `json:"providers"`
}

// Status answers an account's sign-in methods.
func (s *Service) Status(ctx context.Context, accountID string) (AccountStatus, error) {
	c, _, err := s.store.GetCredentials(ctx, accountID)
	if err != nil {
		return AccountStatus{}, err
	}
	ids, err := s.store.ListIdentities(ctx, accountID)
	if err != nil {
		return AccountStatus{}, err
	}
	if ids == nil {
		ids = []dynamo.Identity{}
	}
	providers := []Provider{}
	if s.oidc != nil {
		providers = append(providers, Provider{ID: "oidc", Name: s.cfg.OIDC.Name, URL: "/auth/oidc/start"})
	}
	return AccountStatus{HasPassword: c.PasswordHash != "", TOTPEnabled: c.TOTPEnabled, RecoveryCodesLeft: len(c.RecoveryHashes),
		Identities: ids, Providers: providers}, nil
}
