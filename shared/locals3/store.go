package locals3

import (
	"cmp"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"

	"github.com/botforge/platform/shared/fsutil"
)

// storeBackend is a gofakes3.Backend keeping every object in a file of its
// own, so that object bodies are streamed to and from disk and never held in
// memory. Layout under the store's root (Options.Dir/buckets):
//
//	<bucket>/.bucket.json          bucket record (creation time)
//	<bucket>/<h>.json              sidecar of the object whose key hashes to h:
//	                               key, metadata, size, MD5 and the data file's name
//	<bucket>/<h>-<random>.data     the object's bytes
//
// h is the hex SHA-256 of the key (truncated), so any key maps to a safe,
// fixed-length file name and keys like "a" and "a/b" do not collide as they
// would with one file per path.
//
// A PUT writes a new, uniquely named data file and fsyncs it and the
// directory; then, under the store lock, it writes the sidecar to a
// temporary file, fsyncs it, renames it over <h>.json (the commit point) and
// fsyncs the directory again before answering. A crash at any point leaves
// either the previous object or the new one; unreferenced data files and
// temporary sidecars are removed by the next Open. Readers open the data
// file named by the sidecar while holding the lock, and a replaced data file
// is only unlinked after the new sidecar is in place, so a GET racing an
// overwrite streams a consistent (old) object.
//
// The sidecars are also loaded into memory at Open (metadata only, not
// contents), which serves HEAD, listings and conditional writes.
//
// The backend also enforces MaxObjectSize (including on objects assembled
// by multipart uploads) and remembers what each successful write stored
// (size, and the content type after metadata merging) for Options.OnPut.
type storeBackend struct {
	root string // directory holding one directory per bucket
	tmp  string // scratch directory on the same file system
	now  func() time.Time
	log  *slog.Logger

	mu      sync.RWMutex
	buckets map[string]*bucketState

	record bool
	putsMu sync.Mutex
	puts   map[objectRef]PutObject
}

var _ gofakes3.Backend = (*storeBackend)(nil)

// objectRef identifies an object.
type objectRef struct{ bucket, key string }

type bucketState struct {
	created time.Time
	objects map[string]*objectMeta
}

// bucketRecord is the content of <bucket>/.bucket.json.
type bucketRecord struct {
	Created time.Time `json:"created"`
}

