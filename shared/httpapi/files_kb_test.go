package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
)

// kbItems lists the stored knowledge-base records and files of the bot.
func (f *filesFixture) kbItems() []string {
	var out []string
	for _, k := range f.ItemsHolding(f.bot) {
		if strings.HasPrefix(k, "KB#") || strings.HasPrefix(k, "FILE#") {
			out = append(out, k)
		}
	}
	return out
}

// Knowledge bases: created, listed (newest first, tag filter, pages),
// renamed and retagged; files tied by their kbId tag, searchFiles scoped by
// it; deleting one deletes its files (records and contents) and no other.
func TestKnowledgeBases(t *testing.T) {
	f := newFilesFixture(t)
	create := func(name string, tags map[string]string) string {
		t.Helper()
		body := map[string]any{"name": name}
		if tags != nil {
			body["tags"] = tags
		}
		r := f.Check(f.do("", "", "POST", "/v1/files/knowledge-bases", body), 200, "createKnowledgeBase")
		if r.Str("knowledgeBase.name") != name || !strings.HasPrefix(r.Str("knowledgeBase.id"), "kb_") {
			t.Fatalf("createKnowledgeBase: %s", r.Raw)
		}
		return r.Str("knowledgeBase.id")
	}
	docs := create("Docs", map[string]string{"team": "a"})
	faq := create("FAQ", nil)
	list := func(q string) []any {
		return f.Check(f.do("", "", "GET", "/v1/files/knowledge-bases"+q, nil), 200, "listKnowledgeBases").List("knowledgeBases")
	}
	if l := list(""); len(l) != 2 || l[0].(map[string]any)["id"] != faq || l[1].(map[string]any)["createdAt"] == "" {
		t.Fatalf("listKnowledgeBases: %v", l)
	}
	if l := list("?tags.team=a"); len(l) != 1 || l[0].(map[string]any)["id"] != docs {
		t.Fatalf("tag filter: %v", l)
	}
	if l := list("?tags=" + url.QueryEscape(`{"team":{"not":"a"}}`)); len(l) != 1 || l[0].(map[string]any)["id"] != faq {
		t.Fatalf("not filter: %v", l)
	}
	p1 := f.Check(f.do("", "", "GET", "/v1/files/knowledge-bases?pageSize=1", nil), 200, "listKnowledgeBases")
	p2 := f.Check(f.do("", "", "GET", "/v1/files/knowledge-bases?pageSize=1&nextToken="+url.QueryEscape(p1.Str("meta.nextToken")), nil), 200, "listKnowledgeBases")
	if len(p1.List("knowledgeBases")) != 1 || len(p2.List("knowledgeBases")) != 1 || p2.List("knowledgeBases")[0].(map[string]any)["id"] != docs || p2.Str("meta.nextToken") != "" {
		t.Fatalf("pages: %s %s", p1.Raw, p2.Raw)
	}
	up := f.Check(f.do("", "", "PUT", "/v1/files/knowledge-bases/"+docs, map[string]any{"name": "Manual", "tags": map[string]any{"team": nil, "lang": "en"}}), 200, "updateKnowledgeBase")
	if up.Str("knowledgeBase.name") != "Manual" || up.Str("knowledgeBase.tags.lang") != "en" || up.Str("knowledgeBase.tags.team") != "" {
		t.Fatalf("updateKnowledgeBase: %s", up.Raw)
	}

	// Files of each, searched within one.
	inDocs := f.upload("manual.txt", []byte("The pricing of the product is monthly."), map[string]any{"index": true, "tags": map[string]string{"kbId": docs}})
	faqText := []byte("Pricing questions are answered here.")
	up0 := f.upsert(map[string]any{"key": "faq.txt", "size": len(faqText), "index": true, "tags": map[string]string{"kbId": faq}})
	faqObject := objectKey(t, up0.Str("file.uploadUrl"))
	if status := put(t, up0.Str("file.uploadUrl"), up0.Str("file.contentType"), faqText); status != 200 {
		t.Fatalf("upload: %d", status)
	}
	inFAQ := f.get(up0.Str("file.id"))
	loose := f.upload("loose.txt", []byte("pricing outside any knowledge base"), map[string]any{"index": true})
	scoped := f.Check(f.do("", "", "GET", "/v1/files/search?query=pricing&tags.kbId="+docs, nil), 200, "searchFiles").List("passages")
	if len(scoped) != 1 || scoped[0].(map[string]any)["file"].(map[string]any)["id"] != inDocs.Str("file.id") {
		t.Fatalf("search in the knowledge base: %v", scoped)
	}
	if all := f.search("pricing"); len(all) != 3 {
		t.Fatalf("search everywhere: %d passages", len(all))
	}

	// Bad input: 4xx, nothing written.
	before := strings.Join(f.kbItems(), ",")
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"no name", "POST", "/v1/files/knowledge-bases", map[string]any{}, 400},
		{"empty name", "POST", "/v1/files/knowledge-bases", map[string]any{"name": " "}, 400},
		{"name too long", "POST", "/v1/files/knowledge-bases", map[string]any{"name": strings.Repeat("n", 256)}, 400},
		{"tag not a string", "POST", "/v1/files/knowledge-bases", map[string]any{"name": "x", "tags": map[string]any{"a": 1}}, 400},
		{"unknown field", "POST", "/v1/files/knowledge-bases", map[string]any{"name": "x", "files": []string{}}, 400},
		{"update without name", "PUT", "/v1/files/knowledge-bases/" + faq, map[string]any{"tags": map[string]any{"a": "b"}}, 400},
		{"update tag too long", "PUT", "/v1/files/knowledge-bases/" + faq, map[string]any{"name": "x", "tags": map[string]any{"a": strings.Repeat("v", 1001)}}, 400},
		{"update unknown", "PUT", "/v1/files/knowledge-bases/kb_01ARZ3NDEKTSV4RRFFQ69G5FAV", map[string]any{"name": "x"}, 404},
		{"delete unknown", "DELETE", "/v1/files/knowledge-bases/kb_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"delete not an id", "DELETE", "/v1/files/knowledge-bases/" + inFAQ.Str("file.id"), nil, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.Check(f.do("", "", tc.method, tc.path, tc.body), tc.status, "")
			if after := strings.Join(f.kbItems(), ","); after != before {
				t.Fatalf("written:\n%s\n->\n%s", before, after)
			}
		})
	}

	// Roles: a viewer lists, writes nothing.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	f.Check(f.do(viewer, "", "GET", "/v1/files/knowledge-bases", nil), 200, "listKnowledgeBases")
	f.Check(f.do(viewer, "", "POST", "/v1/files/knowledge-bases", map[string]any{"name": "x"}), 403, "")
	f.Check(f.do(viewer, "", "PUT", "/v1/files/knowledge-bases/"+faq, map[string]any{"name": "x"}), 403, "")
	f.Check(f.do(viewer, "", "DELETE", "/v1/files/knowledge-bases/"+faq, nil), 403, "")
	// Tenancy: another bot sees none of them.
	other := f.createBot(f.AdminToken, map[string]any{"name": "other"})
	if l := f.Check(f.do("", other, "GET", "/v1/files/knowledge-bases", nil), 200, "listKnowledgeBases").List("knowledgeBases"); len(l) != 0 {
		t.Fatalf("other bot lists %v", l)
	}
	f.Check(f.do("", other, "PUT", "/v1/files/knowledge-bases/"+faq, map[string]any{"name": "x"}), 404, "")
	f.Check(f.do("", other, "DELETE", "/v1/files/knowledge-bases/"+faq, nil), 404, "")
	// Another PUT with two segments is no operation.
	f.Check(f.do("", "", "PUT", "/v1/files/other/"+faq, map[string]any{"name": "x"}), 405, "")

	// Deleting a knowledge base deletes its files, contents included.
	if !f.objectExists(faqObject) {
		t.Fatal("the file's content is not stored")
	}
	f.Check(f.do("", "", "DELETE", "/v1/files/knowledge-bases/"+faq, nil), 200, "deleteKnowledgeBase")
	f.Check(f.do("", "", "GET", "/v1/files/"+inFAQ.Str("file.id"), nil), 404, "")
	f.get(inDocs.Str("file.id"))
	f.get(loose.Str("file.id"))
	if l := list(""); len(l) != 1 || l[0].(map[string]any)["id"] != docs {
		t.Fatalf("after delete: %v", l)
	}
	if f.objectExists(faqObject) {
		t.Fatal("the deleted file's content remains")
	}
	if left := f.ItemsHolding(inFAQ.Str("file.id"), "KB#"+f.bot+"#"+faq); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	f.Check(f.do("", "", "DELETE", "/v1/files/knowledge-bases/"+faq, nil), 404, "")
}
