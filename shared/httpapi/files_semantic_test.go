package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/files"
)

// fakeEmbeddings is an OpenAI-compatible POST /v1/embeddings whose vectors
// place synonyms together: each word adds 1 on its concept's dimension, so
// "automobile" is close to "car" with no word in common.
type fakeEmbeddings struct {
	srv *httptest.Server

	mu       sync.Mutex
	calls    int
	inputs   []int // inputs of each call
	models   []string
	failWith int  // status answered while set
	hang     bool // no answer until the client gives up
}

var concepts = map[string]int{
	"car": 0, "automobile": 0, "vehicle": 0, "sedan": 0,
	"cat": 1, "feline": 1, "kitten": 1,
	"invoice": 2, "billing": 2, "payment": 2, "refund": 2,
	"weather": 3, "rain": 3, "sunny": 3,
}

const fakeDims = 8

func newFakeEmbeddings(t *testing.T) *fakeEmbeddings {
	f := &fakeEmbeddings{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || r.Method != "POST" || json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(w, "bad request", 400)
			return
		}
		f.mu.Lock()
		f.calls++
		f.inputs = append(f.inputs, len(in.Input))
		f.models = append(f.models, in.Model)
		fail, hang := f.failWith, f.hang
		f.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		if fail != 0 {
			http.Error(w, `{"error":{"message":"model overloaded"}}`, fail)
			return
		}
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := []datum{}
		for i, text := range in.Input {
			v := make([]float32, fakeDims)
			v[fakeDims-1] = 0.05 // every text a little alike
			for _, w := range files.Terms(text) {
				if d, ok := concepts[w]; ok {
					v[d]++
				}
			}
			out = append(out, datum{Index: i, Embedding: v})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": out, "model": in.Model})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEmbeddings) set(fn func(*fakeEmbeddings)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeEmbeddings) stats() (calls int, inputs []int, models []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, append([]int(nil), f.inputs...), append([]string(nil), f.models...)
}

// newSemanticFixture is a platform whose embeddings model is the fake,
// on its own endpoint (PLATFORM_EMBEDDINGS_URL).
func newSemanticFixture(t *testing.T, env map[string]string) (*filesFixture, *fakeEmbeddings) {
	emb := newFakeEmbeddings(t)
	t.Setenv("PLATFORM_EMBEDDINGS_MODEL", "text-embedding-3-small")
	t.Setenv("PLATFORM_EMBEDDINGS_URL", emb.srv.URL+"/v1")
	for k, v := range env {
		t.Setenv(k, v)
	}
	return newFilesFixture(t), emb
}

const garageTxt = "My sedan is parked in the garage.\n\nThe garage door is green.\n\nThe kitten sleeps on the sofa."

func TestFilesSemanticSearchRanking(t *testing.T) {
	// The same files and queries with and without an embeddings model.
	for _, semantic := range []bool{false, true} {
		t.Run(fmt.Sprintf("semantic=%v", semantic), func(t *testing.T) {
			var f *filesFixture
			var emb *fakeEmbeddings
			if semantic {
				f, emb = newSemanticFixture(t, nil)
			} else {
				t.Setenv("PLATFORM_EMBEDDINGS_MODEL", "")
				f = newFilesFixture(t)
			}
			f.upload("garage.txt", []byte(garageTxt), map[string]any{"index": true})
			f.upload("money.txt", []byte("Ask for a refund within 30 days.\n\nThe garage sale is on Sunday."), map[string]any{"index": true})

			// No word in common: only the vectors find the sedan.
			ps := f.search("automobile")
			if !semantic {
				if len(ps) != 0 {
					t.Fatalf("lexical search found %q", contents(ps))
				}
			} else if len(ps) == 0 || !strings.Contains(ps[0]["content"].(string), "sedan") {
				t.Fatalf("automobile: %q", contents(ps))
			}
			// "garage" is in three passages; with vectors, "garage
			// vehicle" puts the one about the sedan first (and the most
			// similar passages join, without a word in common), lexically
			// a passage that only has "garage" ranks as high.
			r := f.Check(f.do("", "", "GET", "/v1/files/search?contextDepth=0&query="+url.QueryEscape("garage vehicle"), nil), 200, "searchFiles")
			var got []string
			for _, p := range r.List("passages") {
				got = append(got, p.(map[string]any)["content"].(string))
			}
			if want := map[bool]int{false: 3, true: 5}[semantic]; len(got) != want {
				t.Fatalf("garage vehicle: %d passages %q, want %d", len(got), got, want)
			}
			if semantic != (got[0] == "My sedan is parked in the garage.") {
				t.Fatalf("semantic=%v: garage vehicle ranks %q", semantic, got)
			}
			for i, p := range r.List("passages") {
				if s := p.(map[string]any)["score"].(float64); s <= 0 || (i > 0 && s > r.List("passages")[i-1].(map[string]any)["score"].(float64)) {
					t.Fatalf("scores not best first: %s", r.Raw)
				}
			}
			if !semantic {
				return
			}
			calls, inputs, models := emb.stats()
			// Two files (3 and 2 passages), then one query each search.
			if calls != 4 || inputs[0] != 3 || inputs[1] != 2 || inputs[2] != 1 || models[0] != "text-embedding-3-small" {
				t.Fatalf("embeddings calls %d, inputs %v, models %v", calls, inputs, models)
			}
		})
	}
}

func TestFilesSemanticIndexingBatchesAndVectorsGo(t *testing.T) {
	f, emb := newSemanticFixture(t, nil)
	var b strings.Builder
	for i := range 150 {
		fmt.Fprintf(&b, "Paragraph %d about the weather.\n\n", i)
	}
	g := f.upload("many.txt", []byte(b.String()), map[string]any{"index": true})
	if g.Str("file.status") != "indexing_completed" {
		t.Fatalf("indexing: %s", g.Raw)
	}
	_, inputs, _ := emb.stats()
	if fmt.Sprint(inputs) != "[64 64 22]" {
		t.Fatalf("batches of at most 64: %v", inputs)
	}
	id := g.Str("file.id")
	vecItems := func() int {
		n := 0
		for _, k := range f.ItemsHolding(id) {
			if strings.Contains(k, "/ VEC#") {
				n++
			}
		}
		return n
	}
	if vecItems() == 0 {
		t.Fatal("no vector items stored")
	}
	// The bot's vector storage, in bytes (a float32 scale and fakeDims int8
	// values a vector), as getUsage's knowledgebase_vector_storage.
	vectorBytes := func(want float64) {
		t.Helper()
		for _, id := range []string{f.bot, f.ws} { // the bot, and its workspace's sum
			r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/usages/" + id + "?type=knowledgebase_vector_storage", Token: f.AdminToken}), 200, "getUsage")
			if got := r.Body["usage"].(map[string]any)["value"]; got != want {
				t.Fatalf("knowledgebase_vector_storage of %s: %v, want %v", id, got, want)
			}
		}
	}
	vectorBytes(150 * (4 + fakeDims))
	// Passages replaced: the old set's vectors go with it.
	f.Check(f.do("", "", "PUT", "/v1/files/"+id+"/passages", map[string]any{"passages": []any{map[string]any{"content": "It is sunny."}}}), 200, "setFilePassages")
	if n := vecItems(); n != 2 { // one chunk and its manifest
		t.Fatalf("%d vector items after setFilePassages, want 2", n)
	}
	vectorBytes(1 * (4 + fakeDims))
	if ps := f.search("rain"); len(ps) != 1 || ps[0]["content"] != "It is sunny." {
		t.Fatalf("rain after setFilePassages: %q", contents(ps))
	}
	// Deleted: nothing of the file is left, vectors included.
	f.Check(f.do("", "", "DELETE", "/v1/files/"+id, nil), 200, "deleteFile")
	if left := f.ItemsHolding(id); len(left) != 0 {
		t.Fatalf("left after deleteFile: %v", left)
	}
	vectorBytes(0)
	before, _, _ := emb.stats()
	if ps := f.search("rain"); len(ps) != 0 {
		t.Fatalf("deleted file found: %q", contents(ps))
	}
	// A bot without vectors: the query is not sent to the model.
	if after, _, _ := emb.stats(); after != before {
		t.Fatalf("%d embeddings calls for a search in a bot without vectors", after-before)
	}
}

func TestFilesSemanticFailures(t *testing.T) {
	f, emb := newSemanticFixture(t, map[string]string{"PLATFORM_EMBEDDINGS_TIMEOUT": "300ms"})
	f.upload("ok.txt", []byte(garageTxt), map[string]any{"index": true})

	for _, tc := range []struct {
		name   string
		set    func(*fakeEmbeddings)
		reason string
	}{
		{"upstream error", func(e *fakeEmbeddings) { e.failWith = 503 }, "answered 503"},
		{"timeout", func(e *fakeEmbeddings) { e.hang = true }, "no answer within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb.set(func(e *fakeEmbeddings) {
				e.calls, e.inputs, e.models, e.failWith, e.hang = 0, nil, nil, 0, false
				tc.set(e)
			})
			g := f.upload("bad-"+strings.ReplaceAll(tc.name, " ", "-")+".txt", []byte("The automobile is blue."), map[string]any{"index": true})
			reason := g.Str("file.failedStatusReason")
			if g.Str("file.status") != "indexing_failed" || !strings.Contains(reason, "embedding the passages failed") || !strings.Contains(reason, tc.reason) || g.Str("file.url") == "" {
				t.Fatalf("a failing model marks the file: %s", g.Raw)
			}
			if strings.Contains(reason, emb.srv.URL) {
				t.Fatalf("the reason shows the operator's endpoint: %q", reason)
			}
			if calls, _, _ := emb.stats(); calls != 3 {
				t.Fatalf("%d attempts, want 3", calls)
			}
			// setFilePassages: 502 naming the model, passages unchanged.
			r := f.do("", "", "PUT", "/v1/files/ok.txt/passages", map[string]any{"passages": []any{map[string]any{"content": "replaced"}}})
			f.Check(r, 502, "setFilePassages")
			if !strings.Contains(r.Str("message"), "text-embedding-3-small") {
				t.Fatalf("502 message: %s", r.Raw)
			}
			if ps := f.passages("ok.txt", 10); len(ps) != 3 {
				t.Fatalf("passages changed: %v", ps)
			}
			// Search stays lexical while the model fails.
			if ps := f.search("garage"); len(ps) != 2 {
				t.Fatalf("lexical search while the model fails: %q", contents(ps))
			}
		})
	}
}
