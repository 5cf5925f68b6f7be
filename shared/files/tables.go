package files

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/botforge/platform/shared/platform"
)

// Writer is what TableFiles needs of the file store: Records, and creating
// or replacing a file by key (the store's UpsertFile).
type Writer interface {
	Records
	UpsertFile(ctx context.Context, botID, key string, build func(old *platform.FileRecord) (platform.FileRecord, error)) (*platform.FileRecord, platform.FileRecord, error)
}

// MaxImportBytes bounds the file a table import reads into memory.
const MaxImportBytes = 64 << 20

// TableFiles is the Files API's side of table exports and imports
// (platform.TableFiles): an export becomes an ordinary file of the bot,
// stored and completed like an upload; an import reads an uploaded file of
// the bot.
type TableFiles struct {
	Store   Writer
	Objects platform.FileStorage
	Log     *slog.Logger
}

var _ platform.TableFiles = (*TableFiles)(nil)

// SaveTableExport stores content as the bot's file key (replacing any file
// of that key) and completes it before returning its id.
func (t *TableFiles) SaveTableExport(ctx context.Context, botID, key, contentType string, content []byte) (string, error) {
	if err := CheckKey(`export key`, key); err != nil {
		return "", err
	}
	old, rec, err := t.Store.UpsertFile(ctx, botID, key, func(old *platform.FileRecord) (platform.FileRecord, error) {
		ts := platform.Now()
		r := platform.FileRecord{
			File: platform.File{
				ID: platform.NewID(platform.PrefixFile), BotID: botID, Key: key, Size: int64(len(content)),
				ContentType: contentType, Tags: map[string]string{}, CreatedAt: ts, UpdatedAt: ts,
				AccessPolicies: []string{}, Status: platform.FileUploadPending, Owner: platform.FileOwner{Type: "bot", ID: botID},
			},
			Generation: platform.NewID(""),
		}
		if old != nil {
			r.ID, r.CreatedAt = old.ID, old.CreatedAt
		}
		return r, nil
	})
	if err != nil {
		return "", err
	}
	ctx = context.WithoutCancel(ctx)
	if old != nil {
		if err := t.Objects.Delete(ctx, old.ObjectKey()); err != nil && t.Log != nil {
			t.Log.WarnContext(ctx, "object of a replaced export not deleted", "file", old.ID, "err", err)
		}
		if old.PassageSet != "" {
			_ = t.Store.DeletePassageSet(ctx, old.ID, old.PassageSet)
		}
	}
	if err := t.Objects.Put(ctx, rec.ObjectKey(), contentType, bytes.NewReader(content), int64(len(content))); err != nil {
		return "", err
	}
	// Complete now rather than when the storage's event arrives (it then
	// finds nothing to do).
	c := &Completer{Records: t.Store, Objects: t.Objects, Log: t.Log}
	if err := c.ObjectCreated(ctx, rec.ObjectKey()); err != nil {
		return "", err
	}
	return rec.ID, nil
}

// ReadTableImport returns the content of an uploaded file of the bot.
func (t *TableFiles) ReadTableImport(ctx context.Context, botID, fileID string) ([]byte, string, error) {
	rec, err := t.Store.GetFile(ctx, fileID)
	if err == nil && rec.BotID != botID {
		err = platform.NotFound("file", fileID)
	}
	if err != nil {
		return nil, "", err
	}
	if Expired(rec.ExpiresAt, platform.Clock()) {
		return nil, "", platform.NotFound("file", fileID)
	}
	if rec.Checksum == "" || !rec.Status.Uploaded() {
		return nil, "", platform.Invalid("file %q has no uploaded content (status %s)", fileID, rec.Status)
	}
	if rec.Size > MaxImportBytes {
		return nil, "", platform.Errorf(platform.ErrPayloadTooLarge, "file %q is %d bytes; an import reads at most %d", fileID, rec.Size, MaxImportBytes)
	}
	rc, _, err := t.Objects.Open(ctx, rec.ObjectKey(), rec.ETag)
	if err != nil {
		return nil, "", fmt.Errorf("read file %s: %w", fileID, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxImportBytes+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(b)) != rec.Size {
		return nil, "", platform.Errorf(platform.ErrResourceLocked, "file %q changed while being read; try again", fileID)
	}
	return b, rec.ContentType, nil
}
