package localdynamo

import (
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

// Benchmarks of the store at several sizes. Cost must follow the work, not
// the data: compare the p50 of one size with the p50 of another.
//
//	go test -run '^$' -bench 'BenchmarkOps|BenchmarkRestart' -benchtime 2000x ./shared/localdynamo
//
// runs 1,000 and 100,000 items; LOCALDYNAMO_BENCH_SIZES=1000,100000,1000000
// adds the million (about 1 GB of data, a few minutes to load).

func benchSizes() []int {
	spec := os.Getenv("LOCALDYNAMO_BENCH_SIZES")
	if spec == "" {
		spec = "1000,100000"
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

const benchTable = `{"TableName":"bench","BillingMode":"PAY_PER_REQUEST",
 "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"},
  {"AttributeName":"g1pk","AttributeType":"S"},{"AttributeName":"g1sk","AttributeType":"S"},
  {"AttributeName":"g2pk","AttributeType":"S"},{"AttributeName":"g2sk","AttributeType":"S"}],
 "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],
 "GlobalSecondaryIndexes":[
  {"IndexName":"gsi1","KeySchema":[{"AttributeName":"g1pk","KeyType":"HASH"},{"AttributeName":"g1sk","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}},
  {"IndexName":"gsi2","KeySchema":[{"AttributeName":"g2pk","KeyType":"HASH"},{"AttributeName":"g2sk","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}]}`

// benchItem is item i of a table of n: ~1 KB, 100 items per partition
// (a conversation's messages), 100 per GSI partition.
func benchItem(i, n int) string {
	part := i / 100
	return fmt.Sprintf(`{"pk":{"S":"conv#%07d"},"sk":{"S":"msg#%07d"},"g1pk":{"S":"bot#%05d"},"g1sk":{"S":"%07d"},"g2pk":{"S":"tag#%05d"},"g2sk":{"S":"%07d"},"v":{"N":"%d"},"payload":{"S":"%s"}}`,
		part, i%100, i%max(1, n/100), i, (i*7)%max(1, n/100), i, i, strings.Repeat("x", 850))
}

// load fills the store directly (unsynced batches, then one flush): the
// benchmark measures operations, not loading.
func load(tb testing.TB, srv *Server, n int) {
	tb.Helper()
	if res := srv.serve("CreateTable", []byte(benchTable)); !res.ok() {
		tb.Fatalf("CreateTable: %s", res.body)
	}
	t := srv.tables["bench"]
	b := srv.db.NewBatch()
	for i := range n {
		it, err := decodeItem(wireItem{raw: []byte(benchItem(i, n))})
		if err != nil {
			tb.Fatal(err)
		}
		dk, _ := t.dataKey(it, false)
		if _, err := t.stage(b, dk, nil, it); err != nil {
			tb.Fatal(err)
		}
		if b.Count() > 20000 {
			if err := b.Commit(pebble.NoSync); err != nil {
				tb.Fatal(err)
			}
			b = srv.db.NewBatch()
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		tb.Fatal(err)
	}
	if err := srv.db.Flush(); err != nil {
		tb.Fatal(err)
	}
	// Measure the store as it runs, not in the middle of compacting the
	// bulk load: wait (at most 3 minutes) until no compaction is owed.
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m := srv.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Compact.EstimatedDebt == 0 {
			break
		}
	}
}

func call(tb testing.TB, h http.Handler, op, body string) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", targetPrefix+op)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		tb.Fatalf("%s: %d %s", op, w.Code, w.Body.String())
	}
}

// reportLatency records p50 and p99 of the timed calls.
func reportLatency(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	if len(d) == 0 {
		return
	}
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// uniq numbers new items across the runs of a benchmark.
var uniq atomic.Int64

func BenchmarkOps(b *testing.B) {
	for _, n := range benchSizes() {
		dir := b.TempDir()
		srv, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		load(b, srv, n)
		r := rand.New(rand.NewSource(1))
		parts := max(1, n/100)
		ops := []struct {
			name string
			op   string
			body func(i int) string
		}{
			{"GetItem", "GetItem", func(i int) string {
				j := r.Intn(n)
				return fmt.Sprintf(`{"TableName":"bench","Key":{"pk":{"S":"conv#%07d"},"sk":{"S":"msg#%07d"}}}`, j/100, j%100)
			}},
			{"PutItem", "PutItem", func(i int) string {
				return `{"TableName":"bench","Item":` + benchItem(int(uniq.Add(1))+4*n+20000000, n) + `}`
			}},
			{"UpdateItem", "UpdateItem", func(i int) string {
				j := r.Intn(n)
				return fmt.Sprintf(`{"TableName":"bench","Key":{"pk":{"S":"conv#%07d"},"sk":{"S":"msg#%07d"}},"UpdateExpression":"SET v = v + :one, g1sk = :s","ConditionExpression":"attribute_exists(pk)","ExpressionAttributeValues":{":one":{"N":"1"},":s":{"S":"u%07d"}}}`, j/100, j%100, i)
			}},
			{"TransactWrite4", "TransactWriteItems", func(i int) string {
				j := r.Intn(n - 4)
				var items []string
				for k := range 3 {
					items = append(items, fmt.Sprintf(`{"Update":{"TableName":"bench","Key":{"pk":{"S":"conv#%07d"},"sk":{"S":"msg#%07d"}},"UpdateExpression":"ADD v :one","ExpressionAttributeValues":{":one":{"N":"1"}}}}`, (j+k)/100, (j+k)%100))
				}
				items = append(items, fmt.Sprintf(`{"Put":{"TableName":"bench","Item":%s,"ConditionExpression":"attribute_not_exists(pk)"}}`, benchItem(int(uniq.Add(1))+4*n+10000000, n)))
				return `{"TransactItems":[` + strings.Join(items, ",") + `]}`
			}},
			{"QueryAsc20", "Query", func(i int) string {
				return fmt.Sprintf(`{"TableName":"bench","KeyConditionExpression":"pk = :p","ExpressionAttributeValues":{":p":{"S":"conv#%07d"}},"Limit":20}`, r.Intn(parts))
			}},
			{"QueryDesc20", "Query", func(i int) string {
				return fmt.Sprintf(`{"TableName":"bench","KeyConditionExpression":"pk = :p AND sk > :s","ExpressionAttributeValues":{":p":{"S":"conv#%07d"},":s":{"S":"msg#0000010"}},"Limit":20,"ScanIndexForward":false}`, r.Intn(parts))
			}},
			{"QueryGSI1_20", "Query", func(i int) string {
				return fmt.Sprintf(`{"TableName":"bench","IndexName":"gsi1","KeyConditionExpression":"g1pk = :p","ExpressionAttributeValues":{":p":{"S":"bot#%05d"}},"Limit":20}`, r.Intn(parts))
			}},
			{"QueryGSI2Desc20", "Query", func(i int) string {
				return fmt.Sprintf(`{"TableName":"bench","IndexName":"gsi2","KeyConditionExpression":"g2pk = :p","ExpressionAttributeValues":{":p":{"S":"tag#%05d"}},"Limit":20,"ScanIndexForward":false}`, r.Intn(parts))
			}},
		}
		for _, o := range ops {
			b.Run(fmt.Sprintf("items=%d/%s", n, o.name), func(b *testing.B) {
				d := make([]time.Duration, 0, b.N)
				for i := 0; i < b.N; i++ {
					body := o.body(i)
					start := time.Now()
					call(b, srv, o.op, body)
					d = append(d, time.Since(start))
				}
				reportLatency(b, d)
			})
		}
		b.Run(fmt.Sprintf("items=%d/PutItemParallel8", n), func(b *testing.B) {
			benchParallelPuts(b, srv, n, 8)
		})
		b.Run(fmt.Sprintf("items=%d/PutItemParallel1", n), func(b *testing.B) {
			benchParallelPuts(b, srv, n, 1)
		})
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchParallelPuts measures durable PutItem throughput with several clients.
func benchParallelPuts(b *testing.B, srv *Server, n, clients int) {
	var wg sync.WaitGroup
	per := (b.N + clients - 1) / clients
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				call(b, srv, "PutItem", `{"TableName":"bench","Item":`+benchItem(int(uniq.Add(1))+4*n+30000000, n)+`}`)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*clients)/time.Since(start).Seconds(), "writes/s")
}

// BenchmarkRestart measures the time from Open to the first answer of a
// store that was killed (not closed) after loading, and the heap in use.
func BenchmarkRestart(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			srv, err := Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			load(b, srv, n)
			// Unsynced writes in the WAL, as a kill -9 would leave them.
			for i := range 1000 {
				call(b, srv, "PutItem", `{"TableName":"bench","Item":`+benchItem(n+i, n)+`}`)
			}
			// Simulate kill -9: drop the server without closing the store
			// (the flock goes with a new descriptor; Pebble's own lock is
			// released by closing without flushing).
			_ = srv.db.Close()
			_ = srv.lock.Close()
			b.ResetTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				s2, err := Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				call(b, s2, "GetItem", `{"TableName":"bench","Key":{"pk":{"S":"conv#0000000"},"sk":{"S":"msg#0000001"}}}`)
				total += time.Since(start)
				b.StopTimer()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
				_ = s2.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "open-ms")
		})
	}
}
