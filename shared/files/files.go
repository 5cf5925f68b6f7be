// Package files is the logic of the Files API that needs neither HTTP nor a
// database: input rules, content-type inference, tag filters, exact file
// references, text extraction and passage splitting, the search index's
// terms and relevance, and the upload-completion procedure (over small
// interfaces the store and the object storage satisfy).
package files

import (
	"encoding/json"
	"mime"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/botforge/platform/shared/platform"
)

// Limits of the Files API (docs/files.md).
const (
	// MaxKeyBytes bounds a file key: it is a DynamoDB sort key (at most
	// 1024 bytes) and, as the download filename, part of a file reference
	// whose query string must stay under 4 KiB.
	MaxKeyBytes = 1024
	// MaxContentTypeBytes bounds a content type.
	MaxContentTypeBytes = 255
	// MaxFileSize is the largest file: S3's limit for one PUT, which the
	// embedded S3 applies too (platform.MaxObjectSize).
	MaxFileSize = platform.MaxObjectSize
	// MaxTags bounds the tags of one file, so that any write of a file,
	// even one replacing all its tags by others, updates its record and
	// every tag counter it touches in one transaction (2 + 4*24 <= 100).
	MaxTags = 24
	// MaxTagKeyBytes bounds a tag name.
	MaxTagKeyBytes = 200
	// MaxMetadataBytes bounds the metadata JSON of one file (the record
	// is stored twice, each copy under DynamoDB's 400 KB item limit).
	MaxMetadataBytes = 64 << 10
	// MaxExpiry is how far in the future expiresAt may be.
	MaxExpiry = 90 * 24 * time.Hour
)

// UploadURLTTL is how long an upload URL stays valid (tests shorten it).
var UploadURLTTL = 15 * time.Minute

// CheckKey validates a file key; what names it in errors (e.g.
// `field "key"`).
func CheckKey(what, key string) error {
	switch {
	case key == "":
		return platform.Invalid("invalid %s: must not be empty", what)
	case len(key) > MaxKeyBytes:
		return platform.Invalid("invalid %s: must be at most %d bytes", what, MaxKeyBytes)
	case !utf8.ValidString(key):
		return platform.Invalid("invalid %s: must be valid UTF-8", what)
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return platform.Invalid("invalid %s: must not contain control characters", what)
	case key == "." || key == "..":
		// The official client puts a key in the path with
		// encodeURIComponent, which leaves dots alone: the URL's
		// normalization then removes the segment, and the file could
		// never be read, changed or deleted by its key.
		return platform.Invalid("invalid %s: %q cannot be a file key (clients remove it from a URL's path)", what, key)
	case reservedKeys[key]:
		return platform.Invalid("invalid %s: %q cannot be a file key: GET /v1/files/%s is another operation", what, key, key)
	}
	return nil
}

// reservedKeys are the keys whose getFile path (GET /v1/files/{key}) is
// another operation's: a file of that key could not be read by its key.
var reservedKeys = map[string]bool{"search": true, "tags": true, "knowledge-bases": true}

// CheckSize validates a declared size (a JSON number).
func CheckSize(n json.Number) (int64, error) {
	if n == "" {
		return 0, platform.Invalid("invalid body: field \"size\" is required")
	}
	v, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != float64(int64(f)) {
			return 0, platform.Invalid("invalid body: field \"size\": must be a whole number of bytes")
		}
		v = int64(f)
	}
	if v < 0 || v > MaxFileSize {
		return 0, platform.Invalid("invalid body: field \"size\": must be from 0 to %d bytes", int64(MaxFileSize))
	}
	return v, nil
}

// CheckContentType validates a content type given by a caller: a media type
// the storage can sign and later serve as is.
func CheckContentType(ct string) error {
	if ct == "" || len(ct) > MaxContentTypeBytes {
		return platform.Invalid("invalid body: field \"contentType\": must be 1 to %d characters", MaxContentTypeBytes)
	}
	for _, r := range ct {
		if r < 0x20 || r > 0x7e {
			return platform.Invalid("invalid body: field \"contentType\": must be printable ASCII")
		}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return platform.Invalid("invalid body: field \"contentType\": %q is not a media type (type/subtype)", ct)
	}
	return nil
}

