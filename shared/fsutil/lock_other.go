//go:build !unix

package fsutil

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// LockDir creates the lock file exclusively. Without flock a crashed process
// leaves the file behind, and it must then be deleted by hand.
func LockDir(path string, _ time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: %s exists (delete it if no process is using the directory)", ErrLocked, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// UnlockDir releases a lock taken by LockDir.
func UnlockDir(f *os.File) error {
	name := f.Name()
	err := f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// SyncDir is a no-op where directories cannot be fsynced.
func SyncDir(string) error { return nil }
