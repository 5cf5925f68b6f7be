package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/platform"
)

func TestFilesUpdateMetadata(t *testing.T) {
	f := newFilesFixture(t)
	content := []byte("abc")
	g := f.upload("m.txt", content, map[string]any{"tags": map[string]string{"a": "1", "b": "2"}, "metadata": map[string]any{"x": 1, "y": "keep"}})
	id := g.Str("file.id")
	exp := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Minute)
	r := f.Check(f.do("", "", "PUT", "/v1/files/"+id, map[string]any{
		"metadata":       map[string]any{"x": nil, "z": map[string]any{"deep": true}},
		"tags":           map[string]any{"a": nil, "c": "3"},
		"accessPolicies": []string{"integrations", "public_content"},
		"expiresAt":      exp.Add(42 * time.Second).Format(time.RFC3339),
	}), 200, "updateFileMetadata")
	file := r.Body["file"].(map[string]any)
	if !reflect.DeepEqual(file["metadata"], map[string]any{"y": "keep", "z": map[string]any{"deep": true}}) ||
		!reflect.DeepEqual(file["tags"], map[string]any{"b": "2", "c": "3"}) ||
		!reflect.DeepEqual(file["accessPolicies"], []any{"integrations", "public_content"}) ||
		file["expiresAt"] != platform.FormatTime(exp) {
		t.Fatalf("update: %s", r.Raw)
	}
	// Content and status untouched; the url (an exact reference) too.
	if file["status"] != "upload_completed" || file["url"] != g.Str("file.url") || file["updatedAt"] == g.Str("file.updatedAt") {
		t.Fatalf("update touched content fields: %s", r.Raw)
	}
	// An empty body changes nothing but updatedAt; expiresAt null removes the expiry.
	r = f.Check(f.do("", "", "PUT", "/v1/files/m.txt", map[string]any{"expiresAt": nil}), 200, "updateFileMetadata")
	if _, has := r.Body["file"].(map[string]any)["expiresAt"]; has {
		t.Fatalf("expiresAt not removed: %s", r.Raw)
	}
	f.Check(f.do("", "", "PUT", "/v1/files/m.txt", nil), 200, "updateFileMetadata")
	got := f.get(id)
	if !reflect.DeepEqual(got.Body["file"].(map[string]any)["tags"], map[string]any{"b": "2", "c": "3"}) {
		t.Fatalf("after empty update: %s", got.Raw)
	}
	// The tag index follows: c=3 finds it, a=1 no longer does.
	if keys := f.listAll("tags.c=3", 10); len(keys) != 1 {
		t.Fatalf("by new tag: %v", keys)
	}
	if keys := f.listAll("tags.a=1", 10); len(keys) != 0 {
		t.Fatalf("by removed tag: %v", keys)
	}
}

func TestFilesDelete(t *testing.T) {
	f := newFilesFixture(t)
	r := f.upsert(map[string]any{"key": "d.txt", "size": 3, "tags": map[string]string{"t": "v"}, "index": true})
	put(t, r.Str("file.uploadUrl"), "text/plain", []byte("abc"))
	g := f.get("d.txt")
	if g.Str("file.status") != "indexing_completed" {
		t.Fatalf("indexed: %s", g.Raw)
	}
	key := objectKey(t, r.Str("file.uploadUrl"))
	if !f.objectExists(key) {
		t.Fatal("object missing after upload")
	}
	f.Check(f.do("", "", "DELETE", "/v1/files/d.txt", nil), 200, "deleteFile")
	f.Check(f.do("", "", "GET", "/v1/files/d.txt", nil), 404, "")
	f.Check(f.do("", "", "GET", "/v1/files/"+g.Str("file.id"), nil), 404, "")
	f.Check(f.do("", "", "DELETE", "/v1/files/"+g.Str("file.id"), nil), 404, "")
	if status, _, _ := f.download("", "", g.Str("file.url")); status != 404 {
		t.Fatalf("download after delete: %d", status)
	}
	if f.objectExists(key) {
		t.Fatal("object kept after delete")
	}
	if r := f.Check(f.do("", "", "GET", "/v1/files/tags", nil), 200, "listFileTags"); len(r.List("tags")) != 0 {
		t.Fatalf("tags of a deleted file: %s", r.Raw)
	}
	if r := f.Check(f.do("", "", "GET", "/v1/files/search?query=abc", nil), 200, "searchFiles"); len(r.List("passages")) != 0 {
		t.Fatalf("search finds a deleted file: %s", r.Raw)
	}
	// The key is free again.
	f.upsert(map[string]any{"key": "d.txt", "size": 1})
}

