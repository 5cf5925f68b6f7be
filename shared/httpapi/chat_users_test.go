package httpapi_test

import (
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestUsers(t *testing.T) {
	f := newChatFixture(t)
	r := f.call("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{"email": "a@x.io"}, "name": "Ann", "pictureUrl": "https://x.io/a.png"}, 201, "createUser")
	a := r.Str("user.id")
	if r.Str("user.name") != "Ann" || r.Str("user.tags.email") != "a@x.io" {
		t.Fatalf("createUser: %s", r.Raw)
	}
	time.Sleep(time.Millisecond)
	b := f.user(map[string]string{"email": "b@x.io", "team": "red"})
	time.Sleep(time.Millisecond)
	c := f.user(map[string]string{"team": "red"})
	if g := f.call("GET", "/v1/chat/users/"+a, nil, 200, "getUser"); g.Str("user.pictureUrl") != "https://x.io/a.png" {
		t.Fatalf("getUser: %s", g.Raw)
	}
	// Most recent first; filters.
	all, _ := f.listAll("/v1/chat/users", 2, "listUsers", "users")
	if !sameIDs(all, []string{c, b, a}) {
		t.Fatalf("listUsers: %v", all)
	}
	asc, _ := f.listAll("/v1/chat/users?sortDirection=asc", 2, "listUsers", "users")
	if !sameIDs(asc, []string{a, b, c}) {
		t.Fatalf("listUsers asc: %v", asc)
	}
	red, _ := f.listAll("/v1/chat/users?tags.team=red", 1, "listUsers", "users")
	if !sameIDs(red, []string{c, b}) {
		t.Fatalf("listUsers by tag: %v", red)
	}
	both, _ := f.listAll("/v1/chat/users?tags.team=red&tags.email=b%40x.io", 1, "listUsers", "users")
	if !sameIDs(both, []string{b}) {
		t.Fatalf("listUsers by two tags: %v", both)
	}
	since := url.QueryEscape(f.call("GET", "/v1/chat/users/"+b, nil, 200, "getUser").Str("user.createdAt"))
	if got, _ := f.listAll("/v1/chat/users?afterDate="+since, 5, "listUsers", "users"); !sameIDs(got, []string{c, b}) {
		t.Fatalf("afterDate: %v", got)
	}

	// Update: name null removes it; tags merge; updatedAt order follows.
	time.Sleep(time.Millisecond)
	u := f.call("PUT", "/v1/chat/users/"+a, map[string]any{"name": nil, "tags": map[string]string{"team": "blue"}}, 200, "updateUser")
	if _, ok := u.Body["user"].(map[string]any)["name"]; ok || u.Str("user.tags.team") != "blue" || u.Str("user.tags.email") != "a@x.io" {
		t.Fatalf("updateUser: %s", u.Raw)
	}
	if got, _ := f.listAll("/v1/chat/users?sortField=updatedAt", 5, "listUsers", "users"); got[0] != a {
		t.Fatalf("by updatedAt: %v", got)
	}
	if got, _ := f.listAll("/v1/chat/users?sortField=updatedAt&tags.team=blue", 5, "listUsers", "users"); !sameIDs(got, []string{a}) {
		t.Fatalf("by updatedAt and tag: %v", got)
	}
	if got, _ := f.listAll("/v1/chat/users?rangeField=updatedAt&afterDate="+url.QueryEscape(u.Str("user.updatedAt")), 5, "listUsers", "users"); !sameIDs(got, []string{a}) {
		t.Fatalf("rangeField updatedAt: %v", got)
	}

	// Delete: the user, its states and participations go.
	conv := f.conversation("web", nil)
	f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": b}, 200, "addParticipant")
	f.call("POST", "/v1/chat/states/user/"+b+"/userState", map[string]any{"payload": map[string]any{"x": 1}}, 200, "setState")
	f.call("DELETE", "/v1/chat/users/"+b, nil, 200, "deleteUser")
	f.call("GET", "/v1/chat/users/"+b, nil, 404, "")
	f.call("GET", "/v1/chat/states/user/"+b+"/userState", nil, 404, "")
	f.call("GET", "/v1/chat/conversations/"+conv+"/participants/"+b, nil, 404, "")
	f.call("DELETE", "/v1/chat/users/"+b, nil, 404, "")
	if got, _ := f.listAll("/v1/chat/users?tags.team=red", 5, "listUsers", "users"); !sameIDs(got, []string{c}) {
		t.Fatalf("deleted user listed: %v", got)
	}
}

func TestGetOrCreateUser(t *testing.T) {
	f := newChatFixture(t)
	goc := func(body map[string]any, headers ...string) (string, string) {
		t.Helper()
		r := f.Check(f.req("", "POST", "/v1/chat/users/get-or-create", body, headers...), 200, "getOrCreateUser")
		return r.Str("user.id"), r.Str("user.name")
	}
	a, _ := goc(map[string]any{"tags": map[string]string{"ext": "1"}, "name": "Ann"})
	if b, name := goc(map[string]any{"tags": map[string]string{"ext": "1"}, "name": "Annie"}); b != a || name != "Annie" {
		t.Fatalf("found user not updated: %s %s", b, name)
	}
	// Users belong to an integration: another integration's is another user.
	if b, _ := goc(map[string]any{"tags": map[string]string{"ext": "1"}}, "x-integration-alias", "telegram"); b == a {
		t.Fatal("user of another integration answered")
	}
	plain := f.user(map[string]string{"ext": "2", "other": "x"})
	if b, _ := goc(map[string]any{"tags": map[string]string{"ext": "2"}}); b != plain {
		t.Fatal("existing user not found by its tag")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.req("", "POST", "/v1/chat/users/get-or-create", map[string]any{"tags": map[string]string{"ext": "3"}})
			if r.Status != 200 {
				t.Errorf("%d %s", r.Status, r.Raw)
				return
			}
			mu.Lock()
			seen[r.Str("user.id")] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != 1 {
		t.Fatalf("%d users for one identity", len(seen))
	}
	f.call("POST", "/v1/chat/users/get-or-create", map[string]any{"tags": map[string]string{"ext": "1"}, "discriminateByTags": []string{"x"}}, 400, "")
	f.call("POST", "/v1/chat/users/get-or-create", map[string]any{}, 400, "")
}

func TestListTagValues(t *testing.T) {
	f := newChatFixture(t)
	for _, v := range []string{"red", "blue", "red", "green", "blue", "red"} {
		f.user(map[string]string{"color": v})
	}
	longValue := strings.Repeat("z", 450) // too long for a key: indexed by its hash
	f.user(map[string]string{"color": longValue})
	f.conversation("web", map[string]string{"color": "teal"})
	var values []string
	tok := ""
	for pages := 0; ; pages++ {
		p := "/v1/chat/tags/color/values?type=user&pageSize=2"
		if tok != "" {
			p += "&nextToken=" + url.QueryEscape(tok)
		}
		r := f.call("GET", p, nil, 200, "listTagValues")
		for _, v := range r.List("tags") {
			values = append(values, v.(map[string]any)["value"].(string))
		}
		if tok = r.Str("meta.nextToken"); tok == "" || pages > 10 {
			break
		}
	}
	if !sameIDs(values, []string{"blue", "green", "red", longValue}) {
		t.Fatalf("values: %q", values)
	}
	if r := f.call("GET", "/v1/chat/tags/color/values?type=conversation", nil, 200, "listTagValues"); len(r.List("tags")) != 1 {
		t.Fatalf("conversation values: %s", r.Raw)
	}
	f.call("GET", "/v1/chat/tags/color/values", nil, 400, "")
	f.call("GET", "/v1/chat/tags/color/values?type=bot", nil, 400, "")
}
