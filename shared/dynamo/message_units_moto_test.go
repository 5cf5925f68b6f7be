package dynamo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/platform"
)

// writeCount is what write requests asked DynamoDB to write, counted by a
// proxy in front of moto_server from the requests themselves (moto's own
// ConsumedCapacity is not sized as DynamoDB's): base-table items at 1x
// (one per PutItem, UpdateItem, DeleteItem, and per item of a
// BatchWriteItem or TransactWriteItems, a condition check included: it is
// billed as a write) and the index entries the puts create (a put item
// carrying gsi1pk or gsi2pk).
type writeCount struct {
	mu                     sync.Mutex
	items, entries, checks int
}

func (c *writeCount) add(target string, body []byte) {
	type av map[string]json.RawMessage
	type put struct{ Item av }
	var in struct {
		TransactItems []struct {
			Put                            *put
			Update, Delete, ConditionCheck *json.RawMessage
		}
		RequestItems map[string][]struct{ PutRequest *put }
		Item         av
	}
	_ = json.Unmarshal(body, &in)
	entries := func(it av) int {
		n := 0
		for _, k := range []string{"gsi1pk", "gsi2pk"} {
			if _, ok := it[k]; ok {
				n++
			}
		}
		return n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch target {
	case "PutItem":
		c.items++
		c.entries += entries(in.Item)
	case "UpdateItem", "DeleteItem":
		c.items++
	case "BatchWriteItem":
		for _, rs := range in.RequestItems {
			for _, r := range rs {
				c.items++
				if r.PutRequest != nil {
					c.entries += entries(r.PutRequest.Item)
				}
			}
		}
	case "TransactWriteItems":
		for _, t := range in.TransactItems {
			c.items++
			switch {
			case t.Put != nil:
				c.entries += entries(t.Put.Item)
			case t.ConditionCheck != nil:
				c.checks++
			}
		}
	}
}

func (c *writeCount) take() (items, entries, checks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	items, entries, checks = c.items, c.entries, c.checks
	c.items, c.entries, c.checks = 0, 0, 0
	return
}

// TestUserMessageWritesOnMoto: on the AWS code path (the SDK against
// moto_server), a user's message writes, in its transaction, 5 items (the
// message, its copy, its conversation's counter, its outbox entry, its
// usage count) and creates 2 index entries (the bot's messages list, the
// sweep index): the embedded DynamoDB's count of the same write
// (docs/data-model.md, "Items per message"; its message_created event has
// no item, derived from the message when read: before, 6 items and 3
// entries, the event and its entry in the bot's events list; before the
// author check became a read and the event's conversation list entry
// went: 7 items, one a condition check, and 4 entries). Its usage count's
// ADD holds the bot's invocation too (the delivery's, pre-paid: no item
// more). The delivery's write (the outbox entry's removal) is not counted
// here.
func TestUserMessageWritesOnMoto(t *testing.T) {
	target, err := url.Parse(mototest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	var count writeCount
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		count.add(strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810."), body)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	ctx := context.Background()
	if err := dynamo.EnsureTable(ctx, db, "units"); err != nil {
		t.Fatal(err)
	}
	s := dynamo.New(db, "units")
	bot, now := platform.NewID(platform.PrefixBot), platform.FormatTime(time.Now())
	c := platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: now, UpdatedAt: now, Channel: "c", Tags: map[string]string{}}
	if err := s.CreateConversation(ctx, bot, c); err != nil {
		t.Fatal(err)
	}
	u := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now, Tags: map[string]string{}}
	if err := s.CreateUser(ctx, bot, u); err != nil {
		t.Fatal(err)
	}
	count.take()
	for range 3 {
		m := platform.Message{ID: platform.NewID(platform.PrefixMessage), CreatedAt: now, UpdatedAt: now, Type: "text", Payload: []byte(`{"text":"hi"}`),
			Direction: "incoming", UserID: u.ID, ConversationID: c.ID, Tags: map[string]string{}}
		if err := s.CreateMessage(ctx, bot, m); err != nil {
			t.Fatal(err)
		}
		items, entries, checks := count.take()
		t.Logf("a user's message on moto: %d items written (%d condition checks), %d index entries created", items, checks, entries)
		if items != 5 || entries != 2 || checks != 0 {
			t.Errorf("a user's message writes %d items (%d condition checks) and %d index entries, want 5 (none) and 2", items, checks, entries)
		}
	}
}
