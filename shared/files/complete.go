package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// Records is what upload completion and indexing need of the file store.
type Records interface {
	// GetFile reads a file by id, in any bot (a ResourceNotFound error
	// when missing).
	GetFile(ctx context.Context, id string) (platform.FileRecord, error)
	// UpdateFile applies mutate to the current record and writes it back
	// only if the record did not change meanwhile (retrying with a fresh
	// read otherwise); an error from mutate aborts the update.
	UpdateFile(ctx context.Context, id string, mutate func(*platform.FileRecord) error) (old, updated platform.FileRecord, err error)
	// PutPassages stores a passage set of a file and its search postings.
	PutPassages(ctx context.Context, f platform.FileRecord, set string, passages []platform.IndexedPassage, postings []platform.Posting) error
	// DeletePassageSet removes a passage set and its postings.
	DeletePassageSet(ctx context.Context, fileID, set string) error
}

// MaxIndexBytes bounds the content indexed (it is read into memory).
const MaxIndexBytes = 16 << 20

// IndexingStack is the indexingStack of files indexed here.
const IndexingStack = "v1"

// Completer completes uploads: it runs for every object created in the
// bucket (the S3 ObjectCreated event in AWS, the embedded S3's completed PUT
// locally, and copyFile), verifies the object against the file's current
// generation, records its SHA-256 and indexes it when asked.
type Completer struct {
	Records Records
	Objects platform.FileStorage
	Log     *slog.Logger
	// Semantic embeds the passages of indexed files (nil: lexical search
	// only).
	Semantic *Semantic
}

// errSuperseded aborts an update for a generation that is no longer current.
var errSuperseded = errors.New("generation superseded")

// ParseObjectKey splits an object key made by platform.FileObjectKey.
func ParseObjectKey(key string) (botID, fileID, generation string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "files" || parts[1] == "" || parts[2] == "" || parts[3] == "" {
		return "", "", "", false
	}
	return parts[1], parts[2], parts[3], true
}

func (c *Completer) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// ObjectCreated handles the creation (or overwrite) of the object at key.
// It is idempotent: a repeated event for unchanged bytes changes nothing,
// and an event for a superseded generation only deletes that generation's
// object. A returned error is worth retrying (storage or database failure).
func (c *Completer) ObjectCreated(ctx context.Context, key string) error {
	botID, fileID, gen, ok := ParseObjectKey(key)
	if !ok {
		c.log().WarnContext(ctx, "upload completion: not a file object, ignored", "key", key)
		return nil
	}
	rec, err := c.Records.GetFile(ctx, fileID)
	if platform.TypeOf(err) == platform.ErrResourceNotFound || (err == nil && (rec.BotID != botID || rec.Generation != gen)) {
		// The file was deleted, or upserted again since: this generation
		// is garbage.
		return c.dropObject(ctx, key)
	}
	if err != nil {
		return err
	}
	head, err := c.Objects.Head(ctx, key)
	if errors.Is(err, platform.ErrNoObject) {
		return nil // deleted meanwhile (a later upsert or a delete)
	}
	if err != nil {
		return err
	}
	if rec.ETag == head.ETag && rec.Status != platform.FileUploadPending {
		return nil // these bytes were already processed
	}

	res, err := c.inspect(ctx, rec, key, head.ETag)
	if errors.Is(err, platform.ErrObjectChanged) || errors.Is(err, platform.ErrNoObject) {
		return nil // overwritten or deleted while read: its own event follows
	}
	if err != nil {
		return err
	}
	var vectors []platform.VectorChunk
	if len(res.passages) > 0 && c.Semantic != nil {
		var eerr *EmbedError
		vectors, err = c.Semantic.Embed(ctx, fileID, res.set, res.passages)
		if errors.As(err, &eerr) {
			// The model failed (after its retries): the file says why, as
			// for any other indexing failure; the content stays servable.
			c.log().WarnContext(ctx, "indexing: embeddings failed", "file", fileID, "err", err)
			res.status, res.reason, res.set, res.passages, res.postings = platform.FileIndexingFailed, "indexing failed: "+eerr.Error(), "", nil, nil
		} else if err != nil {
			return err
		}
	}
	if res.passages != nil {
		if err := c.Records.PutPassages(ctx, rec, res.set, res.passages, res.postings); err != nil {
			return err
		}
	}
	if len(vectors) > 0 {
		if err := c.Semantic.Store.PutVectors(ctx, rec, vectors); err != nil {
			c.cleanupSet(ctx, fileID, res.set)
			return err
		}
	}
	old, _, err := c.Records.UpdateFile(ctx, fileID, func(r *platform.FileRecord) error {
		if r.Generation != gen {
			return errSuperseded
		}
		res.apply(r)
		return nil
	})
	if errors.Is(err, errSuperseded) || platform.TypeOf(err) == platform.ErrResourceNotFound {
		if res.set != "" {
			c.cleanupSet(ctx, fileID, res.set)
		}
		return c.dropObject(ctx, key)
	}
	if err != nil {
		if res.set != "" {
			c.cleanupSet(ctx, fileID, res.set)
		}
		return err
	}
	if old.PassageSet != "" && old.PassageSet != res.set {
		c.cleanupSet(ctx, fileID, old.PassageSet)
	}
	return nil
}

