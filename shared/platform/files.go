package platform

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"time"
)

// MaxObjectSize is the largest file content, in bytes: S3's limit for one
// PUT (5 GiB). upsertFile refuses a larger size and the embedded S3 a larger
// PUT, so what one accepts the other stores (streamed, never in memory).
const MaxObjectSize = 5 << 30

// FileStorage holds file contents: S3 in AWS, the embedded S3 locally
// (shared/s3store implements it over the AWS SDK for both). It is what the
// Files API needs from an object store and nothing more. Keys are object
// keys chosen by the platform, never by callers.
type FileStorage interface {
	// PresignPut returns a URL that accepts one PUT of key, carrying exactly
	// contentType and size bytes, until ttl has passed. The URL is the
	// upload's only authorization: the storage refuses it for another key,
	// content type or length, or after expiry.
	PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (string, error)
	// Open streams an object. With etag set, the object must still be that
	// version: otherwise ErrObjectChanged. A missing object is ErrNoObject.
	Open(ctx context.Context, key, etag string) (io.ReadCloser, ObjectInfo, error)
	// Head describes an object (ErrNoObject when missing).
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Copy copies the object src, which must still be version etag when etag
	// is set, to dst, without the bytes passing through the caller.
	Copy(ctx context.Context, src, etag, dst string) error
	// Delete removes an object; a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// Put stores size bytes of body at key, for content the platform makes
	// itself (table exports); callers upload through PresignPut.
	Put(ctx context.Context, key, contentType string, body io.ReadSeeker, size int64) error
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Size        int64
	ContentType string
	// ETag identifies the object's current bytes: it changes when the
	// object is overwritten.
	ETag string
}

// Errors of FileStorage.
var (
	ErrNoObject      = errors.New("storage: no such object")
	ErrObjectChanged = errors.New("storage: the object changed")
)

type originKey struct{}

// WithOrigin records in ctx the origin (scheme://host) through which the
// caller reached the API. The local platform serves its S3 on the API's own
// port, so its presigned URLs must point at the address the caller used.
func WithOrigin(ctx context.Context, origin string) context.Context {
	return context.WithValue(ctx, originKey{}, origin)
}

type uploadTaggingKey struct{}

// WithUploadTagging records in ctx the object tagging (URL query form,
// "public=true") a presigned upload URL must sign: the official webchat
// component PUTs its files with that x-amz-tagging header, and S3 refuses
// an x-amz-* header that is not signed. Only in-process callers can set it
// (the webchat integration, shared/webchat): no HTTP request reaches it.
func WithUploadTagging(ctx context.Context, tagging string) context.Context {
	return context.WithValue(ctx, uploadTaggingKey{}, tagging)
}

// UploadTaggingFrom returns the tagging recorded by WithUploadTagging, or "".
func UploadTaggingFrom(ctx context.Context) string {
	s, _ := ctx.Value(uploadTaggingKey{}).(string)
	return s
}

// OriginFrom returns the origin recorded by WithOrigin, or "".
func OriginFrom(ctx context.Context) string {
	s, _ := ctx.Value(originKey{}).(string)
	return s
}

