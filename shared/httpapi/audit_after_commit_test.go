package httpapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
)

// failingDeployer is a code deployer (as the AWS one is) whose deployments
// all fail.
type failingDeployer struct{}

var errDeploy = errors.New("deployment refused")

func (failingDeployer) BotURL(context.Context, platform.Bot) (string, error) { return "", errDeploy }
func (failingDeployer) IntegrationURL(context.Context, platform.Integration) (string, error) {
	return "", errDeploy
}
func (failingDeployer) DeployBot(context.Context, platform.Bot, string) error { return errDeploy }
func (failingDeployer) DeployIntegration(context.Context, platform.Integration, string) error {
	return errDeploy
}
func (failingDeployer) RemoveBot(context.Context, string) error         { return nil }
func (failingDeployer) RemoveIntegration(context.Context, string) error { return nil }

// A write committed and then failed (its code not deployed: 502) is in the
// audit log, and an updateBot's committed registrations still run.
func TestAuditRecordsWritesFailedAfterCommit(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	tok := f.AdminToken
	bot := f.createBot(tok, map[string]any{"name": "deployed", "dev": true, "code": bundleOf("deploy-fails", 200)})
	// The platform as on AWS, with a deployer that fails, over the same
	// store and file storage.
	srv := httptest.NewServer(httpapi.New(httpapi.Config{
		Store: f.Platform.Store, PagingKey: make([]byte, 32), Files: f.Platform.Files, Code: failingDeployer{},
		Outbound: delivery.Client(true), // the test's integration listens on localhost
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, httpapi.AreaAdmin))
	t.Cleanup(srv.Close)
	env := *f.Env
	env.URL = srv.URL
	aws := &fixture{Env: &env, ws: f.ws}
	latest := func() map[string]any {
		t.Helper()
		l := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws + "/audit-records?pageSize=1", Token: tok}), 200, "getAuditRecords").List("records")
		if len(l) == 0 {
			t.Fatal("no audit record")
		}
		return l[0].(map[string]any)
	}
	registers := len(f.integ.of("register", ""))

	r := aws.ws_(tok, "PUT", "/v1/admin/bots/"+bot, map[string]any{
		"integrations": map[string]any{"chan": map[string]any{"integrationId": f.intID, "enabled": true}}})
	if r.Status != 502 {
		t.Fatalf("updateBot with a failing deployment: %d %s", r.Status, r.Raw)
	}
	if rec := latest(); rec["action"] != "UPDATE_BOT" || rec["resourceId"] != bot || rec["value"] != "updateBot" {
		t.Fatalf("updateBot committed then failed: latest record %v", rec)
	}
	if n := len(f.integ.of("register", "")); n != registers+1 {
		t.Fatalf("the committed registration ran %d times", n-registers)
	}
	if b, err := f.Platform.Store.GetBot(t.Context(), bot); err != nil || b.Installs["chan"].Status != platform.InstallRegistered {
		t.Fatalf("the committed installation: %+v, %v", b.Installs["chan"], err)
	}

	r = aws.ws_(tok, "POST", "/v1/admin/bots", map[string]any{"name": "created", "code": bundleOf("create-fails", 200)})
	if r.Status != 502 {
		t.Fatalf("createBot with a failing deployment: %d %s", r.Status, r.Raw)
	}
	if rec := latest(); rec["action"] != "CREATE_BOT" || rec["resourceName"] != "created" || rec["resourceId"] == nil {
		t.Fatalf("createBot committed then failed: latest record %v", rec)
	}

	r = aws.ws_(tok, "POST", "/v1/admin/integrations", integrationDef("deployfails", "1.0.0", map[string]any{"code": bundleOf("int-fails", 200)}))
	if r.Status != 502 {
		t.Fatalf("createIntegration with a failing deployment: %d %s", r.Status, r.Raw)
	}
	rec := latest()
	if rec["value"] != "createIntegration" || rec["resourceName"] != "deployfails" {
		t.Fatalf("createIntegration committed then failed: latest record %v", rec)
	}
	integ, _ := rec["resourceId"].(string)
	if r := aws.ws_(tok, "PUT", "/v1/admin/integrations/"+integ, map[string]any{"title": "Retitled"}); r.Status != 502 {
		t.Fatalf("updateIntegration with a failing deployment: %d %s", r.Status, r.Raw)
	}
	if rec := latest(); rec["value"] != "updateIntegration" || rec["resourceId"] != integ {
		t.Fatalf("updateIntegration committed then failed: latest record %v", rec)
	}
	// A write refused before its commit is still not recorded.
	before := latest()["id"]
	if r := aws.ws_(tok, "PUT", "/v1/admin/bots/bot_01ARZ3NDEKTSV4RRFFQ69G5FAV", map[string]any{"name": "x"}); r.Status != 404 {
		t.Fatalf("unknown bot: %d %s", r.Status, r.Raw)
	}
	if latest()["id"] != before {
		t.Fatal("a refused write was recorded")
	}
}
