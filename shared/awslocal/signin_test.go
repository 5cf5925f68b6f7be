package awslocal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/awslocal"
	"github.com/botforge/platform/shared/signin"
	"github.com/botforge/platform/shared/signintest"
)

// TestSignInFlowsOnTheStack: people's sign-in flows (shared/signintest,
// the table shared/signin's TestSignInFlows runs against the local build)
// against the AWS build: through the HTTP API's stand-in (cookies in its
// payload both ways, the client address its sourceIp) into the admin
// function, single sign-on configured by the stack's parameters with the
// client secret read from SSM, a session ended by the admin function
// checked in the tables function.
func TestSignInFlowsOnTheStack(t *testing.T) { signintest.Run(t, stackStart) }

// stackStart starts a stack configured as a flow asks, as an operator
// would deploy it: single sign-on by the OidcIssuer, OidcClientId and
// OidcName parameters and the SSM SecureString
// /<stack>/oidc-client-secret (no secret in the function's environment);
// sign-in settings (throttles, public URL) in the admin function's
// environment (a template with them set).
func stackStart(t *testing.T, su signintest.Setup) *signintest.Platform {
	t.Helper()
	o := awslocal.Options{DataDir: t.TempDir(), Parameters: map[string]string{}}
	// Settings the stack has parameters for are given as parameters.
	env := map[string]string{}
	for k, v := range su.Env {
		if p, ok := signinStackParameters[k]; ok {
			o.Parameters[p] = v
		} else {
			env[k] = v
		}
	}
	if len(env) > 0 {
		o.Template = withFunctionEnv(t, "AdminFunction", env)
	}
	if c := su.OIDC; c != nil {
		o.Parameters["OidcIssuer"], o.Parameters["OidcClientId"], o.Parameters["OidcName"] = c.Issuer, c.ClientID, c.Name
		o.SecureStrings = map[string]string{"/" + awslocal.StackName + "/oidc-client-secret": c.ClientSecret}
	}
	s := startStackWith(t, o)
	// The stack's setup link is on its API's URL (scripts/first-account.sh's).
	if b, err := os.ReadFile(filepath.Join(o.DataDir, "setup-link")); err != nil || !strings.HasPrefix(string(b), s.URL+"/#/setup/") {
		t.Fatalf("setup link %q (%v) not on %s", b, err, s.URL)
	}
	// The tables function: another process than the admin function's.
	return &signintest.Platform{Env: &apitest.Env{T: t, URL: s.URL, DataDir: o.DataDir, AdminToken: strings.TrimSpace(s.token)}, Other: "/v1/tables"}
}

// signinStackParameters are the sign-in settings the stack takes as
// parameters (template.yaml, infra/stack.go), by their variable.
var signinStackParameters = map[string]string{
	signin.EnvOIDCAllowedDomains: "OidcAllowedDomains",
	signin.EnvOIDCWorkspace:      "OidcWorkspace",
	signin.EnvOIDCSignUpRole:     "OidcSignUpRole",
	signin.EnvOIDCRoleClaim:      "OidcRoleClaim",
	signin.EnvOIDCRoleMap:        "OidcRoleMap",
}

// withFunctionEnv writes a copy of template.yaml with variables set in one
// function's environment.
func withFunctionEnv(t *testing.T, function string, vars map[string]string) string {
	t.Helper()
	raw, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	get := func(n *yaml.Node, key string) *yaml.Node {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
		t.Fatalf("no %s", key)
		return nil
	}
	env := get(get(get(get(get(doc.Content[0], "Resources"), function), "Properties"), "Environment"), "Variables")
	for k, v := range vars {
		val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		set := false
		for i := 0; i+1 < len(env.Content); i += 2 {
			if env.Content[i].Value == k {
				env.Content[i+1], set = val, true
			}
		}
		if !set {
			env.Content = append(env.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, val)
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
