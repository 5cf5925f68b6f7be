// Package console is the platform's web console (docs/console.md): static
// ES modules embedded in the binary and served at "/" (the page) and
// "/console/..." (its assets). It holds no server logic: the page signs in
// with a personal access token and calls the public API like any client.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// AssetPrefix is the path the console's assets are served under.
const AssetPrefix = "/console/"

// ContentSecurityPolicy: scripts, styles and images of this origin only
// (no inline script or style, no eval); API calls to this origin, and on AWS
// to S3's presigned upload and download URLs (the Files API's uploadUrl),
// and the inbox's live stream on the stream host (docs/hitl.md: a Lambda
// function URL, https://<id>.lambda-url.<region>.on.aws, or the container
// tier's load balancer under amazonaws.com).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self' https://*.amazonaws.com https://*.on.aws; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, ready to send.
type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

var assets = load()

func load() map[string]*asset {
	out := map[string]*asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a := &asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		a.contentType = mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		case ".js", ".mjs":
			a.contentType = "text/javascript; charset=utf-8"
		case ".css":
			a.contentType = "text/css; charset=utf-8"
		case ".html":
			a.contentType = "text/html; charset=utf-8"
		case ".svg":
			a.contentType = "image/svg+xml"
		}
		if a.contentType == "" {
			a.contentType = "application/octet-stream"
		}
		// Compressed once at start: every response of a text asset is
		// gzipped for clients that accept it (the assets are small, and
		// the binary stays free of a build step).
		if strings.HasPrefix(a.contentType, "text/") || a.contentType == "image/svg+xml" {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			_, _ = zw.Write(b)
			_ = zw.Close()
			if buf.Len() < len(b) {
				a.gz = buf.Bytes()
			}
		}
		out[strings.TrimPrefix(p, "static/")] = a
		return nil
	})
	if err != nil {
		panic("console: " + err.Error())
	}
	return out
}

// Routes returns the console's patterns (net/http.ServeMux syntax) and
// their handler: exactly "/" and the asset prefix, so that every other path
// keeps the API's own answers.
func Routes() map[string]http.Handler { return RoutesWith("") }

// RoutesWith is Routes whose Content-Security-Policy also lets the page
// connect to streamURL's origin (the platform's PLATFORM_CHAT_STREAM_URL,
// where the inbox's live stream is served: docs/hitl.md) when it is given
// and is another origin: aws-local's function URL and load balancer
// stand-ins are http://127.0.0.1:<port>, which the wildcards do not cover.
func RoutesWith(streamURL string) map[string]http.Handler {
	csp := ContentSecurityPolicy
	if u, err := url.Parse(streamURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		csp = strings.Replace(csp, "connect-src 'self' ", "connect-src 'self' "+u.Scheme+"://"+u.Host+" ", 1)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, csp) })
	return map[string]http.Handler{
		"GET /{$}":                         h,
		"GET " + AssetPrefix + "{path...}": h,
	}
}

// Sizes reports the bytes of every asset and of their gzipped forms (what
// a browser loading the console downloads; docs/console.md).
func Sizes() (raw, gzipped int) {
	for _, a := range assets {
		raw += len(a.body)
		if a.gz != nil {
			gzipped += len(a.gz)
		} else {
			gzipped += len(a.body)
		}
	}
	return raw, gzipped
}

func serve(w http.ResponseWriter, r *http.Request, csp string) {
	name := "index.html"
	if r.URL.Path != "/" {
		name = strings.TrimPrefix(r.URL.Path, AssetPrefix)
	}
	a, ok := assets[name]
	if !ok || name == "index.html" && r.URL.Path != "/" {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("no such console asset\n"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	// Revalidated on every load (a 304 when unchanged): a new binary's
	// console is never mixed with an old one's cached modules.
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if a.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		// Each encoding is its own representation, with its own tag.
		body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
	}
	h.Set("ETag", etag)
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(strings.SplitN(part, ";", 2)[0]) == "gzip" {
			return true
		}
	}
	return false
}
