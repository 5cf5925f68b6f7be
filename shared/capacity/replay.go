// Package capacity replays a load shape through the local platform and its
// embedded DynamoDB, which counts the capacity units each partition key
// takes (localdynamo.CountUnits), and turns what it counted into a
// capacity model of a deployment on AWS: the peak units per partition key
// at a given message rate, the rate at which the hottest key reaches
// DynamoDB's per-partition limit, the Lambda concurrency, and the cost per
// million messages at on-demand prices (prices.go). scripts/capacity is
// its command; docs/data-model.md ("Heat") reports its figures.
package capacity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/localdynamo"
)

// Shape is what a replay writes: Conversations spread evenly over Bots,
// each a user's conversation of Turns turns (the bot's message, then the
// user's answer: two messages, two deliveries), and TableQueries selective
// findTableRows calls on a table of TableRows rows of the first bot.
type Shape struct {
	Bots, Conversations, Turns int
	TableRows, TableQueries    int
	// Parallel is how many conversations are written at once (default 16).
	Parallel int
	// UserOnly: each turn is the user's message alone (delivered to the
	// bot as a message_created event), for the units of a user's message
	// and its delivery.
	UserOnly bool
	// AWS: the deliveries are made as the AWS build makes them (awspath.go:
	// the dispatcher function's handler fed the table's stream, a lease per
	// delivery, the sweep index as runtime.NewStore builds it from
	// PLATFORM_OUTBOX_SWEEP_INDEX: sparse by default), not as the local
	// platform does (one Exclusive dispatcher, no lease, the sparse sweep
	// index): what AWS bills.
	AWS bool
}

// Counted is what a replay counted.
type Counted struct {
	Shape      Shape
	Messages   int // messages written
	Deliveries int // deliveries made (events to bots, messages to channels)
	APICalls   int // calls of the platform's HTTP API while replaying
	// Units by partition key and by operation, while the messages were
	// written and delivered (the setup, and the table queries, apart).
	Usage localdynamo.Usage
	// TableQuery is the units of the table queries.
	TableQuery localdynamo.Usage
	Elapsed    time.Duration
}

