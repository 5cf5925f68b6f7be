package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/platform"
)

// rawRoute is an operation that answers raw bytes rather than JSON. It is
// authenticated and authorized like any route; open prepares the answer
// (any error is still answered in the JSON error shape) and the handler
// then streams it.
type rawRoute struct {
	route
	open func(*call) (*rawAnswer, error)
}

// rawAnswer is a prepared raw answer: headers and a body to stream.
type rawAnswer struct {
	header http.Header
	body   io.ReadCloser
}

// rawRoutes are the raw-answer operations of an area.
func (s *server) rawRoutes(a Area) []rawRoute {
	if a == AreaFiles {
		return s.filesRawRoutes()
	}
	if a == AreaAdmin {
		return s.transferRawRoutes() // transfer_jobs.go
	}
	return nil
}

func (s *server) rawHandler(rr rawRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, usage := dynamo.WithUsage(r.Context())
		c := &call{Request: r.WithContext(ctx), ctx: ctx, s: s, op: rr.op}
		rt := rr.route
		rt.handle = func(c *call) (any, error) { return rr.open(c) }
		out, err := s.serve(w, c, rt)
		if s.OnUsage != nil {
			s.OnUsage(rt.op, usage)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		ans := out.(*rawAnswer)
		defer ans.body.Close()
		for k, v := range ans.header {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		if _, err := io.Copy(w, ans.body); err != nil {
			// The status is sent: cut the connection so the client sees a
			// truncated answer, never a short one that looks complete.
			s.Logger.WarnContext(ctx, "download interrupted", "path", r.URL.Path, "err", err)
			panic(http.ErrAbortHandler)
		}
	})
}

// downloadFileRef is Download Exact File Ref:
//
//	GET /v1/files/{id}/content?size=<bytes>&contentType=<type>&filename=<name>&checksum=<sha256 hex>
//
// It streams the bytes of the generation the reference names, if it is
// still the file's current one, through the API (no redirect, no storage
// address). The id resolves only within the caller's bot.
func (s *server) downloadFileRef(c *call) (*rawAnswer, error) {
	id := c.PathValue("id")
	ref, err := files.ParseRef(id, c.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	if s.Files == nil {
		return nil, errNoStorage
	}
	if !platform.HasPrefix(id, platform.PrefixFile) {
		return nil, platform.NotFound("file", id)
	}
	anonymous := c.principal.Kind == ""
	if anonymous {
		// A signed url: the signature is the authorization, for the bot
		// whose file it names.
		if err := ref.CheckSignature(s.fileURLKey(), now()); err != nil {
			return nil, err
		}
	}
	r, err := s.Store.GetFile(c.ctx, id)
	if err == nil && anonymous {
		c.bot.ID = r.BotID
	}
	if err != nil || r.BotID != c.bot.ID {
		if err == nil || platform.TypeOf(err) == platform.ErrResourceNotFound {
			return nil, platform.NotFound("file", id)
		}
		return nil, err
	}
	if files.Expired(r.ExpiresAt, now()) {
		s.expire(c.ctx, r)
		return nil, platform.NotFound("file", id)
	}
	if r.Checksum == "" || !r.Status.Uploaded() {
		return nil, platform.Errorf(platform.ErrResourceNotFound, "file %q has no uploaded content (status %s)", id, r.Status)
	}
	if field := ref.Mismatch(files.RefOf(r)); field != "" {
		return nil, platform.Errorf(platform.ErrResourceNotFound, "file %q has no generation matching this reference: its %s differs (the file was changed or re-uploaded; get the file for its current url)", id, field)
	}
	var body io.ReadCloser = http.NoBody
	var info platform.ObjectInfo
	if c.Method == http.MethodHead {
		info, err = s.Files.Head(c.ctx, r.ObjectKey())
		if err == nil && info.ETag != r.ETag {
			err = platform.ErrObjectChanged
		}
	} else {
		body, info, err = s.Files.Open(c.ctx, r.ObjectKey(), r.ETag)
	}
	if errors.Is(err, platform.ErrObjectChanged) || errors.Is(err, platform.ErrNoObject) {
		// Overwritten or deleted since it was verified: not this generation.
		return nil, platform.Errorf(platform.ErrResourceNotFound, "file %q has no generation matching this reference", id)
	}
	if err != nil {
		return nil, err
	}
	if info.Size != r.Size {
		body.Close()
		return nil, platform.Errorf(platform.ErrResourceNotFound, "file %q has no generation matching this reference", id)
	}
	h := http.Header{}
	h.Set("Content-Type", r.ContentType)
	h.Set("Content-Length", strconv.FormatInt(r.Size, 10))
	h.Set("Content-Disposition", contentDisposition(ref.Filename))
	h.Set("ETag", `"`+r.Checksum+`"`)
	// The bytes are the caller's, not the API's: never sniffed, never
	// rendered as a page of the API's origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600, immutable")
	return &rawAnswer{header: h, body: body}, nil
}

// hasSignature tells whether a download carries a signed url's signature.
func hasSignature(r *http.Request) bool { return r.URL.Query().Has("signature") }

// fileURLKey signs file urls: derived from the paging key, which every
// function shares (a url signed by one is served by another).
func (s *server) fileURLKey() []byte {
	m := hmac.New(sha256.New, s.PagingKey)
	m.Write([]byte("file urls"))
	return m.Sum(nil)
}

// contentDisposition makes an attachment header for name, with an ASCII
// fallback and the exact name in RFC 5987 form.
func contentDisposition(name string) string {
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	ascii := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`attachment; filename="%s"`, ascii)
}
