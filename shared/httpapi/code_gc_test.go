package httpapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/platform"
)

// TestReplacedCodeObjectsDeleted: a bot's or an integration version's
// code, icon or readme replaced, removed or deleted with its owner leaves
// no object behind, and nothing still named is deleted: the same content
// deployed by another bot or integration (its own key), content deployed
// again unchanged, and the assets an update did not touch all stay.
func TestReplacedCodeObjectsDeleted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	exists := func(key string) bool {
		t.Helper()
		_, err := f.Platform.Files.Head(ctx, key)
		if err != nil && !errors.Is(err, platform.ErrNoObject) {
			t.Fatal(err)
		}
		return err == nil
	}
	botKey := func(id string) string {
		t.Helper()
		rec, err := f.Platform.Store.GetBot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.CodeKey
	}
	codeA, codeB := bundleOf("gc-a", 200), bundleOf("gc-b", 200)
	one := f.createBot(f.AdminToken, map[string]any{"code": codeA})
	two := f.createBot(f.AdminToken, map[string]any{"code": codeA}) // the same content, another owner
	a1, a2 := botKey(one), botKey(two)
	if a1 == a2 || !exists(a1) || !exists(a2) {
		t.Fatalf("keys %q %q", a1, a2)
	}
	// Deployed again unchanged: the object stays.
	f.updateBot(f.AdminToken, one, map[string]any{"code": codeA})
	if botKey(one) != a1 || !exists(a1) {
		t.Fatal("redeploying the same code deleted it")
	}
	// Replaced: the old object goes, the other bot's copy stays.
	f.updateBot(f.AdminToken, one, map[string]any{"code": codeB})
	b1 := botKey(one)
	if b1 == a1 || !exists(b1) || exists(a1) || !exists(a2) {
		t.Fatalf("after a replacement: new %v, old %v, other bot's %v", exists(b1), exists(a1), exists(a2))
	}
	// An update not about the code keeps it.
	f.updateBot(f.AdminToken, one, map[string]any{"description": "x"})
	if !exists(b1) {
		t.Fatal("an update without code deleted the code")
	}
	// Removed (empty code): gone.
	f.updateBot(f.AdminToken, two, map[string]any{"code": ""})
	if exists(a2) {
		t.Fatal("removed code left its object")
	}
	// The bot deleted: its code goes.
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+one, nil), 200, "deleteBot")
	if exists(b1) {
		t.Fatal("a deleted bot's code stayed")
	}

	// Integrations: code, icon and readme, each replaced on its own.
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>`
	intKeys := func(id string) platform.Integration {
		t.Helper()
		rec, err := f.Platform.Store.GetIntegration(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Integration
	}
	body := map[string]any{"version": "1.0.0", "icon": b64(svg), "readme": b64("# R\n"), "code": codeA}
	body["name"] = "gc-one"
	i1 := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", body), 200, "createIntegration").Str("integration.id")
	body["name"] = "gc-two"
	i2 := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", body), 200, "createIntegration").Str("integration.id")
	k1, k2 := intKeys(i1), intKeys(i2)
	for _, k := range []string{k1.CodeKey, k1.IconKey, k1.ReadmeKey, k2.CodeKey, k2.IconKey, k2.ReadmeKey} {
		if !exists(k) {
			t.Fatalf("%s missing", k)
		}
	}
	svg2 := strings.Replace(svg, `width="1"`, `width="2"`, 1)
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/integrations/"+i1, map[string]any{"icon": b64(svg2), "code": codeB}), 200, "updateIntegration")
	n1 := intKeys(i1)
	if exists(k1.IconKey) || exists(k1.CodeKey) || !exists(n1.IconKey) || !exists(n1.CodeKey) || n1.ReadmeKey != k1.ReadmeKey || !exists(k1.ReadmeKey) {
		t.Fatalf("after replacing icon and code: old icon %v, old code %v, new %v %v, readme %v",
			exists(k1.IconKey), exists(k1.CodeKey), exists(n1.IconKey), exists(n1.CodeKey), exists(k1.ReadmeKey))
	}
	for _, k := range []string{k2.CodeKey, k2.IconKey, k2.ReadmeKey} {
		if !exists(k) {
			t.Fatalf("the other integration's %s was deleted", k)
		}
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/integrations/"+i1, nil), 200, "deleteIntegration")
	for _, k := range []string{n1.CodeKey, n1.IconKey, n1.ReadmeKey} {
		if exists(k) {
			t.Fatalf("a deleted integration's %s stayed", k)
		}
	}
	if !exists(k2.CodeKey) {
		t.Fatal("the other integration's code was deleted")
	}
}

// TestInvalidHostRefused: a url under .invalid (where the platform's own
// addresses of deployed code on AWS live) is refused, with nothing written.
func TestInvalidHostRefused(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	for _, u := range []string{"http://lambda.invalid/x-code-bot_1/v/seal", "https://LAMBDA.INVALID", "http://lambda.invalid./x"} {
		r := f.ws_(f.AdminToken, "PUT", "/v1/admin/bots/"+bot, map[string]any{"url": u})
		if r.Status != 400 || r.Str("type") != "InvalidPayload" || !strings.Contains(r.Str("message"), ".invalid") {
			t.Fatalf("%s: %d %s", u, r.Status, r.Raw)
		}
		r = f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", map[string]any{"name": "inv", "version": "1.0.0", "url": u})
		if r.Status != 400 || r.Str("type") != "InvalidPayload" {
			t.Fatalf("integration %s: %d %s", u, r.Status, r.Raw)
		}
	}
	if b := f.getBot(bot); b["url"] != "" && b["url"] != nil {
		t.Fatalf("url written: %v", b["url"])
	}
}
