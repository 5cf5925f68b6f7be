package signin

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// OpenID Connect single sign-on: the authorization code flow with PKCE
// (S256), state and nonce. A pending flow is stored in the table under
// the hash of its state (single use, ten minutes) and bound to the browser
// that started it by a __Host- cookie holding the state. The ID token's
// signature, issuer and audience are checked by go-oidc against the
// configured issuer's discovery document and keys; its nonce here.
// Identities are linked to accounts by (iss, sub), never by email.

// CallbackPath is where the provider sends the browser back; the operator
// registers <public URL>/auth/oidc/callback at the provider.
const CallbackPath = "/auth/oidc/callback"

const flowCookie = "__Host-botforge_oidc"

const flowTTL = 10 * time.Minute

type oidcClient struct {
	cfg OIDCConfig
	mu  sync.Mutex
	p   *oidc.Provider // discovered on first use, kept once found
}

func newOIDCClient(cfg OIDCConfig) *oidcClient { return &oidcClient{cfg: cfg} }

// provider discovers the issuer (go-oidc refuses a discovery document
// naming another issuer).
func (o *oidcClient) provider(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.p != nil {
		return o.p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("the OpenID provider %s could not be used: %v", o.cfg.Issuer, err)
	}
	o.p = p
	return p, nil
}

func (s *Service) callbackURL(r *http.Request) string { return s.baseURL(r) + CallbackPath }

func (s *Service) oauth(p *oidc.Provider, r *http.Request) *oauth2.Config {
	return &oauth2.Config{ClientID: s.cfg.OIDC.ClientID, ClientSecret: s.cfg.OIDC.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.callbackURL(r), Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
}

// oidcStart begins a sign-in (or, with ?link=, the linking of an identity
// to the account of a setup or invitation link).
func (s *Service) oidcStart(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		s.failPage(w, r, http.StatusNotFound, "single sign-on is not configured on this platform (PLATFORM_OIDC_ISSUER)")
		return
	}
	ctx := r.Context()
	// Behind a proxy, the host the browser uses must be the public URL's:
	// the flow's cookie is set here and must come back to the callback.
	if s.cfg.PublicURL != "" {
		if pu, err := url.Parse(s.cfg.PublicURL); err == nil && !strings.EqualFold(pu.Host, r.Host) {
			s.failPage(w, r, http.StatusBadRequest, fmt.Sprintf("this console was opened at %s, but PLATFORM_PUBLIC_URL is %s: the sign-in must start at the public URL, whose %s is the callback registered at the provider. Open %s, or set PLATFORM_PUBLIC_URL to the URL people use (behind a proxy: the proxy's public URL).",
				r.Host, s.cfg.PublicURL, CallbackPath, s.cfg.PublicURL))
			return
		}
	}
	p, err := s.oidc.provider(ctx)
	if err != nil {
		s.failPage(w, r, http.StatusBadGateway, err.Error())
		return
	}
	var linkHash string
	if tok := r.URL.Query().Get("link"); tok != "" {
		l, err := s.liveLink(ctx, tok)
		if err != nil {
			s.failPage(w, r, http.StatusNotFound, err.Error())
			return
		}
		linkHash = l.Hash
	}
	state, nonce, verifier := randomValue(), randomValue(), oauth2.GenerateVerifier()
	if err := s.store.PutFlow(ctx, dynamo.HashToken(state), dynamo.Flow{Provider: "oidc", Verifier: verifier, Nonce: nonce, LinkHash: linkHash,
		ExpiresAt: fmtTime(s.now().Add(flowTTL))}); err != nil {
		s.failPage(w, r, http.StatusInternalServerError, "the sign-in could not be started: "+err.Error())
		return
	}
	// Lax: the provider's redirect back is a top-level GET, which carries it.
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: state, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: int(flowTTL / time.Second)})
	http.Redirect(w, r, s.oauth(p, r).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusFound)
}