// CheckTags validates tags (values may be nil in a patch: a deletion).
func CheckTags(field string, tags map[string]*string) error {
	if len(tags) > MaxTags {
		return platform.Invalid("invalid body: field %q: at most %d tags", field, MaxTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > MaxTagKeyBytes || !utf8.ValidString(k) {
			return platform.Invalid("invalid body: field %q: tag names must be 1 to %d bytes of UTF-8", field, MaxTagKeyBytes)
		}
		if v != nil && !utf8.ValidString(*v) {
			return platform.Invalid("invalid body: field %q: tag %q: value must be valid UTF-8", field, k)
		}
	}
	return nil
}

// CheckMetadata validates metadata: a JSON object (or null: none).
func CheckMetadata(raw json.RawMessage) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	if len(raw) > MaxMetadataBytes {
		return nil, platform.Errorf(platform.ErrPayloadTooLarge, "field \"metadata\": at most %d bytes of JSON", MaxMetadataBytes)
	}
	if err := json.Unmarshal(raw, &out); err != nil || out == nil {
		return nil, platform.Invalid("invalid body: field \"metadata\": must be an object")
	}
	return out, nil
}

// ParseExpiry validates an expiresAt: in the future, at most MaxExpiry
// ahead; as the reference says, only minutes count (seconds are dropped).
func ParseExpiry(s string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, platform.Invalid("invalid body: field \"expiresAt\": must be an ISO 8601 timestamp")
	}
	t = t.UTC().Truncate(time.Minute)
	if !t.After(now) {
		return time.Time{}, platform.Invalid("invalid body: field \"expiresAt\": must be in the future (seconds are ignored)")
	}
	if t.Sub(now) > MaxExpiry {
		return time.Time{}, platform.Invalid("invalid body: field \"expiresAt\": must be at most 90 days from now")
	}
	return t, nil
}

// Expired reports whether a file with expiresAt (wire format, or "") is
// past its expiry at now.
func Expired(expiresAt string, now time.Time) bool {
	if expiresAt == "" {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, expiresAt)
	return err == nil && !t.After(now)
}

// Filename is the name a download gives the file: the last segment of its
// key.
func Filename(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 && i < len(key)-1 {
		return key[i+1:]
	}
	return strings.Trim(key, "/")
}

// contentTypes maps file extensions to media types. A fixed table rather
// than the operating system's: the inferred type must not depend on the
// machine.
var contentTypes = map[string]string{
	".txt": "text/plain", ".text": "text/plain", ".log": "text/plain",
	".md": "text/markdown", ".markdown": "text/markdown", ".mdx": "text/markdown",
	".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml",
	".json": "application/json", ".jsonl": "application/jsonl", ".ndjson": "application/x-ndjson",
	".csv": "text/csv", ".tsv": "text/tab-separated-values",
	".xml": "application/xml", ".yaml": "application/yaml", ".yml": "application/yaml",
	".css": "text/css", ".js": "text/javascript", ".mjs": "text/javascript", ".ts": "text/plain",
	".pdf": "application/pdf", ".rtf": "application/rtf",
	".doc": "application/msword", ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xls": "application/vnd.ms-excel", ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".ppt": "application/vnd.ms-powerpoint", ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	".odt": "application/vnd.oasis.opendocument.text", ".epub": "application/epub+zip",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".svg": "image/svg+xml", ".ico": "image/vnd.microsoft.icon",
	".bmp": "image/bmp", ".tif": "image/tiff", ".tiff": "image/tiff", ".avif": "image/avif", ".heic": "image/heic",
	".mp3": "audio/mpeg", ".wav": "audio/wav", ".ogg": "audio/ogg", ".oga": "audio/ogg", ".m4a": "audio/mp4",
	".flac": "audio/flac", ".aac": "audio/aac", ".weba": "audio/webm",
	".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime", ".avi": "video/x-msvideo", ".mkv": "video/x-matroska",
	".zip": "application/zip", ".gz": "application/gzip", ".tar": "application/x-tar", ".7z": "application/x-7z-compressed",
	".wasm": "application/wasm", ".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf",
}

// DefaultContentType is the content type of a file whose key has no known
// extension.
const DefaultContentType = "application/octet-stream"

// ContentTypeFor infers a content type from the extension of key.
func ContentTypeFor(key string) string {
	if ct, ok := contentTypes[strings.ToLower(path.Ext(Filename(key)))]; ok {
		return ct
	}
	return DefaultContentType
}

// MediaType is the lowercased media type of a content type, without
// parameters ("Text/HTML; charset=utf-8" -> "text/html").
func MediaType(ct string) string {
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
