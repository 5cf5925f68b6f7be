// Command oidcprovider runs a real OpenID Connect provider that no one
// here wrote, the zitadel/oidc library's example provider, on loopback,
// for the sign-in tests (shared/signin's TestOIDC*, make signin-e2e).
// It lives in its own module so the platform's module never depends on
// it. Environment: PORT (required), REDIRECT_URI (comma-separated
// callbacks registered for the client "web", secret "secret"). The issuer
// is http://127.0.0.1:PORT/ and its user test-user@127.0.0.1, password
// verysecure (the example's static users). OIDC_USERS adds users, a JSON
// list of {"username", "email", "emailVerified", "groups"} (password
// verysecure, subject "u-<username>"); their "groups" is a claim of the
// ID token and of the userinfo answer (the example asserts email only in
// the userinfo answer, as many providers do).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

type extraUser struct {
	Username      string   `json:"username"`
	Email         string   `json:"email"`
	EmailVerified bool     `json:"emailVerified"`
	Groups        []string `json:"groups"`
}

// users is the example's users plus OIDC_USERS.
type users struct {
	storage.UserStore
	extra map[string]*storage.User
}

func (u users) GetUserByID(id string) *storage.User {
	if x, ok := u.extra[id]; ok {
		return x
	}
	return u.UserStore.GetUserByID(id)
}

func (u users) GetUserByUsername(name string) *storage.User {
	for _, x := range u.extra {
		if x.Username == name {
			return x
		}
	}
	return u.UserStore.GetUserByUsername(name)
}

// store is the example's storage asserting each extra user's groups.
type store struct {
	*storage.Storage
	groups map[string][]string
}

func (s store) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, token, scopes); err != nil {
		return err
	}
	if g, ok := s.groups[token.GetSubject()]; ok {
		ui.AppendClaims("groups", g)
	}
	return nil
}

func (s store) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	if g, ok := s.groups[ui.Subject]; ok {
		ui.AppendClaims("groups", g)
	}
	return nil
}

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		fmt.Fprintln(os.Stderr, "oidcprovider: set PORT")
		os.Exit(2)
	}
	issuer := "http://127.0.0.1:" + port + "/"
	storage.RegisterClients(storage.WebClient("web", "secret", strings.Split(os.Getenv("REDIRECT_URI"), ",")...))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("OIDC_DEBUG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	us := users{UserStore: storage.NewUserStore(issuer), extra: map[string]*storage.User{}}
	groups := map[string][]string{}
	if v := os.Getenv("OIDC_USERS"); v != "" {
		var xs []extraUser
		if err := json.Unmarshal([]byte(v), &xs); err != nil {
			fmt.Fprintln(os.Stderr, "oidcprovider: OIDC_USERS:", err)
			os.Exit(2)
		}
		for _, x := range xs {
			id := "u-" + x.Username
			us.extra[id] = &storage.User{ID: id, Username: x.Username, Password: "verysecure", FirstName: x.Username, LastName: "Test",
				Email: x.Email, EmailVerified: x.EmailVerified}
			if x.Groups != nil {
				groups[id] = x.Groups
			}
		}
	}
	router := exampleop.SetupServer(issuer, store{Storage: storage.NewStorage(us), groups: groups}, log, false)
	fmt.Println("issuer", issuer) // the tests wait for this line
	if err := (&http.Server{Addr: "127.0.0.1:" + port, Handler: router}).ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider: ", err)
		os.Exit(1)
	}
}
