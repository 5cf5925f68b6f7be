package webchat

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
)

// Files of end users: POST /files makes a file of the bot (public
// content) and answers its presigned upload URL and a link served here,
// <webhookUrl>/files/<id>/<signature>: the page shows it in an <img> or an
// <a>, which send no key, so the link carries its own proof (an HMAC of
// the file id with a secret of the installation, derived as the user
// keys' is). The platform's own file URLs need a token of the bot.

// fileSig signs a file id for installation in.
func fileSig(in builtin.Install, fileID string) string {
	m := hmac.New(sha256.New, []byte(in.Integration.SigningSecret))
	m.Write([]byte("webchat file\x00" + in.Instance.WebhookID + "\x00" + fileID))
	return hex.EncodeToString(m.Sum(nil))
}

// fileLink is the link of file id below the installation's webhook URL.
func fileLink(in builtin.Install, fileID string) string {
	return strings.TrimSuffix(in.WebhookURL, "/") + "/files/" + url.PathEscape(fileID) + "/" + fileSig(in, fileID)
}

// inlineTypes are shown in the page; anything else is downloaded.
var inlineTypes = []string{"image/", "audio/", "video/"}

// serveFile is GET /files/{id}/{sig}: the file's content, when the link
// is this installation's and the upload is done.
func (q *req) serveFile(id, sig string) error {
	if !hmac.Equal([]byte(sig), []byte(fileSig(q.in, id))) {
		return platform.NotFound("file", id)
	}
	var f struct {
		File platform.File `json:"file"`
	}
	if err := q.in.API.Call(q.ctx, q.in, "GET", "/v1/files/"+url.PathEscape(id), nil, &f); err != nil {
		return err
	}
	if f.File.URL == "" {
		return platform.Errorf(platform.ErrResourceNotFound, "file %q has no uploaded content yet", id)
	}
	u, err := url.Parse(f.File.URL)
	if err != nil {
		return err
	}
	var body []byte
	if err := q.in.API.Call(q.ctx, q.in, "GET", u.RequestURI(), nil, &body); err != nil {
		return err
	}
	h := q.w.Header()
	h.Set("Content-Type", f.File.ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	// Content of end users, on the platform's origin: never a document
	// that runs anything.
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, max-age=300")
	name := f.File.Key[strings.LastIndexByte(f.File.Key, '/')+1:]
	disp := "attachment"
	for _, t := range inlineTypes {
		if strings.HasPrefix(f.File.ContentType, t) {
			disp = "inline"
		}
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disp, map[string]string{"filename": name}))
	q.w.WriteHeader(http.StatusOK)
	_, _ = q.w.Write(body)
	return nil
}
