package webchat

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
)

// The hosted page: <webhookUrl>/ renders the official @botpress/webchat
// component (vendored, scripts/webchat/vendor.sh) connected to this
// installation. Everything it loads is served here, under
// <webhookUrl>/assets/: no CDN, no other origin, no font. The page holds
// no secret: the client id is the webhook id, public by design (as the
// component's clientId on Botpress Cloud), and each visitor gets their own
// user key from /initialize, kept in the browser's localStorage.

//go:embed static
var static embed.FS

// assets are the files of the page, by name below assets/.
var assets = map[string]string{
	"react.js":       "static/vendor/react.js",
	"react-dom.js":   "static/vendor/react-dom.js",
	"webchat.js":     "static/vendor/webchat.js",
	"webchat.css":    "static/vendor/webchat.css",
	"jsx-runtime.js": "static/jsx-runtime.js",
	"page.js":        "static/page.js",
	"page.css":       "static/page.css",
	"favicon.svg":    "static/favicon.svg",
}

// pageCSP: scripts and styles of this origin only (the component adds its
// theme as a <style> element, hence 'unsafe-inline' for styles alone),
// connections to this origin (the Webchat API, the file uploads of the
// local platform's S3) and to the origin of the file uploads' presigned
// URLs where that is another (on AWS the bucket's S3 host: filesOrigin),
// images of this origin, data: (the component's icons) and blob: (file
// previews), the notification sound as data:.
func pageCSP(filesOrigin string) string {
	connect := "'self'"
	if filesOrigin != "" {
		connect += " " + filesOrigin
	}
	return "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; media-src 'self' data: blob:; " +
		"connect-src " + connect + "; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors *"
}

// cspOrigin matches an origin that may stand in a CSP source list as is
// (no space, quote, semicolon or comma can end the directive).
var cspOrigin = regexp.MustCompile(`^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$`)

