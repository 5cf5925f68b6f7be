package locals3

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// Objects returned by reads must not alias bbolt's memory map, which a later
// write may remap or reuse (s3bolt's own reads do alias it).
func TestReadsDoNotAliasTheMap(t *testing.T) {
	env := newEnv(t, envConfig{})
	b := env.srv.backend
	// A bucket holding more than a page is no longer stored inline, so its
	// values are read straight from the map.
	filler := strings.Repeat("F", 64<<10)
	if _, err := b.PutObject(testBucket, "big", map[string]string{}, strings.NewReader(filler), int64(len(filler)), nil); err != nil {
		t.Fatal(err)
	}
	small := []byte("small object that must stay intact")
	if _, err := b.PutObject(testBucket, "small", map[string]string{"Content-Type": "text/plain"}, bytes.NewReader(small), int64(len(small)), nil); err != nil {
		t.Fatal(err)
	}
	get, err := b.GetObject(testBucket, "small", nil)
	if err != nil {
		t.Fatal(err)
	}
	head, err := b.HeadObject(testBucket, "small")
	if err != nil {
		t.Fatal(err)
	}

	fi, err := os.Stat(filepath.Join(env.dir, "s3.db"))
	if err != nil {
		t.Fatal(err)
	}
	start := env.srv.db.Info().Data
	inMap := func(p []byte) bool {
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
		return addr >= start && addr < start+uintptr(fi.Size())
	}
	if inMap(get.Hash) || inMap(head.Hash) {
		t.Fatal("GetObject/HeadObject returned memory inside bbolt's mmap")
	}

	// Grow the file past the current mapping and overwrite the object; the
	// earlier read must be unaffected.
	big := strings.Repeat("B", 4<<20)
	if _, err := b.PutObject(testBucket, "big2", map[string]string{}, strings.NewReader(big), int64(len(big)), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		other := bytes.Repeat([]byte{byte('a' + i)}, len(small))
		if _, err := b.PutObject(testBucket, "small", map[string]string{}, bytes.NewReader(other), int64(len(other)), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := io.ReadAll(get.Contents)
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("contents after later writes = %q, %v", got, err)
	}
	if len(get.Hash) != 16 || !bytes.Equal(get.Hash, head.Hash) || head.Size != int64(len(small)) || head.Metadata["Content-Type"] != "text/plain" {
		t.Fatalf("metadata after later writes: get %x head %x size %d meta %v", get.Hash, head.Hash, head.Size, head.Metadata)
	}
}
