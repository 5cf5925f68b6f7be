// Command kvbench compares the two ordered stores considered for the
// embedded DynamoDB (docs/embedded-dynamodb.md): durable 1 KB puts with 1
// and 8 writers over 200,000 preloaded keys, and random point reads.
// Its own module, so the platform does not depend on bbolt:
//
//	cd scripts/kvbench && go run .
package main

import (
	"fmt"
	"math/rand"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	bolt "go.etcd.io/bbolt"
)

const preload = 200000

func val() []byte { v := make([]byte, 1000); rand.Read(v); return v }

func run(name string, clients, n int, put func(k []byte) error) {
	var wg sync.WaitGroup
	start := time.Now()
	per := n / clients
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := put([]byte(fmt.Sprintf("k%02d%09d", c, rand.Intn(1<<30)))); err != nil {
					panic(err)
				}
			}
		}(c)
	}
	wg.Wait()
	fmt.Printf("%s clients=%d: %.0f durable puts/s\n", name, clients, float64(per*clients)/time.Since(start).Seconds())
}

func main() {
	v := val()
	dir, _ := os.MkdirTemp("", "kv")
	defer os.RemoveAll(dir)
	opts := &pebble.Options{MemTableSize: 16 << 20}
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir+"/pebble", opts)
	if err != nil {
		panic(err)
	}
	b := db.NewBatch()
	for i := 0; i < preload; i++ {
		b.Set([]byte(fmt.Sprintf("p%09d", i)), v, nil)
	}
	b.Commit(pebble.Sync)
	for _, c := range []int{1, 8} {
		run("pebble", c, 4000, func(k []byte) error { return db.Set(k, v, pebble.Sync) })
	}
	start := time.Now()
	for i := 0; i < 20000; i++ {
		c, cl, _ := db.Get([]byte(fmt.Sprintf("p%09d", rand.Intn(preload))))
		_ = c
		cl.Close()
	}
	fmt.Printf("pebble get: %.1f µs\n", float64(time.Since(start).Microseconds())/20000)
	db.Close()

	bdb, err := bolt.Open(dir+"/bolt.db", 0o600, nil)
	if err != nil {
		panic(err)
	}
	bdb.Update(func(tx *bolt.Tx) error {
		bk, _ := tx.CreateBucketIfNotExists([]byte("b"))
		for i := 0; i < preload; i++ {
			bk.Put([]byte(fmt.Sprintf("p%09d", i)), v)
		}
		return nil
	})
	for _, c := range []int{1, 8} {
		run("bbolt Update", c, 2000, func(k []byte) error {
			return bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put(k, v) })
		})
		run("bbolt Batch", c, 2000, func(k []byte) error {
			return bdb.Batch(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put(k, v) })
		})
	}
	start = time.Now()
	bdb.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("b"))
		for i := 0; i < 20000; i++ {
			_ = bk.Get([]byte(fmt.Sprintf("p%09d", rand.Intn(preload))))
		}
		return nil
	})
	fmt.Printf("bbolt get: %.1f µs\n", float64(time.Since(start).Microseconds())/20000)
}