// uploadSource is the CSP source of the installation's upload URLs when
// they go to another origin than the page's (self): "" when the same, or
// unknown, or not a plain origin.
func uploadSource(filesOrigin, self string) string {
	if filesOrigin == "" || strings.EqualFold(filesOrigin, self) || !cspOrigin.MatchString(filesOrigin) {
		return ""
	}
	return filesOrigin
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.BotName}}</title>
<link rel="icon" href="{{.Assets}}/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="{{.Assets}}/webchat.css?v={{.Version}}">
<link rel="stylesheet" href="{{.Assets}}/page.css?v={{.Version}}">
</head>
<body>
<div id="webchat" data-client-id="{{.ClientID}}" data-api-url="{{.APIURL}}" data-bot-name="{{.BotName}}"></div>
<script src="{{.Assets}}/react.js?v={{.Version}}"></script>
<script src="{{.Assets}}/react-dom.js?v={{.Version}}"></script>
<script src="{{.Assets}}/jsx-runtime.js?v={{.Version}}"></script>
<script src="{{.Assets}}/webchat.js?v={{.Version}}"></script>
<script src="{{.Assets}}/page.js?v={{.Version}}"></script>
</body>
</html>
`))

var (
	versionOnce sync.Once
	version     string
)

// assetsVersion is a digest of all assets: their URLs change with them,
// so they can be cached for long.
func assetsVersion() string {
	versionOnce.Do(func() {
		h := sha256.New()
		for _, name := range []string{"react.js", "react-dom.js", "webchat.js", "webchat.css", "jsx-runtime.js", "page.js", "page.css", "favicon.svg"} {
			b, _ := static.ReadFile(assets[name])
			h.Write(b)
		}
		version = hex.EncodeToString(h.Sum(nil))[:16]
	})
	return version
}

// PageURL is the hosted page of an installation (its webhook URL, "/").
func PageURL(webhookURL string) string { return strings.TrimSuffix(webhookURL, "/") + "/" }

// streamPage is where the page of in is served when another host than its
// webhook URL's (hook) serves the streams (in.StreamURL, on AWS the
// stack's ChatStreamUrl): <StreamURL>webhooks/<webhookId>/; "" when the
// page is served here.
func streamPage(in builtin.Install, hook *url.URL) string {
	s, err := url.Parse(in.StreamURL)
	if in.StreamURL == "" || err != nil || s.Host == "" || strings.EqualFold(s.Host, hook.Host) {
		return ""
	}
	return strings.TrimSuffix(in.StreamURL, "/") + "/webhooks/" + url.PathEscape(in.Instance.WebhookID) + "/"
}

// HookOf is the webhook URL the page and the embed codes of an
// installation use: its webhook URL hook, or below streamURL when another
// host serves the streams (on AWS the stack's ChatStreamUrl).
func HookOf(hook, streamURL string) string {
	if streamURL == "" {
		return hook
	}
	return strings.TrimSuffix(streamURL, "/") + "/webhooks/" + hook[strings.LastIndexByte(strings.TrimSuffix(hook, "/"), '/')+1:]
}

// servePage serves GET / (the page) and GET /assets/<name>.
func (q *req) servePage(p string) bool {
	if q.r.Method != http.MethodGet && q.r.Method != http.MethodHead {
		return false
	}
	u, err := url.Parse(q.in.WebhookURL)
	if err != nil {
		return false
	}
	base := strings.TrimSuffix(u.Path, "/")
	h := q.w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	switch {
	case (p == "/" || p == "") && streamPage(q.in, u) != "":
		// Served where the streams are: API Gateway (on AWS) cannot hold
		// the component's /initialize stream, the stream host can, and
		// there the page, its Webchat API and its streams share one origin.
		h.Set("Cache-Control", "no-cache")
		http.Redirect(q.w, q.r, streamPage(q.in, u), http.StatusFound)
		return true
	case p == "/" || p == "":
		apiURL := u.Scheme + "://" + u.Host + path.Dir(base) // <base>/webhooks
		name := q.in.Bot.Name
		if name == "" {
			name = "Chat"
		}
		var b bytes.Buffer
		_ = pageTemplate.Execute(&b, map[string]string{"Assets": base + "/assets", "ClientID": q.in.Instance.WebhookID, "APIURL": apiURL, "BotName": name, "Version": assetsVersion()})
		h.Set("Content-Type", "text/html; charset=utf-8")
		files := ""
		if q.in.FilesOrigin != nil {
			files = q.in.FilesOrigin()
		}
		h.Set("Content-Security-Policy", pageCSP(uploadSource(files, u.Scheme+"://"+u.Host)))
		h.Set("Cache-Control", "no-cache")
		q.w.WriteHeader(http.StatusOK)
		_, _ = q.w.Write(b.Bytes())
		return true
	case strings.HasPrefix(p, "/assets/"):
		file, ok := assets[strings.TrimPrefix(p, "/assets/")]
		if !ok {
			builtin.WriteError(q.w, platform.NotFound("asset", strings.TrimPrefix(p, "/assets/")))
			return true
		}
		b, _ := static.ReadFile(file)
		switch path.Ext(file) {
		case ".js":
			h.Set("Content-Type", "text/javascript; charset=utf-8")
		case ".css":
			h.Set("Content-Type", "text/css; charset=utf-8")
		case ".svg":
			h.Set("Content-Type", "image/svg+xml")
		}
		h.Set("Cache-Control", "public, max-age=86400")
		q.w.WriteHeader(http.StatusOK)
		_, _ = q.w.Write(b)
		return true
	}
	return false
}

// EmbedCode is getBotWebchat's code of type typ for the installation of
// webhook URL hook: sharableUrl, the page; fullscreen, an iframe filling
// its container; preconfigured, an iframe floating at the corner;
// configurable, the official component mounted by your own React app.
func EmbedCode(typ, hook, clientID string) string {
	page := PageURL(hook)
	attr := template.HTMLEscapeString(page)
	switch typ {
	case "sharableUrl":
		return page
	case "fullscreen":
		return `<iframe src="` + attr + `" title="Chat" style="border:0;width:100%;height:100%" allow="clipboard-write"></iframe>`
	case "preconfigured":
		return `<iframe src="` + attr + `" title="Chat" style="position:fixed;right:16px;bottom:16px;width:400px;height:600px;max-width:calc(100vw - 32px);max-height:calc(100vh - 32px);border:0;border-radius:12px;box-shadow:0 8px 30px rgba(0,0,0,.2);z-index:2147483000" allow="clipboard-write"></iframe>`
	}
	apiURL := hook[:strings.LastIndexByte(strings.TrimSuffix(hook, "/"), '/')]
	return "// npm install @botpress/webchat@" + ComponentVersion + " react react-dom\n" +
		"import { Webchat } from '@botpress/webchat'\n" +
		"// and its styles: node_modules/@botpress/webchat/dist/style.css\n\n" +
		"// Add your site's origin to the installation's allowedOrigins.\n" +
		"export const Chat = () => <Webchat clientId=\"" + clientID + "\" apiUrl=\"" + apiURL + "\" />\n"
}
