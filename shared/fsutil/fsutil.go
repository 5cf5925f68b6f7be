// Package fsutil holds the file-system helpers of the local platform's
// durable state.
package fsutil

import (
	"errors"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data durably: a private temp file,
// fsync, rename, then fsync of the directory, so a crash leaves either the
// old or the new content, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// ErrLocked is returned (wrapped) by LockDir when another process holds the lock.
var ErrLocked = errors.New("directory is locked")
