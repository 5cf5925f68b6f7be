package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// Deployed code, integration icons and readmes live in the file storage
// (S3, the embedded S3 locally), not in the DynamoDB items: bp deploy's
// bundles (~600 KB for the echo bot template) are larger than an item may
// be. Objects are content-addressed under their owner,
//
//	code/bots/<botId>/<sha256>.js
//	code/integrations/<intId>/<sha256>.js
//	code/integrations/<intId>/icon-<sha256>.svg, readme-<sha256>.md
//
// written before the record that names them, so a record never names a
// missing object (a failed write leaves at most an unnamed object). The
// records keep the key (platform.Bot.CodeKey, Integration.CodeKey ...).

// maxDeployBody caps the bodies that carry code (updateBot, createBot,
// create/updateIntegration and their dry runs): API Gateway's limit for a
// request body.
const maxDeployBody = 10 << 20

// CodeKeyPrefix is where the file storage keeps deployed code and assets.
const CodeKeyPrefix = "code/"

func contentHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// putObject stores data at key (idempotent: the key names the content).
func (s *server) putObject(ctx context.Context, key, contentType string, data []byte) error {
	if s.Files == nil {
		return errors.New("no file storage configured for deployed code")
	}
	return s.Files.Put(ctx, key, contentType, bytes.NewReader(data), int64(len(data)))
}

// storeBotCode stores a bot's code and returns its key; empty code
// removes the code ("" key).
func (s *server) storeBotCode(ctx context.Context, botID, code string) (string, error) {
	if code == "" {
		return "", nil
	}
	key := CodeKeyPrefix + "bots/" + botID + "/" + contentHash([]byte(code)) + ".js"
	return key, s.putObject(ctx, key, "application/javascript", []byte(code))
}

// integrationAssets are the decoded code, icon and readme of an
// integration body (nil: not given; empty: removed).
type integrationAssets struct {
	code, icon, readme []byte
	given              [3]bool
}

// decodeAssets checks and decodes the code, icon and readme of a body:
// the CLI sends the icon (SVG) and the readme (Markdown) base64-encoded.
func decodeAssets(in *integrationBody) (integrationAssets, error) {
	var a integrationAssets
	if in.Code != nil {
		a.code, a.given[0] = []byte(*in.Code), true
	}
	for n, f := range []struct {
		name string
		v    *string
		dst  *[]byte
	}{{"icon", in.Icon, &a.icon}, {"readme", in.Readme, &a.readme}} {
		if f.v == nil {
			continue
		}
		// bp dev (CLI 0.8.59) sends the definition's file path ("icon.svg",
		// "hub.md") instead of the file: nothing to store.
		if v := strings.ToLower(strings.TrimSpace(*f.v)); strings.HasSuffix(v, ".svg") || strings.HasSuffix(v, ".md") {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*f.v))
		if err != nil {
			return a, platform.Invalid("invalid body: field %q: must be base64 (the file's bytes, as bp deploy sends them)", f.name)
		}
		*f.dst, a.given[n+1] = b, true
	}
	if a.given[1] && len(a.icon) > 0 && !bytes.Contains(a.icon[:min(len(a.icon), 4096)], []byte("<svg")) {
		return a, platform.Invalid("invalid body: field \"icon\": must be an SVG image (base64)")
	}
	return a, nil
}

// store writes the given assets of integration i and points i at them.
func (s *server) storeAssets(c *call, i *platform.Integration, a integrationAssets) error {
	origin := strings.TrimSuffix(webhookBase(c), "/webhooks")
	return s.storeFiles(c, CodeKeyPrefix+"integrations/"+i.ID+"/", origin+"/v1/admin/integrations/"+i.ID+"/assets/", []assetFile{
		{a.given[0], a.code, "%s.js", "application/javascript", &i.CodeKey, nil},
		{a.given[1], a.icon, "icon-%s.svg", "image/svg+xml", &i.IconKey, &i.IconURL},
		{a.given[2], a.readme, "readme-%s.md", "text/markdown; charset=utf-8", &i.ReadmeKey, &i.ReadmeURL},
	})
}

// assetFile is a file of a catalogue version (code, icon, readme) to
// store: given when the body carried it (empty data clears it), name a
// pattern whose %s is the content's hash, url set only for the files
// served by URL (icon, readme).
type assetFile struct {
	given       bool
	data        []byte
	name, ctype string
	key, url    *string
}

// storeFiles writes the given files of a version under base
// (content-addressed: a retry writes the same keys) and points their keys,
// and URLs (urlBase + name), at them.
func (s *server) storeFiles(c *call, base, urlBase string, files []assetFile) error {
	for _, f := range files {
		if !f.given {
			continue
		}
		if len(f.data) == 0 {
			*f.key = ""
			if f.url != nil {
				*f.url = ""
			}
			continue
		}
		name := strings.Replace(f.name, "%s", contentHash(f.data), 1)
		if err := s.putObject(c.ctx, base+name, f.ctype, f.data); err != nil {
			return err
		}
		*f.key = base + name
		if f.url != nil {
			*f.url = urlBase + name
		}
	}
	return nil
}

// assetName is an icon or readme object's name: its content's hash makes
// the URL a capability (it cannot be guessed without the content).
var assetName = regexp.MustCompile(`^(icon-[0-9a-f]{64}\.svg|readme-[0-9a-f]{64}\.md)$`)

