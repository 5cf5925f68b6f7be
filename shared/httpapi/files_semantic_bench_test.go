package httpapi_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkFilesSemanticSearch measures semantic search through the local
// platform over 10,000 passages (20 files of 500) with 1536-dimension
// vectors (OpenAI text-embedding-3-small's size) from a fake model on
// loopback: indexing throughput (passages/s, including the model's JSON),
// then p50/p99 of searchFiles and the heap a query allocates.
func BenchmarkFilesSemanticSearch(b *testing.B) {
	const dims, nFiles, perFile = 1536, 20, 500
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := make([]datum, len(in.Input))
		for i, t := range in.Input {
			h := fnv.New64a()
			h.Write([]byte(t))
			rng := rand.New(rand.NewPCG(h.Sum64(), 1))
			v := make([]float32, dims)
			for j := range v {
				v[j] = float32(rng.NormFloat64())
			}
			out[i] = datum{i, v}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": out})
	}))
	defer up.Close()
	b.Setenv("PLATFORM_EMBEDDINGS_MODEL", "bench")
	b.Setenv("PLATFORM_EMBEDDINGS_URL", up.URL+"/v1")
	f := &filesFixture{fixture: newFixture(b)}
	f.bot = f.createBot(f.AdminToken, map[string]any{"name": "bench"})

	start := time.Now()
	for i := range nFiles {
		var sb strings.Builder
		for j := range perFile {
			fmt.Fprintf(&sb, "Passage %d of file %d: the quick brown fox %d jumps over the lazy dog %d.\n\n", j, i, i*perFile+j, j%37)
		}
		g := f.upload(fmt.Sprintf("f%02d.txt", i), []byte(sb.String()), map[string]any{"index": true})
		if g.Str("file.status") != "indexing_completed" {
			b.Fatalf("indexing: %s", g.Raw)
		}
	}
	indexing := time.Since(start)
	queries := []string{"quick fox", "lazy dog 12", "passage of file 3", "brown", "jumps over"}
	var lat []time.Duration
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		r := f.do("", "", "GET", "/v1/files/search?limit=10&query="+url.QueryEscape(queries[i%len(queries)]), nil)
		lat = append(lat, time.Since(t))
		if r.Status != 200 || len(r.List("passages")) != 10 {
			b.Fatalf("search: %d %s", r.Status, r.Raw)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(nFiles*perFile)/indexing.Seconds(), "indexed-passages/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/(1<<20), "MiB-alloc/query")
	b.ReportMetric(float64(ms1.HeapInuse)/(1<<20), "heap-inuse-MiB")
}
