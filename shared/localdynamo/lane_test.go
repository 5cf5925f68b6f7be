package localdynamo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/writelane"
)

// inProcess is a client calling srv in the caller's goroutine, its
// context included (as the local platform's client does).
func inProcess(srv *Server) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  aws.AnonymousCredentials{},
		BaseEndpoint: aws.String("http://dynamodb.local"),
		Retryer:      aws.NopRetryer{},
		HTTPClient: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, r)
			return rec.Result(), nil
		})},
	}, func(o *dynamodb.Options) {
		// The item operations on the in-process path (as the platform's),
		// unless PLATFORM_LOCAL_DYNAMO_HTTP is set.
		if os.Getenv("PLATFORM_LOCAL_DYNAMO_HTTP") == "" {
			o.APIOptions = append(o.APIOptions, srv.InProcess)
		}
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLaneReadsPastItsOwnWrite (shared/writelane): a DeleteItem of a lane
// calls its visible once the item is gone for reads, while its fsync is
// still held; a Query of the lane then answers at once without the item,
// while a Query of no lane or of another lane waits until the delete is
// durable; and a Query of the lane still waits for another writer's write
// in flight where it reads (nothing of others' not yet durable is
// answered).
func TestLaneReadsPastItsOwnWrite(t *testing.T) {
	h := openHeldSync(t)
	srv, armed, blocked, free := h.srv, &h.armed, h.blocked, h.free
	defer free()
	defer func() { free(); _ = srv.Close() }()
	db := inProcess(srv)
	createTable(t, db, "main")
	for _, k := range [][2]string{{"q", "1"}, {"q", "2"}, {"r", "1"}} {
		if _, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s(k[0]), "sk": s(k[1])}}); err != nil {
			t.Fatal(err)
		}
	}
	type answer struct {
		sks []string
		err error
	}
	query := func(c context.Context, pk string) chan answer {
		out := make(chan answer, 1)
		go func() {
			res, err := db.Query(c, &dynamodb.QueryInput{TableName: aws.String("main"), KeyConditionExpression: aws.String("pk = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(pk)}, ConsistentRead: aws.Bool(true)})
			a := answer{err: err}
			if err == nil {
				for _, it := range res.Items {
					a.sks = append(a.sks, it["sk"].(*types.AttributeValueMemberS).Value)
				}
			}
			out <- a
		}()
		return out
	}
	wait := func(ch chan answer, what string) answer {
		select {
		case a := <-ch:
			if a.err != nil {
				t.Fatalf("%s: %v", what, a.err)
			}
			return a
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not answer", what)
		}
		return answer{}
	}

	lane := writelane.New()
	visible := make(chan struct{})
	armed.Store(true)
	removed := make(chan error, 1)
	go func() {
		_, err := db.DeleteItem(writelane.Writing(ctx(), lane, func() { close(visible) }),
			&dynamodb.DeleteItemInput{TableName: aws.String("main"), Key: keyOf("q", "1")})
		removed <- err
	}()
	for _, ch := range []chan struct{}{visible, blocked} {
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatal("the lane's delete was never visible, or never reached its fsync")
		}
	}

	// Readers of no lane and of another lane wait for the delete's fsync.
	plain := query(ctx(), "q")
	other := query(writelane.Reading(ctx(), writelane.New()), "q")
	// The lane's own read does not, and no longer sees the item.
	if a := wait(query(writelane.Reading(ctx(), lane), "q"), "the lane's Query during its delete's fsync"); !slices.Equal(a.sks, []string{"2"}) {
		t.Fatalf("the lane's Query during its delete's fsync: %v, want [2]", a.sks)
	}

	// Another writer's write of q, in flight behind the held fsync: the
	// lane's read of q must wait for it now.
	put := make(chan error, 1)
	go func() {
		_, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s("q"), "sk": s("3")}})
		put <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		srv.durable.mu.Lock()
		n := len(srv.durable.pending)
		srv.durable.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other write never began")
		}
		time.Sleep(time.Millisecond)
	}
	laneAfterPut := query(writelane.Reading(ctx(), lane), "q")
	// The lane's read of another partition answers meanwhile.
	if a := wait(query(writelane.Reading(ctx(), lane), "r"), "the lane's Query of r"); !slices.Equal(a.sks, []string{"1"}) {
		t.Fatalf("the lane's Query of r: %v", a.sks)
	}
	select {
	case a := <-plain:
		t.Fatalf("a Query of no lane answered before the lane's delete was durable: %+v", a)
	case a := <-other:
		t.Fatalf("a Query of another lane answered before the lane's delete was durable: %+v", a)
	case a := <-laneAfterPut:
		t.Fatalf("the lane's Query answered before another writer's write was durable: %+v", a)
	case err := <-removed:
		t.Fatalf("the delete was answered before its fsync: %v", err)
	default:
	}

	free()
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ch   chan answer
		what string
	}{{plain, "the Query of no lane"}, {other, "the Query of another lane"}, {laneAfterPut, "the lane's Query after the put"}} {
		a := wait(c.ch, c.what)
		// Each answered once what it waited for was durable: without q/1;
		// the one begun after the put began has q/3.
		if slices.Contains(a.sks, "1") || c.ch == laneAfterPut && !slices.Equal(a.sks, []string{"2", "3"}) {
			t.Fatalf("%s: %v", c.what, a.sks)
		}
	}
}
