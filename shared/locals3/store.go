package locals3

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	bolt "go.etcd.io/bbolt"
	"gopkg.in/mgo.v2/bson"
)

// storeBackend wraps gofakes3's bbolt backend (s3bolt). It
//
//   - replaces the object reads: s3bolt decodes objects with mgo's bson,
//     whose []byte fields alias the bbolt value, and returns them after the
//     read transaction ended. bbolt only guarantees values while the
//     transaction is open; once a later write remaps the file or reuses the
//     pages, such a GET streams garbage or faults (SIGSEGV seen under -race
//     with CopyObject). Reads here copy what they return inside the
//     transaction, and HEAD does not decode the contents at all;
//   - enforces MaxObjectSize on objects assembled by multipart uploads;
//   - remembers what each successful write stored (size, and the content
//     type after gofakes3 merged metadata) for Options.OnPut.
type storeBackend struct {
	gofakes3.Backend // *s3bolt.Backend
	db               *bolt.DB

	record bool
	mu     sync.Mutex
	puts   map[objectRef]PutObject
}

// objectRef identifies an object.
type objectRef struct{ bucket, key string }

// storedObject mirrors s3bolt's value schema (backend/s3bolt/schema.go,
// boltObject); mgo's bson uses the lowercased field names.
type storedObject struct {
	Name         string            `bson:"name"`
	Metadata     map[string]string `bson:"metadata"`
	LastModified time.Time         `bson:"lastmodified"`
	Size         int64             `bson:"size"`
	Contents     []byte            `bson:"contents"`
	Hash         []byte            `bson:"hash"`
}

// storedObjectInfo is storedObject without the contents.
type storedObjectInfo struct {
	Metadata map[string]string `bson:"metadata"`
	Size     int64             `bson:"size"`
	Hash     []byte            `bson:"hash"`
}

// view runs fn with the stored value of bucket/key inside a read transaction.
func (b *storeBackend) view(bucket, key string, fn func(v []byte) error) error {
	return b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucket))
		if bk == nil {
			return gofakes3.BucketNotFound(bucket)
		}
		v := bk.Get([]byte(key))
		if v == nil {
			return gofakes3.KeyNotFound(key)
		}
		return fn(v)
	})
}

// GetObject implements gofakes3.Backend.
func (b *storeBackend) GetObject(bucket, key string, rangeRequest *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	var obj *gofakes3.Object
	err := b.view(bucket, key, func(v []byte) error {
		var o storedObject
		if err := bson.Unmarshal(v, &o); err != nil {
			return fmt.Errorf("locals3: decoding %s/%s: %w", bucket, key, err)
		}
		rng, err := rangeRequest.Range(o.Size)
		if err != nil {
			return err
		}
		data := o.Contents
		if rng != nil {
			data = data[rng.Start : rng.Start+rng.Length]
		}
		obj = &gofakes3.Object{
			Name:     key,
			Metadata: o.Metadata, // bson decodes strings into fresh memory
			Size:     o.Size,
			Contents: io.NopCloser(bytes.NewReader(bytes.Clone(data))),
			Range:    rng,
			Hash:     bytes.Clone(o.Hash),
		}
		return nil
	})
	return obj, err
}

// HeadObject implements gofakes3.Backend.
func (b *storeBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	var obj *gofakes3.Object
	err := b.view(bucket, key, func(v []byte) error {
		var o storedObjectInfo
		if err := bson.Unmarshal(v, &o); err != nil {
			return fmt.Errorf("locals3: decoding %s/%s: %w", bucket, key, err)
		}
		obj = &gofakes3.Object{
			Name:     key,
			Metadata: o.Metadata,
			Size:     o.Size,
			Contents: io.NopCloser(bytes.NewReader(nil)),
			Hash:     bytes.Clone(o.Hash),
		}
		return nil
	})
	return obj, err
}

// PutObject implements gofakes3.Backend.
func (b *storeBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	if size > MaxObjectSize {
		return gofakes3.PutObjectResult{}, gofakes3.ErrorMessagef(gofakes3.ErrInvalidArgument,
			"Your proposed upload exceeds the maximum allowed size of %d bytes.", MaxObjectSize)
	}
	// s3bolt commits (and bbolt fsyncs) before returning.
	res, err := b.Backend.PutObject(bucket, key, meta, input, size, conditions)
	if err == nil && b.record {
		b.mu.Lock()
		b.puts[objectRef{bucket, key}] = PutObject{Bucket: bucket, Key: key, ContentType: meta["Content-Type"], Size: size}
		b.mu.Unlock()
	}
	return res, err
}

// CopyObject implements gofakes3.Backend, reading and writing through the
// methods above (s3bolt's own CopyObject would bypass them).
func (b *storeBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	return gofakes3.CopyObject(b, srcBucket, srcKey, dstBucket, dstKey, meta)
}

// takePut returns and forgets what the latest write of bucket/key stored.
func (b *storeBackend) takePut(bucket, key string) (PutObject, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref := objectRef{bucket, key}
	obj, ok := b.puts[ref]
	delete(b.puts, ref)
	return obj, ok
}
