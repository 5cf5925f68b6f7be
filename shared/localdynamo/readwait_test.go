package localdynamo

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// heldSync is a store whose next log fsync, once armed, blocks until freed
// (its write is then visible, not yet durable); blocked is closed when it
// does.
type heldSync struct {
	srv              *Server
	armed            atomic.Bool
	blocked, release chan struct{}
	once             sync.Once
}

func openHeldSync(t *testing.T) *heldSync {
	t.Helper()
	h := &heldSync{blocked: make(chan struct{}), release: make(chan struct{})}
	srv, err := OpenWith(t.TempDir(), Options{beforeSync: func(name string) {
		if strings.HasSuffix(name, ".log") && h.armed.CompareAndSwap(true, false) {
			close(h.blocked)
			<-h.release
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	return h
}

func (h *heldSync) free() { h.once.Do(func() { close(h.release) }) }

// TestReadWaitsOnlyForWritesWhereItReads: a write is visible in the store
// before its fsync ends, so a read waits for the writes in flight it may
// have seen, and only for those: with a write of one item held in its
// fsync, a GetItem or Query of another item answers at once, while a
// GetItem and a Query of the item being written wait until it is durable,
// (before, every read waited for every write in flight: on a
// busy platform, a read paid for others' fsyncs).
func TestReadWaitsOnlyForWritesWhereItReads(t *testing.T) {
	h := openHeldSync(t)
	srv, armed, blocked, free := h.srv, &h.armed, h.blocked, h.free
	defer free()
	hs := httptest.NewServer(srv)
	defer func() { free(); hs.Close(); _ = srv.Close() }()
	db := clientFor(srv, hs.URL)
	createTable(t, db, "main")
	for _, pk := range []string{"x", "y"} {
		if _, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s(pk), "sk": s("a"), "v": n(1)}}); err != nil {
			t.Fatal(err)
		}
	}

	// y's new value, held in its fsync.
	armed.Store(true)
	written := make(chan error, 1)
	go func() {
		_, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s("y"), "sk": s("a"), "v": n(2)}})
		written <- err
	}()
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the write never reached its fsync")
	}
	// Reads of y, started now, must wait.
	type answer struct {
		v   string
		err error
	}
	readY := make(chan answer, 2)
	go func() {
		out, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("main"), Key: keyOf("y", "a"), ConsistentRead: aws.Bool(true)})
		a := answer{err: err}
		if err == nil {
			a.v = out.Item["v"].(*types.AttributeValueMemberN).Value
		}
		readY <- a
	}()
	go func() {
		out, err := db.Query(ctx(), &dynamodb.QueryInput{TableName: aws.String("main"), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("y")}})
		a := answer{err: err}
		if err == nil && len(out.Items) == 1 {
			a.v = out.Items[0]["v"].(*types.AttributeValueMemberN).Value
		}
		readY <- a
	}()

	// Reads of x answer while y's write is in flight.
	done := make(chan error, 1)
	go func() {
		if _, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String("main"), Key: keyOf("x", "a"), ConsistentRead: aws.Bool(true)}); err != nil {
			done <- err
			return
		}
		_, err := db.Query(ctx(), &dynamodb.QueryInput{TableName: aws.String("main"), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("x")}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a GetItem and a Query of another item waited for a write in flight")
	}
	select {
	case a := <-readY:
		t.Fatalf("a read of the item being written answered before its write was durable: %+v", a)
	case err := <-written:
		t.Fatalf("the write was answered before its fsync: %v", err)
	default:
	}

	free()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	// Each saw the value before the write or after it (whether it read
	// before the batch was applied), but only once it was durable.
	for range 2 {
		if a := <-readY; a.err != nil || a.v != "1" && a.v != "2" {
			t.Fatalf("a read of y: %+v", a)
		}
	}
	if v := getItem(t, db, "main", "y", "a")["v"].(*types.AttributeValueMemberN).Value; v != "2" {
		t.Fatalf("y after its write: v %s, want 2", v)
	}
}

// TestSettleWaitsForTheWriteUnderWay: a write is visible from its commit,
// a moment before its units are recorded (the capacity replay saw an
// outbox empty, then read the units without its last removal). Settle
// returns only once the write under way is done and counted.
func TestSettleWaitsForTheWriteUnderWay(t *testing.T) {
	h := openHeldSync(t)
	srv := h.srv
	defer h.free()
	hs := httptest.NewServer(srv)
	defer func() { h.free(); hs.Close(); _ = srv.Close() }()
	db := clientFor(srv, hs.URL)
	createTable(t, db, "main")
	srv.CountUnits(true)
	h.armed.Store(true)
	written := make(chan error, 1)
	go func() {
		_, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s("x"), "sk": s("a"), "v": n(1)}})
		written <- err
	}()
	select {
	case <-h.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the write never reached its fsync")
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Settle(short); err == nil {
		t.Fatal("Settle returned while a write was held in its fsync")
	}
	h.free()
	if err := srv.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := srv.Usage().Calls["PutItem"]; got != 1 {
		t.Errorf("after Settle, %d PutItem calls counted, want 1", got)
	}
	if w := srv.Usage().Total().Write; w < 1 {
		t.Errorf("after Settle, %v write units counted, want the PutItem's", w)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}
