package files

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

func TestContentTypeFor(t *testing.T) {
	for key, want := range map[string]string{
		"a.txt": "text/plain", "dir/b.Markdown": "text/markdown", "x.HTM": "text/html", "y.json": "application/json",
		"z.csv": "text/csv", "p.jpeg": "image/jpeg", "noext": DefaultContentType, "dir.d/noext": DefaultContentType,
		"trailing/": DefaultContentType, ".hidden": DefaultContentType, "a.tar.gz": "application/gzip",
	} {
		if got := ContentTypeFor(key); got != want {
			t.Errorf("ContentTypeFor(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestFilename(t *testing.T) {
	for key, want := range map[string]string{"a/b/c.txt": "c.txt", "c.txt": "c.txt", "a/": "a", "/x": "x"} {
		if got := Filename(key); got != want {
			t.Errorf("Filename(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestChecks(t *testing.T) {
	bad := func(err error) bool { return platform.TypeOf(err) == platform.ErrInvalidPayload }
	if !bad(CheckKey("k", "")) || !bad(CheckKey("k", strings.Repeat("a", 1025))) || !bad(CheckKey("k", "a\x00b")) || !bad(CheckKey("k", "\xff")) {
		t.Error("bad keys accepted")
	}
	if CheckKey("k", "dir/file name (1).txt") != nil {
		t.Error("good key refused")
	}
	for _, n := range []string{"-1", "1.5", "1e20", "abc", ""} {
		if _, err := CheckSize(json.Number(n)); !bad(err) {
			t.Errorf("size %q accepted", n)
		}
	}
	if v, err := CheckSize("1e3"); err != nil || v != 1000 {
		t.Errorf("size 1e3: %d %v", v, err)
	}
	for _, ct := range []string{"text", "text/plain; charset", "a/b\n", "é/x", ""} {
		if !bad(CheckContentType(ct)) {
			t.Errorf("content type %q accepted", ct)
		}
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if ts, err := ParseExpiry("2026-01-01T12:05:59.999Z", now); err != nil || !ts.Equal(now.Add(5*time.Minute)) {
		t.Errorf("expiry truncation: %v %v", ts, err)
	}
	for _, s := range []string{"2026-01-01T12:00:30Z", "2025-12-31T00:00:00Z", "2026-04-02T12:00:00Z", "soon"} {
		if _, err := ParseExpiry(s, now); !bad(err) {
			t.Errorf("expiry %q accepted", s)
		}
	}
	if _, err := CheckMetadata(json.RawMessage(`[1]`)); !bad(err) {
		t.Error("array metadata accepted")
	}
	if m, err := CheckMetadata(json.RawMessage(`null`)); err != nil || len(m) != 0 {
		t.Error("null metadata")
	}
}

func TestParseTagFilter(t *testing.T) {
	q := func(s string) url.Values { v, _ := url.ParseQuery(s); return v }
	for _, tc := range []struct {
		query string
		want  TagFilter
	}{
		{"", TagFilter{}},
		{"tags=" + url.QueryEscape(`{"a":"1","b":["2","3"],"c":{"not":"4"},"d":{"not":["5","6"]}}`), TagFilter{
			{Key: "a", In: []string{"1"}}, {Key: "b", In: []string{"2", "3"}}, {Key: "c", NotIn: []string{"4"}}, {Key: "d", NotIn: []string{"5", "6"}},
		}},
		{"tags.a=1&tags.b=3&tags.b=2&tags.c.not=4&tags[d]=7", TagFilter{
			{Key: "a", In: []string{"1"}}, {Key: "b", In: []string{"2", "3"}}, {Key: "c", NotIn: []string{"4"}}, {Key: "d", In: []string{"7"}},
		}},
	} {
		got, err := ParseTagFilter(q(tc.query))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v %v, want %+v", tc.query, got, err, tc.want)
		}
	}
	for _, s := range []string{`{`, `[]`, `{"a":1}`, `{"a":[]}`, `{"a":{"not":1}}`, `{"a":{"no":"x"}}`, `{"a":{"not":"x","and":"y"}}`, `{"":"x"}`, `{} {}`} {
		if _, err := ParseTagFilter(q("tags=" + url.QueryEscape(s))); platform.TypeOf(err) != platform.ErrInvalidPayload {
			t.Errorf("filter %s accepted", s)
		}
	}
	f, _ := ParseTagFilter(q("tags=" + url.QueryEscape(`{"a":["1","2"],"b":{"not":"x"}}`)))
	for tags, want := range map[string]bool{`{"a":"1"}`: true, `{"a":"2","b":"y"}`: true, `{"a":"3"}`: false, `{"a":"1","b":"x"}`: false, `{}`: false} {
		var m map[string]string
		json.Unmarshal([]byte(tags), &m)
		if f.Match(m) != want {
			t.Errorf("Match(%s) = %v", tags, !want)
		}
	}
	if eq := f.Equalities(); len(eq) != 0 {
		t.Errorf("equalities of an OR: %v", eq)
	}
}

func TestRef(t *testing.T) {
	r := Ref{ID: "file_x", Size: 12, ContentType: "text/plain; charset=utf-8", Filename: "a b&c=d+é.txt", Checksum: strings.Repeat("0", 64)}
	got, err := ParseRef("file_x", r.Query())
	if err != nil || got != r {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if got.Mismatch(r) != "" {
		t.Fatal("mismatch with itself")
	}
	for _, q := range []string{
		r.Query() + "&size=12", r.Query() + "&extra=1", "size=12", strings.Replace(r.Query(), "size=12", "size=012", 1),
		strings.Replace(r.Query(), "size=12", "size=-1", 1), r.Query() + "&" + strings.Repeat("x", 4096), "size=1&contentType=%ZZ",
	} {
		if _, err := ParseRef("file_x", q); platform.TypeOf(err) != platform.ErrInvalidQuery {
			t.Errorf("%.80s accepted (%v)", q, err)
		}
	}
}

func TestExtractAndSplit(t *testing.T) {
	md := "# T\n\nintro para\n\n## S1\n\n- a\n- b\n\n> quote\n\n| x | y |\n|---|---|\n\n```\ncode\n```\n\nSetext\n------\n\ntail"
	blocks, err := Extract("text/markdown", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, b := range blocks {
		kinds = append(kinds, b.Kind)
	}
	if strings.Join(kinds, ",") != "title,paragraph,subtitle,list,blockquote,table,code,subtitle,paragraph" {
		t.Fatalf("kinds %v", kinds)
	}
	ps := Passages("set", blocks, Chunking{})
	if ps[len(ps)-1].Breadcrumb != "T > Setext" || ps[1].Breadcrumb != "T" || ps[0].Breadcrumb != "" {
		t.Fatalf("breadcrumbs: %q %q %q", ps[0].Breadcrumb, ps[1].Breadcrumb, ps[len(ps)-1].Breadcrumb)
	}
	for i, p := range ps {
		if *p.Meta.Position != i || p.ID != PassageID("set", i) {
			t.Fatalf("passage %d: %+v", i, p)
		}
	}
	// Long text is cut at boundaries, every piece within the maximum.
	long := strings.Repeat("Sentence number one is here. ", 200)
	ps = Passages("s", []Block{{Kind: KindParagraph, Text: long}}, Chunking{MaxLength: 300})
	for _, p := range ps {
		if n := len([]rune(p.Content)); n > 300 || !strings.HasSuffix(p.Content, ".") {
			t.Fatalf("piece of %d: %q", n, p.Content)
		}
	}
	// Short paragraphs merge under MinParagraph.
	ps = Passages("s", []Block{{Kind: KindParagraph, Text: "a"}, {Kind: KindParagraph, Text: "b"}, {Kind: KindParagraph, Text: strings.Repeat("c", 60)}}, Chunking{MinParagraph: 50})
	if len(ps) != 1 {
		t.Fatalf("min paragraph: %d passages", len(ps))
	}
	// CSV and JSON.
	blocks, _ = Extract("text/csv; charset=utf-8", []byte("a,b\n1,2\n,3\n"))
	if len(blocks) != 2 || blocks[0].Text != "a: 1; b: 2" || blocks[1].Text != "b: 3" {
		t.Fatalf("csv: %+v", blocks)
	}
	blocks, _ = Extract("application/ld+json", []byte(`{"b":{"c":[1,true]},"a":null}`))
	if len(blocks) != 1 || blocks[0].Text != "b.c[0]: 1\nb.c[1]: true" {
		t.Fatalf("json: %+v", blocks)
	}
	if _, err := Extract("application/pdf", []byte("%PDF")); err == nil {
		t.Fatal("pdf extracted")
	}
	if !Indexable("text/x-go") || Indexable("image/png") {
		t.Fatal("Indexable")
	}
}

func TestRank(t *testing.T) {
	ps := []platform.IndexedPassage{
		{Passage: platform.Passage{Content: "the cat sat", Meta: platform.PassageMeta{Position: ptr(0)}}},
		{Passage: platform.Passage{Content: "cats and dogs and cats", Meta: platform.PassageMeta{Position: ptr(1)}}},
		{Passage: platform.Passage{Content: "dogs only", Meta: platform.PassageMeta{Position: ptr(2)}}},
	}
	byTerm := map[string][]platform.FilePosting{}
	for _, p := range Postings(ps) {
		byTerm[p.Term] = []platform.FilePosting{{FileID: "f", Set: "s", Passages: 3, Hits: p.Hits}}
	}
	q := map[string][]platform.FilePosting{}
	for _, t := range QueryTerms("Cats!") {
		q[t] = byTerm[t]
	}
	hits := Rank(q)
	if len(hits) != 2 || hits[0].Position != 1 || hits[1].Position != 0 || hits[0].Score <= hits[1].Score {
		t.Fatalf("hits %+v", hits)
	}
	if got := QueryTerms("The files, the FILES and a bot's 2 bots"); !reflect.DeepEqual(got, []string{"file", "bot", "2"}) {
		t.Fatalf("terms %v", got)
	}
}

func ptr(i int) *int { return &i }
