package files

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Ref is a complete file reference: it names one immutable generation of a
// file by its id and the generation's size, content type, filename and
// SHA-256 checksum. It is served by GET /v1/files/{id}/content?<Ref.Query>.
type Ref struct {
	ID          string
	Size        int64
	ContentType string
	Filename    string
	Checksum    string // SHA-256, 64 lowercase hex digits
	// Expires and Signature make the reference readable without a token
	// until Expires (Unix seconds): a signed URL (SignedQuery). Zero and
	// "" on a plain reference.
	Expires   int64
	Signature string
}

// SignedURLTTL is the least time a file's signed url stays valid: it
// expires at the end of the hour after the next one starts, so a file's
// url is the same for every answer within an hour (1 to 2 hours of
// validity).
const SignedURLTTL = time.Hour

// SignedExpiry is the expiry of a url signed at now.
func SignedExpiry(now time.Time) int64 {
	return now.Truncate(time.Hour).Add(2 * SignedURLTTL).Unix()
}

// SignedQuery is the reference's query with an expiry and an HMAC-SHA256
// under key of the id, the four parameters and the expiry.
func (r Ref) SignedQuery(key []byte, expires int64) string {
	return r.Query() + "&expires=" + strconv.FormatInt(expires, 10) + "&signature=" + r.sign(key, expires)
}

func (r Ref) sign(key []byte, expires int64) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("file-url\n" + r.ID + "\n" + r.Query() + "\n" + strconv.FormatInt(expires, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

// CheckSignature tells whether a signed reference is valid at now: its
// signature is the key's and it has not expired. The message says which.
func (r Ref) CheckSignature(key []byte, now time.Time) error {
	if r.Signature == "" {
		return platform.Errorf(platform.ErrUnauthorized, "missing bearer token: send Authorization: Bearer <token>, or use the file's url as getFile answers it (signed)")
	}
	if !hmac.Equal([]byte(r.Signature), []byte(r.sign(key, r.Expires))) {
		return platform.Errorf(platform.ErrUnauthorized, "the signature of this file url is not valid: get the file again for its current url")
	}
	if now.Unix() >= r.Expires {
		return platform.Errorf(platform.ErrUnauthorized, "this file url expired at %s: get the file again for a fresh one", time.Unix(r.Expires, 0).UTC().Format(platform.TimeFormat))
	}
	return nil
}

// MaxRefQuery is the longest query string a reference may have.
const MaxRefQuery = 4096

// The query parameters of a reference, in the order Query writes them.
var refParams = []string{"size", "contentType", "filename", "checksum"}

// The parameters a signed reference adds (SignedQuery).
var signedParams = []string{"expires", "signature"}

// RefOf is the reference of the current generation of an uploaded file.
func RefOf(r platform.FileRecord) Ref {
	return Ref{ID: r.ID, Size: r.Size, ContentType: r.ContentType, Filename: Filename(r.Key), Checksum: r.Checksum}
}

// Path is the path serving the reference.
func (r Ref) Path() string { return "/v1/files/" + url.PathEscape(r.ID) + "/content" }

// Query is the reference's query string; every value is URL-encoded.
func (r Ref) Query() string {
	vals := []string{strconv.FormatInt(r.Size, 10), r.ContentType, r.Filename, r.Checksum}
	var b strings.Builder
	for i, name := range refParams {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(vals[i]))
	}
	return b.String()
}

func badRef(format string, args ...any) error {
	return platform.Errorf(platform.ErrInvalidQuery, format, args...)
}

// ParseRef reads the query of a reference strictly: at most MaxRefQuery
// bytes, exactly the four parameters, each once, each properly
// URL-encoded.
func ParseRef(id, rawQuery string) (Ref, error) {
	if len(rawQuery) > MaxRefQuery {
		return Ref{}, badRef("the query string of a file reference is at most %d bytes", MaxRefQuery)
	}
	got := map[string]string{}
	for part := range strings.SplitSeq(rawQuery, "&") {
		if part == "" {
			continue
		}
		rawName, rawVal, ok := strings.Cut(part, "=")
		name, err1 := url.QueryUnescape(rawName)
		val, err2 := url.QueryUnescape(rawVal)
		if !ok || err1 != nil || err2 != nil {
			return Ref{}, badRef("malformed query parameter %q: write name=value with URL-encoded values", part)
		}
		known := false
		for _, p := range append(refParams, signedParams...) {
			known = known || p == name
		}
		if !known {
			return Ref{}, badRef("unknown query parameter %q: a file reference has exactly %s", name, strings.Join(refParams, ", "))
		}
		if _, dup := got[name]; dup {
			return Ref{}, badRef("query parameter %q is given more than once", name)
		}
		got[name] = val
	}
	for _, p := range refParams {
		if _, ok := got[p]; !ok {
			return Ref{}, badRef("query parameter %q is required: a file reference has exactly %s", p, strings.Join(refParams, ", "))
		}
	}
	size, err := strconv.ParseInt(got["size"], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != got["size"] {
		return Ref{}, badRef("query parameter \"size\" must be a byte count")
	}
	sum := got["checksum"]
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return Ref{}, badRef("query parameter \"checksum\" must be a SHA-256 in 64 lowercase hex digits")
	}
	ref := Ref{ID: id, Size: size, ContentType: got["contentType"], Filename: got["filename"], Checksum: sum}
	exp, hasExp := got["expires"]
	sig, hasSig := got["signature"]
	if hasExp != hasSig {
		return Ref{}, badRef("a signed file reference has both \"expires\" and \"signature\"")
	}
	if hasExp {
		ref.Expires, err = strconv.ParseInt(exp, 10, 64)
		if err != nil || ref.Expires <= 0 {
			return Ref{}, badRef("query parameter \"expires\" must be a Unix time in seconds")
		}
		if len(sig) != 64 || strings.Trim(sig, "0123456789abcdef") != "" {
			return Ref{}, badRef("query parameter \"signature\" must be 64 lowercase hex digits")
		}
		ref.Signature = sig
	}
	return ref, nil
}

// Mismatch reports which field of ref differs from the current generation
// of the file, or "" when ref names it exactly.
func (r Ref) Mismatch(cur Ref) string {
	switch {
	case r.Size != cur.Size:
		return "size"
	case r.ContentType != cur.ContentType:
		return "contentType"
	case r.Filename != cur.Filename:
		return "filename"
	case r.Checksum != cur.Checksum:
		return "checksum"
	}
	return ""
}
