package httpapi_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// bundleOf is a CommonJS "bundle" of n bytes holding marker (a comment
// pads it), shaped like bp deploy's.
func bundleOf(marker string, n int) string {
	head := "/* " + marker + " */\nmodule.exports = { default: { start() {} } }\n//"
	if n < len(head) {
		return head
	}
	return head + strings.Repeat("x", n-len(head))
}

// TestDeployedCodeSizes: bot and integration code up to API Gateway's
// 10 MB body limit is taken (bp deploy's echo bot bundle is ~600 KB, more
// than a DynamoDB item holds), stored outside the table; more is a 413 in
// the API's error shape, and nothing is written.
func TestDeployedCodeSizes(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	cases := []struct {
		name, marker string
		size         int
		method, path string
		body         func(code string) map[string]any
		want         int
	}{
		{"echo bot bundle", "bot600k", 600 << 10, "PUT", "/v1/admin/bots/" + bot, func(c string) map[string]any { return map[string]any{"code": c} }, 200},
		{"bot, 9 MB", "bot9m", 9 << 20, "PUT", "/v1/admin/bots/" + bot, func(c string) map[string]any { return map[string]any{"code": c} }, 200},
		{"bot, over 10 MB", "botbig", 10<<20 + 1, "PUT", "/v1/admin/bots/" + bot, func(c string) map[string]any { return map[string]any{"code": c} }, 413},
		{"new bot with code", "newbot", 600 << 10, "POST", "/v1/admin/bots", func(c string) map[string]any { return map[string]any{"code": c} }, 200},
		{"integration, 2 MB", "int2m", 2 << 20, "POST", "/v1/admin/integrations", func(c string) map[string]any {
			return map[string]any{"name": "big", "version": "1.0.0", "code": c}
		}, 200},
		{"integration dry run, 2 MB", "intdry", 2 << 20, "POST", "/v1/admin/integrations/validate", func(c string) map[string]any {
			return map[string]any{"name": "dry", "version": "1.0.0", "code": c}
		}, 200},
		{"integration, over 10 MB", "intbig", 10<<20 + 1, "POST", "/v1/admin/integrations", func(c string) map[string]any {
			return map[string]any{"name": "huge", "version": "1.0.0", "code": c}
		}, 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.ws_(f.AdminToken, tc.method, tc.path, tc.body(bundleOf(tc.marker, tc.size)))
			if r.Status != tc.want {
				t.Fatalf("status %d, want %d: %.300s", r.Status, tc.want, r.Raw)
			}
			if tc.want == 413 && r.Str("type") != "PayloadTooLarge" {
				t.Fatalf("want PayloadTooLarge, got %s", r.Raw)
			}
			if held := f.ItemsHolding(tc.marker); len(held) > 0 {
				t.Fatalf("the code is in DynamoDB items %v", held)
			}
		})
	}
	// The stored code is the bot's: getBot still answers (no code on the
	// wire) and says it was deployed.
	b := f.getBot(bot)
	if b["deployedAt"] == nil || b["deployedAt"] == "" {
		t.Fatalf("deployedAt not set after a deploy: %v", b)
	}
}

// TestIntegrationIconAndReadme: bp deploy sends the icon and readme
// base64-encoded; iconUrl and readmeUrl serve them (no token, as an <img>
// fetches), only the current ones, and a bad icon is a 400.
func TestIntegrationIconAndReadme(t *testing.T) {
	f := newFixture(t)
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>`
	md := "# Hello\n\nThe readme.\n"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	r := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", map[string]any{
		"name": "pretty", "version": "1.0.0", "icon": b64(svg), "readme": b64(md), "code": "module.exports = {}",
	}), 200, "createIntegration")
	id, iconURL, readmeURL := r.Str("integration.id"), r.Str("integration.iconUrl"), r.Str("integration.readmeUrl")
	fetch := func(u string) (int, string, string) {
		t.Helper()
		res, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type"), string(b)
	}
	if st, ct, body := fetch(iconURL); st != 200 || ct != "image/svg+xml" || body != svg {
		t.Fatalf("iconUrl %q: %d %s %q", iconURL, st, ct, body)
	}
	if st, ct, body := fetch(readmeURL); st != 200 || !strings.HasPrefix(ct, "text/markdown") || body != md {
		t.Fatalf("readmeUrl %q: %d %s %q", readmeURL, st, ct, body)
	}
	// getIntegration and the list answer the same URLs.
	g := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations/"+id, nil), 200, "getIntegration")
	if g.Str("integration.iconUrl") != iconURL || g.Str("integration.readmeUrl") != readmeURL {
		t.Fatalf("getIntegration: %s", g.Raw)
	}
	// A new icon: the new URL serves it, the old one is gone.
	svg2 := strings.Replace(svg, `width="1"`, `width="2"`, 1)
	u := f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/integrations/"+id, map[string]any{"icon": b64(svg2)}), 200, "updateIntegration")
	if st, _, body := fetch(u.Str("integration.iconUrl")); st != 200 || body != svg2 {
		t.Fatalf("new iconUrl: %d %q", st, body)
	}
	if st, _, _ := fetch(iconURL); st != 404 {
		t.Fatalf("the replaced icon's url answers %d, want 404", st)
	}
	if u.Str("integration.readmeUrl") != readmeURL {
		t.Fatalf("an update without readme changed readmeUrl: %s", u.Raw)
	}
	// A guessed name is a 404 in the error shape.
	res := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/integrations/" + id + "/assets/icon-" + strings.Repeat("0", 64) + ".svg"})
	if res.Status != 404 || res.Str("type") != "ResourceNotFound" {
		t.Fatalf("guessed asset: %d %s", res.Status, res.Raw)
	}
	for _, bad := range []map[string]any{
		{"name": "bad1", "version": "1.0.0", "icon": "not base64 !!"},
		{"name": "bad2", "version": "1.0.0", "icon": b64("plain text, no image")},
		{"name": "bad3", "version": "1.0.0", "readme": "%%%"},
	} {
		r := f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", bad)
		if r.Status != 400 || r.Str("type") != "InvalidPayload" {
			t.Fatalf("%v: %d %s", bad, r.Status, r.Raw)
		}
	}
	// bp dev sends the definition's file paths: nothing is stored.
	dev := f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", map[string]any{"name": "devpaths", "version": "1.0.0", "dev": true, "icon": "icon.svg", "readme": "hub.md"})
	if dev.Status != 200 || dev.Str("integration.iconUrl") != "" || dev.Str("integration.readmeUrl") != "" {
		t.Fatalf("file paths of bp dev: %d %s", dev.Status, dev.Raw)
	}
}
