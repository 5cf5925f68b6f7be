// Package signin signs people in to the console (docs/signin.md): email
// and password (argon2id) with an optional TOTP second factor, OpenID
// Connect single sign-on, one-time links for the first account's setup
// and for invitations, and the browser sessions they open. A session is an
// opaque random value in a __Host- cookie, stored hashed in the table
// (shared/dynamo/signin.go), with idle and absolute timeouts; calls made
// with it carry a CSRF token in a header. Personal access tokens stay what
// the API, the CLI and scripts use.
//
// The same code runs locally and in the admin function on AWS: every
// state (pending flows, sessions, throttles) is in the table.
package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/mail"
	"github.com/botforge/platform/shared/platform"
)

// CookieName is the session cookie. The __Host- prefix makes browsers
// refuse it unless Secure, Path=/ and without Domain: no subdomain or
// plain-http page can set or overwrite it (loopback counts as secure).
const CookieName = "__Host-botforge_session"

// CSRFHeader carries a cookie-authenticated call's CSRF token. A page of
// another origin can neither read the token nor send a custom header
// without a CORS preflight, which the API does not grant with credentials.
const CSRFHeader = "X-CSRF-Token"

// Config is what the operator chooses (flags and environment locally,
// stack parameters on AWS).
type Config struct {
	// PublicURL is the console's public base URL (PLATFORM_PUBLIC_URL):
	// the OpenID callback is PublicURL + "/auth/oidc/callback", and links
	// are built on it. Empty: the request's own scheme and host (local).
	PublicURL string
	// OIDC is the single sign-on provider; zero Issuer: none.
	OIDC OIDCConfig
	// Password: email and password sign-in is offered (default true;
	// DisablePassword turns it off, e.g. behind a company's provider).
	DisablePassword bool
	// IdleTimeout ends a session unused this long (default 12h);
	// AbsoluteTimeout ends it this long after sign-in whatever its use
	// (default 7 days).
	IdleTimeout, AbsoluteTimeout time.Duration
	// InvitationTTL is how long an invitation link stays valid (default 7
	// days); SetupTTL the first account's setup link (default 7 days).
	InvitationTTL, SetupTTL time.Duration
	// Attempts throttles sign-in attempts within AttemptWindow (default
	// 15 minutes): per account (email) PerAccount (default 10), per client
	// address PerAddress (default 100).
	AttemptWindow          time.Duration
	PerAccount, PerAddress int64
	// Mail sends invitation links (PLATFORM_SMTP_URL, shared/mail); nil:
	// none is mailed.
	Mail *mail.Sender
}

// OIDCConfig is one OpenID Connect provider.
type OIDCConfig struct {
	Issuer       string // PLATFORM_OIDC_ISSUER
	ClientID     string // PLATFORM_OIDC_CLIENT_ID
	ClientSecret string // PLATFORM_OIDC_CLIENT_SECRET (on AWS read from SSM)
	// Name is the provider's display name ("Sign in with <Name>");
	// PLATFORM_OIDC_NAME, default "single sign-on".
	Name string
	// AllowedDomains: self sign-up (signup.go) of identities whose
	// verified email is at one of these domains; none: off.
	AllowedDomains []string
	// Workspace (id or handle) that self-signed-up accounts join, with
	// SignUpRole (default viewer).
	Workspace  string
	SignUpRole platform.Role
	// RoleClaim's values set the role in Workspace at every single
	// sign-on, by RoleMap (roleclaim.go); empty: off.
	RoleClaim string
	RoleMap   map[string]platform.Role
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.IdleTimeout, 12*time.Hour)
	def(&c.AbsoluteTimeout, 7*24*time.Hour)
	def(&c.InvitationTTL, 7*24*time.Hour)
	def(&c.SetupTTL, 7*24*time.Hour)
	def(&c.AttemptWindow, 15*time.Minute)
	if c.PerAccount <= 0 {
		c.PerAccount = 10
	}
	if c.PerAddress <= 0 {
		c.PerAddress = 100
	}
	if c.OIDC.Name == "" {
		c.OIDC.Name = "single sign-on"
	}
	c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	return c
}

