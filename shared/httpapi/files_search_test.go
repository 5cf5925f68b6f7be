package httpapi_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// passages lists all passages of a file, limit at a time.
func (f *filesFixture) passages(idOrKey string, limit int) []map[string]any {
	f.T.Helper()
	var out []map[string]any
	next := ""
	for {
		r := f.Check(f.do("", "", "GET", fmt.Sprintf("/v1/files/%s/passages?limit=%d&nextToken=%s", url.PathEscape(idOrKey), limit, url.QueryEscape(next)), nil), 200, "listFilePassages")
		for _, p := range r.List("passages") {
			out = append(out, p.(map[string]any))
		}
		if len(r.List("passages")) > limit {
			f.T.Fatalf("%d passages for limit %d", len(r.List("passages")), limit)
		}
		if next = r.Str("meta.nextToken"); next == "" {
			return out
		}
	}
}

func (f *filesFixture) search(query string) []map[string]any {
	f.T.Helper()
	r := f.Check(f.do("", "", "GET", "/v1/files/search?query="+query, nil), 200, "searchFiles")
	var out []map[string]any
	for _, p := range r.List("passages") {
		out = append(out, p.(map[string]any))
	}
	return out
}

func contents(ps []map[string]any) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p["content"].(string))
	}
	return out
}

const botsMD = `# Bots

Bots answer questions about billing and accounts.

## Pricing

The pricing of bots depends on monthly usage.

- first item
- second item

` + "```go\nfmt.Println(\"code\")\n```\n"

func TestFilesIndexing(t *testing.T) {
	f := newFilesFixture(t)
	idx := map[string]any{"index": true}
	for _, tc := range []struct {
		key, content string
		status       string
		want         []string // substrings of the passages, in order
	}{
		{"bots.md", botsMD, "indexing_completed", []string{"Bots", "Bots answer questions", "Pricing", "pricing of bots", "- first item\n- second item", "fmt.Println"}},
		{"plain.txt", "First paragraph.\n\nSecond paragraph\non two lines.", "indexing_completed", []string{"First paragraph.", "Second paragraph\non two lines."}},
		{"page.html", `<html><head><title>T</title><script>alert("x")</script></head><body><h1>Heading &amp; more</h1><p>Para <b>one</b>.</p><ul><li>a</li><li>b</li></ul><table><tr><th>k</th><th>v</th></tr><tr><td>1</td><td>2</td></tr></table><style>p{}</style></body></html>`,
			"indexing_completed", []string{"Heading & more", "Para one.", "- a\n- b", "k | v\n1 | 2"}},
		{"data.json", `[{"name":"Ada","role":"engineer"},{"name":"Bob","tags":["x","y"]}]`, "indexing_completed", []string{"name: Ada\nrole: engineer", "tags[1]: y"}},
		{"rows.csv", "city,country\nParis,France\nLima,Peru\n", "indexing_completed", []string{"city: Paris; country: France\ncity: Lima; country: Peru"}},
		{"img.png", "\x89PNG....", "indexing_failed", nil},
		{"bad.txt", "\xff\xfe bad", "indexing_failed", nil},
		{"broken.json", `{"a":`, "indexing_failed", nil},
	} {
		t.Run(tc.key, func(t *testing.T) {
			g := f.upload(tc.key, []byte(tc.content), idx)
			if g.Str("file.status") != tc.status {
				t.Fatalf("status: %s", g.Raw)
			}
			if tc.status == "indexing_failed" {
				if g.Str("file.failedStatusReason") == "" || g.Str("file.url") == "" {
					t.Fatalf("a failed indexing keeps the content servable and says why: %s", g.Raw)
				}
				t.Logf("%s: %s", tc.key, g.Str("file.failedStatusReason"))
				return
			}
			if g.Str("file.indexingStack") != "v1" {
				t.Fatalf("indexingStack: %s", g.Raw)
			}
			ps := f.passages(tc.key, 1)
			all := ""
			for i, p := range ps {
				meta := p["meta"].(map[string]any)
				if meta["position"] != float64(i) || meta["type"] != "chunk" || p["id"] == "" {
					t.Fatalf("passage %d: %v", i, p)
				}
				all += p["content"].(string) + "\x00"
			}
			rest := all
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("passages %q, want in order %q", contents(ps), tc.want)
				}
				rest = rest[i+len(w):]
			}
			if got := f.passages(tc.key, 200); len(got) != len(ps) {
				t.Fatalf("paging: %d passages, then %d", len(ps), len(got))
			}
		})
	}
	// Subtypes of the Markdown passages.
	var subtypes []string
	for _, p := range f.passages("bots.md", 50) {
		subtypes = append(subtypes, p["meta"].(map[string]any)["subtype"].(string))
	}
	if strings.Join(subtypes, ",") != "title,paragraph,subtitle,paragraph,list,code" {
		t.Fatalf("subtypes: %v", subtypes)
	}
	// Script and style content is not indexed.
	if ps := f.search("alert"); len(ps) != 0 {
		t.Fatalf("script content found: %v", ps)
	}
	// Chunking configuration: short passages.
	long := strings.Repeat("word ", 100)
	f.upload("long.txt", []byte(long), map[string]any{"index": true, "indexing": map[string]any{"configuration": map[string]any{"chunking": map[string]any{"maximumChunkLength": 100}}}})
	for _, p := range f.passages("long.txt", 50) {
		if n := len(p["content"].(string)); n > 100 {
			t.Fatalf("passage of %d characters for a maximum of 100", n)
		}
	}
}

