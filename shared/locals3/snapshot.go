package locals3

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/botforge/platform/shared/fsutil"
)

// SnapshotStats counts what a snapshot holds.
type SnapshotStats struct {
	Buckets int
	Objects int
	Bytes   int64 // the objects' sizes
	// Paused is how long writes waited (the checkpoint of during included).
	Paused time.Duration
}

// Snapshot writes every bucket and object into dir (which must not exist;
// laid out as Options.Dir: dir/buckets/<bucket>/...) as of one instant:
// writes wait while it runs, reads go on. Data files are never changed once
// written (an overwrite writes a new one), so they are hard-linked when dir is
// on the same file system, and copied otherwise; sidecars are written anew
// from the records in memory, which are what the store answers.
//
// during, when set, runs at that same instant, before the copy: the platform
// checkpoints its DynamoDB there, so that the two stores are copied as of
// one moment (every object a record of the checkpoint names is in the
// snapshot, and no later write is).
func (s *Server) Snapshot(dir string, during func() error) (SnapshotStats, error) {
	var st SnapshotStats
	if s.closed.Load() {
		return st, errors.New("locals3: the server is closed")
	}
	type object struct {
		dir string
		m   objectMeta
	}
	var objects []object
	var dirs []string
	root := filepath.Join(dir, "buckets")
	// Writes wait for this part only: the records read and the data files
	// linked (a data file may be removed once a write replaces it). The
	// records are written and everything fsynced after.
	err := func() error {
		b := s.backend
		b.mu.RLock()
		start := time.Now()
		defer func() { st.Paused = time.Since(start); b.mu.RUnlock() }()
		if during != nil {
			if err := during(); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(root, 0o700); err != nil {
			return err
		}
		for name, bs := range b.buckets {
			src, dst := filepath.Join(b.root, name), filepath.Join(root, name)
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
			rec, _ := json.Marshal(bucketRecord{Created: bs.created})
			if err := writeFileSync(filepath.Join(dst, bucketRecordName), rec); err != nil {
				return err
			}
			dirs = append(dirs, dst)
			st.Buckets++
			for key, m := range bs.objects {
				if err := fsutil.LinkOrCopy(filepath.Join(src, m.Data), filepath.Join(dst, m.Data)); err != nil {
					return fmt.Errorf("%s/%s: %w", name, key, err)
				}
				objects = append(objects, object{dst, *m})
				st.Objects++
				st.Bytes += m.Size
			}
		}
		return nil
	}()
	if err != nil {
		return st, fmt.Errorf("locals3: snapshot: %w", err)
	}
	for _, o := range objects {
		raw, err := json.Marshal(&o.m)
		if err != nil {
			return st, err
		}
		if err := writeFileSync(filepath.Join(o.dir, keyHash(o.m.Key)+sidecarExt), raw); err != nil {
			return st, fmt.Errorf("locals3: snapshot: %w", err)
		}
	}
	for _, d := range dirs {
		if err := fsutil.SyncDir(d); err != nil {
			return st, err
		}
	}
	return st, fsutil.SyncDir(root)
}