// TestFilesExpiry: an expired file is neither listed nor served, and is
// removed (record, object, tag counts) when noticed.
func TestFilesExpiry(t *testing.T) {
	f := newFilesFixture(t)
	exp := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Minute)
	r := f.upsert(map[string]any{"key": "e.txt", "size": 3, "tags": map[string]string{"t": "v"}, "expiresAt": exp.Format(time.RFC3339Nano)})
	if r.Str("file.expiresAt") != platform.FormatTime(exp) {
		t.Fatalf("expiresAt: %s", r.Raw)
	}
	put(t, r.Str("file.uploadUrl"), "text/plain", []byte("abc"))
	f.upsert(map[string]any{"key": "keep.txt", "size": 1, "tags": map[string]string{"t": "v"}})
	g := f.get("e.txt")
	key := objectKey(t, r.Str("file.uploadUrl"))

	defer func(c func() time.Time) { platform.Clock = c }(platform.Clock)
	later := platform.Clock().Add(3 * time.Hour)
	platform.Clock = func() time.Time { return later }

	if keys := f.listAll("", 10); !reflect.DeepEqual(keys, []string{"keep.txt"}) {
		t.Fatalf("list shows an expired file: %v", keys)
	}
	if keys := f.listAll("tags.t=v", 10); !reflect.DeepEqual(keys, []string{"keep.txt"}) {
		t.Fatalf("tag list shows an expired file: %v", keys)
	}
	if status, _, _ := f.download("", "", g.Str("file.url")); status != 404 {
		t.Fatalf("download of an expired file: %d", status)
	}
	f.Check(f.do("", "", "GET", "/v1/files/e.txt", nil), 404, "")
	if f.objectExists(key) {
		t.Fatal("object of an expired file kept")
	}
	if v := f.Check(f.do("", "", "GET", "/v1/files/tags/t/values", nil), 200, "listFileTagValues"); len(v.List("values")) != 1 {
		t.Fatalf("tag values after expiry: %s", v.Raw)
	}
	// The key can be used again: a new file.
	n := f.upsert(map[string]any{"key": "e.txt", "size": 1})
	if n.Str("file.createdAt") == g.Str("file.createdAt") {
		t.Fatalf("re-created file kept the expired one's createdAt: %s", n.Raw)
	}
}

