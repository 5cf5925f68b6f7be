package localdynamo

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// benchKeys bounds the table size: minidyn re-sorts a table's keys on every
// insert of a new key, which would otherwise make the result depend on b.N.
const benchKeys = 1000

// BenchmarkParallelPutItem measures durable PutItem throughput with 1 to 64
// concurrent clients and how many fsyncs group commit needs per write.
// "sdk" goes through the AWS SDK and loopback HTTP like real clients;
// "handler" calls ServeHTTP directly, isolating minidyn plus the journal.
func BenchmarkParallelPutItem(b *testing.B) {
	for _, transport := range []string{"sdk", "handler"} {
		for _, clients := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", transport, clients), func(b *testing.B) {
				e := openEnv(b, b.TempDir())
				createTable(b, e.db, "main")
				put := func(i int64) error {
					key := fmt.Sprintf("k%06d", i%benchKeys)
					_, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
						Item: map[string]types.AttributeValue{"pk": s(key), "sk": s("x"), "gpk": s("g"), "gsk": s(key), "v": n(int(i))}})
					return err
				}
				if transport == "handler" {
					put = func(i int64) error {
						key := fmt.Sprintf("k%06d", i%benchKeys)
						body := fmt.Sprintf(`{"TableName":"main","Item":{"pk":{"S":%q},"sk":{"S":"x"},"gpk":{"S":"g"},"gsk":{"S":%q},"v":{"N":"%d"}}}`, key, key, i)
						req, _ := http.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
						req.Header.Set("X-Amz-Target", "DynamoDB_20120810.PutItem")
						var w recorder
						e.srv.ServeHTTP(&w, req)
						if r := w.response(); !r.ok() {
							return fmt.Errorf("PutItem: %d %s", r.status, r.body)
						}
						return nil
					}
				}
				records, syncs := e.srv.j.stats()
				var (
					next atomic.Int64
					wg   sync.WaitGroup
				)
				b.ResetTimer()
				start := time.Now()
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							if err := put(i); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				records2, syncs2 := e.srv.j.stats()
				if got := records2 - records; got != int64(b.N) {
					b.Fatalf("%d records journaled for %d writes", got, b.N)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
				b.ReportMetric(float64(syncs2-syncs)/float64(b.N), "fsyncs/op")
			})
		}
	}
}