// Replay runs shape through a fresh local platform in a temporary
// directory and returns what its DynamoDB counted.
func Replay(ctx context.Context, shape Shape) (Counted, error) {
	if shape.Bots < 1 || shape.Conversations < shape.Bots || shape.Turns < 1 {
		return Counted{}, fmt.Errorf("capacity: a shape needs bots >= 1, conversations >= bots and turns >= 1")
	}
	if shape.Parallel == 0 {
		shape.Parallel = 16
	}
	dir, err := os.MkdirTemp("", "capacity-")
	if err != nil {
		return Counted{}, err
	}
	defer os.RemoveAll(dir)
	open := local.Open
	if shape.AWS {
		open = local.OpenAWSDispatch
	}
	p, err := open(ctx, dir, "http://127.0.0.1:1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return Counted{}, err
	}
	defer p.Close()
	if p.Dynamo == nil {
		return Counted{}, fmt.Errorf("capacity: the platform is not on the embedded DynamoDB (PLATFORM_DYNAMODB_ENDPOINT is set)")
	}
	var stream *awsStream
	if shape.AWS {
		stream = startAWSStream(p)
		defer stream.close()
	}
	api := httptest.NewServer(p.Handler)
	defer api.Close()
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") }))
	defer bot.Close()
	var delivered atomic.Int64
	p.OnDelivery(func(_ context.Context, r delivery.Result) {
		if r.Outcome == delivery.Delivered {
			delivered.Add(1)
		}
	})
	c := &client{base: api.URL, token: p.FirstToken}

	// Setup, not counted: bots, their conversations (on the console's
	// emulator channel: a bot's message is delivered to it without a
	// network call) and users.
	ws, err := c.do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "capacity"})
	if err != nil {
		return Counted{}, err
	}
	type conv struct{ bot, id, user string }
	var convs []conv
	var bots []string
	for b := range shape.Bots {
		out, err := c.do("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": str(ws, "id")}, map[string]any{"name": fmt.Sprint("bot", b), "dev": true, "url": bot.URL})
		if err != nil {
			return Counted{}, err
		}
		bots = append(bots, str(out, "bot", "id"))
	}
	for i := range shape.Conversations {
		botID := bots[i%len(bots)]
		h := map[string]string{"x-bot-id": botID, "x-integration-alias": "emulator"}
		cv, err := c.do("POST", "/v1/chat/conversations", h, map[string]any{"channel": "channel", "tags": map[string]string{}})
		if err != nil {
			return Counted{}, err
		}
		u, err := c.do("POST", "/v1/chat/users", h, map[string]any{"tags": map[string]string{}})
		if err != nil {
			return Counted{}, err
		}
		convs = append(convs, conv{botID, str(cv, "conversation", "id"), str(u, "user", "id")})
	}

	// The load, counted.
	p.Dynamo.CountUnits(true)
	defer p.Dynamo.CountUnits(false)
	start := time.Now()
	c.calls.Store(0)
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, shape.Parallel)
		errMu sync.Mutex
		first error
	)
	for _, cv := range convs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for t := range shape.Turns {
				// The bot speaks (to the emulator), the user answers (to the bot).
				for _, m := range []struct {
					user  string
					alias bool
				}{{cv.bot, false}, {cv.user, true}}[b2i(shape.UserOnly):] {
					h := map[string]string{"x-bot-id": cv.bot}
					if m.alias {
						h["x-integration-alias"] = "emulator"
					}
					_, err := c.do("POST", "/v1/chat/messages", h, map[string]any{"conversationId": cv.id, "userId": m.user,
						"type": "text", "payload": map[string]any{"text": fmt.Sprint("turn ", t)}, "tags": map[string]string{}})
					if err != nil {
						errMu.Lock()
						first = err
						errMu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return Counted{}, first
	}
	calls := int(c.calls.Load())
	messages := (2 - b2i(shape.UserOnly)) * shape.Turns * shape.Conversations
	// Every message is delivered once; then the outbox is empty (the last
	// delivery's own writes follow its call).
	deadline := time.Now().Add(5 * time.Minute)
	for delivered.Load() < int64(messages) || !outboxEmpty(p) {
		if stream != nil && stream.err() != nil {
			return Counted{}, fmt.Errorf("capacity: a stream batch failed: %w", stream.err())
		}
		if time.Now().After(deadline) {
			return Counted{}, fmt.Errorf("capacity: %d of %d deliveries after 5 minutes", delivered.Load(), messages)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The last removal is visible before its units are recorded.
	if err := p.Dynamo.Settle(ctx); err != nil {
		return Counted{}, err
	}
	out := Counted{Shape: shape, Messages: messages, Deliveries: int(delivered.Load()), APICalls: calls,
		Usage: p.Dynamo.Usage(), Elapsed: time.Since(start)}

	if shape.TableQueries > 0 {
		if out.TableQuery, err = tableQueries(c, p.Dynamo, bots[0], shape); err != nil {
			return Counted{}, err
		}
	}
	return out, nil
}

// outboxEmpty tells whether no outbox entry is left (the table's outbox
// partitions, whether in the sweep index or not: it is sparse locally;
// no units counted).
func outboxEmpty(p *local.Platform) bool {
	pks, err := p.Dynamo.PartitionKeys(p.Env.Table, "OUTBOX#")
	if err != nil {
		return false
	}
	for _, pk := range pks {
		if dynamo.IsShard(pk) {
			return false
		}
	}
	return true
}

// tableQueries fills a table of the bot and counts the units of selective
// findTableRows calls on it.
func tableQueries(c *client, ddb *localdynamo.Server, botID string, shape Shape) (localdynamo.Usage, error) {
	h := map[string]string{"x-bot-id": botID}
	if _, err := c.do("POST", "/v1/tables", h, map[string]any{"name": "capacityTable",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}, "tag": map[string]any{"type": "string"}}}}); err != nil {
		return localdynamo.Usage{}, err
	}
	for i := 0; i < shape.TableRows; i += 100 {
		rows := []map[string]any{}
		for j := i; j < min(i+100, shape.TableRows); j++ {
			rows = append(rows, map[string]any{"n": j, "tag": fmt.Sprint("t", j%1000)})
		}
		if _, err := c.do("POST", "/v1/tables/capacityTable/rows", h, map[string]any{"rows": rows}); err != nil {
			return localdynamo.Usage{}, err
		}
	}
	ddb.CountUnits(true)
	defer ddb.CountUnits(false)
	for q := range shape.TableQueries {
		if _, err := c.do("POST", "/v1/tables/capacityTable/rows/find", h, map[string]any{"filter": map[string]any{"tag": fmt.Sprint("t", q%1000)}, "limit": 20}); err != nil {
			return localdynamo.Usage{}, err
		}
	}
	return ddb.Usage(), nil
}

