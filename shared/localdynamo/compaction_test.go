package localdynamo

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files stay bounded by the live data: overwriting and deleting items
// leaves dead bytes that a compaction, triggered while running, reclaims.
func TestDeadBytesAreCompactedAway(t *testing.T) {
	dir := t.TempDir()
	srv, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if res := srv.serve("CreateTable", []byte(benchTable)); !res.ok() {
		t.Fatalf("%s", res.body)
	}
	const items = 1000
	r := rand.New(rand.NewSource(1))
	random := func() string { // 8 KB that does not compress
		b := make([]byte, 6*1024)
		r.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	write := func(round int) {
		for i := 0; i < items; i += 25 {
			var reqs []string
			for j := i; j < i+25; j++ {
				reqs = append(reqs, fmt.Sprintf(`{"PutRequest":{"Item":{"pk":{"S":"p%d"},"sk":{"S":"s"},"r":{"N":"%d"},"data":{"S":"%s"}}}}`, j, round, random()))
			}
			if res := srv.serve("BatchWriteItem", []byte(`{"RequestItems":{"bench":[`+strings.Join(reqs, ",")+`]}}`)); !res.ok() {
				t.Fatalf("%s", res.body)
			}
		}
	}
	for round := range 10 { // about 80 MB written, 8 MB live
		write(round)
	}
	if err := srv.db.Flush(); err != nil {
		t.Fatal(err)
	}
	before := dirBytes(t, filepath.Join(dir, storeName))
	srv.maybeCompact()
	after := dirBytes(t, filepath.Join(dir, storeName))
	live := int64(items * 8 * 1024)
	t.Logf("store %d MiB before compaction, %d MiB after; live data %d MiB", before>>20, after>>20, live>>20)
	if after > 3*live {
		t.Fatalf("store holds %d bytes after compaction for %d live", after, live)
	}
	if srv.deadBytes.Load() >= 64<<20 {
		t.Fatalf("dead byte count not reset: %d", srv.deadBytes.Load())
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if os.IsNotExist(err) {
			return nil // removed by a background compaction meanwhile
		}
		if err == nil && !info.IsDir() && !strings.HasSuffix(info.Name(), ".log") {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
