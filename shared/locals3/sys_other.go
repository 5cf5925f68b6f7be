//go:build !unix

package locals3

import (
	"os"
	"time"
)

// lockDir opens the lock file without locking it: cross-process locking is
// only implemented on Unix.
func lockDir(path string, _ time.Duration) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

func unlockDir(f *os.File) error { return f.Close() }

// syncDir is a no-op: directories cannot be fsynced on this platform.
func syncDir(string) error { return nil }