// serveAsset answers GET /v1/admin/integrations/{id}/assets/{name}, the
// iconUrl and readmeUrl of an integration. No token: an <img> cannot send
// one; the URL names the content's hash, and only the integration's
// current icon or readme is served. The bytes stream through the API (no
// storage address is given out), cacheable for good (the URL changes with
// the content).
func (s *server) serveAsset(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.serveAssetOf(w, r, "integration asset", "integrations/", func() (string, string, error) {
		rec, err := s.Store.GetIntegration(r.Context(), id)
		return rec.IconKey, rec.ReadmeKey, err
	})
}

// servePluginAsset answers GET /v1/admin/plugins/{id}/assets/{name}, the
// iconUrl and readmeUrl of a plugin version, as serveAsset does.
func (s *server) servePluginAsset(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.serveAssetOf(w, r, "plugin asset", "plugins/", func() (string, string, error) {
		rec, err := s.Store.GetPlugin(r.Context(), id)
		return rec.IconKey, rec.ReadmeKey, err
	})
}

func (s *server) serveAssetOf(w http.ResponseWriter, r *http.Request, what, dir string, current func() (icon, readme string, err error)) {
	id, name := r.PathValue("id"), r.PathValue("name")
	notFound := platform.NotFound(what, id+"/"+name)
	if !assetName.MatchString(name) {
		s.writeError(w, r, notFound)
		return
	}
	iconKey, readmeKey, err := current()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	key := CodeKeyPrefix + dir + id + "/" + name
	if key != iconKey && key != readmeKey || s.Files == nil {
		s.writeError(w, r, notFound)
		return
	}
	body, info, err := s.Files.Open(r.Context(), key, "")
	if errors.Is(err, platform.ErrNoObject) {
		s.writeError(w, r, notFound)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer body.Close()
	ctype := "image/svg+xml"
	if strings.HasSuffix(name, ".md") {
		ctype = "text/markdown; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	// An SVG may hold scripts: never run them in the API's origin.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, body)
	}
}

// codeTarget is where a call to integration i goes: its url, or its
// deployed code's address (s.Code). Errors are in the API's terms (502
// with the reason).
func (s *server) codeTarget(ctx context.Context, i platform.Integration) (string, error) {
	u, err := platform.IntegrationTarget(ctx, s.Code, i)
	if err != nil {
		var pe *platform.Error
		if !errors.As(err, &pe) {
			err = platform.Errorf(platform.ErrBadGateway, "integration %q: its deployed code cannot be reached: %v", i.Name, err)
		}
	}
	return u, err
}

// resolveCalls points calls to integrations without a url at their
// deployed code (registration, unregistration); a call that cannot reach
// it fails with the reason.
func (s *server) resolveCalls(ctx context.Context, calls []integrationCall) {
	for n := range calls {
		c := &calls[n].call
		if c.URL != "" {
			continue
		}
		rec, err := s.Store.GetIntegration(ctx, c.IntegrationID)
		if err != nil || !rec.HasCode() {
			continue
		}
		if c.URL, err = s.codeTarget(ctx, rec.Integration); err != nil {
			c.NoURL = err.(*platform.Error).Message
		}
	}
}

// dropReplaced deletes the objects of deployed code, icons and readmes a
// record named before a change and names no longer (replaced, removed, or
// the bot or integration deleted). Keys are per owner
// (code/bots/<botId>/..., code/integrations/<id>/...), so only the owner's
// record can name one: once it does not, nothing does, even where another
// bot deployed the same content (its key is its own). current, when set,
// re-reads the owner's keys just before the deletion, so an update made
// meanwhile that named the old content again keeps it. A failed deletion
// is logged: the object stays, unnamed.
func (s *server) dropReplaced(ctx context.Context, before, after []string, current func(context.Context) ([]string, error)) {
	if s.Files == nil {
		return
	}
	keep := map[string]bool{"": true}
	for _, k := range after {
		keep[k] = true
	}
	var drop []string
	for _, k := range before {
		if !keep[k] && strings.HasPrefix(k, CodeKeyPrefix) {
			drop = append(drop, k)
			keep[k] = true // once
		}
	}
	if len(drop) == 0 {
		return
	}
	if current != nil {
		now, err := current(ctx)
		var pe *platform.Error
		if err != nil && !(errors.As(err, &pe) && pe.Type == platform.ErrResourceNotFound) {
			s.Logger.Warn("replaced code objects kept: the owner could not be read", "keys", drop, "err", err)
			return
		}
		named := map[string]bool{}
		for _, k := range now {
			named[k] = true
		}
		kept := drop[:0]
		for _, k := range drop {
			if !named[k] {
				kept = append(kept, k)
			}
		}
		drop = kept
	}
	for _, k := range drop {
		if err := s.Files.Delete(ctx, k); err != nil && !errors.Is(err, platform.ErrNoObject) {
			s.Logger.Warn("a replaced code object was not deleted", "key", k, "err", err)
		}
	}
}

func integrationKeys(i platform.Integration) []string {
	return []string{i.CodeKey, i.IconKey, i.ReadmeKey}
}

func (s *server) botKeysNow(id string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		rec, err := s.Store.GetBot(ctx, id)
		return []string{rec.CodeKey}, err
	}
}

func (s *server) integrationKeysNow(id string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		rec, err := s.Store.GetIntegration(ctx, id)
		return integrationKeys(rec.Integration), err
	}
}