// Event is what the audit log records of a sign-in.
type Event struct {
	AccountID string
	Email     string
	// Action: SIGN_IN, SIGN_IN_FAILED, SESSION_END.
	Action  string
	Detail  string
	Address string
}

// Service signs people in.
type Service struct {
	cfg    Config
	store  *dynamo.Store
	limits platform.SharedLimits
	audit  func(context.Context, Event)
	// WriteError answers an error in the API's error shape.
	writeError func(http.ResponseWriter, *http.Request, error)
	oidc       *oidcClient
	now        func() time.Time
}

// New returns the service. audit receives every sign-in, failure and
// session end; writeError answers errors in the API's shape.
func New(cfg Config, store *dynamo.Store, limits platform.SharedLimits, audit func(context.Context, Event), writeError func(http.ResponseWriter, *http.Request, error)) *Service {
	s := &Service{cfg: cfg.withDefaults(), store: store, limits: limits, audit: audit, writeError: writeError, now: platform.Clock}
	if s.cfg.OIDC.Issuer != "" {
		s.oidc = newOIDCClient(s.cfg.OIDC)
	}
	if s.audit == nil {
		s.audit = func(context.Context, Event) {}
	}
	return s
}

// Config answers the service's configuration (defaults applied).
func (s *Service) Config() Config { return s.cfg }

// randomValue is a fresh random value of 256 bits, URL-safe.
func randomValue() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func fmtTime(t time.Time) string { return platform.FormatTime(t) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// NewSession opens a session of an account (a new one at every sign-in:
// a value planted before sign-in is never promoted) and sets its cookie.
// It answers the session's CSRF token.
func (s *Service) NewSession(ctx context.Context, w http.ResponseWriter, r *http.Request, accountID, method string) (string, error) {
	value := randomValue()
	csrf := csrfOf(value)
	now := s.now()
	ua := r.UserAgent()
	if len(ua) > 200 {
		ua = ua[:200]
	}
	ss := dynamo.Session{ID: platform.NewID("ses_"), AccountID: accountID, CreatedAt: fmtTime(now), LastSeenAt: fmtTime(now),
		ExpiresAt: fmtTime(now.Add(s.cfg.AbsoluteTimeout)), Method: method, UserAgent: ua, Address: clientip.Of(r),
		Hash: dynamo.HashToken(value)}
	if err := s.store.CreateSession(ctx, ss); err != nil {
		return "", err
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.cfg.AbsoluteTimeout / time.Second)})
	acct, _ := s.store.GetAccount(ctx, accountID)
	s.audit(ctx, Event{AccountID: accountID, Email: acct.Email, Action: "SIGN_IN", Detail: "signed in (" + method + ")", Address: clientip.Of(r)})
	return csrf, nil
}

func clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

// HasCookie tells whether r carries a session cookie.
func HasCookie(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	return err == nil && c.Value != ""
}

var errNoSession = platform.Errorf(platform.ErrUnauthorized, "not signed in, or the session ended: sign in again")

// session reads r's session, checking its timeouts (an expired one is
// ended). It does not check CSRF.
func (s *Service) session(ctx context.Context, r *http.Request) (dynamo.Session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" || len(c.Value) > 200 {
		return dynamo.Session{}, errNoSession
	}
	ss, ok, err := s.store.SessionByHash(ctx, dynamo.HashToken(c.Value))
	if err != nil {
		return ss, err
	}
	if !ok {
		return ss, errNoSession
	}
	now := s.now()
	timedOut := func() bool {
		return now.After(parseTime(ss.ExpiresAt)) || now.After(parseTime(ss.LastSeenAt).Add(s.cfg.IdleTimeout))
	}
	if timedOut() {
		// What this process remembers may predate another process's
		// touch: read it afresh before ending it.
		s.store.ForgetSession(ss.Hash)
		if ss, ok, err = s.store.SessionByHash(ctx, ss.Hash); err != nil || !ok {
			if err == nil {
				err = errNoSession
			}
			return ss, err
		}
	}
	if timedOut() {
		_ = s.store.DeleteSession(ctx, ss.AccountID, ss.ID)
		s.audit(ctx, Event{AccountID: ss.AccountID, Action: "SESSION_END", Detail: "session " + ss.ID + " timed out", Address: clientip.Of(r)})
		return ss, errNoSession
	}
	// Last use is written at most once a minute per session.
	if now.Sub(parseTime(ss.LastSeenAt)) > time.Minute {
		ss.LastSeenAt = fmtTime(now)
		if err := s.store.TouchSession(ctx, ss); err != nil {
			return ss, err
		}
	}
	return ss, nil
}

