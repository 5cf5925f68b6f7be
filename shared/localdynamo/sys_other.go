//go:build !unix

package localdynamo

import (
	"errors"
	"fmt"
	"os"
)

// lockDir creates path exclusively. Without flock a crashed process leaves
// the file behind, and it must then be deleted by hand.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: %s exists (delete it if no process is using the directory)", ErrLocked, path)
		}
		return nil, fmt.Errorf("localdynamo: lock %s: %w", path, err)
	}
	return f, nil
}

// unlockDir releases a lock taken by lockDir.
func unlockDir(f *os.File) error {
	name := f.Name()
	err := f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// syncDir is a no-op where directories cannot be fsynced.
func syncDir(string) error { return nil }