// client calls the platform's API.
type client struct {
	base, token string
	calls       atomic.Int64
}

func (c *client) do(method, path string, hdr map[string]string, body any) (map[string]any, error) {
	c.calls.Add(1)
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &out)
	if res.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		mm, _ := v.(map[string]any)
		v = mm[k]
	}
	s, _ := v.(string)
	return s
}

// ids matches the platform's ids and the sweep index's bucket numbers, so
// that partition keys of the same kind read as one pattern.
var ids = regexp.MustCompile(`\b([a-z]+)_[0-9A-Za-z]{20,}|#[0-9]+$|^TOKEN#[0-9a-f]{64}$`)

// Pattern is the kind of a partition key: its ids replaced by <prefix>
// (OUTBOX#bot_01J...#conv_01J... reads OUTBOX#<bot>#<conv>, a token's
// item TOKEN#<hash>).
func Pattern(key string) string {
	return ids.ReplaceAllStringFunc(key, func(m string) string {
		switch {
		case strings.HasPrefix(m, "TOKEN#"):
			return "TOKEN#<hash>"
		case strings.HasPrefix(m, "#"):
			return "#<n>"
		}
		return "<" + m[:strings.Index(m, "_")] + ">"
	})
}

// KeyHeat is what one kind of partition key took.
type KeyHeat struct {
	Table    bool   // a base-table key (else an index's)
	Index    string // the index, for an index key
	Pattern  string
	Keys     int     // distinct keys of the pattern
	Write    float64 // write units, all keys
	Read     float64
	MaxWrite float64 // of the hottest key
	MaxRead  float64
	HotKey   string
}

// Heat groups the counted units by kind of partition key, hottest first.
func Heat(u localdynamo.Usage) []KeyHeat {
	by := map[string]*KeyHeat{}
	for p, units := range u.Partitions {
		pat := Pattern(p.Key)
		k := p.Index + " " + pat
		h := by[k]
		if h == nil {
			h = &KeyHeat{Table: p.Index == "", Index: p.Index, Pattern: pat}
			by[k] = h
		}
		h.Keys++
		h.Write += units.Write
		h.Read += units.Read
		if units.Write > h.MaxWrite {
			h.MaxWrite, h.HotKey = units.Write, p.Key
		}
		h.MaxRead = max(h.MaxRead, units.Read)
	}
	out := make([]KeyHeat, 0, len(by))
	for _, h := range by {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].MaxWrite != out[j].MaxWrite {
			return out[i].MaxWrite > out[j].MaxWrite
		}
		return out[i].Index+out[i].Pattern < out[j].Index+out[j].Pattern
	})
	return out
}

// Throughput writes messages users' messages spread over conversations
// conversations of one bot (each conversation's written one after the
// other, the conversations at once) on a fresh local platform, and returns
// how long it took from the first write until every message was delivered
// to the bot (which answers at once).
func Throughput(ctx context.Context, conversations, messages int) (time.Duration, error) {
	c, err := throughput(ctx, conversations, messages, false, false)
	return c.Elapsed, err
}

