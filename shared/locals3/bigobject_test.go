package locals3

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const bigObjectSize = 50 << 20

// patternReader yields size deterministic bytes without holding them: a
// seekable upload body that costs no memory.
type patternReader struct{ size, off int64 }

func patternByte(i int64) byte { return byte(i*31 + i>>13) }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), p.size-p.off))
	for i := range n {
		b[i] = patternByte(p.off + int64(i))
	}
	p.off += int64(n)
	return n, nil
}

func (p *patternReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += p.off
	case io.SeekEnd:
		offset += p.size
	}
	if offset < 0 {
		return 0, errors.New("negative seek")
	}
	p.off = offset
	return offset, nil
}

// patternSum is the SHA-256 of the first size pattern bytes.
func patternSum(size int64) [32]byte {
	h := sha256.New()
	_, _ = io.CopyBuffer(h, &patternReader{size: size}, make([]byte, 64<<10))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// heapWatch samples the Go heap while a transfer runs.
type heapWatch struct {
	base     runtime.MemStats
	peak     uint64 // highest HeapInuse seen
	stop     chan struct{}
	done     sync.WaitGroup
	started  time.Time
	elapsed  time.Duration
	mu       sync.Mutex
	end      runtime.MemStats
	rssStart int64
}

func watchHeap() *heapWatch {
	runtime.GC()
	w := &heapWatch{stop: make(chan struct{}), rssStart: peakRSS()}
	runtime.ReadMemStats(&w.base)
	w.peak = w.base.HeapInuse
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				w.mu.Lock()
				w.peak = max(w.peak, ms.HeapInuse)
				w.mu.Unlock()
			}
		}
	}()
	w.started = time.Now()
	return w
}

// finish stops sampling and returns the peak growth of HeapInuse and the
// bytes allocated meanwhile.
func (w *heapWatch) finish() (peakGrowth, allocated uint64) {
	w.elapsed = time.Since(w.started)
	close(w.stop)
	w.done.Wait()
	runtime.ReadMemStats(&w.end)
	peak := max(w.peak, w.end.HeapInuse)
	if peak > w.base.HeapInuse {
		peakGrowth = peak - w.base.HeapInuse
	}
	return peakGrowth, w.end.TotalAlloc - w.base.TotalAlloc
}

// peakRSS is the process's peak resident set in bytes (Linux), or -1.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// Object bodies are streamed, not buffered: uploading and downloading a
// 50 MiB object (through the SDK, which sends aws-chunked bodies with a
// CRC32 trailer that are verified and spooled to a temporary file, and
// through presigned URLs, which stream straight to the object's file) grows
// the Go heap of the whole process (server and client) by far less than the
// object size.
func TestBigObjectStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 200 MiB")
	}
	env := newEnv(t, envConfig{})
	c := env.client(testSecret)
	presign := s3.NewPresignClient(c)
	ctx := context.Background()
	want := patternSum(bigObjectSize)
	const limit = 16 << 20

	check := func(t *testing.T, what string, w *heapWatch) {
		t.Helper()
		growth, allocated := w.finish()
		mibps := float64(bigObjectSize) / (1 << 20) / w.elapsed.Seconds()
		rss := ""
		if r := peakRSS(); r > 0 {
			rss = " peak RSS " + mib(uint64(r))
		}
		t.Logf("%-22s %6.0f MiB/s  heap-in-use peak growth %s  allocated %s%s", what, mibps, mib(growth), mib(allocated), rss)
		if growth > limit {
			t.Errorf("%s: heap in use grew by %s (limit %s) for a %s object", what, mib(growth), mib(limit), mib(bigObjectSize))
		}
	}
	verify := func(t *testing.T, body io.Reader) {
		t.Helper()
		h := sha256.New()
		n, err := io.CopyBuffer(h, body, make([]byte, 64<<10))
		if err != nil || n != bigObjectSize || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatalf("downloaded %d bytes (err %v), content mismatch %v", n, err, !bytes.Equal(h.Sum(nil), want[:]))
		}
	}

	t.Run("sdk", func(t *testing.T) {
		w := watchHeap()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(testBucket), Key: aws.String("big/sdk"), Body: &patternReader{size: bigObjectSize},
			ContentLength: aws.Int64(bigObjectSize), ContentType: aws.String("application/octet-stream"),
		}); err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		check(t, "SDK PutObject", w)

		w = watchHeap()
		get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big/sdk")})
		if err != nil {
			t.Fatalf("GetObject: %v", err)
		}
		verify(t, get.Body)
		get.Body.Close()
		check(t, "SDK GetObject", w)
	})

	t.Run("presigned", func(t *testing.T) {
		put, err := presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big/presigned")})
		if err != nil {
			t.Fatal(err)
		}
		w := watchHeap()
		req, _ := http.NewRequest(put.Method, put.URL, &patternReader{size: bigObjectSize})
		req.ContentLength = bigObjectSize
		resp, err := env.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("presigned PUT = %d", resp.StatusCode)
		}
		check(t, "presigned PUT", w)

		get, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big/presigned")})
		if err != nil {
			t.Fatal(err)
		}
		w = watchHeap()
		resp, err = env.http.Client().Get(get.URL)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("presigned GET = %d", resp.StatusCode)
		}
		verify(t, resp.Body)
		resp.Body.Close()
		check(t, "presigned GET", w)
	})

	// A ranged read near the end streams only the range.
	rng, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big/presigned"), Range: aws.String("bytes=52428700-")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rng.Body)
	rng.Body.Close()
	if len(got) != 100 || got[0] != patternByte(52428700) || got[99] != patternByte(bigObjectSize-1) {
		t.Fatalf("range: %d bytes", len(got))
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
