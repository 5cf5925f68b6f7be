package httpapi_test

import (
	"net/url"
	"testing"
)

// TestFilesDynamoDBCalls pins the DynamoDB calls of each Files operation
// (docs/files.md). Every call first pays 3 GetItems: token, bot, and the
// caller's membership of the bot's workspace.
func TestFilesDynamoDBCalls(t *testing.T) {
	f := newFilesFixture(t)
	g := f.upload("a.md", []byte("# A\n\nalpha words"), map[string]any{"index": true, "tags": map[string]string{"t": "v"}})
	id := g.Str("file.id")
	f.upload("b.txt", []byte("bravo"), nil)
	rec := recordUsage(f.Env)
	type calls map[string]int
	for _, tc := range []struct {
		name, op, method, path string
		body                   any
		want                   calls
	}{
		{"upsert new, no tags", "upsertFile", "PUT", "/v1/files", map[string]any{"key": "c.txt", "size": 1}, calls{"GetItem": 5, "TransactWriteItems": 1}},
		{"upsert new, tags", "upsertFile", "PUT", "/v1/files", map[string]any{"key": "d.txt", "size": 1, "tags": map[string]string{"x": "y"}}, calls{"GetItem": 5, "BatchWriteItem": 1, "TransactWriteItems": 1}},
		// Replacing: tag-index items, then the replaced generation's passages
		// and postings (2 Query, 1 BatchWriteItem).
		{"upsert existing, indexed", "upsertFile", "PUT", "/v1/files", map[string]any{"key": "a.md", "size": 1, "tags": map[string]string{"t": "v"}}, calls{"GetItem": 5, "BatchWriteItem": 2, "TransactWriteItems": 1, "Query": 3}},
		{"get by id", "getFile", "GET", "/v1/files/" + id, nil, calls{"GetItem": 4}},
		{"get by key", "getFile", "GET", "/v1/files/b.txt", nil, calls{"GetItem": 4}},
		{"list", "listFiles", "GET", "/v1/files", nil, calls{"GetItem": 3, "Query": 1}},
		{"list by key", "listFiles", "GET", "/v1/files?sortField=key", nil, calls{"GetItem": 3, "Query": 1}},
		{"list, one tag", "listFiles", "GET", "/v1/files?tags.t=v", nil, calls{"GetItem": 3, "BatchGetItem": 2, "Query": 1}},
		{"list by ids", "listFiles", "GET", "/v1/files?ids=" + id, nil, calls{"GetItem": 3, "BatchGetItem": 1}},
		{"update metadata", "updateFileMetadata", "PUT", "/v1/files/b.txt", map[string]any{"metadata": map[string]any{"m": 1}}, calls{"GetItem": 5, "TransactWriteItems": 1}},
		{"list tags", "listFileTags", "GET", "/v1/files/tags", nil, calls{"GetItem": 3, "Query": 1}},
		{"list tag values", "listFileTagValues", "GET", "/v1/files/tags/t/values", nil, calls{"GetItem": 3, "Query": 1}},
		{"list passages", "listFilePassages", "GET", "/v1/files/b.txt/passages", nil, calls{"GetItem": 4}},
		{"search, one term", "searchFiles", "GET", "/v1/files/search?query=bravo", nil, calls{"GetItem": 3, "Query": 1}},
		{"delete", "deleteFile", "DELETE", "/v1/files/b.txt", nil, calls{"GetItem": 5, "TransactWriteItems": 1, "Query": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do("", "", tc.method, tc.path, tc.body)
			f.Check(r, 200, tc.op)
			u := rec.of(tc.op)
			total := 0
			for op, n := range tc.want {
				total += n
				if got := u.Calls(op); got != n {
					t.Errorf("%d %s calls, want %d (all: %s)", got, op, n, u)
				}
			}
			if u.Calls("") != total {
				t.Errorf("%d calls in all, want %d (%s)", u.Calls(""), total, u)
			}
			t.Logf("%-26s %s", tc.name, u)
		})
	}
	// An indexed file's passages and a search that finds something.
	g = f.upload("e.md", []byte("# E\n\necho words"), map[string]any{"index": true})
	for _, tc := range []struct {
		name, op, path string
		want           calls
	}{
		{"list passages (indexed)", "listFilePassages", "/v1/files/e.md/passages", calls{"GetItem": 4, "Query": 1}},
		{"search, two terms, hits", "searchFiles", "/v1/files/search?query=" + url.QueryEscape("echo words"), calls{"GetItem": 3, "Query": 2, "BatchGetItem": 2}},
		{"download", "downloadFileRef", g.Str("file.url"), calls{"GetItem": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.op == "downloadFileRef" {
				if status, _, _ := f.download("", "", tc.path); status != 200 {
					t.Fatalf("download: %d", status)
				}
			} else {
				f.Check(f.do("", "", "GET", tc.path, nil), 200, tc.op)
			}
			u := rec.of(tc.op)
			total := 0
			for op, n := range tc.want {
				total += n
				if got := u.Calls(op); got != n {
					t.Errorf("%d %s calls, want %d (all: %s)", got, op, n, u)
				}
			}
			if u.Calls("") != total {
				t.Errorf("%d calls in all, want %d (%s)", u.Calls(""), total, u)
			}
			t.Logf("%-26s %s", tc.name, u)
		})
	}
}