func TestFilesCopy(t *testing.T) {
	f := newFilesFixture(t)
	content := []byte("# Title\n\nSome copied words.\n")
	src := f.upload("src.md", content, map[string]any{"tags": map[string]string{"t": "v"}, "metadata": map[string]any{"m": 1}, "index": true})
	if src.Str("file.status") != "indexing_completed" {
		t.Fatalf("source: %s", src.Raw)
	}
	c := f.Check(f.do("", "", "POST", "/v1/files/src.md/"+url.PathEscape("copies/dst.md"), nil), 200, "copyFile")
	file := c.Body["file"].(map[string]any)
	if file["key"] != "copies/dst.md" || file["id"] == src.Str("file.id") || file["status"] != "indexing_completed" ||
		!reflect.DeepEqual(file["tags"], map[string]any{"t": "v"}) || !reflect.DeepEqual(file["metadata"], map[string]any{"m": float64(1)}) {
		t.Fatalf("copy: %s", c.Raw)
	}
	u, _ := url.Parse(file["url"].(string))
	if u.Query().Get("checksum") != sha(content) || u.Query().Get("filename") != "dst.md" {
		t.Fatalf("copy url: %s", file["url"])
	}
	status, body, _ := f.download("", "", file["url"].(string))
	if status != 200 || !bytes.Equal(body, content) {
		t.Fatalf("copy download: %d %q", status, body)
	}
	p := f.Check(f.do("", "", "GET", "/v1/files/copies%2Fdst.md/passages", nil), 200, "listFilePassages")
	if len(p.List("passages")) == 0 {
		t.Fatalf("copy not indexed: %s", p.Raw)
	}
	// Existing destination: refused unless overwrite.
	f.upload("taken.txt", []byte("old"), nil)
	f.Check(f.do("", "", "POST", "/v1/files/"+src.Str("file.id")+"/taken.txt", map[string]any{}), 409, "")
	if g := f.get("taken.txt"); g.Str("file.status") != "upload_completed" {
		t.Fatalf("refused copy changed the destination: %s", g.Raw)
	}
	c = f.Check(f.do("", "", "POST", "/v1/files/"+src.Str("file.id")+"/taken.txt", map[string]any{"overwrite": true}), 200, "copyFile")
	status, body, _ = f.download("", "", c.Str("file.url"))
	if status != 200 || !bytes.Equal(body, content) {
		t.Fatalf("overwritten copy: %d %q", status, body)
	}
	// Another bot of a workspace the caller develops in.
	other := f.createBot(f.AdminToken, map[string]any{"name": "other"})
	c = f.Do(apitest.Req{Method: "POST", Path: "/v1/files/src.md/src.md", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.bot, "x-destination-bot-id": other}})
	f.Check(c, 200, "copyFile")
	if c.Str("file.botId") != other || c.Str("file.owner.id") != other {
		t.Fatalf("cross-bot copy: %s", c.Raw)
	}
	if status, body, _ := f.download("", other, c.Str("file.url")); status != 200 || !bytes.Equal(body, content) {
		t.Fatalf("cross-bot copy download: %d", status)
	}
	// Not onto itself, not a pending file, not from or to a bot out of reach.
	f.Check(f.do("", "", "POST", "/v1/files/src.md/src.md", nil), 400, "")
	f.upsert(map[string]any{"key": "pending.txt", "size": 5})
	f.Check(f.do("", "", "POST", "/v1/files/pending.txt/p2.txt", nil), 409, "")
	f.Check(f.do("", "", "GET", "/v1/files/p2.txt", nil), 404, "")
	outsider := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: f.AdminToken, Body: map[string]any{"name": "Other"}}), 200, "createWorkspace").Str("id")
	strangerTok, _ := f.invite("stranger@example.com", "developer")
	foreignBot := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/bots", Token: f.AdminToken, Body: map[string]any{}, Headers: map[string]string{"x-workspace-id": outsider}}), 200, "createBot").Str("bot.id")
	r := f.Do(apitest.Req{Method: "POST", Path: "/v1/files/src.md/x.md", Token: strangerTok, Headers: map[string]string{"x-bot-id": f.bot, "x-destination-bot-id": foreignBot}})
	f.Check(r, 404, "")
	f.Check(f.do("", foreignBot, "GET", "/v1/files/x.md", nil), 404, "")
}

