// Command oidcprovider runs a real OpenID Connect provider that no one
// here wrote, the zitadel/oidc library's example provider, on loopback,
// for the sign-in tests (shared/signin's TestOIDC*, make signin-e2e).
// It lives in its own module so the platform's module never depends on
// it. Environment: PORT (required), REDIRECT_URI (comma-separated
// callbacks registered for the client "web", secret "secret"). The issuer
// is http://127.0.0.1:PORT/ and its user test-user@127.0.0.1, password
// verysecure (the example's static users).
package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

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
	router := exampleop.SetupServer(issuer, storage.NewStorage(storage.NewUserStore(issuer)), log, false)
	fmt.Println("issuer", issuer) // the tests wait for this line
	if err := (&http.Server{Addr: "127.0.0.1:" + port, Handler: router}).ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}