// objectMeta is the content of an object's sidecar.
type objectMeta struct {
	Key          string            `json:"key"`
	Data         string            `json:"data"` // data file name, in the bucket directory
	Size         int64             `json:"size"`
	MD5          []byte            `json:"md5"`
	LastModified time.Time         `json:"lastModified"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

const (
	bucketRecordName = ".bucket.json"
	sidecarExt       = ".json"
	dataExt          = ".data"
	tmpExt           = ".tmp"
	// copyBufferSize is the buffer used to stream bodies into data files.
	copyBufferSize = 256 << 10
)

// openStore loads the store under root, creating it if needed, and removes
// what interrupted writes left behind. The caller holds the directory lock.
func openStore(root, tmp string, now func() time.Time, log *slog.Logger) (*storeBackend, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	b := &storeBackend{root: root, tmp: tmp, now: now, log: log, buckets: map[string]*bucketState{}, puts: map[objectRef]PutObject{}}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		st, err := b.loadBucket(e.Name())
		if err != nil {
			return nil, err
		}
		b.buckets[e.Name()] = st
	}
	return b, nil
}

// loadBucket reads a bucket directory's sidecars and deletes its debris.
func (b *storeBackend) loadBucket(name string) (*bucketState, error) {
	dir := filepath.Join(b.root, name)
	st := &bucketState{objects: map[string]*objectMeta{}}
	if raw, err := os.ReadFile(filepath.Join(dir, bucketRecordName)); err == nil {
		var rec bucketRecord
		if err := json.Unmarshal(raw, &rec); err == nil {
			st.created = rec.Created
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if st.created.IsZero() {
		if fi, err := os.Stat(dir); err == nil {
			st.created = fi.ModTime()
		}
	}
	referenced := map[string]bool{}
	var data, debris []string
	for _, e := range entries {
		n := e.Name()
		switch {
		case e.IsDir() || n == bucketRecordName:
		case strings.HasSuffix(n, tmpExt):
			debris = append(debris, n)
		case strings.HasSuffix(n, dataExt):
			data = append(data, n)
		case strings.HasSuffix(n, sidecarExt):
			m, err := readSidecar(filepath.Join(dir, n))
			if err != nil {
				b.log.Warn("ignoring unreadable object record", "bucket", name, "file", n, "err", err)
				continue
			}
			fi, err := os.Stat(filepath.Join(dir, m.Data))
			if err != nil || fi.Size() != m.Size || m.Data != filepath.Base(m.Data) {
				b.log.Warn("ignoring object whose data file is missing or truncated", "bucket", name, "key", m.Key, "file", m.Data)
				continue
			}
			referenced[m.Data] = true
			st.objects[m.Key] = m
		}
	}
	for _, n := range data {
		if !referenced[n] {
			debris = append(debris, n)
		}
	}
	for _, n := range debris {
		_ = os.Remove(filepath.Join(dir, n))
	}
	return st, nil
}

func readSidecar(path string) (*objectMeta, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m objectMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m.Data == "" {
		return nil, errors.New("no data file")
	}
	return &m, nil
}

// keyHash is the file name stem of key's files.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

func randomSuffix() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// ListBuckets implements gofakes3.Backend.
func (b *storeBackend) ListBuckets() ([]gofakes3.BucketInfo, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]gofakes3.BucketInfo, 0, len(b.buckets))
	for name, st := range b.buckets {
		out = append(out, gofakes3.BucketInfo{Name: name, CreationDate: gofakes3.NewContentTime(st.created.UTC())})
	}
	slices.SortFunc(out, func(x, y gofakes3.BucketInfo) int { return cmp.Compare(x.Name, y.Name) })
	return out, nil
}

// ListBucket implements gofakes3.Backend, with marker pagination as s3bolt
// does it.
func (b *storeBackend) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	if prefix == nil {
		prefix = &gofakes3.Prefix{}
	}
	b.mu.RLock()
	st, ok := b.buckets[name]
	if !ok {
		b.mu.RUnlock()
		return nil, gofakes3.BucketNotFound(name)
	}
	type entry struct {
		key   string
		match gofakes3.PrefixMatch
		meta  objectMeta
	}
	var entries []entry
	for key, m := range st.objects {
		if page.HasMarker && key <= page.Marker {
			continue
		}
		var match gofakes3.PrefixMatch
		if prefix.Match(key, &match) {
			entries = append(entries, entry{key: key, match: match, meta: *m})
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(entries, func(x, y entry) int { return cmp.Compare(x.key, y.key) })

	objects := gofakes3.NewObjectList()
	var cnt int64
	var lastMatchedPart string
	for i, e := range entries {
		if e.match.CommonPrefix {
			if e.match.MatchedPart == lastMatchedPart {
				continue // rolled up into the prefix already emitted
			}
			objects.AddPrefix(e.match.MatchedPart)
			lastMatchedPart = e.match.MatchedPart
		} else {
			objects.Add(&gofakes3.Content{
				Key:          e.key,
				ETag:         gofakes3.FormatETag(e.meta.MD5),
				Size:         e.meta.Size,
				LastModified: gofakes3.NewContentTime(e.meta.LastModified.UTC()),
			})
		}
		cnt++
		if page.MaxKeys > 0 && cnt >= page.MaxKeys {
			// NextMarker must advance past every key rolled up into the
			// prefix just emitted, or the next page would emit it again.
			nextMarker := e.key
			for _, n := range entries[i+1:] {
				if n.match.CommonPrefix && n.match.MatchedPart == lastMatchedPart {
					nextMarker = n.key
					continue
				}
				objects.IsTruncated = true
				objects.NextMarker = nextMarker
				break
			}
			break
		}
	}
	return objects, nil
}

// CreateBucket implements gofakes3.Backend. The bucket directory is
// assembled in the scratch directory and renamed into place, so it appears
// complete or not at all.
func (b *storeBackend) CreateBucket(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.buckets[name]; ok {
		return gofakes3.ResourceError(gofakes3.ErrBucketAlreadyExists, name)
	}
	created := b.now()
	staging, err := os.MkdirTemp(b.tmp, "bucket-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging) // no-op once renamed
	raw, _ := json.Marshal(bucketRecord{Created: created})
	if err := writeFileSync(filepath.Join(staging, bucketRecordName), raw); err != nil {
		return err
	}
	if err := fsutil.SyncDir(staging); err != nil {
		return err
	}
	if err := os.Rename(staging, filepath.Join(b.root, name)); err != nil {
		return err
	}
	if err := fsutil.SyncDir(b.root); err != nil {
		return err
	}
	b.buckets[name] = &bucketState{created: created, objects: map[string]*objectMeta{}}
	return nil
}

// BucketExists implements gofakes3.Backend.
func (b *storeBackend) BucketExists(name string) (bool, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.buckets[name]
	return ok, nil
}

// DeleteBucket implements gofakes3.Backend.
func (b *storeBackend) DeleteBucket(name string) error {
	return b.deleteBucket(name, false)
}

// ForceDeleteBucket implements gofakes3.Backend.
func (b *storeBackend) ForceDeleteBucket(name string) error {
	return b.deleteBucket(name, true)
}

// deleteBucket moves the bucket directory out of the way (atomically) and
// then removes it.
func (b *storeBackend) deleteBucket(name string, force bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.buckets[name]
	if !ok {
		return gofakes3.BucketNotFound(name)
	}
	if !force && len(st.objects) > 0 {
		return gofakes3.ResourceError(gofakes3.ErrBucketNotEmpty, name)
	}
	trash := filepath.Join(b.tmp, "deleted-"+randomSuffix())
	if err := os.Rename(filepath.Join(b.root, name), trash); err != nil {
		return err
	}
	if err := fsutil.SyncDir(b.root); err != nil {
		return err
	}
	delete(b.buckets, name)
	_ = os.RemoveAll(trash)
	return nil
}

// lookup returns a copy of bucket/key's record. The caller holds b.mu.
func (b *storeBackend) lookup(bucket, key string) (*objectMeta, error) {
	st, ok := b.buckets[bucket]
	if !ok {
		return nil, gofakes3.BucketNotFound(bucket)
	}
	m, ok := st.objects[key]
	if !ok {
		return nil, gofakes3.KeyNotFound(key)
	}
	c := *m
	c.Metadata = maps.Clone(m.Metadata)
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	c.MD5 = slices.Clone(m.MD5)
	return &c, nil
}

// HeadObject implements gofakes3.Backend.
func (b *storeBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	b.mu.RLock()
	m, err := b.lookup(bucket, key)
	b.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return &gofakes3.Object{Name: key, Metadata: m.Metadata, Size: m.Size, Hash: m.MD5, Contents: io.NopCloser(strings.NewReader(""))}, nil
}

// GetObject implements gofakes3.Backend. Contents streams from the data
// file (a section of it for a range request).
func (b *storeBackend) GetObject(bucket, key string, rangeRequest *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	// Open under the lock: the data file a record names is only unlinked
	// after the record was replaced, which needs the write lock.
	b.mu.RLock()
	m, err := b.lookup(bucket, key)
	var f *os.File
	if err == nil {
		f, err = os.Open(filepath.Join(b.root, bucket, m.Data))
	}
	b.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	rng, err := rangeRequest.Range(m.Size)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	var contents io.ReadCloser = f
	if rng != nil {
		contents = sectionReadCloser{io.NewSectionReader(f, rng.Start, rng.Length), f}
	}
	return &gofakes3.Object{Name: key, Metadata: m.Metadata, Size: m.Size, Hash: m.MD5, Range: rng, Contents: contents}, nil
}

type sectionReadCloser struct {
	*io.SectionReader
	io.Closer
}

// PutObject implements gofakes3.Backend. input is streamed to disk.
func (b *storeBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	var res gofakes3.PutObjectResult
	if size > MaxObjectSize {
		return res, gofakes3.ErrorMessagef(gofakes3.ErrInvalidArgument,
			"Your proposed upload exceeds the maximum allowed size of %d bytes.", MaxObjectSize)
	}
	if meta == nil {
		meta = map[string]string{}
	}
	// Fail fast, before reading the body; checked again at commit.
	b.mu.RLock()
	_, err := b.checkPut(bucket, key, conditions)
	b.mu.RUnlock()
	if err != nil {
		return res, err
	}

	dir := filepath.Join(b.root, bucket)
	h := keyHash(key)
	dataName := h + "-" + randomSuffix() + dataExt
	dataPath := filepath.Join(dir, dataName)
	sum, err := writeData(dataPath, input, size)
	if err != nil {
		_ = os.Remove(dataPath)
		return res, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.Remove(dataPath)
		}
	}()
	// Make the data file's directory entry durable before any record can
	// point at it.
	if err := fsutil.SyncDir(dir); err != nil {
		return res, err
	}

	b.mu.Lock()
	old, err := b.checkPut(bucket, key, conditions)
	if err == nil {
		// The bucket may have been deleted (and recreated) meanwhile.
		_, err = os.Stat(dataPath)
	}
	if err != nil {
		b.mu.Unlock()
		return res, err
	}
	// Metadata not given by this write carries over from the object it
	// replaces (gofakes3.MergeMetadata, which s3bolt applied).
	if old != nil {
		for k, v := range old.Metadata {
			if _, ok := meta[k]; !ok {
				meta[k] = v
			}
		}
	}
	m := &objectMeta{Key: key, Data: dataName, Size: size, MD5: sum, LastModified: b.now(), Metadata: maps.Clone(meta)}
	renamed, err := b.writeSidecar(dir, h, m)
	if renamed {
		// The record on disk names the new data file now, even if making
		// the rename durable failed: keep memory in step with it.
		committed = true
		b.buckets[bucket].objects[key] = m
	}
	b.mu.Unlock()
	if err != nil {
		return res, err
	}

	if old != nil && old.Data != dataName {
		_ = os.Remove(filepath.Join(dir, old.Data))
	}
	if b.record {
		b.putsMu.Lock()
		b.puts[objectRef{bucket, key}] = PutObject{Bucket: bucket, Key: key, ContentType: meta["Content-Type"], Size: size}
		b.putsMu.Unlock()
	}
	return res, nil
}

// checkPut checks that bucket exists and conditions hold, and returns the
// object being replaced, if any. The caller holds b.mu.
func (b *storeBackend) checkPut(bucket, key string, conditions *gofakes3.PutConditions) (*objectMeta, error) {
	st, ok := b.buckets[bucket]
	if !ok {
		return nil, gofakes3.BucketNotFound(bucket)
	}
	old := st.objects[key]
	if conditions != nil {
		info := &gofakes3.ConditionalObjectInfo{}
		if old != nil {
			info.Exists, info.Hash = true, old.MD5
		}
		if err := gofakes3.CheckPutConditions(conditions, info); err != nil {
			return nil, err
		}
	}
	return old, nil
}

// writeData streams exactly size bytes of input into a new file at path,
// fsyncs it and returns the MD5 of the contents. input is read to EOF, so a
// verifying reader (gofakes3 checks Content-MD5 at EOF) reports mismatches.
func writeData(path string, input io.Reader, size int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hash := md5.New()
	n, err := io.CopyBuffer(io.MultiWriter(f, hash), io.LimitReader(input, size+1), make([]byte, copyBufferSize))
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, gofakes3.ErrIncompleteBody
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return hash.Sum(nil), nil
}

// writeSidecar durably replaces key's record with m: temporary file, fsync,
// rename, fsync of the directory. It reports whether the rename happened.
// The caller holds b.mu.
func (b *storeBackend) writeSidecar(dir, h string, m *objectMeta) (renamed bool, err error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	tmp := filepath.Join(dir, h+"-"+randomSuffix()+tmpExt)
	if err := writeFileSync(tmp, raw); err != nil {
		_ = os.Remove(tmp)
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, h+sidecarExt)); err != nil {
		_ = os.Remove(tmp)
		return false, err
	}
	return true, fsutil.SyncDir(dir)
}

// DeleteObject implements gofakes3.Backend. Deleting a missing key succeeds.
func (b *storeBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	var res gofakes3.ObjectDeleteResult
	b.mu.Lock()
	defer b.mu.Unlock()
	return res, b.deleteLocked(bucket, key)
}

// DeleteMulti implements gofakes3.Backend.
func (b *storeBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	var res gofakes3.MultiDeleteResult
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.buckets[bucket]; !ok {
		return res, gofakes3.BucketNotFound(bucket)
	}
	for _, key := range keys {
		if err := b.deleteLocked(bucket, key); err != nil {
			b.log.Error("delete object failed", "bucket", bucket, "key", key, "err", err)
			res.Error = append(res.Error, gofakes3.ErrorResult{Code: gofakes3.ErrInternal, Message: gofakes3.ErrInternal.Message(), Key: key})
			continue
		}
		res.Deleted = append(res.Deleted, gofakes3.ObjectID{Key: key})
	}
	return res, nil
}

// deleteLocked removes key's record (the commit point) and then its data.
// The caller holds b.mu.
func (b *storeBackend) deleteLocked(bucket, key string) error {
	st, ok := b.buckets[bucket]
	if !ok {
		return gofakes3.BucketNotFound(bucket)
	}
	m, ok := st.objects[key]
	if !ok {
		return nil
	}
	dir := filepath.Join(b.root, bucket)
	if err := os.Remove(filepath.Join(dir, keyHash(key)+sidecarExt)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return err
	}
	delete(st.objects, key)
	_ = os.Remove(filepath.Join(dir, m.Data))
	return nil
}

// CopyObject implements gofakes3.Backend by streaming the source through
// GetObject into PutObject.
func (b *storeBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	return gofakes3.CopyObject(b, srcBucket, srcKey, dstBucket, dstKey, meta)
}

// takePut returns and forgets what the latest write of bucket/key stored.
func (b *storeBackend) takePut(bucket, key string) (PutObject, bool) {
	b.putsMu.Lock()
	defer b.putsMu.Unlock()
	ref := objectRef{bucket, key}
	obj, ok := b.puts[ref]
	delete(b.puts, ref)
	return obj, ok
}

// writeFileSync creates path with data and fsyncs it.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