// OneBot is the one-bot load test: users' messages to one bot, over
// conversations conversations written at once, as fast as the local
// platform takes them, each delivered to the bot (which answers at once);
// it returns what the embedded DynamoDB counted and the time from the
// first write until every message was delivered (so Messages/Elapsed is
// the rate this machine sustains). With aws, the deliveries are made as
// the AWS build makes them (Shape.AWS, awspath.go: the dispatcher
// function's handler fed the table's stream, a lease per delivery, every
// outbox entry in the sweep index), not by the local platform's one
// Exclusive dispatcher.
func OneBot(ctx context.Context, conversations, messages int, aws bool) (Counted, error) {
	return throughput(ctx, conversations, messages, true, aws)
}

func throughput(ctx context.Context, conversations, messages int, count, aws bool) (Counted, error) {
	fail := func(err error) (Counted, error) { return Counted{}, err }
	dir, err := os.MkdirTemp("", "throughput-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	open := local.Open
	if aws {
		open = local.OpenAWSDispatch
	}
	p, err := open(ctx, dir, "http://127.0.0.1:1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return fail(err)
	}
	defer p.Close()
	var stream *awsStream
	if aws {
		if p.Dynamo == nil {
			return fail(fmt.Errorf("capacity: the platform is not on the embedded DynamoDB (PLATFORM_DYNAMODB_ENDPOINT is set)"))
		}
		stream = startAWSStream(p)
		defer stream.close()
	}
	api := httptest.NewServer(p.Handler)
	defer api.Close()
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") }))
	defer bot.Close()
	var delivered atomic.Int64
	all := make(chan struct{})
	p.OnDelivery(func(_ context.Context, r delivery.Result) {
		if r.Outcome == delivery.Delivered && delivered.Add(1) == int64(messages) {
			close(all)
		}
	})
	c := &client{base: api.URL, token: p.FirstToken}
	ws, err := c.do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "throughput"})
	if err != nil {
		return fail(err)
	}
	b, err := c.do("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": str(ws, "id")}, map[string]any{"name": "t", "dev": true, "url": bot.URL})
	if err != nil {
		return fail(err)
	}
	h := map[string]string{"x-bot-id": str(b, "bot", "id")}
	// A user per conversation (a message's write checks its author).
	var convs, users []string
	for range conversations {
		cv, err := c.do("POST", "/v1/chat/conversations", h, map[string]any{"channel": "web", "tags": map[string]string{}})
		if err != nil {
			return fail(err)
		}
		u, err := c.do("POST", "/v1/chat/users", h, map[string]any{"tags": map[string]string{}})
		if err != nil {
			return fail(err)
		}
		convs, users = append(convs, str(cv, "conversation", "id")), append(users, str(u, "user", "id"))
	}
	if count {
		p.Dynamo.CountUnits(true)
		defer p.Dynamo.CountUnits(false)
	}
	start := time.Now()
	errs := make(chan error, conversations)
	for i, cv := range convs {
		n := messages / conversations
		if i < messages%conversations {
			n++
		}
		go func() {
			for j := range n {
				if _, err := c.do("POST", "/v1/chat/messages", h, map[string]any{"conversationId": cv, "userId": users[i],
					"type": "text", "payload": map[string]any{"text": fmt.Sprint(j)}, "tags": map[string]string{}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range convs {
		if err := <-errs; err != nil {
			return fail(err)
		}
	}
	deadline := time.After(5 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-all:
			break wait
		case <-tick.C: // a failed stream batch ends the run
			if stream != nil && stream.err() != nil {
				return fail(fmt.Errorf("throughput: a stream batch failed: %w", stream.err()))
			}
		case <-deadline:
			return fail(fmt.Errorf("throughput: %d of %d delivered after 5 minutes", delivered.Load(), messages))
		}
	}
	out := Counted{Shape: Shape{Bots: 1, Conversations: conversations, Turns: max(1, messages/conversations), UserOnly: true, AWS: aws},
		Messages: messages, Deliveries: int(delivered.Load()), APICalls: messages, Elapsed: time.Since(start)}
	if count {
		// The last deliveries' own writes (their entries' removal) follow
		// their calls: wait for the outbox to be empty.
		for !outboxEmpty(p) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := p.Dynamo.Settle(ctx); err != nil { // the last removal's units
			return fail(err)
		}
		out.Usage = p.Dynamo.Usage()
	}
	return out, nil
}
