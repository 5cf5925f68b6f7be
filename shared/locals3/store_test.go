package locals3

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
)

// A GET that started before an overwrite (or a delete) keeps streaming the
// object it opened, intact.
func TestReadsSurviveOverwrites(t *testing.T) {
	env := newEnv(t, envConfig{})
	b := env.srv.backend
	small := []byte("small object that must stay intact")
	if _, err := b.PutObject(testBucket, "small", map[string]string{"Content-Type": "text/plain"}, bytes.NewReader(small), int64(len(small)), nil); err != nil {
		t.Fatal(err)
	}
	get, err := b.GetObject(testBucket, "small", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Contents.Close()
	head, err := b.HeadObject(testBucket, "small")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		other := bytes.Repeat([]byte{byte('a' + i)}, 3*len(small))
		if _, err := b.PutObject(testBucket, "small", map[string]string{}, bytes.NewReader(other), int64(len(other)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.DeleteObject(testBucket, "small"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(get.Contents)
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("contents after later writes = %q, %v", got, err)
	}
	if len(get.Hash) != 16 || !bytes.Equal(get.Hash, head.Hash) || head.Size != int64(len(small)) || head.Metadata["Content-Type"] != "text/plain" {
		t.Fatalf("metadata: get %x head %x size %d meta %v", get.Hash, head.Hash, head.Size, head.Metadata)
	}
}

// Keys that are prefixes of each other, or that are not valid file paths,
// are distinct objects.
func TestKeysAreNotPaths(t *testing.T) {
	env := newEnv(t, envConfig{})
	b := env.srv.backend
	keys := []string{"a", "a/b", "a/b/", "../x", "./a", "a//b", "/lead", "ünï cødé", strings.Repeat("k", 1024)}
	for _, k := range keys {
		if _, err := b.PutObject(testBucket, k, nil, strings.NewReader("v:"+k), int64(len("v:"+k)), nil); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}
	for _, k := range keys {
		obj, err := b.GetObject(testBucket, k, nil)
		if err != nil {
			t.Fatalf("get %q: %v", k, err)
		}
		got, _ := io.ReadAll(obj.Contents)
		_ = obj.Contents.Close()
		if string(got) != "v:"+k {
			t.Fatalf("get %q = %q", k, got)
		}
	}
	list, err := b.ListBucket(testBucket, nil, gofakes3.ListBucketPage{})
	if err != nil || len(list.Contents) != len(keys) {
		t.Fatalf("list: %d objects, %v", len(list.Contents), err)
	}
}

// Concurrent writers and readers of one key: every read sees one complete
// version.
func TestConcurrentOverwrites(t *testing.T) {
	env := newEnv(t, envConfig{})
	b := env.srv.backend
	const n = 8
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('A' + i)}, 64<<10) }
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := b.PutObject(testBucket, "hot", map[string]string{}, bytes.NewReader(body(i)), 64<<10, nil)
			errs <- err
		}()
		go func() {
			defer wg.Done()
			obj, err := b.GetObject(testBucket, "hot", nil)
			if err != nil {
				return // not written yet
			}
			defer obj.Contents.Close()
			got, err := io.ReadAll(obj.Contents)
			if err == nil && (len(got) != 64<<10 || !bytes.Equal(got, bytes.Repeat(got[:1], len(got)))) {
				err = io.ErrUnexpectedEOF
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Exactly one data file and one record remain for the key.
	entries, _ := os.ReadDir(filepath.Join(env.dir, "buckets", testBucket))
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if len(files) != 3 { // .bucket.json, <h>.json, <h>-<r>.data
		t.Fatalf("bucket directory holds %v", files)
	}
}

// Open removes what an interrupted write leaves behind (a data file no
// record points to, a temporary record), ignores a record whose data file is
// truncated, and starts despite an s3.db of the former bbolt store.
func TestOpenCleansUpAfterACrash(t *testing.T) {
	dir := t.TempDir()
	env := newEnv(t, envConfig{dir: dir})
	c := env.client(testSecret)
	ctx := context.Background()
	for _, k := range []string{"kept", "truncated"} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String(k), Body: strings.NewReader("contents of " + k)}); err != nil {
			t.Fatal(err)
		}
	}
	env.http.Close()
	if err := env.srv.Close(); err != nil {
		t.Fatal(err)
	}

	bdir := filepath.Join(dir, "buckets", testBucket)
	orphan := filepath.Join(bdir, keyHash("orphan")+"-0000000000000000"+dataExt)
	tmp := filepath.Join(bdir, keyHash("orphan")+"-0000000000000000"+tmpExt)
	for _, p := range []string{orphan, tmp} {
		if err := os.WriteFile(p, []byte("debris"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := readSidecar(filepath.Join(bdir, keyHash("truncated")+sidecarExt))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(bdir, m.Data), 3); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s3.db"), []byte("old bbolt file"), 0o600); err != nil {
		t.Fatal(err)
	}

	env2 := newEnv(t, envConfig{dir: dir})
	for _, p := range []string{orphan, tmp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", filepath.Base(p), err)
		}
	}
	c2 := env2.client(testSecret)
	get, err := c2.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("kept")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if string(got) != "contents of kept" {
		t.Fatalf("kept = %q", got)
	}
	if _, err := c2.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("truncated")}); httpStatus(err) != 404 {
		t.Fatalf("truncated object: %v", err)
	}
}

// A second Server cannot open a directory in use.
func TestDirIsLocked(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("no directory lock on Windows")
	}
	env := newEnv(t, envConfig{})
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 200 * time.Millisecond
	_, err := openWithLockTimeout(env.dir)
	if err == nil || !strings.Contains(err.Error(), "held by another") {
		t.Fatalf("second Open = %v", err)
	}
}

func openWithLockTimeout(dir string) (*Server, error) {
	srv, err := Open(Options{Dir: dir, Region: testRegion, AccessKeyID: testAccessKey, SecretAccessKey: testSecret})
	if err == nil {
		_ = srv.Close()
	}
	return srv, err
}