// TestFilesTenancyAndRoles: files are reached only through their own bot;
// viewers read, developers write; a bot's key acts on its own bot only.
func TestFilesTenancyAndRoles(t *testing.T) {
	f := newFilesFixture(t)
	g := f.upload("r.txt", []byte("data"), map[string]any{"index": true})
	id := g.Str("file.id")
	viewer, _ := f.invite("viewer@example.com", "viewer")
	dev, _ := f.invite("dev@example.com", "developer")
	otherBot := f.createBot(f.AdminToken, map[string]any{"name": "other"})
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": f.bot}), 200, "createBotApiKey").Str("value")
	otherWS := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: viewer, Body: map[string]any{"name": "Mine"}}), 200, "createWorkspace").Str("id")
	foreignBot := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/bots", Token: viewer, Body: map[string]any{}, Headers: map[string]string{"x-workspace-id": otherWS}}), 200, "createBot").Str("bot.id")

	reads := []struct{ method, path, op string }{
		{"GET", "/v1/files/" + id, "getFile"},
		{"GET", "/v1/files", "listFiles"},
		{"GET", "/v1/files/" + id + "/passages", "listFilePassages"},
		{"GET", "/v1/files/search?query=data", "searchFiles"},
		{"GET", "/v1/files/tags", "listFileTags"},
		{"GET", "/v1/files/tags/t/values", "listFileTagValues"},
	}
	writes := []struct {
		method, path string
		body         any
	}{
		{"PUT", "/v1/files", map[string]any{"key": "w.txt", "size": 1}},
		{"PUT", "/v1/files/" + id, map[string]any{"tags": map[string]string{"x": "y"}}},
		{"DELETE", "/v1/files/" + id, nil},
		{"POST", "/v1/files/" + id + "/copy.txt", nil},
		{"PUT", "/v1/files/" + id + "/passages", map[string]any{"passages": []any{map[string]any{"content": "x"}}}},
	}
	for _, rd := range reads {
		t.Run("viewer reads "+rd.op, func(t *testing.T) { f.Check(f.do(viewer, "", rd.method, rd.path, nil), 200, rd.op) })
		t.Run("bot key reads "+rd.op, func(t *testing.T) { f.Check(f.do(key, "", rd.method, rd.path, nil), 200, rd.op) })
	}
	if status, _, _ := f.download(viewer, "", g.Str("file.url")); status != 200 {
		t.Fatalf("viewer download: %d", status)
	}
	for _, w := range writes {
		name := w.method + " " + w.path
		t.Run("viewer cannot "+name, func(t *testing.T) { f.Check(f.do(viewer, "", w.method, w.path, w.body), 403, "") })
		t.Run("other bot cannot "+name, func(t *testing.T) {
			if strings.HasPrefix(w.path, "/v1/files/"+id) {
				f.Check(f.do(dev, otherBot, w.method, w.path, w.body), 404, "")
			}
		})
		t.Run("bot key on another bot "+name, func(t *testing.T) { f.Check(f.do(key, otherBot, w.method, w.path, w.body), 404, "") })
		t.Run("non-member "+name, func(t *testing.T) { f.Check(f.do(f.AdminToken, foreignBot, w.method, w.path, w.body), 404, "") })
	}
	// Reads of the file through another bot: 404, no existence oracle.
	for _, path := range []string{"/v1/files/" + id, "/v1/files/r.txt", "/v1/files/" + id + "/passages"} {
		f.Check(f.do(dev, otherBot, "GET", path, nil), 404, "")
	}
	if r := f.Check(f.do(dev, otherBot, "GET", "/v1/files", nil), 200, "listFiles"); len(r.List("files")) != 0 {
		t.Fatalf("another bot lists the file: %s", r.Raw)
	}
	if r := f.Check(f.do(dev, otherBot, "GET", "/v1/files?ids="+id, nil), 200, "listFiles"); len(r.List("files")) != 0 {
		t.Fatalf("another bot lists the file by id: %s", r.Raw)
	}
	if r := f.Check(f.do(dev, otherBot, "GET", "/v1/files/search?query=data", nil), 200, "searchFiles"); len(r.List("passages")) != 0 {
		t.Fatalf("another bot finds the file: %s", r.Raw)
	}
	if status, _, _ := f.download(dev, otherBot, g.Str("file.url")); status != 404 {
		t.Fatalf("download through another bot: %d", status)
	}
	// The developer and the bot's key write.
	f.Check(f.do(dev, "", "PUT", "/v1/files", map[string]any{"key": "dev.txt", "size": 1}), 200, "upsertFile")
	f.Check(f.do(key, "", "PUT", "/v1/files/dev.txt", map[string]any{"tags": map[string]string{"by": "key"}}), 200, "updateFileMetadata")
	f.Check(f.do(key, "", "DELETE", "/v1/files/dev.txt", nil), 200, "deleteFile")
}