// CheckCSRF refuses a cookie-authenticated call without its session's
// CSRF token, or sent from another site (Sec-Fetch-Site, Origin).
func (s *Service) checkCSRF(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return platform.Forbidden("cross-site request refused (Sec-Fetch-Site: %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" && !s.sameOrigin(r, o) {
		return platform.Forbidden("request from origin %q refused: the session cookie is only accepted from this console's origin", o)
	}
	tok := r.Header.Get(CSRFHeader)
	c, _ := r.Cookie(CookieName)
	if tok == "" || c == nil || subtle.ConstantTimeCompare([]byte(tok), []byte(csrfOf(c.Value))) != 1 {
		return platform.Forbidden("missing or wrong %s header: a call authenticated by the session cookie must carry the session's CSRF token", CSRFHeader)
	}
	return nil
}

// sameOrigin tells whether origin is this console's: the public URL's, or
// the request's own host.
func (s *Service) sameOrigin(r *http.Request, origin string) bool {
	if s.cfg.PublicURL != "" && strings.EqualFold(origin, originOf(s.cfg.PublicURL)) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

func originOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	return u.Scheme + "://" + u.Host
}

// csrfOf is a session's CSRF token: derived from the session's value
// (which only its browser holds, in an HttpOnly cookie), so every tab of
// the browser reads the same one (GET /auth/session) and nothing more is
// stored. A page of another origin can read neither.
func csrfOf(sessionValue string) string {
	sum := sha256.Sum256([]byte("csrf\x00" + sessionValue))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Authenticate resolves a call's session cookie to its account principal,
// checking CSRF. The principal's TokenID is the session's id.
func (s *Service) Authenticate(ctx context.Context, r *http.Request) (platform.Principal, error) {
	ss, err := s.session(ctx, r)
	if err != nil {
		return platform.Principal{}, err
	}
	if err := s.checkCSRF(r); err != nil {
		return platform.Principal{}, err
	}
	return platform.Principal{Kind: platform.PrincipalAccount, TokenID: ss.ID, AccountID: ss.AccountID}, nil
}

// EndSessions ends every session of an account (password changed, member
// removed, an administrator's action, the account deleted).
func (s *Service) EndSessions(ctx context.Context, accountID, why, address string) error {
	n, err := s.store.DeleteSessions(ctx, accountID)
	if err == nil && n > 0 {
		s.audit(ctx, Event{AccountID: accountID, Action: "SESSION_END", Detail: why, Address: address})
	}
	return err
}

// AccountDeleted ends an account's sessions and deletes its links and
// identity links (before the account itself is deleted).
func (s *Service) AccountDeleted(ctx context.Context, accountID string) error {
	if err := s.EndSessions(ctx, accountID, "account deleted", ""); err != nil {
		return err
	}
	return s.store.DeleteSignIn(ctx, accountID)
}

// EndSession ends one session of an account.
func (s *Service) EndSession(ctx context.Context, accountID, sessionID, why, address string) error {
	if err := s.store.DeleteSession(ctx, accountID, sessionID); err != nil {
		return err
	}
	s.audit(ctx, Event{AccountID: accountID, Action: "SESSION_END", Detail: why + " (session " + sessionID + ")", Address: address})
	return nil
}

// SessionInfo is a session as its account sees it.
type SessionInfo struct {
	ID         string `json:"id"`
	CreatedAt  string `json:"createdAt"`
	LastSeenAt string `json:"lastSeenAt"`
	ExpiresAt  string `json:"expiresAt"`
	Method     string `json:"method"`
	UserAgent  string `json:"userAgent"`
	Address    string `json:"address"`
	Current    bool   `json:"current"`
}

// ListSessions lists an account's live sessions; current is the calling
// session's id, if any.
func (s *Service) ListSessions(ctx context.Context, accountID, current string) ([]SessionInfo, error) {
	all, err := s.store.ListSessions(ctx, accountID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := []SessionInfo{}
	for _, ss := range all {
		if now.After(parseTime(ss.ExpiresAt)) || now.After(parseTime(ss.LastSeenAt).Add(s.cfg.IdleTimeout)) {
			continue
		}
		out = append(out, SessionInfo{ID: ss.ID, CreatedAt: ss.CreatedAt, LastSeenAt: ss.LastSeenAt, ExpiresAt: ss.ExpiresAt,
			Method: ss.Method, UserAgent: ss.UserAgent, Address: ss.Address, Current: ss.ID == current})
	}
	return out, nil
}

// Environment variables of the sign-in (flags of the local platform set
// the same).
const (
	EnvPublicURL        = "PLATFORM_PUBLIC_URL"
	EnvOIDCIssuer       = "PLATFORM_OIDC_ISSUER"
	EnvOIDCClientID     = "PLATFORM_OIDC_CLIENT_ID"
	EnvOIDCClientSecret = "PLATFORM_OIDC_CLIENT_SECRET"
	EnvOIDCName         = "PLATFORM_OIDC_NAME"
	// EnvPasswordSignIn "off" turns email and password sign-in off.
	EnvPasswordSignIn = "PLATFORM_PASSWORD_SIGNIN"
	// Throttles and timeouts (Go durations; counts).
	EnvPerAccount      = "PLATFORM_SIGNIN_ATTEMPTS_PER_ACCOUNT"
	EnvPerAddress      = "PLATFORM_SIGNIN_ATTEMPTS_PER_ADDRESS"
	EnvAttemptWindow   = "PLATFORM_SIGNIN_ATTEMPT_WINDOW"
	EnvIdleTimeout     = "PLATFORM_SESSION_IDLE_TIMEOUT"
	EnvAbsoluteTimeout = "PLATFORM_SESSION_MAX_AGE"
)

// FromEnv reads the configuration from the environment (get: os.Getenv);
// a malformed value is an error naming its variable.
func FromEnv(get func(string) string) (Config, error) {
	c := Config{PublicURL: get(EnvPublicURL), DisablePassword: strings.EqualFold(get(EnvPasswordSignIn), "off"),
		OIDC: OIDCConfig{Issuer: get(EnvOIDCIssuer), ClientID: get(EnvOIDCClientID), ClientSecret: get(EnvOIDCClientSecret), Name: get(EnvOIDCName)}}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return c, fmt.Errorf("%s=%q: want the console's public base URL, scheme://host[:port]", EnvPublicURL, c.PublicURL)
		}
	}
	if c.OIDC.Issuer != "" && c.OIDC.ClientID == "" {
		return c, fmt.Errorf("%s is set but %s is not", EnvOIDCIssuer, EnvOIDCClientID)
	}
	if err := signUpFromEnv(&c, get); err != nil {
		return c, err
	}
	if err := roleClaimFromEnv(&c, get); err != nil {
		return c, err
	}
	var err error
	if c.Mail, err = mail.FromEnv(get); err != nil {
		return c, err
	}
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{EnvAttemptWindow, &c.AttemptWindow}, {EnvIdleTimeout, &c.IdleTimeout}, {EnvAbsoluteTimeout, &c.AbsoluteTimeout}} {
		if v := get(d.env); v != "" {
			t, err := time.ParseDuration(v)
			if err != nil || t <= 0 {
				return c, fmt.Errorf("%s=%q: want a positive duration such as 15m", d.env, v)
			}
			*d.to = t
		}
	}
	for _, n := range []struct {
		env string
		to  *int64
	}{{EnvPerAccount, &c.PerAccount}, {EnvPerAddress, &c.PerAddress}} {
		if v := get(n.env); v != "" {
			k, err := strconv.ParseInt(v, 10, 64)
			if err != nil || k <= 0 {
				return c, fmt.Errorf("%s=%q: want a positive count", n.env, v)
			}
			*n.to = k
		}
	}
	return c, nil
}
