package localdynamo

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// queryKeys returns the sort keys a Query of partition pk answers (of the
// table, or of gsi1 when gsi), forward, following its pages.
func queryKeys(t testing.TB, db *dynamodb.Client, pk string, gsi bool) []string {
	t.Helper()
	in := &dynamodb.QueryInput{
		TableName:                 aws.String("main"),
		KeyConditionExpression:    aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(pk)},
	}
	attr := "sk"
	if gsi {
		in.IndexName, in.KeyConditionExpression, attr = aws.String("gsi1"), aws.String("gpk = :p"), "gsk"
	}
	var keys []string
	for {
		out, err := db.Query(ctx(), in)
		if err != nil {
			t.Fatalf("Query %s: %v", pk, err)
		}
		for _, it := range out.Items {
			keys = append(keys, it[attr].(*types.AttributeValueMemberS).Value)
		}
		if out.LastEvaluatedKey == nil {
			return keys
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// TestQuerySkipsWhatItFoundDeleted: a partition of 3,000 items all deleted
// but the last (an outbox lane's history) is walked once; the next Queries
// of it step over a handful of keys, not the 3,000 tombstones (before:
// every Query stepped over all of them, until a compaction dropped them).
// Items written again in the dead range, before or after what is left, are
// found at once.
func TestQuerySkipsWhatItFoundDeleted(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	const n = 3000
	put := func(sk string) {
		t.Helper()
		it := keyOf("lane", sk)
		it["gpk"], it["gsk"] = s("lane-ix"), s(sk)
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(sk string) {
		t.Helper()
		if _, err := e.db.DeleteItem(ctx(), &dynamodb.DeleteItemInput{TableName: aws.String("main"), Key: keyOf("lane", sk)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		put(fmt.Sprintf("e%05d", i))
	}
	for i := range n - 1 {
		del(fmt.Sprintf("e%05d", i))
	}
	last := fmt.Sprintf("e%05d", n-1)
	for _, gsi := range []bool{false, true} {
		pk := map[bool]string{false: "lane", true: "lane-ix"}[gsi]
		first := e.srv.stepped.Load()
		if got := queryKeys(t, e.db, pk, gsi); !slices.Equal(got, []string{last}) {
			t.Fatalf("gsi %v: got %v, want [%s]", gsi, got, last)
		}
		if walked := e.srv.stepped.Load() - first; walked < n-1 {
			t.Fatalf("gsi %v: the first Query stepped over %d keys, want the %d tombstones (the test measures nothing)", gsi, walked, n-1)
		}
		for range 3 {
			before := e.srv.stepped.Load()
			if got := queryKeys(t, e.db, pk, gsi); !slices.Equal(got, []string{last}) {
				t.Fatalf("gsi %v: got %v, want [%s]", gsi, got, last)
			}
			if walked := e.srv.stepped.Load() - before; walked > 4 {
				t.Fatalf("gsi %v: a Query stepped over %d keys, want at most 4", gsi, walked)
			}
		}
	}
	// Written again in the dead range: before, between and after.
	put("e00000")
	put("e01500")
	put("e99999")
	want := []string{"e00000", "e01500", last, "e99999"}
	for _, gsi := range []bool{false, true} {
		pk := map[bool]string{false: "lane", true: "lane-ix"}[gsi]
		if got := queryKeys(t, e.db, pk, gsi); !slices.Equal(got, want) {
			t.Fatalf("gsi %v: got %v, want %v", gsi, got, want)
		}
	}
	// A Scan learns nothing: its range spans partitions, which every write
	// would cut into pieces.
	e.srv.dead.ranges = nil
	if _, err := e.db.Scan(ctx(), &dynamodb.ScanInput{TableName: aws.String("main")}); err != nil {
		t.Fatal(err)
	}
	if len(e.srv.dead.ranges) != 0 {
		t.Fatalf("a Scan left dead ranges: %q", e.srv.dead.ranges)
	}
	// A Query starting inside a dead range (a key condition's bound).
	out, err := e.db.Query(ctx(), &dynamodb.QueryInput{
		TableName:                 aws.String("main"),
		KeyConditionExpression:    aws.String("pk = :p AND sk > :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("lane"), ":s": s("e00001")},
	})
	if err != nil || len(out.Items) != 3 {
		t.Fatalf("sk > e00001: %d items, %v; want 3", len(out.Items), err)
	}
}

// TestDeadRangesNeverHideAWrite: writers put a key of their own anywhere in
// a shared partition, Query it and must find it, then delete it, while
// readers Query the partition and its index all along (learning its dead
// ranges from snapshots taken before, during and after those writes). A
// range learned from a snapshot older than a write, or not cut by it, would
// hide the key from its writer's Query.
func TestDeadRangesNeverHideAWrite(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	// History: tombstones over the whole key space of the partition.
	for i := range 500 {
		it := keyOf("p", fmt.Sprintf("k%04d", i*20))
		it["gpk"], it["gsk"] = s("p-ix"), s(fmt.Sprintf("k%04d", i*20))
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: it}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.DeleteItem(ctx(), &dynamodb.DeleteItemInput{TableName: aws.String("main"), Key: keyOf("p", fmt.Sprintf("k%04d", i*20))}); err != nil {
			t.Fatal(err)
		}
	}
	const writers, rounds = 4, 150
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				queryKeys(t, e.db, map[int]string{0: "p", 1: "p-ix"}[r], r == 1)
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				sk := fmt.Sprintf("k%04d-w%d-%d", rand.IntN(10000), w, i)
				it := keyOf("p", sk)
				it["gpk"], it["gsk"] = s("p-ix"), s(sk)
				if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: it}); err != nil {
					errs <- err
					return
				}
				for _, gsi := range []bool{false, true} {
					if got := queryKeys(t, e.db, map[bool]string{false: "p", true: "p-ix"}[gsi], gsi); !slices.Contains(got, sk) {
						errs <- fmt.Errorf("writer %d: its item %s is missing from the Query (gsi %v) after its PutItem: %v", w, sk, gsi, got)
						return
					}
				}
				if _, err := e.db.DeleteItem(ctx(), &dynamodb.DeleteItemInput{TableName: aws.String("main"), Key: keyOf("p", sk)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestDeadRangeOfAnOlderSnapshot: a range found dead in a snapshot taken
// before a write is remembered only up to the key written (it may be live
// now), not at all after an unreadable write or too many writes; and a
// write cuts what is remembered.
func TestDeadRangeOfAnOlderSnapshot(t *testing.T) {
	e := openEnv(t, t.TempDir())
	start := func(d *deadRanges, lo string) string {
		snap, from, _ := d.snapshot(e.srv.db, []byte(lo), true)
		snap.Close()
		return string(from)
	}
	older := func(d *deadRanges, writes ...*writeSet) {
		snap, _, gen := d.snapshot(e.srv.db, []byte("a"), true)
		snap.Close()
		for _, ws := range writes {
			d.cut(ws)
		}
		d.learn([]byte("a"), []byte("z"), gen)
	}
	m := &writeSet{keys: [][]byte{[]byte("c"), []byte("m")}}
	d := &deadRanges{}
	older(d, &writeSet{keys: [][]byte{[]byte("0")}}, m)
	if got := start(d, "a"); got != "c" {
		t.Fatalf("learned over a write since the snapshot: a read from a starts at %q, want c", got)
	}
	if got := start(d, "p"); got != "" {
		t.Fatalf("a read from p starts at %q, want there", got)
	}
	for _, writes := range [][]*writeSet{{nil}, slices.Repeat([]*writeSet{{keys: [][]byte{[]byte("0")}}}, recentCuts)} {
		d := &deadRanges{}
		older(d, writes...)
		if len(d.ranges) != 0 {
			t.Fatalf("learned %q after %d writes since the snapshot (the last unreadable: %v)", d.ranges, len(writes), writes[len(writes)-1] == nil)
		}
	}
	d = &deadRanges{}
	older(d)
	d.cut(m)
	for lo, want := range map[string]string{"a": "c", "c": "", "d": "m", "m": "", "p": "z"} {
		if got := start(d, lo); got != want {
			t.Fatalf("after a write of c and m, a read from %s starts at %q, want %q", lo, got, want)
		}
	}
}

// TestQueryStopsAtItsLastKey: a Query whose sort key condition ends at a
// value (=, <=, BETWEEN) stops at the item holding that value, instead of
// stepping on over its older versions (a conversation's counter, updated
// on every message: 3,000 versions here) to the range's bound. The items
// answered are those of the range, whatever the condition.
func TestQueryStopsAtItsLastKey(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "main")
	for _, sk := range []string{"CONV", "CONV#N", "MSG#1"} {
		if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf("c", sk)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3000 {
		if _, err := e.db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
			TableName: aws.String("main"), Key: keyOf("c", "CONV#N"),
			UpdateExpression:          aws.String("ADD msgs :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		cond string
		vals map[string]types.AttributeValue
		want []string
	}{
		{"pk = :p AND sk BETWEEN :a AND :b", map[string]types.AttributeValue{":a": s("CONV"), ":b": s("CONV#N")}, []string{"CONV", "CONV#N"}},
		{"pk = :p AND sk = :a", map[string]types.AttributeValue{":a": s("CONV#N")}, []string{"CONV#N"}},
		{"pk = :p AND sk <= :a", map[string]types.AttributeValue{":a": s("CONV#N")}, []string{"CONV", "CONV#N"}},
		{"pk = :p AND sk <= :a", map[string]types.AttributeValue{":a": s("CONV#M")}, []string{"CONV"}},
		{"pk = :p AND sk BETWEEN :a AND :b", map[string]types.AttributeValue{":a": s("CONV#N"), ":b": s("MSG#1")}, []string{"CONV#N", "MSG#1"}},
	} {
		c.vals[":p"] = s("c")
		before := e.srv.stepped.Load()
		out, err := e.db.Query(ctx(), &dynamodb.QueryInput{TableName: aws.String("main"), KeyConditionExpression: aws.String(c.cond), ExpressionAttributeValues: c.vals})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range out.Items {
			got = append(got, it["sk"].(*types.AttributeValueMemberS).Value)
		}
		if !slices.Equal(got, c.want) || out.LastEvaluatedKey != nil {
			t.Fatalf("%s: got %v (LastEvaluatedKey %v), want %v", c.cond, got, out.LastEvaluatedKey, c.want)
		}
		if walked := e.srv.stepped.Load() - before; walked > 10 && slices.Contains(c.want, "CONV#N") && c.want[len(c.want)-1] == "CONV#N" {
			t.Fatalf("%s (want %v): stepped over %d keys, want at most 10 (not the counter's 3,000 versions)", c.cond, c.want, walked)
		}
	}
}
