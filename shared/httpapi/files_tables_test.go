package httpapi_test

import (
	"strings"
	"testing"
)

// TestFilesTableExportImport: table exports become files of the bot
// (stored, completed and served like uploads), and an uploaded file imports
// into a table.
func TestFilesTableExportImport(t *testing.T) {
	f := newFilesFixture(t)
	schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "city": map[string]any{"type": "string"}}}
	f.Check(f.do("", "", "POST", "/v1/tables", map[string]any{"name": "placesTable", "schema": schema}), 200, "createTable")
	f.Check(f.do("", "", "POST", "/v1/tables/placesTable/rows", map[string]any{"rows": []any{
		map[string]any{"name": "Ada", "city": "London"}, map[string]any{"name": "Alan", "city": "Wilmslow"},
	}}), 200, "createTableRows")

	r := f.Check(f.do("", "", "GET", "/v1/tables/placesTable/export?format=csv&compress=false", nil), 200, "exportTable")
	id := r.Str("job.outputFileId")
	g := f.get(id)
	if g.Str("file.status") != "upload_completed" || !strings.HasPrefix(g.Str("file.key"), "tables/placesTable/") {
		t.Fatalf("export file: %s", g.Raw)
	}
	status, body, _ := f.download("", "", g.Str("file.url"))
	if status != 200 || !strings.Contains(string(body), "Wilmslow") {
		t.Fatalf("export download: %d %s", status, body)
	}
	// Another bot cannot import it.
	other := f.createBot(f.AdminToken, map[string]any{"name": "other"})
	f.Check(f.do("", other, "POST", "/v1/tables", map[string]any{"name": "placesTable", "schema": schema}), 200, "createTable")
	f.Check(f.do("", other, "POST", "/v1/tables/placesTable/import", map[string]any{"fileId": id}), 404, "")

	// An uploaded CSV imports; a pending file does not.
	up := f.upload("import.csv", []byte("name,city\nGrace,Arlington\n"), nil)
	f.Check(f.do("", "", "POST", "/v1/tables", map[string]any{"name": "importedTable", "schema": schema}), 200, "createTable")
	im := f.Check(f.do("", "", "POST", "/v1/tables/importedTable/import", map[string]any{"fileId": up.Str("file.id")}), 200, "importTable")
	if im.Str("job.status") != "completed" {
		t.Fatalf("import: %s", im.Raw)
	}
	rows := f.Check(f.do("", "", "POST", "/v1/tables/importedTable/rows/find", map[string]any{}), 200, "findTableRows")
	if l := rows.List("rows"); len(l) != 1 || l[0].(map[string]any)["city"] != "Arlington" {
		t.Fatalf("imported rows: %s", rows.Raw)
	}
	pending := f.upsert(map[string]any{"key": "later.csv", "size": 10})
	f.Check(f.do("", "", "POST", "/v1/tables/importedTable/import", map[string]any{"fileId": pending.Str("file.id")}), 400, "")
}
