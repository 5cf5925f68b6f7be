package localdynamo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/botforge/platform/shared/fsutil"
)

// migrateJournal moves the data of a directory written by the previous
// version (minidyn behind a journal of write requests) into the store: it
// replays every journaled request once, flushes, and removes the journal.
// A crash halfway leaves the journal in place and the store partly filled;
// the next Open starts over from an empty store.
func (s *Server) migrateJournal() error {
	path := filepath.Join(s.dir, journalName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("localdynamo: %w", err)
	}
	defer f.Close()
	if len(s.tables) > 0 {
		// An interrupted migration: start over.
		if err := s.reset(); err != nil {
			return err
		}
	}
	n := 0
	_, err = readJournal(f, func(r record) error {
		n++
		h, ok := handlers[r.op]
		if !ok {
			return fmt.Errorf("localdynamo: journal record %d: unknown operation %s", n, r.op)
		}
		// Failed requests were journaled when minidyn may have half-applied
		// them; this store applies a request whole or not at all, so their
		// outcome is ignored, as the old replay did.
		res := s.serveLocked(h, r.body)
		if r.flag == flagApplied && !res.ok() && r.op != "UpdateTimeToLive" {
			s.log.Warn("localdynamo: migrating the journal: a request the old store accepted was refused",
				"record", n, "op", r.op, "answer", string(res.body))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("localdynamo: migrate %s: %w", path, err)
	}
	if err := s.db.Flush(); err != nil {
		return err
	}
	for _, old := range []string{path, path + ".tmp", path + ".compact"} {
		if err := os.Remove(old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	s.log.Info("localdynamo: migrated the journal of the previous version", "records", n)
	return fsutil.SyncDir(s.dir)
}

// serveLocked runs a handler at open time (no other request can run).
func (s *Server) serveLocked(h handler, body []byte) response {
	return toResponse(h.fn(s, request{body: body}))
}

// reset empties the store.
func (s *Server) reset() error {
	if err := s.db.DeleteRange([]byte{0}, []byte{0xFF}, nil); err != nil {
		return err
	}
	s.tables = map[string]*tableDef{}
	return nil
}
