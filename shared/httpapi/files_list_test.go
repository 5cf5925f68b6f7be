package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/platform"
)

// listAll pages through listFiles with query and pageSize, returning the
// keys in order.
func (f *filesFixture) listAll(query string, pageSize int) []string {
	f.T.Helper()
	var keys []string
	next := ""
	for page := 0; ; page++ {
		if page > 100 {
			f.T.Fatal("listFiles does not end")
		}
		q := query
		if q != "" {
			q += "&"
		}
		q += fmt.Sprintf("pageSize=%d", pageSize)
		if next != "" {
			q += "&nextToken=" + url.QueryEscape(next)
		}
		r := f.Check(f.do("", "", "GET", "/v1/files?"+q, nil), 200, "listFiles")
		for _, it := range r.List("files") {
			keys = append(keys, it.(map[string]any)["key"].(string))
		}
		if len(r.List("files")) > pageSize {
			f.T.Fatalf("page of %d files for pageSize %d", len(r.List("files")), pageSize)
		}
		if next = r.Str("meta.nextToken"); next == "" {
			return keys
		}
	}
}

func TestFilesListOrders(t *testing.T) {
	f := newFilesFixture(t)
	type file struct {
		key  string
		size int
		done bool // uploaded
	}
	all := []file{{"c.txt", 30, true}, {"a.txt", 10, false}, {"e.txt", 50, true}, {"b.txt", 20, false}, {"d.txt", 20, true}}
	for _, fl := range all {
		content := []byte(strings.Repeat("x", fl.size))
		if fl.done {
			f.upload(fl.key, content, nil)
		} else {
			f.upsert(map[string]any{"key": fl.key, "size": fl.size})
		}
	}
	// Touch a.txt last: most recently updated.
	f.Check(f.do("", "", "PUT", "/v1/files/a.txt", map[string]any{"metadata": map[string]any{"x": 1}}), 200, "updateFileMetadata")

	created := []string{"c.txt", "a.txt", "e.txt", "b.txt", "d.txt"}
	reverse := func(s []string) []string {
		out := append([]string{}, s...)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", reverse(created)},
		{"sortField=createdAt", reverse(created)},
		{"sortField=createdAt&sortDirection=asc", created},
		{"sortField=key", []string{"a.txt", "b.txt", "c.txt", "d.txt", "e.txt"}},
		{"sortField=key&sortDirection=desc", []string{"e.txt", "d.txt", "c.txt", "b.txt", "a.txt"}},
		{"sortField=size", []string{"a.txt", "b.txt", "d.txt", "c.txt", "e.txt"}},
		{"sortField=size&sortDirection=desc", []string{"e.txt", "c.txt", "d.txt", "b.txt", "a.txt"}},
		{"sortField=updatedAt", []string{"a.txt", "d.txt", "b.txt", "e.txt", "c.txt"}},
		{"sortField=updatedAt&sortDirection=asc", []string{"c.txt", "e.txt", "b.txt", "d.txt", "a.txt"}},
		// Status order: upload_completed before upload_pending, each by creation.
		{"sortField=status", []string{"c.txt", "e.txt", "d.txt", "a.txt", "b.txt"}},
		{"sortField=status&sortDirection=desc", []string{"b.txt", "a.txt", "d.txt", "e.txt", "c.txt"}},
	} {
		for _, size := range []int{1, 2, 100} {
			t.Run(fmt.Sprintf("%s/pageSize=%d", tc.query, size), func(t *testing.T) {
				if got := f.listAll(tc.query, size); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
	}
}

func TestFilesListFilters(t *testing.T) {
	f := newFilesFixture(t)
	files := map[string]map[string]string{
		"1.txt": {"color": "red", "size": "s"},
		"2.txt": {"color": "blue", "size": "m"},
		"3.txt": {"color": "green", "size": "s"},
		"4.txt": {"color": "red", "size": "l"},
		"5.txt": {"size": "s"},
		"6.txt": {},
	}
	ids := map[string]string{}
	for _, k := range []string{"1.txt", "2.txt", "3.txt", "4.txt", "5.txt", "6.txt"} {
		extra := map[string]any{"tags": files[k], "index": k == "1.txt" || k == "2.txt"}
		ids[k] = f.upsert(map[string]any{"key": k, "size": 1, "tags": extra["tags"], "index": extra["index"]}).Str("file.id")
	}
	j := func(s string) string { return "tags=" + url.QueryEscape(s) }
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"one tag (JSON)", j(`{"color":"red"}`), []string{"1.txt", "4.txt"}},
		{"one tag (client form)", "tags.color=red", []string{"1.txt", "4.txt"}},
		{"two tags", j(`{"color":"red","size":"s"}`), []string{"1.txt"}},
		{"OR (JSON)", j(`{"color":["red","blue"]}`), []string{"1.txt", "2.txt", "4.txt"}},
		{"OR (client form)", "tags.color=red&tags.color=blue", []string{"1.txt", "2.txt", "4.txt"}},
		{"not (JSON)", j(`{"color":{"not":"red"}}`), []string{"2.txt", "3.txt", "5.txt", "6.txt"}},
		{"not array (JSON)", j(`{"color":{"not":["red","blue"]}}`), []string{"3.txt", "5.txt", "6.txt"}},
		{"not (client form)", "tags.color.not=red&tags.color.not=green", []string{"2.txt", "5.txt", "6.txt"}},
		{"equal and not", j(`{"size":"s","color":{"not":"green"}}`), []string{"1.txt", "5.txt"}},
		{"no file has it", j(`{"color":"purple"}`), nil},
		{"ids", "ids=" + ids["2.txt"] + "&ids=" + ids["5.txt"] + "&ids=file_01ARZ3NDEKTSV4RRFFQ69G5FAV", []string{"2.txt", "5.txt"}},
		{"ids and a tag", "ids=" + ids["1.txt"] + "&ids=" + ids["3.txt"] + "&tags.size=s&tags.color=green", []string{"3.txt"}},
		{"indexed", "indexed=true", []string{"1.txt", "2.txt"}},
		{"not indexed and a tag", "indexed=false&tags.size=s", []string{"3.txt", "5.txt"}},
		{"tag, ordered by key", "sortField=key&tags.size=s", []string{"1.txt", "3.txt", "5.txt"}},
	} {
		for _, size := range []int{1, 20} {
			t.Run(fmt.Sprintf("%s/pageSize=%d", tc.name, size), func(t *testing.T) {
				got := f.listAll(tc.query, size)
				sort.Strings(got)
				if !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
	}
}

func TestFilesListBadInput(t *testing.T) {
	f := newFilesFixture(t)
	f.upsert(map[string]any{"key": "a", "size": 1})
	many := make([]string, 51)
	for i := range many {
		many[i] = "ids=file_" + fmt.Sprintf("%026d", i)
	}
	f.upsert(map[string]any{"key": "b", "size": 1})
	tok := f.Check(f.do("", "", "GET", "/v1/files?pageSize=1&sortField=key", nil), 200, "listFiles").Str("meta.nextToken")
	for _, tc := range []struct{ name, query string }{
		{"51 ids", strings.Join(many, "&")},
		{"empty id", "ids="},
		{"malformed tags JSON", "tags=" + url.QueryEscape(`{"a":`)},
		{"tags JSON not an object", "tags=" + url.QueryEscape(`["a"]`)},
		{"tags JSON number value", "tags=" + url.QueryEscape(`{"a":1}`)},
		{"tags JSON empty array", "tags=" + url.QueryEscape(`{"a":[]}`)},
		{"tags JSON bad not", "tags=" + url.QueryEscape(`{"a":{"nope":"x"}}`)},
		{"tags given twice", "tags=%7B%7D&tags=%7B%7D"},
		{"bad sortField", "sortField=name"},
		{"bad sortDirection", "sortDirection=up"},
		{"bad indexed", "indexed=maybe"},
		{"bad pageSize", "pageSize=0"},
		{"pageSize too large", "pageSize=101"},
		{"forged nextToken", "nextToken=abc.def"},
		{"nextToken of another list", "sortField=size&nextToken=" + url.QueryEscape(tok)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do("", "", "GET", "/v1/files?"+tc.query, nil)
			if r.Status != 400 {
				t.Fatalf("got %d %s, want 400", r.Status, r.Raw)
			}
		})
	}
	// The token works with its own list.
	r := f.Check(f.do("", "", "GET", "/v1/files?pageSize=1&sortField=key&nextToken="+url.QueryEscape(tok), nil), 200, "listFiles")
	if len(r.List("files")) != 1 || r.List("files")[0].(map[string]any)["key"] != "b" {
		t.Fatalf("second page: %s", r.Raw)
	}
}

func TestFilesTags(t *testing.T) {
	f := newFilesFixture(t)
	f.upsert(map[string]any{"key": "a", "size": 1, "tags": map[string]string{"color": "red", "lang": "en"}})
	f.upsert(map[string]any{"key": "b", "size": 1, "tags": map[string]string{"color": "blue"}})
	f.upsert(map[string]any{"key": "c", "size": 1, "tags": map[string]string{"color": "red"}})
	tags := func() []string {
		r := f.Check(f.do("", "", "GET", "/v1/files/tags", nil), 200, "listFileTags")
		return strs(r.List("tags"))
	}
	values := func(tag string) []string {
		r := f.Check(f.do("", "", "GET", "/v1/files/tags/"+url.PathEscape(tag)+"/values", nil), 200, "listFileTagValues")
		return strs(r.List("values"))
	}
	if got := tags(); !reflect.DeepEqual(got, []string{"color", "lang"}) {
		t.Fatalf("tags: %v", got)
	}
	if got := values("color"); !reflect.DeepEqual(got, []string{"blue", "red"}) {
		t.Fatalf("color values: %v", got)
	}
	// Changes move the counts: a's lang removed, c's color changed.
	f.Check(f.do("", "", "PUT", "/v1/files/a", map[string]any{"tags": map[string]any{"lang": nil}}), 200, "updateFileMetadata")
	f.Check(f.do("", "", "PUT", "/v1/files/c", map[string]any{"tags": map[string]any{"color": "green"}}), 200, "updateFileMetadata")
	if got := tags(); !reflect.DeepEqual(got, []string{"color"}) {
		t.Fatalf("tags after updates: %v", got)
	}
	if got := values("color"); !reflect.DeepEqual(got, []string{"blue", "green", "red"}) {
		t.Fatalf("color values after updates: %v", got)
	}
	f.Check(f.do("", "", "DELETE", "/v1/files/b", nil), 200, "deleteFile")
	f.upsert(map[string]any{"key": "a", "size": 1, "tags": map[string]string{"shape": "round"}}) // replaces a's tags
	if got := values("color"); !reflect.DeepEqual(got, []string{"green"}) {
		t.Fatalf("color values after delete and upsert: %v", got)
	}
	if got := tags(); !reflect.DeepEqual(got, []string{"color", "shape"}) {
		t.Fatalf("tags after delete and upsert: %v", got)
	}
	if got := values("nope"); len(got) != 0 {
		t.Fatalf("values of an unused tag: %v", got)
	}
	// Paging.
	for i := 0; i < 5; i++ {
		f.upsert(map[string]any{"key": fmt.Sprintf("p%d", i), "size": 1, "tags": map[string]string{fmt.Sprintf("t%d", i): "v"}})
	}
	var all []string
	next := ""
	for {
		r := f.Check(f.do("", "", "GET", "/v1/files/tags?pageSize=2&nextToken="+url.QueryEscape(next), nil), 200, "listFileTags")
		all = append(all, strs(r.List("tags"))...)
		if next = r.Str("meta.nextToken"); next == "" {
			break
		}
	}
	if want := []string{"color", "shape", "t0", "t1", "t2", "t3", "t4"}; !reflect.DeepEqual(all, want) {
		t.Fatalf("paged tags: %v, want %v", all, want)
	}
	// Another bot sees none of these.
	other := f.createBot(f.AdminToken, map[string]any{"name": "other"})
	if r := f.Check(f.do("", other, "GET", "/v1/files/tags", nil), 200, "listFileTags"); len(r.List("tags")) != 0 {
		t.Fatalf("another bot's tags: %s", r.Raw)
	}
}

func strs(l []any) []string {
	out := []string{}
	for _, v := range l {
		out = append(out, v.(string))
	}
	return out
}

// TestFilesListReadsScale: the items a listFiles page reads grow with the
// page size, not with the bot's file count (issue 5: ratio under 1.5
// between a small and a large bot).
func TestFilesListReadsScale(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds thousands of files")
	}
	small := measureListReads(t, 200)
	large := measureListReads(t, 2000)
	for name, s := range small {
		l := large[name]
		t.Logf("%-22s items read per page: %4d files: %3d   %4d files: %3d", name, 200, s, 2000, l)
		if float64(l)/float64(s) >= 1.5 {
			t.Errorf("%s: %d items read with 2000 files vs %d with 200", name, l, s)
		}
	}
}

// measureListReads seeds a bot with n files (a quarter tagged team=a) and
// returns the items read by one page of 20 of each listing.
func measureListReads(t testing.TB, n int) map[string]int {
	e := apitest.New(t)
	f := &filesFixture{fixture: &fixture{Env: e}}
	f.ws = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "bench"}}), 200, "createWorkspace").Str("id")
	f.bot = f.createBot(e.AdminToken, map[string]any{"name": "b"})
	seedFiles(t, e, f.bot, n)
	rec := recordUsage(e)
	out := map[string]int{}
	for name, q := range map[string]string{
		"unfiltered":     "",
		"by key":         "sortField=key",
		"by size":        "sortField=size",
		"one tag":        "tags.team=a",
		"one tag (JSON)": "tags=" + url.QueryEscape(`{"team":"a"}`),
	} {
		r := f.Check(f.do("", "", "GET", "/v1/files?pageSize=20&"+q, nil), 200, "listFiles")
		if len(r.List("files")) != 20 {
			t.Fatalf("%s: %d files", name, len(r.List("files")))
		}
		out[name] = rec.of("listFiles").ItemsRead
		r = f.Check(f.do("", "", "GET", "/v1/files?pageSize=20&"+q+"&nextToken="+url.QueryEscape(r.Str("meta.nextToken")), nil), 200, "listFiles")
		if len(r.List("files")) != 20 {
			t.Fatalf("%s, page 2: %d files", name, len(r.List("files")))
		}
		out[name+", page 2"] = rec.of("listFiles").ItemsRead
	}
	return out
}

// seedFiles writes n uploaded files of bot straight into the store (the
// API would take a transaction each): file i has tag team=a when i%4 == 0,
// team=b otherwise.
func seedFiles(t testing.TB, e *apitest.Env, bot string, n int) {
	t.Helper()
	start := time.Now().Add(-time.Hour)
	recs := make([]platform.FileRecord, n)
	for i := range recs {
		team := "b"
		if i%4 == 0 {
			team = "a"
		}
		ts := platform.FormatTime(start.Add(time.Duration(i) * time.Millisecond))
		recs[i] = platform.FileRecord{
			File: platform.File{
				ID: platform.NewID(platform.PrefixFile), BotID: bot, Key: fmt.Sprintf("seed/%06d.txt", i), Size: int64(i),
				ContentType: "text/plain", Tags: map[string]string{"team": team}, Metadata: map[string]json.RawMessage{},
				CreatedAt: ts, UpdatedAt: ts, AccessPolicies: []string{}, Status: platform.FileUploadCompleted,
				Owner: platform.FileOwner{Type: "bot", ID: bot},
			},
			Generation: platform.NewID(""), Checksum: strings.Repeat("0", 64), ETag: `"x"`,
		}
	}
	if err := e.Platform.Store.ImportFiles(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
}