// TestFilesBadInput: every operation answers bad input with a 4xx in the
// error shape, and writes nothing.
func TestFilesBadInput(t *testing.T) {
	f := newFilesFixture(t)
	f.upload("x.txt", []byte("x"), nil)
	long := strings.Repeat("k", 1025)
	past := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	far := time.Now().UTC().Add(100 * 24 * time.Hour).Format(time.RFC3339)
	manyTags := map[string]string{}
	for i := 0; i < 25; i++ {
		manyTags[fmt.Sprint("t", i)] = "v"
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"upsert: missing size", "PUT", "/v1/files", map[string]any{"key": "a"}, 400},
		{"upsert: negative size", "PUT", "/v1/files", map[string]any{"key": "a", "size": -1}, 400},
		{"upsert: fractional size", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1.5}, 400},
		{"upsert: size as string", "PUT", "/v1/files", map[string]any{"key": "a", "size": "1"}, 400},
		{"upsert: too large", "PUT", "/v1/files", map[string]any{"key": "a", "size": int64(6) << 30}, 400},
		{"upsert: missing key", "PUT", "/v1/files", map[string]any{"size": 1}, 400},
		{"upsert: empty key", "PUT", "/v1/files", map[string]any{"key": "", "size": 1}, 400},
		{"upsert: key too long", "PUT", "/v1/files", map[string]any{"key": long, "size": 1}, 400},
		{"upsert: key with a control character", "PUT", "/v1/files", map[string]any{"key": "a\nb", "size": 1}, 400},
		{"upsert: bad content type", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "contentType": "not a type"}, 400},
		{"upsert: content type with a newline", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "contentType": "text/plain\r\nx: y"}, 400},
		{"upsert: expiry in the past", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "expiresAt": past}, 400},
		{"upsert: expiry too far", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "expiresAt": far}, 400},
		{"upsert: expiry not a date", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "expiresAt": "tomorrow"}, 400},
		{"upsert: metadata not an object", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "metadata": []int{1}}, 400},
		{"upsert: tag value not a string", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "tags": map[string]any{"t": 1}}, 400},
		{"upsert: too many tags", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "tags": manyTags}, 400},
		{"upsert: unknown field", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "color": "red"}, 400},
		{"upsert: bad access policy", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "accessPolicies": []string{"everyone"}}, 400},
		{"upsert: public content immediately", "PUT", "/v1/files", map[string]any{"key": "a", "size": 1, "publicContentImmediatelyAccessible": true}, 400},
		{"upsert: malformed JSON", "PUT", "/v1/files", `{"key": "a", "size": 1`, 400},
		{"update: bad expiry", "PUT", "/v1/files/x.txt", map[string]any{"expiresAt": past}, 400},
		{"update: metadata not an object", "PUT", "/v1/files/x.txt", map[string]any{"metadata": "m"}, 400},
		{"update: too many tags", "PUT", "/v1/files/x.txt", map[string]any{"tags": manyTags}, 400},
		{"update: unknown field", "PUT", "/v1/files/x.txt", map[string]any{"key": "y"}, 400},
		{"update: missing file", "PUT", "/v1/files/nope.txt", map[string]any{}, 404},
		{"get: missing file", "GET", "/v1/files/file_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"delete: missing file", "DELETE", "/v1/files/nope.txt", nil, 404},
		{"copy: missing source", "POST", "/v1/files/nope.txt/y.txt", nil, 404},
		{"copy: bad body", "POST", "/v1/files/x.txt/y.txt", map[string]any{"overwrite": "yes"}, 400},
		{"copy: destination too long", "POST", "/v1/files/x.txt/" + long, nil, 400},
		{"passages: bad limit", "GET", "/v1/files/x.txt/passages?limit=0", nil, 400},
		{"passages: limit too large", "GET", "/v1/files/x.txt/passages?limit=201", nil, 400},
		{"passages: forged token", "GET", "/v1/files/x.txt/passages?nextToken=x.y", nil, 400},
		{"set passages: missing passages", "PUT", "/v1/files/x.txt/passages", map[string]any{}, 400},
		{"set passages: bad type", "PUT", "/v1/files/x.txt/passages", map[string]any{"passages": []any{map[string]any{"content": "c", "type": "poem"}}}, 400},
		{"set passages: missing content", "PUT", "/v1/files/x.txt/passages", map[string]any{"passages": []any{map[string]any{"type": "title"}}}, 400},
		{"search: no query", "GET", "/v1/files/search", nil, 400},
		{"search: blank query", "GET", "/v1/files/search?query=%20", nil, 400},
		{"search: bad limit", "GET", "/v1/files/search?query=a&limit=0", nil, 400},
		{"search: bad depth", "GET", "/v1/files/search?query=a&contextDepth=11", nil, 400},
		{"search: bad boolean", "GET", "/v1/files/search?query=a&consolidate=si", nil, 400},
		{"search: context with consolidate", "GET", "/v1/files/search?query=a&consolidate=true&withContext=true", nil, 400},
		{"search: malformed tags", "GET", "/v1/files/search?query=a&tags=%7B", nil, 400},
		{"tags: forged token", "GET", "/v1/files/tags?nextToken=x.y", nil, 400},
		{"tag values: bad page size", "GET", "/v1/files/tags/t/values?pageSize=1000", nil, 400},
		{"no bot header", "GET", "/v1/files", nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bot := ""
			if tc.name == "no bot header" {
				r := f.Do(apitest.Req{Method: tc.method, Path: tc.path, Token: f.AdminToken})
				f.Check(r, tc.want, "")
				return
			}
			f.Check(f.do("", bot, tc.method, tc.path, tc.body), tc.want, "")
		})
	}
	// Nothing was written.
	if keys := f.listAll("", 100); !reflect.DeepEqual(keys, []string{"x.txt"}) {
		t.Fatalf("files after bad input: %v", keys)
	}
	g := f.get("x.txt")
	if len(g.Body["file"].(map[string]any)["tags"].(map[string]any)) != 0 || g.Body["file"].(map[string]any)["expiresAt"] != nil {
		t.Fatalf("x.txt changed by bad input: %s", g.Raw)
	}
	if r := f.Check(f.do("", "", "GET", "/v1/files/tags", nil), 200, "listFileTags"); len(r.List("tags")) != 0 {
		t.Fatalf("tags after bad input: %s", r.Raw)
	}
}

