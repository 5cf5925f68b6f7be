package localdynamo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble"
)

// Checkpoint writes a consistent copy of the store into dir (which must not
// exist; it is laid out as the directory Open takes, without its LOCK), as of
// one instant, while the server goes on serving: every write answered before
// the call is in it, and a write is in it whole or not at all (Pebble's
// checkpoint: the immutable SSTables are hard-linked when dir is on the same
// file system, the WAL and MANIFEST copied, after a synced flush of the
// WAL). The copy opens as any store does, with no repair (shared/backup).
func (s *Server) Checkpoint(dir string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errors.New("localdynamo: the server is closed")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("localdynamo: checkpoint: %w", err)
	}
	if err := s.db.Checkpoint(filepath.Join(dir, storeName), pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("localdynamo: checkpoint: %w", err)
	}
	return nil
}