func (c *Completer) dropObject(ctx context.Context, key string) error {
	if err := c.Objects.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete superseded object %s: %w", key, err)
	}
	return nil
}

func (c *Completer) cleanupSet(ctx context.Context, fileID, set string) {
	if err := c.Records.DeletePassageSet(ctx, fileID, set); err != nil {
		c.log().WarnContext(ctx, "passage set cleanup failed (unreferenced, so harmless)", "file", fileID, "set", set, "err", err)
	}
}

// outcome is what inspecting an object concluded.
type outcome struct {
	status   platform.FileStatus
	reason   string
	checksum string
	etag     string
	set      string
	passages []platform.IndexedPassage
	postings []platform.Posting
}

func (o outcome) apply(r *platform.FileRecord) {
	r.Status, r.FailedStatusReason = o.status, o.reason
	r.ETag, r.Checksum = o.etag, o.checksum
	r.IndexingStack = ""
	if o.status == platform.FileUploadFailed {
		r.Checksum = "" // not servable
	}
	if o.status == platform.FileIndexingCompleted {
		r.IndexingStack = IndexingStack
		r.PassageSet, r.PassageCount = o.set, len(o.passages)
	} else {
		r.PassageSet, r.PassageCount = "", 0
	}
	r.UpdatedAt = platform.Now()
}

// inspect reads the object once: its SHA-256, its size, and when the file
// is to be indexed, its passages.
func (c *Completer) inspect(ctx context.Context, rec platform.FileRecord, key, etag string) (outcome, error) {
	rc, info, err := c.Objects.Open(ctx, key, etag)
	if err != nil {
		return outcome{}, err
	}
	defer rc.Close()
	h := sha256.New()
	w := io.Writer(h)
	var buf *cappedBuffer
	if rec.Index && Indexable(rec.ContentType) && rec.Size <= MaxIndexBytes {
		// Never more than the declared size is kept, whatever arrives.
		buf = &cappedBuffer{b: make([]byte, 0, rec.Size), max: int(rec.Size)}
		w = io.MultiWriter(h, buf)
	}
	n, err := io.Copy(w, rc)
	if err != nil {
		return outcome{}, fmt.Errorf("read object %s: %w", key, err)
	}
	o := outcome{etag: info.ETag, checksum: hex.EncodeToString(h.Sum(nil))}
	switch {
	case n != rec.Size:
		o.status = platform.FileUploadFailed
		o.reason = fmt.Sprintf("the uploaded content is %d bytes but the file was declared with size %d: upsert the file again with the right size", n, rec.Size)
	case !rec.Index:
		o.status = platform.FileUploadCompleted
	case !Indexable(rec.ContentType):
		o.status = platform.FileIndexingFailed
		o.reason = fmt.Sprintf("files of content type %q cannot be indexed: indexing supports plain text, Markdown, HTML, JSON, CSV and PDF", MediaType(rec.ContentType))
	case n > MaxIndexBytes:
		o.status = platform.FileIndexingFailed
		o.reason = fmt.Sprintf("files larger than %d MiB are not indexed", MaxIndexBytes>>20)
	default:
		o.status = platform.FileIndexingCompleted
		o.set = platform.NewID("")
		if err := o.index(rec, buf.b); err != nil {
			o.status, o.reason, o.set = platform.FileIndexingFailed, "indexing failed: "+err.Error(), ""
		}
	}
	return o, nil
}

func (o *outcome) index(rec platform.FileRecord, data []byte) error {
	blocks, err := Extract(rec.ContentType, data)
	if err != nil {
		return err
	}
	ps := Passages(o.set, blocks, ChunkingOf(rec.Indexing))
	if len(ps) > MaxPassages {
		return fmt.Errorf("the content yields %d passages, more than the %d a file may have", len(ps), MaxPassages)
	}
	o.passages, o.postings = ps, Postings(ps)
	if o.passages == nil {
		o.passages = []platform.IndexedPassage{}
	}
	return nil
}

// cappedBuffer keeps the first max bytes written to it and drops the rest.
type cappedBuffer struct {
	b   []byte
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