func TestFilesSearch(t *testing.T) {
	f := newFilesFixture(t)
	f.upload("bots.md", []byte(botsMD), map[string]any{"index": true, "tags": map[string]string{"lang": "en"}})
	f.upload("cats.txt", []byte("Cats sleep most of the day.\n\nCats purr when happy.\n\nDogs bark at bots."), map[string]any{"index": true, "tags": map[string]string{"lang": "fr"}})
	f.upload("notindexed.txt", []byte("pricing pricing pricing"), nil)

	ps := f.search("pricing")
	if len(ps) != 2 || !strings.Contains(strings.Join(contents(ps), ""), "pricing of bots") {
		t.Fatalf("pricing: %v", contents(ps))
	}
	for _, p := range ps {
		if p["file"].(map[string]any)["key"] != "bots.md" {
			t.Fatalf("pricing found in %v (not indexed)", p["file"])
		}
	}
	// contextDepth 1 (the default) adds the neighbours.
	if c := ps[0]["content"].(string); !strings.Contains(c, "## Pricing") && !strings.Contains(c, "Pricing\n") {
		t.Fatalf("no context in %q", c)
	}
	// Best first: the passage with both terms ranks above those with one.
	ps = f.search(url.QueryEscape("cats purr"))
	if len(ps) < 2 || !strings.Contains(ps[0]["content"].(string), "purr") {
		t.Fatalf("cats purr: %v", contents(ps))
	}
	for i := 1; i < len(ps); i++ {
		if ps[i]["score"].(float64) > ps[i-1]["score"].(float64) {
			t.Fatalf("not best first: %v", ps)
		}
	}
	// Plural folding: "bot" finds "bots".
	if ps := f.search("bot"); len(ps) < 2 {
		t.Fatalf("bot: %v", contents(ps))
	}
	// Tag filters.
	r := f.Check(f.do("", "", "GET", "/v1/files/search?query=bots&tags.lang=fr&contextDepth=0", nil), 200, "searchFiles")
	if l := r.List("passages"); len(l) != 1 || l[0].(map[string]any)["content"] != "Dogs bark at bots." {
		t.Fatalf("bots in fr: %s", r.Raw)
	}
	r = f.Check(f.do("", "", "GET", "/v1/files/search?query=cats&tags="+url.QueryEscape(`{"lang":{"not":"fr"}}`), nil), 200, "searchFiles")
	if len(r.List("passages")) != 0 {
		t.Fatalf("cats not in fr: %s", r.Raw)
	}
	// limit, breadcrumb, context.
	r = f.Check(f.do("", "", "GET", "/v1/files/search?query=bots&limit=1", nil), 200, "searchFiles")
	if len(r.List("passages")) != 1 {
		t.Fatalf("limit 1: %s", r.Raw)
	}
	r = f.Check(f.do("", "", "GET", "/v1/files/search?query=monthly&contextDepth=0&includeBreadcrumb=true&withContext=true", nil), 200, "searchFiles")
	p := r.List("passages")[0].(map[string]any)
	if p["content"] != "Bots > Pricing\n\nThe pricing of bots depends on monthly usage." {
		t.Fatalf("breadcrumb: %q", p["content"])
	}
	ctx := p["context"].([]any)
	if len(ctx) != 2 || ctx[0].(map[string]any)["type"] != "breadcrumb" || ctx[1].(map[string]any)["type"] != "current" {
		t.Fatalf("context: %s", r.Raw)
	}
	r = f.Check(f.do("", "", "GET", "/v1/files/search?query=questions&contextDepth=1&withContext=true", nil), 200, "searchFiles")
	var types []string
	for _, c := range r.List("passages")[0].(map[string]any)["context"].([]any) {
		types = append(types, c.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "preceding,current,subsequent" {
		t.Fatalf("context types: %v", types)
	}
	// Consolidated: one passage per file.
	r = f.Check(f.do("", "", "GET", "/v1/files/search?query=bots+cats+pricing&consolidate=true", nil), 200, "searchFiles")
	files := map[any]bool{}
	for _, p := range r.List("passages") {
		pm := p.(map[string]any)
		if pm["meta"].(map[string]any)["type"] != "consolidated" || files[pm["file"].(map[string]any)["id"]] {
			t.Fatalf("consolidated: %s", r.Raw)
		}
		files[pm["file"].(map[string]any)["id"]] = true
	}
	if len(files) != 2 {
		t.Fatalf("consolidated files: %s", r.Raw)
	}
	// Nothing to find.
	if ps := f.search("zebra"); len(ps) != 0 {
		t.Fatalf("zebra: %v", ps)
	}
	if ps := f.search("the"); len(ps) != 0 {
		t.Fatalf("a stop word alone: %v", ps)
	}
}

// TestFilesSetPassages: passages set by the caller replace the extracted
// ones; a new upload replaces them again.
func TestFilesSetPassages(t *testing.T) {
	f := newFilesFixture(t)
	g := f.upload("doc.md", []byte(botsMD), map[string]any{"index": true})
	f.upsert(map[string]any{"key": "pending.md", "size": 3})
	f.Check(f.do("", "", "PUT", "/v1/files/pending.md/passages", map[string]any{"passages": []any{map[string]any{"content": "x"}}}), 409, "")

	f.Check(f.do("", "", "PUT", "/v1/files/"+g.Str("file.id")+"/passages", map[string]any{"passages": []any{
		map[string]any{"content": "Manual title", "type": "title"},
		map[string]any{"content": "A hand-written zebra passage.", "pageNumber": 3},
	}}), 200, "setFilePassages")
	ps := f.passages("doc.md", 10)
	if len(ps) != 2 || ps[0]["content"] != "Manual title" || ps[0]["meta"].(map[string]any)["subtype"] != "title" ||
		ps[1]["meta"].(map[string]any)["subtype"] != "paragraph" || ps[1]["meta"].(map[string]any)["pageNumber"] != float64(3) {
		t.Fatalf("set passages: %v", ps)
	}
	if st := f.get("doc.md").Str("file.status"); st != "indexing_completed" {
		t.Fatalf("status after setFilePassages: %s", st)
	}
	if ps := f.search("zebra"); len(ps) != 1 {
		t.Fatalf("zebra: %v", ps)
	}
	if ps := f.search("pricing"); len(ps) != 0 {
		t.Fatalf("replaced passages still found: %v", contents(ps))
	}
	// A new generation drops the passages until its upload is indexed.
	r := f.upsert(map[string]any{"key": "doc.md", "size": 5, "index": true})
	if ps := f.passages("doc.md", 10); len(ps) != 0 {
		t.Fatalf("passages of a replaced generation: %v", ps)
	}
	if ps := f.search("zebra"); len(ps) != 0 {
		t.Fatalf("zebra after a new generation: %v", ps)
	}
	put(t, r.Str("file.uploadUrl"), "text/markdown", []byte("hello"))
	if ps := f.search("hello"); len(ps) != 1 {
		t.Fatalf("hello: %v", ps)
	}
}
