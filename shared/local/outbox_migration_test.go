package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/sdkhttp"
)

// eventLog is a fake bot recording the ids of the events it receives.
type eventLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *eventLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Event struct {
			ID string `json:"id"`
		} `json:"event"`
	}
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &body)
	l.mu.Lock()
	l.ids = append(l.ids, body.Event.ID)
	l.mu.Unlock()
	_, _ = io.WriteString(w, "{}")
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ids
	l.ids = nil
	return out
}

func (l *eventLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
	}
}

func openPlatform(t *testing.T, dir string) (*local.Platform, apiCall) {
	t.Helper()
	ctx := context.Background()
	p, err := local.Open(ctx, dir, "http://127.0.0.1:1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler)
	t.Cleanup(srv.Close)
	return p, caller(t, ctx, srv.URL, p.FirstToken) // the token of a fresh directory
}

// TestOutboxMigration: a data directory whose outbox is in the previous
// layout (every entry under OUTBOX, those due later under OUTBOX#LATER,
// one leased by the process that wrote it and died) is moved into the
// sharded layout at start: the entries due go out in their order with
// their event ids (at least once: they were delivered before), the one due
// later waits in its conversation's shard with its attempts kept, the old
// partitions are empty, and a second migration finds nothing to do.
func TestOutboxMigration(t *testing.T) {
	dir := t.TempDir()
	bot := &eventLog{}
	botSrv := httptest.NewServer(bot)
	defer botSrv.Close()

	// A platform writes a conversation of four messages, delivered.
	p, do := openPlatform(t, dir)
	ws := do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "mig"}, 200)["id"].(string)
	botID := do("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws},
		map[string]any{"name": "mig", "dev": true, "url": botSrv.URL}, 200)["bot"].(map[string]any)["id"].(string)
	hdr := map[string]string{"x-bot-id": botID}
	conv := do("POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}}, 201)["conversation"].(map[string]any)["id"].(string)
	user := do("POST", "/v1/chat/users", hdr, map[string]any{"tags": map[string]string{}}, 201)["user"].(map[string]any)["id"].(string)
	var msgs []string
	for i := range 4 {
		msgs = append(msgs, do("POST", "/v1/chat/messages", hdr, map[string]any{"conversationId": conv, "userId": user,
			"type": "text", "payload": map[string]any{"text": fmt.Sprint(i)}, "tags": map[string]string{}}, 201)["message"].(map[string]any)["id"].(string))
	}
	waitFor(t, "four deliveries", func() bool { return bot.count() == 4 })
	// The bot has them when it records the fourth, but the dispatcher
	// finishes that delivery (deletes its entry) only after the bot's
	// answer: closed before that, the entry stays and goes out again at the
	// next start (at least once), ahead of the entries written below in the
	// previous layout, whose ids are newer. Those entries stand for the
	// whole of the conversation's pending work, so the shard must be empty.
	ctx := context.Background()
	convShard := dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: conv})
	waitFor(t, "the conversation's outbox drained", func() bool {
		ds, _, err := p.Store.PendingDeliveries(ctx, convShard, "", 10)
		return err == nil && len(ds) == 0
	})
	events := bot.take()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	// The same deliveries as the previous layout held them, as if the
	// process had died before delivering them.
	ddb, err := localdynamo.Open(filepath.Join(dir, "dynamodb"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ddb)
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: sdkhttp.Client()})
	now := time.Now()
	old := func(pk, sk string, d platform.Delivery, lease int64) {
		doc, _ := json.Marshal(d)
		due, _ := time.Parse(platform.TimeFormat, d.DueAt)
		it := map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
			"doc":      &types.AttributeValueMemberS{Value: string(doc)},
			"dueAt":    &types.AttributeValueMemberN{Value: fmt.Sprint(due.UnixMilli())},
			"attempts": &types.AttributeValueMemberN{Value: fmt.Sprint(d.Attempts)},
			"gsi1pk":   &types.AttributeValueMemberS{Value: "BOT#" + botID + "#DLVS"}, "gsi1sk": &types.AttributeValueMemberS{Value: d.ID},
			"gsi2pk": &types.AttributeValueMemberS{Value: "BOT#" + botID + "#CONV#" + conv + "#DLVS"}, "gsi2sk": &types.AttributeValueMemberS{Value: d.ID},
		}
		if lease > 0 {
			it["lease"] = &types.AttributeValueMemberN{Value: fmt.Sprint(lease)}
		}
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("platform"), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	delivery := func(i int, due time.Time, attempts int) platform.Delivery {
		return platform.Delivery{ID: platform.NewID(dynamo.PrefixDelivery), Kind: platform.DeliverEvent, BotID: botID, ConversationID: conv,
			EventID: events[i], MessageID: msgs[i], CreatedAt: platform.FormatTime(now), DueAt: platform.FormatTime(due), Attempts: attempts}
	}
	for i := range 3 {
		d := delivery(i, now, 0)
		lease := int64(0)
		if i == 0 {
			lease = now.Add(time.Hour).UnixMilli() // held by the dead process
		}
		old("OUTBOX", d.ID, d, lease)
	}
	due := delivery(3, now.Add(-time.Second), 0) // came due while the platform was down
	old("OUTBOX#LATER", fmt.Sprintf("%013d#%s", now.Add(-time.Second).UnixMilli(), due.ID), due, 0)
	later := delivery(0, now.Add(time.Hour), 2)
	old("OUTBOX#LATER", fmt.Sprintf("%013d#%s", now.Add(time.Hour).UnixMilli(), later.ID), later, 0)
	hs.Close()
	if err := ddb.Close(); err != nil {
		t.Fatal(err)
	}

	// Started again: migrated, then delivered.
	p, _ = openPlatform(t, dir)
	defer p.Close()
	waitFor(t, "the four entries due", func() bool { return bot.count() >= 4 })
	if got := bot.take(); !slices.Equal(got, events) {
		t.Fatalf("delivered after the migration: %v, want %v (the conversation's order, the same event ids)", got, events)
	}
	shard := dynamo.Shard(later)
	waitFor(t, "the shard holds only the entry due later", func() bool {
		ds, _, err := p.Store.PendingDeliveries(ctx, shard, "", 10)
		return err == nil && len(ds) == 1 && ds[0].ID == later.ID && ds[0].Attempts == 2 && ds[0].DueAt == later.DueAt
	})
	if n, err := p.Store.MigrateOutbox(ctx); err != nil || n != 0 {
		t.Fatalf("second migration: %d moved, %v", n, err)
	}
	if n := bot.count(); n != 0 {
		t.Fatalf("%d more deliveries: the entry due in an hour went out", n)
	}
}
