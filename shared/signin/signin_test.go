package signin_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/signin"
	"github.com/botforge/platform/shared/signintest"
)

// The sign-in through the public HTTP API of the local platform
// in-process (apitest): the flows of shared/signintest, the same table
// shared/awslocal's TestSignInFlowsOnTheStack runs against the AWS build.

// localStart starts the local platform configured as a flow asks, through
// its environment (the variables `make run` reads).
func localStart(t *testing.T, s signintest.Setup) *signintest.Platform {
	t.Helper()
	t.Setenv("PLATFORM_BUILTINS", "none")
	for k, v := range s.Env {
		t.Setenv(k, v)
	}
	if o := s.OIDC; o != nil {
		t.Setenv(signin.EnvOIDCIssuer, o.Issuer)
		t.Setenv(signin.EnvOIDCClientID, o.ClientID)
		t.Setenv(signin.EnvOIDCClientSecret, o.ClientSecret)
		t.Setenv(signin.EnvOIDCName, o.Name)
	}
	// One process serves everything: "another process" is this one.
	return &signintest.Platform{Env: apitest.New(t), Other: "/v1/tables"}
}

func TestSignInFlows(t *testing.T) { signintest.Run(t, localStart) }

// setupSession accepts the first account's setup link with pw: the
// session it opens.
func setupSession(t *testing.T, e *apitest.Env, pw string) (cookie, csrf string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.DataDir, "setup-link"))
	if err != nil {
		t.Fatal(err)
	}
	_, tok, _ := strings.Cut(string(b), "/#/setup/")
	r := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/auth/links/" + strings.TrimSpace(tok), Body: map[string]any{"password": pw}}), 200, "")
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == signin.CookieName {
			return c.Value, r.Str("csrfToken")
		}
	}
	t.Fatalf("no session cookie: %s", r.Raw)
	return "", ""
}
