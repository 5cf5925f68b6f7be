package files

import (
	"net/url"
	"strconv"
	"strings"

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
}

// MaxRefQuery is the longest query string a reference may have.
const MaxRefQuery = 4096

// The query parameters of a reference, in the order Query writes them.
var refParams = []string{"size", "contentType", "filename", "checksum"}

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
		for _, p := range refParams {
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
	return Ref{ID: id, Size: size, ContentType: got["contentType"], Filename: got["filename"], Checksum: sum}, nil
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