// TestFilesConcurrentUpserts: upserts of one key racing with their uploads
// end on one generation, which serves exactly its own bytes.
func TestFilesConcurrentUpserts(t *testing.T) {
	f := newFilesFixture(t)
	const n = 8
	contents := map[string]bool{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		content := []byte(fmt.Sprintf("content of writer %d %s", i, strings.Repeat("x", i)))
		contents[string(content)] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.Do(apitest.Req{Method: "PUT", Path: "/v1/files", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.bot},
				Body: map[string]any{"key": "race.txt", "size": len(content), "tags": map[string]string{"writer": fmt.Sprint(len(content))}}})
			if r.Status != 200 {
				mu.Lock()
				defer mu.Unlock()
				t.Errorf("upsert: %d %s", r.Status, r.Raw)
				return
			}
			if status := put(t, r.Str("file.uploadUrl"), "text/plain", content); status != 200 {
				t.Errorf("upload: %d", status)
			}
		}()
	}
	wg.Wait()
	g := f.get("race.txt")
	file := g.Body["file"].(map[string]any)
	// Every upload completed before the last upsert could not complete it;
	// if the last upsert's upload came last, the file is complete.
	if file["status"] == "upload_completed" {
		status, body, _ := f.download("", "", file["url"].(string))
		if status != 200 || !contents[string(body)] || fmt.Sprint(len(body)) != file["tags"].(map[string]any)["writer"] || float64(len(body)) != file["size"] {
			t.Fatalf("served %d %q for %s", status, body, g.Raw)
		}
	} else if file["status"] != "upload_pending" {
		t.Fatalf("status %s", g.Raw)
	}
	t.Logf("after the race: %s", file["status"])
	if keys := f.listAll("", 100); len(keys) != 1 {
		t.Fatalf("%d files for one key", len(keys))
	}
	// Only the current generation's object may remain.
	objs, err := f.s3().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("platform-files"), Prefix: aws.String("files/" + f.bot + "/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Contents) > 1 {
		t.Fatalf("%d objects kept for one file", len(objs.Contents))
	}
	if v := f.Check(f.do("", "", "GET", "/v1/files/tags/writer/values", nil), 200, "listFileTagValues"); len(v.List("values")) != 1 {
		t.Fatalf("tag counts after the race: %s", v.Raw)
	}
	// Uploading the final generation's bytes again is always served.
	r := f.upsert(map[string]any{"key": "race.txt", "size": 5})
	var wg2 sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg2.Add(1)
		go func() { defer wg2.Done(); put(t, r.Str("file.uploadUrl"), "text/plain", []byte("final")) }()
	}
	wg2.Wait()
	g = f.get("race.txt")
	if status, body, _ := f.download("", "", g.Str("file.url")); status != 200 || string(body) != "final" {
		t.Fatalf("final: %d %q %s", status, body, g.Raw)
	}
}

// TestFilesConcurrentMetadataUpdates: concurrent updates of one file's tags
// and metadata lose nothing (conditional writes, retried).
func TestFilesConcurrentMetadataUpdates(t *testing.T) {
	f := newFilesFixture(t)
	f.upsert(map[string]any{"key": "c.txt", "size": 1})
	const n = 12
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.Do(apitest.Req{Method: "PUT", Path: "/v1/files/c.txt", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.bot},
				Body: map[string]any{"tags": map[string]string{fmt.Sprint("t", i): "v"}, "metadata": map[string]any{fmt.Sprint("m", i): i}}})
			if r.Status != 200 {
				t.Errorf("update %d: %d %s", i, r.Status, r.Raw)
			}
		}()
	}
	wg.Wait()
	g := f.get("c.txt").Body["file"].(map[string]any)
	if len(g["tags"].(map[string]any)) != n || len(g["metadata"].(map[string]any)) != n {
		t.Fatalf("lost updates: %v", g)
	}
	if r := f.Check(f.do("", "", "GET", "/v1/files/tags?pageSize=100", nil), 200, "listFileTags"); len(r.List("tags")) != n {
		t.Fatalf("tag counts: %s", r.Raw)
	}
}
