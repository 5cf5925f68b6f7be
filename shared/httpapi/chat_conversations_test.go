package httpapi_test

import (
	"fmt"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

func TestChatConversationLifecycle(t *testing.T) {
	f := newChatFixture(t)
	r := f.call("POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{"topic": "billing", "gone": ""}}, 201, "createConversation")
	id := r.Str("conversation.id")
	if r.Str("conversation.channel") != "web" || r.Str("conversation.integration") != "" || r.Body["conversation"].(map[string]any)["messageCount"] != float64(0) {
		t.Fatalf("created: %s", r.Raw)
	}
	tags := r.Body["conversation"].(map[string]any)["tags"].(map[string]any)
	if len(tags) != 1 || tags["topic"] != "billing" {
		t.Fatalf("an empty tag value is not stored: %s", r.Raw)
	}
	got := f.call("GET", "/v1/chat/conversations/"+id, nil, 200, "getConversation")
	if got.Str("conversation.createdAt") != r.Str("conversation.createdAt") || got.Str("conversation.id") != id {
		t.Fatalf("get: %s", got.Raw)
	}

	// Only passed tags change; an empty value removes a tag.
	time.Sleep(2 * time.Millisecond)
	u := f.call("PUT", "/v1/chat/conversations/"+id, map[string]any{"tags": map[string]string{"lang": "fr"}}, 200, "updateConversation")
	tags = u.Body["conversation"].(map[string]any)["tags"].(map[string]any)
	if len(tags) != 2 || tags["topic"] != "billing" || tags["lang"] != "fr" || u.Str("conversation.updatedAt") <= r.Str("conversation.updatedAt") {
		t.Fatalf("update adds: %s", u.Raw)
	}
	u = f.call("PUT", "/v1/chat/conversations/"+id, map[string]any{"tags": map[string]string{"topic": ""}}, 200, "updateConversation")
	tags = u.Body["conversation"].(map[string]any)["tags"].(map[string]any)
	if len(tags) != 1 || tags["lang"] != "fr" {
		t.Fatalf("update removes: %s", u.Raw)
	}
	same := f.call("PUT", "/v1/chat/conversations/"+id, map[string]any{}, 200, "updateConversation")
	if same.Str("conversation.updatedAt") != u.Str("conversation.updatedAt") {
		t.Fatalf("an empty update changed the conversation: %s", same.Raw)
	}
	// The index follows the tags.
	if l := f.call("GET", "/v1/chat/conversations?tags.topic=billing", nil, 200, "listConversations"); len(l.List("conversations")) != 0 {
		t.Fatalf("removed tag still indexed: %s", l.Raw)
	}
	if l := f.call("GET", "/v1/chat/conversations?tags.lang=fr", nil, 200, "listConversations"); !sameIDs(ids(l, "conversations"), []string{id}) {
		t.Fatalf("added tag not indexed: %s", l.Raw)
	}

	f.call("DELETE", "/v1/chat/conversations/"+id, nil, 200, "deleteConversation")
	f.call("GET", "/v1/chat/conversations/"+id, nil, 404, "")
	f.call("PUT", "/v1/chat/conversations/"+id, map[string]any{"tags": map[string]string{"a": "b"}}, 404, "")
	f.call("DELETE", "/v1/chat/conversations/"+id, nil, 404, "")
	if l := f.call("GET", "/v1/chat/conversations", nil, 200, "listConversations"); len(l.List("conversations")) != 0 {
		t.Fatalf("deleted conversation listed: %s", l.Raw)
	}
}

// convInfo is what the list tests know of a conversation.
type convInfo struct {
	id, createdAt, updatedAt, channel, integration string
	tags                                           map[string]string
	participants                                   map[string]bool
	messages                                       int64
}

// TestListConversationsFilters checks every query parameter of
// listConversations, alone and combined, against an oracle, paging with a
// small page size so that every page boundary is crossed.
func TestListConversationsFilters(t *testing.T) {
	f := newChatFixture(t)
	u1, u2 := f.user(nil), f.user(nil)
	var convs []*convInfo
	for i := 0; i < 12; i++ {
		channel := []string{"web", "sms", "web"}[i%3]
		tags := map[string]string{"kind": []string{"a", "b"}[i%2]}
		if i%4 == 0 {
			tags["vip"] = "yes"
		}
		headers := []string{}
		integration := ""
		if i%5 == 0 {
			integration = "telegram"
			headers = []string{"x-integration-alias", "telegram"}
		}
		r := f.Check(f.req("", "POST", "/v1/chat/conversations", map[string]any{"channel": channel, "tags": tags}, headers...), 201, "createConversation")
		stored := tags
		if integration != "" {
			// An integration's tags are stored (and seen by the bot) under its alias.
			stored = map[string]string{}
			for k, v := range tags {
				stored[integration+":"+k] = v
			}
		}
		c := &convInfo{id: r.Str("conversation.id"), createdAt: r.Str("conversation.createdAt"), updatedAt: r.Str("conversation.updatedAt"),
			channel: channel, integration: integration, tags: stored, participants: map[string]bool{}}
		if c.integration != r.Str("conversation.integration") {
			t.Fatalf("integration: %s", r.Raw)
		}
		convs = append(convs, c)
		time.Sleep(time.Millisecond)
	}
	for i, c := range convs {
		if i%2 == 0 {
			f.call("POST", "/v1/chat/conversations/"+c.id+"/participants", map[string]any{"userId": u1}, 200, "addParticipant")
			c.participants[u1] = true
		}
		if i%3 == 0 {
			f.call("POST", "/v1/chat/conversations/"+c.id+"/participants", map[string]any{"userId": u2}, 200, "addParticipant")
			c.participants[u2] = true
		}
		for j := 0; j < i%4; j++ {
			f.message(c.id, u1, nil)
			c.messages++
		}
	}
	// Update a few, so the order by update time differs from creation order.
	for _, i := range []int{7, 2, 9} {
		time.Sleep(time.Millisecond)
		r := f.call("PUT", "/v1/chat/conversations/"+convs[i].id, map[string]any{"tags": map[string]string{"touched": "1"}}, 200, "updateConversation")
		convs[i].updatedAt, convs[i].tags["touched"] = r.Str("conversation.updatedAt"), "1"
	}
	after, before := convs[3].createdAt, convs[8].createdAt

	type want func(c *convInfo) bool
	all := func(c *convInfo) bool { return true }
	for _, tc := range []struct {
		query string
		keep  want
	}{
		{"", all},
		{"tags.kind=a", func(c *convInfo) bool { return c.tags["kind"] == "a" }},
		{"tags.kind=a&tags.vip=yes", func(c *convInfo) bool { return c.tags["kind"] == "a" && c.tags["vip"] == "yes" }},
		{"tags[kind]=b", func(c *convInfo) bool { return c.tags["kind"] == "b" }},
		{"tags.kind=zzz", func(c *convInfo) bool { return false }},
		{"channel=web", func(c *convInfo) bool { return c.channel == "web" }},
		{"integrationName=telegram", func(c *convInfo) bool { return c.integration == "telegram" }},
		{"integrationName=telegram&channel=web", func(c *convInfo) bool { return c.integration == "telegram" && c.channel == "web" }},
		{"participantIds=" + u1, func(c *convInfo) bool { return c.participants[u1] }},
		{"participantIds=" + u1 + "&participantIds=" + u2, func(c *convInfo) bool { return c.participants[u1] && c.participants[u2] }},
		{"participantIds=" + u2 + "&tags.kind=b", func(c *convInfo) bool { return c.participants[u2] && c.tags["kind"] == "b" }},
		{"afterDate=" + url.QueryEscape(after), func(c *convInfo) bool { return c.createdAt >= after }},
		{"beforeDate=" + url.QueryEscape(before), func(c *convInfo) bool { return c.createdAt <= before }},
		{"afterDate=" + url.QueryEscape(after) + "&beforeDate=" + url.QueryEscape(before), func(c *convInfo) bool { return c.createdAt >= after && c.createdAt <= before }},
		{"afterDate=" + url.QueryEscape(after) + "&tags.kind=a", func(c *convInfo) bool { return c.createdAt >= after && c.tags["kind"] == "a" }},
		{"minMessageCount=2", func(c *convInfo) bool { return c.messages >= 2 }},
		{"maxMessageCount=1", func(c *convInfo) bool { return c.messages <= 1 }},
		{"minMessageCount=1&maxMessageCount=2&channel=web", func(c *convInfo) bool { return c.messages >= 1 && c.messages <= 2 && c.channel == "web" }},
	} {
		for _, order := range []struct{ field, dir string }{{"", ""}, {"createdAt", "asc"}, {"updatedAt", "desc"}, {"updatedAt", "asc"}} {
			q := tc.query
			if order.field != "" {
				q += "&sortField=" + order.field + "&sortDirection=" + order.dir
			}
			t.Run(q, func(t *testing.T) {
				var expect []*convInfo
				for _, c := range convs {
					if tc.keep(c) {
						expect = append(expect, c)
					}
				}
				sortKey := func(c *convInfo) string {
					if order.field == "updatedAt" {
						return c.updatedAt + "#" + c.id
					}
					return c.createdAt + "#" + c.id
				}
				sort.Slice(expect, func(i, j int) bool {
					if order.dir == "asc" {
						return sortKey(expect[i]) < sortKey(expect[j])
					}
					return sortKey(expect[i]) > sortKey(expect[j])
				})
				var wantIDs []string
				for _, c := range expect {
					wantIDs = append(wantIDs, c.id)
				}
				got, _ := f.listAll("/v1/chat/conversations?"+q, 2, "listConversations", "conversations")
				if !sameIDs(got, wantIDs) {
					t.Fatalf("got %v\nwant %v", got, wantIDs)
				}
			})
		}
	}
	// messageCount is reported, and pagination tokens are bound to their list.
	r := f.call("GET", "/v1/chat/conversations?pageSize=1", nil, 200, "listConversations")
	tok := r.Str("meta.nextToken")
	f.call("GET", "/v1/chat/conversations?channel=web&nextToken="+url.QueryEscape(tok), nil, 400, "")
	f.call("GET", "/v1/chat/conversations?nextToken=forged", nil, 400, "")
}

func TestGetOrCreateConversation(t *testing.T) {
	f := newChatFixture(t)
	goc := func(body map[string]any, status int) apitest.Response {
		t.Helper()
		return f.call("POST", "/v1/chat/conversations/get-or-create", body, status, "getOrCreateConversation")
	}
	created := func(r apitest.Response) bool {
		m, _ := r.Body["meta"].(map[string]any)
		return m["created"] == true
	}
	first := goc(map[string]any{"channel": "dm", "tags": map[string]string{"ext": "42"}}, 200)
	id := first.Str("conversation.id")
	if !created(first) {
		t.Fatalf("first call: %s", first.Raw)
	}
	again := goc(map[string]any{"channel": "dm", "tags": map[string]string{"ext": "42"}}, 200)
	if created(again) || again.Str("conversation.id") != id {
		t.Fatalf("second call: %s", again.Raw)
	}
	// Another channel is another conversation.
	if other := goc(map[string]any{"channel": "group", "tags": map[string]string{"ext": "42"}}, 200); !created(other) || other.Str("conversation.id") == id {
		t.Fatalf("other channel: %s", other.Raw)
	}
	// discriminateByTags: only those tags identify; the other tags of the
	// body are set on the conversation found.
	d := goc(map[string]any{"channel": "dm", "tags": map[string]string{"ext": "42", "name": "Ann"}, "discriminateByTags": []string{"ext"}}, 200)
	if created(d) || d.Str("conversation.id") != id || d.Str("conversation.tags.name") != "Ann" {
		t.Fatalf("discriminateByTags: %s", d.Raw)
	}
	f.call("GET", "/v1/chat/conversations/"+id, nil, 200, "getConversation")
	if g := f.call("GET", "/v1/chat/conversations/"+id, nil, 200, "getConversation"); g.Str("conversation.tags.name") != "Ann" {
		t.Fatalf("tags not updated: %s", g.Raw)
	}
	// Without discriminateByTags every tag of the body must match.
	if n := goc(map[string]any{"channel": "dm", "tags": map[string]string{"ext": "42", "name": "Bob"}}, 200); !created(n) {
		t.Fatalf("all tags discriminate by default: %s", n.Raw)
	}
	// A conversation made by createConversation is found too.
	made := f.conversation("dm", map[string]string{"ext": "7"})
	if g := goc(map[string]any{"channel": "dm", "tags": map[string]string{"ext": "7"}}, 200); created(g) || g.Str("conversation.id") != made {
		t.Fatalf("existing conversation not found: %s", g.Raw)
	}
	// A conversation whose tags changed no longer answers its old claim.
	f.call("PUT", "/v1/chat/conversations/"+made, map[string]any{"tags": map[string]string{"ext": "8"}}, 200, "updateConversation")
	if g := goc(map[string]any{"channel": "dm", "tags": map[string]string{"ext": "7"}}, 200); !created(g) || g.Str("conversation.id") == made {
		t.Fatalf("stale claim answered: %s", g.Raw)
	}
	// Bad input.
	goc(map[string]any{"channel": "dm", "tags": map[string]string{"ext": "1"}, "discriminateByTags": []string{"nope"}}, 400)
	goc(map[string]any{"tags": map[string]string{}}, 400)
	goc(map[string]any{"channel": "dm", "tags": map[string]string{"": "x"}}, 400)
}

// TestGetOrCreateConversationConcurrently: 50 parallel calls with the same
// tags make one conversation, and exactly one call says it created it.
func TestGetOrCreateConversationConcurrently(t *testing.T) {
	f := newChatFixture(t)
	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		idsSeen = map[string]int{}
		created int
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.req("", "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "dm", "tags": map[string]string{"ext": "same"}})
			if r.Status != 200 {
				t.Errorf("status %d: %s", r.Status, r.Raw)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			idsSeen[r.Str("conversation.id")]++
			if m, _ := r.Body["meta"].(map[string]any); m["created"] == true {
				created++
			}
		}()
	}
	wg.Wait()
	if len(idsSeen) != 1 || created != 1 {
		t.Fatalf("%d conversations, %d created: %v", len(idsSeen), created, idsSeen)
	}
	if l := f.call("GET", "/v1/chat/conversations?tags.ext=same", nil, 200, "listConversations"); len(l.List("conversations")) != 1 {
		t.Fatalf("listed: %s", l.Raw)
	}
}

// TestDeleteConversationCascades: a conversation's messages, participants,
// states and claims go with it, at once.
func TestDeleteConversationCascades(t *testing.T) {
	f := newChatFixture(t)
	u := f.user(nil)
	conv := f.call("POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "dm", "tags": map[string]string{"ext": "c1"}}, 200, "getOrCreateConversation").Str("conversation.id")
	keep := f.conversation("dm", map[string]string{"ext": "c2"})
	f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": u}, 200, "addParticipant")
	var msgs []string
	for i := 0; i < 5; i++ {
		msgs = append(msgs, f.message(conv, u, map[string]string{"seq": fmt.Sprint(i), "unique": "only-here"}))
	}
	kept := f.message(keep, u, map[string]string{"seq": "0"})
	f.call("POST", "/v1/chat/states/conversation/"+conv+"/convState", map[string]any{"payload": map[string]any{"a": 1}}, 200, "setState")

	f.call("DELETE", "/v1/chat/conversations/"+conv, nil, 200, "deleteConversation")
	for _, m := range msgs {
		f.call("GET", "/v1/chat/messages/"+m, nil, 404, "")
	}
	f.call("GET", "/v1/chat/messages?conversationId="+conv, nil, 404, "")
	if l := f.call("GET", "/v1/chat/messages", nil, 200, "listMessages"); !sameIDs(ids(l, "messages"), []string{kept}) {
		t.Fatalf("messages left: %s", l.Raw)
	}
	if l := f.call("GET", "/v1/chat/messages?tags.seq=0", nil, 200, "listMessages"); !sameIDs(ids(l, "messages"), []string{kept}) {
		t.Fatalf("message index left: %s", l.Raw)
	}
	if l := f.call("GET", "/v1/chat/tags/unique/values?type=message", nil, 200, "listTagValues"); len(l.List("tags")) != 0 {
		t.Fatalf("tag value left: %s", l.Raw)
	}
	f.call("GET", "/v1/chat/conversations/"+conv+"/participants/"+u, nil, 404, "")
	if l := f.call("GET", "/v1/chat/conversations?participantIds="+u, nil, 200, "listConversations"); len(l.List("conversations")) != 0 {
		t.Fatalf("participation left: %s", l.Raw)
	}
	f.call("GET", "/v1/chat/states/conversation/"+conv+"/convState", nil, 404, "")
	if g := f.call("POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "dm", "tags": map[string]string{"ext": "c1"}}, 200, "getOrCreateConversation"); g.Str("conversation.id") == conv {
		t.Fatalf("claim of a deleted conversation answered: %s", g.Raw)
	}
	// The user itself stays, with its other data.
	f.call("GET", "/v1/chat/users/"+u, nil, 200, "getUser")
	if g := f.call("GET", "/v1/chat/conversations/"+keep, nil, 200, "getConversation"); g.Body["conversation"].(map[string]any)["messageCount"] != float64(1) {
		t.Fatalf("other conversation: %s", g.Raw)
	}
}

// TestDeleteConversationWhileWriting deletes a conversation while messages
// and participants are being added to it: nothing written to it survives.
func TestDeleteConversationWhileWriting(t *testing.T) {
	f := newChatFixture(t)
	u := f.user(nil)
	conv := f.conversation("web", nil)
	for i := 0; i < 3; i++ {
		f.message(conv, u, nil)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		made []string
	)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := map[string]any{"conversationId": conv, "userId": u, "type": "text", "payload": map[string]any{}, "tags": map[string]string{"i": fmt.Sprint(i)}}
			r := f.req("", "POST", "/v1/chat/messages", body)
			switch r.Status {
			case 201:
				mu.Lock()
				made = append(made, r.Str("message.id"))
				mu.Unlock()
			case 404:
			default:
				t.Errorf("createMessage during deletion: %d %s", r.Status, r.Raw)
			}
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(5 * time.Millisecond)
		if r := f.req("", "DELETE", "/v1/chat/conversations/"+conv, nil); r.Status != 200 {
			t.Errorf("delete: %d %s", r.Status, r.Raw)
		}
	}()
	wg.Wait()
	for _, m := range made {
		f.call("GET", "/v1/chat/messages/"+m, nil, 404, "")
	}
	if l := f.call("GET", "/v1/chat/messages", nil, 200, "listMessages"); len(l.List("messages")) != 0 {
		t.Fatalf("messages survived the deletion: %s", l.Raw)
	}
}

func TestParticipants(t *testing.T) {
	f := newChatFixture(t)
	conv := f.conversation("web", nil)
	u1, u2, u3 := f.user(map[string]string{"n": "1"}), f.user(nil), f.user(nil)
	for _, u := range []string{u1, u2, u3, u1} { // adding twice is harmless
		r := f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": u}, 200, "addParticipant")
		if r.Str("participant.id") != u {
			t.Fatalf("addParticipant: %s", r.Raw)
		}
	}
	if g := f.call("GET", "/v1/chat/conversations/"+conv+"/participants/"+u1, nil, 200, "getParticipant"); g.Str("participant.tags.n") != "1" {
		t.Fatalf("getParticipant: %s", g.Raw)
	}
	all, _ := f.listAll("/v1/chat/conversations/"+conv+"/participants", 2, "listParticipants", "participants")
	if !sameIDs(all, []string{u1, u2, u3}) {
		t.Fatalf("listParticipants: %v", all)
	}
	if l := f.call("GET", "/v1/chat/users?conversationId="+conv+"&tags.n=1", nil, 200, "listUsers"); !sameIDs(ids(l, "users"), []string{u1}) {
		t.Fatalf("listUsers by conversation and tag: %s", l.Raw)
	}
	f.call("DELETE", "/v1/chat/conversations/"+conv+"/participants/"+u2, nil, 200, "removeParticipant")
	f.call("DELETE", "/v1/chat/conversations/"+conv+"/participants/"+u2, nil, 404, "")
	f.call("GET", "/v1/chat/conversations/"+conv+"/participants/"+u2, nil, 404, "")
	all, _ = f.listAll("/v1/chat/conversations/"+conv+"/participants", 10, "listParticipants", "participants")
	if !sameIDs(all, []string{u1, u3}) {
		t.Fatalf("after remove: %v", all)
	}
	// Unknown or malformed ids.
	f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": "user_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 404, "")
	f.call("POST", "/v1/chat/conversations/conv_01ARZ3NDEKTSV4RRFFQ69G5FAV/participants", map[string]any{"userId": u1}, 404, "")
	f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": "short"}, 400, "")
	f.call("GET", "/v1/chat/conversations/conv_01ARZ3NDEKTSV4RRFFQ69G5FAV/participants", nil, 404, "")
	// Deleting a user removes its participations.
	f.call("DELETE", "/v1/chat/users/"+u3, nil, 200, "deleteUser")
	all, _ = f.listAll("/v1/chat/conversations/"+conv+"/participants", 10, "listParticipants", "participants")
	if !sameIDs(all, []string{u1}) {
		t.Fatalf("after deleteUser: %v", all)
	}
	if l := f.call("GET", "/v1/chat/conversations?participantIds="+u3, nil, 200, "listConversations"); len(l.List("conversations")) != 0 {
		t.Fatalf("deleted user's participation indexed: %s", l.Raw)
	}
}