// UploadOrigin is the origin (scheme://host) of the upload URLs s presigns
// during ctx: where a browser PUTs a file (on AWS the bucket's S3 host,
// on the local platform the API's own address), so a page that uploads
// can allow it in its CSP's connect-src. It signs a URL and reads its
// host (no request is made); "" when s cannot sign one.
func UploadOrigin(ctx context.Context, s FileStorage) string {
	if s == nil {
		return ""
	}
	raw, err := s.PresignPut(ctx, "files/origin", "application/octet-stream", 1, time.Minute)
	if err != nil {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// FileStatus is the upload and indexing state of a file.
type FileStatus string

const (
	FileUploadPending     FileStatus = "upload_pending"
	FileUploadFailed      FileStatus = "upload_failed"
	FileUploadCompleted   FileStatus = "upload_completed"
	FileIndexingPending   FileStatus = "indexing_pending"
	FileIndexingFailed    FileStatus = "indexing_failed"
	FileIndexingCompleted FileStatus = "indexing_completed"
)

// Uploaded reports whether the content of a file in status s is stored and
// verified (so it can be served and copied).
func (s FileStatus) Uploaded() bool {
	switch s {
	case FileUploadCompleted, FileIndexingPending, FileIndexingFailed, FileIndexingCompleted:
		return true
	}
	return false
}

// PrefixFile is the prefix of file ids.
const PrefixFile = "file_"

// FileOwner is who created a file.
type FileOwner struct {
	Type  string `json:"type"`
	ID    string `json:"id,omitempty"`
	Name  string `json:"name,omitempty"`
	Alias string `json:"alias,omitempty"`
}

// File is a file record in the reference's shape.
type File struct {
	ID                 string                     `json:"id"`
	BotID              string                     `json:"botId"`
	Key                string                     `json:"key"`
	URL                string                     `json:"url"`
	Size               int64                      `json:"size"`
	ContentType        string                     `json:"contentType"`
	Tags               map[string]string          `json:"tags"`
	Metadata           map[string]json.RawMessage `json:"metadata"`
	CreatedAt          string                     `json:"createdAt"`
	UpdatedAt          string                     `json:"updatedAt"`
	AccessPolicies     []string                   `json:"accessPolicies"`
	Index              bool                       `json:"index"`
	Status             FileStatus                 `json:"status"`
	FailedStatusReason string                     `json:"failedStatusReason,omitempty"`
	ExpiresAt          string                     `json:"expiresAt,omitempty"`
	Owner              FileOwner                  `json:"owner"`
	IndexingStack      string                     `json:"indexingStack,omitempty"`
}

// FileRecord is a file with the state the platform keeps beside its wire
// shape: which generation of content it is at, and what is known of it.
type FileRecord struct {
	File
	// Generation names the current content: every upsert starts a new one,
	// stored under its own object key, so bytes of an earlier generation
	// can never be served for a later one.
	Generation string
	// Checksum is the SHA-256 (hex) of the generation's bytes, and ETag the
	// storage's version of them, once the upload has been verified.
	Checksum string
	ETag     string
	// PassageSet names the current set of passages (empty: none), and
	// PassageCount how many it holds.
	PassageSet   string
	PassageCount int
	// Indexing is the indexing configuration given at upsert (raw JSON).
	Indexing json.RawMessage
	// Version is the record's optimistic-concurrency version (set by the store).
	Version int64
}

// ObjectKey is where the record's current generation is stored.
func (r FileRecord) ObjectKey() string { return FileObjectKey(r.BotID, r.ID, r.Generation) }

// FileObjectKey is the storage key of one generation of a file.
func FileObjectKey(botID, fileID, generation string) string {
	return "files/" + botID + "/" + fileID + "/" + generation
}

// Passage is one passage of an indexed file, in the reference's shape.
type Passage struct {
	ID      string      `json:"id"`
	Content string      `json:"content"`
	Meta    PassageMeta `json:"meta"`
}

// PassageMeta describes a passage.
type PassageMeta struct {
	Type       string `json:"type"`
	Subtype    string `json:"subtype,omitempty"`
	PageNumber *int   `json:"pageNumber,omitempty"`
	Position   *int   `json:"position,omitempty"`
	SourceURL  string `json:"sourceUrl,omitempty"`
}

// IndexedPassage is a passage as stored: the wire passage and the headings
// (title > subtitle) it falls under, for search breadcrumbs.
type IndexedPassage struct {
	Passage
	Breadcrumb string
}

// Posting says where a term occurs in one passage set of a file: the
// search index has one per (file, passage set, term).
type Posting struct {
	Term string
	Hits []PostingHit
}

// PostingHit is a passage holding a term: its position, how often the term
// occurs in it, and its length in terms.
type PostingHit struct {
	Position, Count, Length int
}

// FilePosting is a posting as the search reads it back: a term's hits in
// one passage set of one file, with the set's passage count.
type FilePosting struct {
	FileID, Set string
	Passages    int
	Hits        []PostingHit
}

// PrefixKnowledgeBase starts knowledge base ids.
const PrefixKnowledgeBase = "kb_"

// KnowledgeBaseTag is the file tag tying a file to a knowledge base (its
// value: the knowledge base's id), as Botpress's knowledge bases tag the
// files they hold.
const KnowledgeBaseTag = "kbId"

// KnowledgeBase groups a bot's files (the reference's shape).
type KnowledgeBase struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	CreatedAt string            `json:"createdAt"`
	Tags      map[string]string `json:"tags"`
}

// VectorChunk is a run of a passage set's embeddings, stored as one item:
// the vectors of positions Start to Start+Count-1, each Dims int8 values
// after a float32 scale (files.EncodeVectors; docs/files.md).
type VectorChunk struct {
	FileID, Set string
	Start       int
	Count       int
	Dims        int
	Data        []byte
}