// oidcCallback finishes a flow: state (the browser's own, once), the
// code exchanged with its PKCE verifier, the ID token verified.
func (s *Service) oidcCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	addr := clientip.Of(r)
	fail := func(status int, msg string) {
		s.audit(ctx, Event{Action: "SIGN_IN_FAILED", Detail: "single sign-on: " + msg, Address: addr})
		s.failPage(w, r, status, msg)
	}
	if s.oidc == nil {
		fail(http.StatusNotFound, "single sign-on is not configured on this platform (PLATFORM_OIDC_ISSUER)")
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "the provider refused the sign-in: "+e+" "+q.Get("error_description"))
		return
	}
	// RFC 9207: a response naming another issuer is a mix-up.
	if iss := q.Get("iss"); iss != "" && iss != s.cfg.OIDC.Issuer {
		fail(http.StatusUnauthorized, fmt.Sprintf("the answer comes from issuer %q, not the configured %q: refused", iss, s.cfg.OIDC.Issuer))
		return
	}
	state := q.Get("state")
	c, err := r.Cookie(flowCookie)
	if err != nil || c.Value == "" {
		fail(http.StatusBadRequest, fmt.Sprintf("this browser started no sign-in that this callback could finish (its flow cookie is missing). If the sign-in was started, the callback reached %s%s, another host than the console's: behind a proxy, set PLATFORM_PUBLIC_URL to the public URL people use and register %s at the provider.",
			r.Host, CallbackPath, s.callbackURL(r)))
		return
	}
	if state == "" || len(state) > 200 || state != c.Value {
		fail(http.StatusBadRequest, "wrong state: this answer does not belong to the sign-in this browser started; start again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: "", Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	flow, ok, err := s.store.ConsumeFlow(ctx, dynamo.HashToken(state))
	if err != nil {
		fail(http.StatusInternalServerError, err.Error())
		return
	}
	if !ok || s.now().After(parseTime(flow.ExpiresAt)) {
		fail(http.StatusBadRequest, "this sign-in was already finished or expired (a replayed answer?): start again")
		return
	}
	p, err := s.oidc.provider(ctx)
	if err != nil {
		fail(http.StatusBadGateway, err.Error())
		return
	}
	xctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tok, err := s.oauth(p, r).Exchange(xctx, q.Get("code"), oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		msg := err.Error()
		if errors.As(err, &re) {
			msg = re.ErrorCode + " " + re.ErrorDescription
		}
		fail(http.StatusUnauthorized, fmt.Sprintf("the provider refused the code: %s. (If it says the redirect URI does not match: %s must be registered at the provider; behind a proxy PLATFORM_PUBLIC_URL must be the public URL.)", strings.TrimSpace(msg), s.callbackURL(r)))
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		fail(http.StatusUnauthorized, "the provider answered no ID token")
		return
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: s.cfg.OIDC.ClientID}).Verify(xctx, raw)
	if err != nil {
		fail(http.StatusUnauthorized, "the ID token was refused: "+err.Error())
		return
	}
	if idt.Nonce != flow.Nonce {
		fail(http.StatusUnauthorized, "the ID token's nonce is not this sign-in's: refused")
		return
	}
	claims, err := s.identityClaims(xctx, p, tok, idt)
	if err != nil {
		fail(http.StatusUnauthorized, err.Error())
		return
	}
	// The claim's role is checked before anything is written: a refused
	// sign-in spends no link and creates no account.
	role, err := s.claimRole(claims)
	if err != nil {
		fail(http.StatusForbidden, messageOf(err))
		return
	}
	accountID, err := s.identityAccount(ctx, idt.Issuer, idt.Subject, claims, flow.LinkHash, addr)
	if err != nil {
		fail(http.StatusForbidden, messageOf(err))
		return
	}
	if role != "" {
		if err := s.applyRole(ctx, accountID, role, addr); err != nil {
			fail(http.StatusForbidden, messageOf(err))
			return
		}
	}
	if _, err := s.NewSession(ctx, w, r, accountID, "oidc"); err != nil {
		fail(http.StatusInternalServerError, err.Error())
		return
	}
	http.Redirect(w, r, s.baseURL(r)+"/#/", http.StatusSeeOther)
}

// identityAccount finds the account of (iss, sub), or links it to the
// account of the setup or invitation link being accepted, or creates its
// account by self sign-up (signup.go).
func (s *Service) identityAccount(ctx context.Context, iss, sub string, claims map[string]any, linkHash, address string) (string, error) {
	email := claimString(claims, "email")
	if linkHash != "" {
		l, ok, err := s.store.ConsumeLink(ctx, linkHash)
		if err != nil {
			return "", err
		}
		if !ok || s.now().After(parseTime(l.ExpiresAt)) {
			return "", errLinkGone
		}
		if err := s.store.LinkIdentity(ctx, dynamo.Identity{Issuer: iss, Subject: sub, AccountID: l.AccountID, Email: email, LinkedAt: fmtTime(s.now())}); err != nil {
			return "", err
		}
		return l.AccountID, nil
	}
	id, ok, err := s.store.IdentityAccount(ctx, iss, sub)
	if err != nil {
		return "", err
	}
	if !ok && len(s.cfg.OIDC.AllowedDomains) > 0 {
		return s.signUp(ctx, iss, sub, claims, address)
	}
	if !ok {
		return "", platform.Forbidden("no account here is linked to this %s identity: ask an administrator for an invitation and accept it with \"Sign in with %s\"", s.cfg.OIDC.Name, s.cfg.OIDC.Name)
	}
	return id.AccountID, nil
}

// failPage answers a browser flow's failure: a small page saying why,
// with a way back to the console's sign-in.
func (s *Service) failPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in failed</title><link rel="icon" href="data:,"></head><body>
<h1>Sign-in failed</h1><p id="reason" data-test="signin-failed">%s</p><p><a href="/#/signin">Back to sign-in</a></p></body></html>
`, html.EscapeString(msg))
}

// messageOf is an error's message as a person reads it.
func messageOf(err error) string {
	var pe *platform.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}
