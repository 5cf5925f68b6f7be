package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
)

// tablesFixture is a platform with a workspace, a bot and helpers calling
// the Tables API on that bot.
type tablesFixture struct {
	*fixture
	bot string
}

func newTablesFixture(t *testing.T) *tablesFixture {
	f := newFixture(t)
	return &tablesFixture{fixture: f, bot: f.createBot(f.AdminToken, nil)}
}

// tb calls the Tables API on the fixture's bot with token.
func (f *tablesFixture) tb(token, method, path string, body any) apitest.Response {
	f.T.Helper()
	return f.Do(apitest.Req{Method: method, Path: path, Token: token, Body: body, Headers: map[string]string{"x-bot-id": f.bot}})
}

// ok calls as the admin and checks a 200 valid for op.
func (f *tablesFixture) ok(op, method, path string, body any) apitest.Response {
	f.T.Helper()
	return f.Check(f.tb(f.AdminToken, method, path, body), 200, op)
}

// fail calls as the admin and checks the status.
func (f *tablesFixture) fail(status int, method, path string, body any) apitest.Response {
	f.T.Helper()
	return f.Check(f.tb(f.AdminToken, method, path, body), status, "")
}

// col is a column definition.
func tcol(typ string, extra ...any) map[string]any {
	c := map[string]any{"type": typ}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

// schemaOf is a table schema with the given columns.
func tschema(cols map[string]any, extra ...any) map[string]any {
	s := map[string]any{"type": "object", "properties": cols}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i].(string)] = extra[i+1]
	}
	return s
}

// createTable creates a table and returns its id.
func (f *tablesFixture) createTable(name string, schema map[string]any, extra ...any) string {
	f.T.Helper()
	body := map[string]any{"name": name, "schema": schema}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return f.ok("createTable", "POST", "/v1/tables", body).Str("table.id")
}

// rows creates rows and returns the response.
func (f *tablesFixture) rows(table string, rows ...map[string]any) apitest.Response {
	f.T.Helper()
	return f.ok("createTableRows", "POST", "/v1/tables/"+table+"/rows", map[string]any{"rows": rows})
}

// find runs findTableRows.
func (f *tablesFixture) find(table string, body map[string]any) apitest.Response {
	f.T.Helper()
	return f.ok("findTableRows", "POST", "/v1/tables/"+table+"/rows/find", body)
}

// ids returns the ids of a list of rows.
func tids(rows []any) []int {
	out := []int{}
	for _, r := range rows {
		out = append(out, int(r.(map[string]any)["id"].(float64)))
	}
	return out
}

func trows(r apitest.Response, name string) []map[string]any {
	out := []map[string]any{}
	for _, x := range r.List(name) {
		out = append(out, x.(map[string]any))
	}
	return out
}

func tjson(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var tPeopleSchema = tschema(map[string]any{
	"name":     tcol("string", "x-zui", map[string]any{"searchable": true}),
	"age":      tcol("number"),
	"active":   tcol("boolean"),
	"joined":   tcol("string", "format", "date-time"),
	"address":  tcol("object", "properties", map[string]any{"city": tcol("string")}),
	"tags":     tcol("array", "items", tcol("string")),
	"nickname": tcol("string", "nullable", true),
}, "required", []string{"name"})

func TestTablesLifecycle(t *testing.T) {
	f := newTablesFixture(t)
	id := f.createTable("peopleTable", tPeopleSchema, "tags", map[string]string{"team": "a"}, "factor", 2)

	got := f.ok("getTable", "GET", "/v1/tables/peopleTable", nil)
	if got.Str("table.id") != id || got.Body["rows"] != float64(0) || got.Str("table.schema.properties.name.type") != "string" {
		t.Fatalf("getTable: %s", got.Raw)
	}
	// x-zui is kept and every column gets an index.
	if !strings.Contains(string(got.Raw), `"searchable":true`) || !strings.Contains(string(got.Raw), `"index":0`) {
		t.Fatalf("x-zui not kept or indexed: %s", got.Raw)
	}
	f.ok("getTable", "GET", "/v1/tables/"+id, nil)

	l := f.ok("listTables", "GET", "/v1/tables", nil)
	if len(l.List("tables")) != 1 {
		t.Fatalf("listTables: %s", l.Raw)
	}
	l = f.ok("listTables", "GET", "/v1/tables?"+url.Values{"tags[team]": {"b"}}.Encode(), nil)
	if len(l.List("tables")) != 0 {
		t.Fatalf("listTables by tag: %s", l.Raw)
	}
	l = f.ok("listTables", "GET", "/v1/tables?tags.team=a", nil)
	if len(l.List("tables")) != 1 {
		t.Fatalf("listTables by tag: %s", l.Raw)
	}

	// getOrCreateTable: existing, then new.
	g := f.ok("getOrCreateTable", "POST", "/v1/tables/peopleTable", map[string]any{"schema": tPeopleSchema})
	if g.Body["created"] != false || g.Str("table.id") != id {
		t.Fatalf("getOrCreateTable existing: %s", g.Raw)
	}
	g = f.ok("getOrCreateTable", "POST", "/v1/tables/otherTable", map[string]any{"schema": tschema(map[string]any{"x": tcol("number")})})
	if g.Body["created"] != true || g.Str("table.name") != "otherTable" {
		t.Fatalf("getOrCreateTable new: %s", g.Raw)
	}
	f.fail(409, "POST", "/v1/tables", map[string]any{"name": "otherTable", "schema": tschema(map[string]any{"x": tcol("number")})})

	// updateTable merges columns, removes those given as null, renames.
	u := f.ok("updateTable", "PUT", "/v1/tables/otherTable", map[string]any{
		"name":   "renamedTable",
		"schema": map[string]any{"properties": map[string]any{"y": tcol("string"), "x": nil}},
		"tags":   map[string]string{"k": "v"},
		"factor": 3,
	})
	if u.Str("table.name") != "renamedTable" || u.Str("table.schema.properties.y.type") != "string" || strings.Contains(string(u.Raw), `"x":{`) {
		t.Fatalf("updateTable: %s", u.Raw)
	}
	f.fail(404, "GET", "/v1/tables/otherTable", nil)
	f.ok("getTable", "GET", "/v1/tables/renamedTable", nil)
	f.fail(400, "PUT", "/v1/tables/renamedTable", map[string]any{"factor": 1}) // factor only grows

	// renameTableColumn keeps the values.
	f.rows("peopleTable", map[string]any{"name": "Ada", "age": 36})
	r := f.ok("renameTableColumn", "PUT", "/v1/tables/peopleTable/column", map[string]any{"name": "age", "newName": "years"})
	if r.Str("table.schema.properties.years.type") != "number" {
		t.Fatalf("rename: %s", r.Raw)
	}
	row := f.ok("getTableRow", "GET", "/v1/tables/peopleTable/row?id=1", nil)
	if row.Body["row"].(map[string]any)["years"] != float64(36) {
		t.Fatalf("renamed column lost its value: %s", row.Raw)
	}
	f.fail(404, "PUT", "/v1/tables/peopleTable/column", map[string]any{"name": "nope", "newName": "x"})
	f.fail(409, "PUT", "/v1/tables/peopleTable/column", map[string]any{"name": "years", "newName": "name"})

	// deleteTable takes its rows.
	f.ok("deleteTable", "DELETE", "/v1/tables/peopleTable", nil)
	f.fail(404, "GET", "/v1/tables/peopleTable", nil)
	f.fail(404, "GET", "/v1/tables/peopleTable/row?id=1", nil)
	f.createTable("peopleTable", tPeopleSchema)
	f.fail(404, "GET", "/v1/tables/peopleTable/row?id=1", nil)
}

func TestTableRows(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("peopleTable", tPeopleSchema)
	c := f.rows("peopleTable",
		map[string]any{"name": "Ada", "age": 36, "joined": "2024-01-02T03:04:05Z", "tags": []string{"x"}},
		map[string]any{"age": 1},                  // missing required name
		map[string]any{"name": "Bob", "age": "x"}, // wrong type
		map[string]any{"name": "Cy", "unknown": 1, "id": 77},
	)
	rows := trows(c, "rows")
	if len(rows) != 2 || len(c.List("errors")) != 2 || len(c.List("warnings")) != 2 {
		t.Fatalf("createTableRows partial: %s", c.Raw)
	}
	if rows[0]["id"] != float64(1) || rows[1]["id"] != float64(2) || rows[0]["createdAt"] == nil {
		t.Fatalf("ids: %s", c.Raw)
	}
	u := f.ok("updateTableRows", "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{
		map[string]any{"id": 1, "age": 37},
		map[string]any{"id": 99, "age": 1},
	}})
	if len(u.List("rows")) != 1 || len(u.List("errors")) != 1 || trows(u, "rows")[0]["name"] != "Ada" || trows(u, "rows")[0]["age"] != float64(37) {
		t.Fatalf("updateTableRows: %s", u.Raw)
	}
	f.fail(404, "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"id": 99, "age": 1}}})
	f.fail(400, "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1, "age": "old"}}})

	up := f.ok("upsertTableRows", "POST", "/v1/tables/peopleTable/rows/upsert", map[string]any{"rows": []any{
		map[string]any{"id": 2, "age": 50},
		map[string]any{"name": "Dee"},
	}})
	if len(up.List("inserted")) != 1 || len(up.List("updated")) != 1 {
		t.Fatalf("upsert by id: %s", up.Raw)
	}
	up = f.ok("upsertTableRows", "POST", "/v1/tables/peopleTable/rows/upsert", map[string]any{"keyColumn": "name", "rows": []any{
		map[string]any{"name": "Dee", "age": 9},
		map[string]any{"name": "Eve", "age": 10},
	}})
	// By a column that is not the key column: through its column index.
	if len(up.List("inserted")) != 1 || len(up.List("updated")) != 1 || len(up.List("warnings")) != 0 {
		t.Fatalf("upsert by column: %s", up.Raw)
	}
	g := f.ok("getTable", "GET", "/v1/tables/peopleTable", nil)
	if g.Body["rows"] != float64(4) {
		t.Fatalf("row count: %s", g.Raw)
	}
	d := f.ok("deleteTableRows", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"ids": []int{1, 1, 1000}})
	if d.Body["deletedRows"] != float64(1) {
		t.Fatalf("delete by ids: %s", d.Raw)
	}
	d = f.ok("deleteTableRows", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"filter": map[string]any{"age": map[string]any{"$gte": 10}}})
	if d.Body["deletedRows"] != float64(2) {
		t.Fatalf("delete by filter: %s", d.Raw)
	}
	d = f.ok("deleteTableRows", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"deleteAllRows": true})
	if d.Body["deletedRows"] != float64(1) {
		t.Fatalf("delete all: %s", d.Raw)
	}
	g = f.ok("getTable", "GET", "/v1/tables/peopleTable", nil)
	if g.Body["rows"] != float64(0) {
		t.Fatalf("row count after deletes: %s", g.Raw)
	}
	// Ids keep increasing after deletes.
	c = f.rows("peopleTable", map[string]any{"name": "Fay"})
	if trows(c, "rows")[0]["id"] != float64(5) {
		t.Fatalf("id after deletes: %s", c.Raw)
	}
}

// tablesFindFixture is a people table with six rows (ids 1 to 6).
func tablesFindFixture(t *testing.T) *tablesFixture {
	f := newTablesFixture(t)
	f.createTable("peopleTable", tPeopleSchema)
	f.rows("peopleTable",
		map[string]any{"name": "Ada Lovelace", "age": 36, "active": true, "joined": "2024-01-10T00:00:00Z", "address": map[string]any{"city": "London"}, "tags": []string{"math", "poetry"}},
		map[string]any{"name": "Alan Turing", "age": 41, "active": false, "joined": "2023-06-01T12:00:00Z", "address": map[string]any{"city": "Wilmslow"}, "tags": []string{"math"}},
		map[string]any{"name": "Grace Hopper", "age": 85, "active": true, "joined": "2022-12-09T00:00:00.000Z", "address": map[string]any{"city": "Arlington"}},
		map[string]any{"name": "Edsger Dijkstra", "age": 72, "joined": "2024-05-11T08:30:00+02:00", "nickname": nil},
		map[string]any{"name": "Barbara Liskov", "age": 84, "active": true, "tags": []string{"systems", "math"}},
		map[string]any{"name": "<b>&amp;\u2028 \"odd\"", "age": 1.5},
	)
	return f
}

func TestFindTableRowsFilters(t *testing.T) {
	f := tablesFindFixture(t)
	for _, tc := range []struct {
		name   string
		filter any
		want   []int
	}{
		{"implicit eq", map[string]any{"name": "Ada Lovelace"}, []int{1}},
		{"eq", map[string]any{"age": map[string]any{"$eq": 41}}, []int{2}},
		{"eq html chars", map[string]any{"name": "<b>&amp;\u2028 \"odd\""}, []int{6}},
		{"ne", map[string]any{"active": map[string]any{"$ne": true}}, []int{2, 4, 6}},
		{"gt lt", map[string]any{"age": map[string]any{"$gt": 36, "$lt": 85}}, []int{2, 4, 5}},
		{"gte lte", map[string]any{"age": map[string]any{"$gte": 36, "$lte": 41}}, []int{1, 2}},
		{"in", map[string]any{"age": map[string]any{"$in": []any{36, 85, 1000}}}, []int{1, 3}},
		{"nin", map[string]any{"age": map[string]any{"$nin": []any{36, 85}}}, []int{2, 4, 5, 6}},
		{"exists", map[string]any{"active": map[string]any{"$exists": true}}, []int{1, 2, 3, 5}},
		{"not exists", map[string]any{"active": map[string]any{"$exists": false}}, []int{4, 6}},
		{"null matches missing and null", map[string]any{"nickname": nil}, []int{1, 2, 3, 4, 5, 6}},
		{"regex", map[string]any{"name": map[string]any{"$regex": "^a"}}, []int{}},
		{"regex options", map[string]any{"name": map[string]any{"$regex": "^a", "$options": "i"}}, []int{1, 2}},
		{"not", map[string]any{"age": map[string]any{"$not": map[string]any{"$gt": 50}}}, []int{1, 2, 6}},
		{"and", map[string]any{"$and": []any{map[string]any{"active": true}, map[string]any{"age": map[string]any{"$gt": 80}}}}, []int{3, 5}},
		{"or", map[string]any{"$or": []any{map[string]any{"age": 36}, map[string]any{"name": "Alan Turing"}}}, []int{1, 2}},
		{"top-level not", map[string]any{"$not": map[string]any{"active": true}}, []int{2, 4, 6}},
		{"dot path", map[string]any{"address.city": "London"}, []int{1}},
		{"dot path regex", map[string]any{"address.city": map[string]any{"$regex": "ton$"}}, []int{3}},
		{"array contains", map[string]any{"tags": "math"}, []int{1, 2, 5}},
		{"array in", map[string]any{"tags": map[string]any{"$in": []any{"poetry", "systems"}}}, []int{1, 5}},
		{"date as date", map[string]any{"joined": map[string]any{"$gte": "2024-01-01"}}, []int{1, 4}},
		{"date equality across formats", map[string]any{"joined": "2022-12-09T00:00:00Z"}, []int{3}},
		{"date with offset", map[string]any{"joined": map[string]any{"$lt": "2024-05-11T07:00:00Z"}}, []int{1, 2, 3, 4}},
		{"system id", map[string]any{"id": map[string]any{"$in": []any{2, 3}}}, []int{2, 3}},
		{"system createdAt", map[string]any{"createdAt": map[string]any{"$gt": "2000-01-01"}}, []int{1, 2, 3, 4, 5, 6}},
		{"number fraction", map[string]any{"age": 1.5}, []int{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.find("peopleTable", map[string]any{"filter": tc.filter})
			if got := tids(r.List("rows")); tjson(got) != tjson(tc.want) {
				t.Fatalf("got %v, want %v: %s", got, tc.want, r.Raw)
			}
		})
	}
}

func TestFindTableRowsBadFilters(t *testing.T) {
	f := tablesFindFixture(t)
	deep := map[string]any{"age": 1}
	for i := 0; i < 12; i++ {
		deep = map[string]any{"$and": []any{deep}}
	}
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"unknown column", map[string]any{"filter": map[string]any{"nope": 1}}},
		{"where", map[string]any{"filter": map[string]any{"$where": "this.age > 1"}}},
		{"expr", map[string]any{"filter": map[string]any{"$expr": map[string]any{"$gt": []any{"$age", 1}}}}},
		{"unknown field operator", map[string]any{"filter": map[string]any{"age": map[string]any{"$elemMatch": 1}}}},
		{"function", map[string]any{"filter": map[string]any{"name": map[string]any{"$function": "x"}}}},
		{"deep nesting", map[string]any{"filter": deep}},
		{"bad regex", map[string]any{"filter": map[string]any{"name": map[string]any{"$regex": "("}}}},
		{"long regex", map[string]any{"filter": map[string]any{"name": map[string]any{"$regex": strings.Repeat("a", 300)}}}},
		{"backreference", map[string]any{"filter": map[string]any{"name": map[string]any{"$regex": `(a+)+\1`}}}},
		{"bad options", map[string]any{"filter": map[string]any{"name": map[string]any{"$regex": "a", "$options": "x"}}}},
		{"options alone", map[string]any{"filter": map[string]any{"name": map[string]any{"$options": "i"}}}},
		{"in not array", map[string]any{"filter": map[string]any{"age": map[string]any{"$in": 3}}}},
		{"gt object", map[string]any{"filter": map[string]any{"age": map[string]any{"$gt": map[string]any{}}}}},
		{"date not a date", map[string]any{"filter": map[string]any{"joined": map[string]any{"$gt": "yesterday"}}}},
		{"and not array", map[string]any{"filter": map[string]any{"$and": map[string]any{}}}},
		{"filter not object", map[string]any{"filter": []any{1}}},
		{"limit 0", map[string]any{"limit": 0}},
		{"limit 1001", map[string]any{"limit": 1001}},
		{"negative offset", map[string]any{"offset": -1}},
		{"unknown orderBy", map[string]any{"orderBy": "nope"}},
		{"bad direction", map[string]any{"orderDirection": "up"}},
		{"unknown field", map[string]any{"where": 1}},
		{"bad group op", map[string]any{"group": map[string]any{"age": "median"}}},
		{"group unknown column", map[string]any{"group": map[string]any{"nope": "key"}}},
		{"search too long", map[string]any{"search": strings.Repeat("a", 1025)}},
		{"window too large", map[string]any{"orderBy": "age", "offset": 9500, "limit": 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.fail(400, "POST", "/v1/tables/peopleTable/rows/find", tc.body)
			if r.Str("type") != "InvalidPayload" {
				t.Fatalf("type: %s", r.Raw)
			}
		})
	}
}

func TestFindTableRowsOrderSelectPage(t *testing.T) {
	f := tablesFindFixture(t)
	r := f.find("peopleTable", map[string]any{"orderBy": "age", "orderDirection": "desc", "limit": 2})
	if got := tids(r.List("rows")); tjson(got) != "[3,5]" || r.Body["hasMore"] != true {
		t.Fatalf("order by age desc: %v %s", got, r.Raw)
	}
	r = f.find("peopleTable", map[string]any{"orderBy": "age", "limit": 2, "offset": 4})
	if got := tids(r.List("rows")); tjson(got) != "[5,3]" || r.Body["hasMore"] != false || r.Body["offset"] != float64(4) {
		t.Fatalf("order by age, last page: %v %s", got, r.Raw)
	}
	r = f.find("peopleTable", map[string]any{"orderDirection": "desc", "limit": 4})
	if got := tids(r.List("rows")); tjson(got) != "[6,5,4,3]" || r.Body["hasMore"] != true {
		t.Fatalf("order by id desc: %v", got)
	}
	r = f.find("peopleTable", map[string]any{"limit": 3, "offset": 3})
	if got := tids(r.List("rows")); tjson(got) != "[4,5,6]" || r.Body["hasMore"] != false {
		t.Fatalf("page by id: %v %s", got, r.Raw)
	}
	r = f.find("peopleTable", map[string]any{"orderBy": "joined", "filter": map[string]any{"joined": map[string]any{"$exists": true}}})
	if got := tids(r.List("rows")); tjson(got) != "[3,2,1,4]" {
		t.Fatalf("order by date: %v", got)
	}
	r = f.find("peopleTable", map[string]any{"select": []string{"address.city", "nope"}, "limit": 1})
	row := trows(r, "rows")[0]
	if _, has := row["name"]; has || row["address"].(map[string]any)["city"] != "London" || row["id"] != float64(1) || len(r.List("warnings")) != 1 {
		t.Fatalf("select: %s", r.Raw)
	}
	// A comparison that can never hold is answered, with a warning.
	r = f.find("peopleTable", map[string]any{"filter": map[string]any{"age": "old"}})
	if len(r.List("rows")) != 0 || len(r.List("warnings")) != 1 {
		t.Fatalf("questionable filter: %s", r.Raw)
	}
}

func TestFindTableRowsGroupAndSearch(t *testing.T) {
	f := tablesFindFixture(t)
	r := f.find("peopleTable", map[string]any{"group": map[string]any{"active": "key", "age": []string{"sum", "avg", "min", "max"}, "id": "count"}})
	groups := trows(r, "rows")
	if len(groups) != 3 {
		t.Fatalf("groups: %s", r.Raw)
	}
	// Keys ascending: null (absent), false, true.
	if groups[0]["activeKey"] != nil || groups[1]["activeKey"] != false || groups[2]["activeKey"] != true {
		t.Fatalf("group keys: %s", r.Raw)
	}
	g := groups[2]
	if g["ageSum"] != float64(36+85+84) || g["idCount"] != float64(3) || g["ageMin"] != float64(36) || g["ageMax"] != float64(85) || g["ageAvg"] != float64(205)/3 {
		t.Fatalf("aggregates: %s", r.Raw)
	}
	r = f.find("peopleTable", map[string]any{"group": map[string]any{"active": "key", "id": "count"}, "orderBy": "idCount", "orderDirection": "desc", "limit": 1})
	if g := trows(r, "rows")[0]; g["activeKey"] != true || r.Body["hasMore"] != true {
		t.Fatalf("groups ordered by count: %s", r.Raw)
	}

	r = f.find("peopleTable", map[string]any{"search": "grace hoper"})
	rows := trows(r, "rows")
	if len(rows) != 6 || rows[0]["id"] != float64(3) {
		t.Fatalf("search: %s", r.Raw)
	}
	prev := 2.0
	for _, row := range rows {
		s, ok := row["similarity"].(float64)
		if !ok || s < 0 || s > 1 || s > prev {
			t.Fatalf("similarity not in [0,1], best first: %s", r.Raw)
		}
		prev = s
	}
	if rows[5]["similarity"] != float64(0) {
		t.Fatalf("a row matching nothing has similarity 0: %s", r.Raw)
	}
	r = f.find("peopleTable", map[string]any{"search": "turing", "filter": map[string]any{"age": map[string]any{"$gt": 40}}, "limit": 1})
	if rows := trows(r, "rows"); len(rows) != 1 || rows[0]["id"] != float64(2) || rows[0]["similarity"] != float64(1) || r.Body["hasMore"] != true {
		t.Fatalf("search with filter: %s", r.Raw)
	}
}

// TestTableRowsConcurrentCreate: 20 concurrent createTableRows of 50 rows
// each make 1000 rows with 1000 distinct ids, each request's ids
// increasing.
func TestTableRowsConcurrentCreate(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("countTable", tschema(map[string]any{"n": tcol("number")}))
	var wg sync.WaitGroup
	results := make([]apitest.Response, 20)
	for w := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows := make([]map[string]any, 50)
			for i := range rows {
				rows[i] = map[string]any{"n": w*50 + i}
			}
			results[w] = f.tb(f.AdminToken, "POST", "/v1/tables/countTable/rows", map[string]any{"rows": rows})
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, r := range results {
		f.Check(r, 200, "createTableRows")
		got := tids(r.List("rows"))
		for i, id := range got {
			if seen[id] {
				t.Fatalf("id %d given twice", id)
			}
			seen[id] = true
			if i > 0 && id <= got[i-1] {
				t.Fatalf("ids of one request not increasing: %v", got)
			}
		}
	}
	if len(seen) != 1000 {
		t.Fatalf("%d distinct ids, want 1000", len(seen))
	}
	g := f.ok("getTable", "GET", "/v1/tables/countTable", nil)
	if g.Body["rows"] != float64(1000) {
		t.Fatalf("row count: %s", g.Raw)
	}
	all := f.find("countTable", map[string]any{"limit": 1000})
	if len(all.List("rows")) != 1000 || all.Body["hasMore"] != false {
		t.Fatalf("find all: %d rows", len(all.List("rows")))
	}
}

// TestTableRowsConcurrentDelete: rows deleted by several requests at once,
// while others update them, are each deleted and uncounted once: the
// deletedRows answered add up to the rows there were, and the table counts
// none left.
func TestTableRowsConcurrentDelete(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("goneTable", tschema(map[string]any{"n": tcol("number")}))
	rows := make([]map[string]any, 300)
	ids := make([]int, 300)
	for i := range rows {
		rows[i], ids[i] = map[string]any{"n": i}, i+1
	}
	f.rows("goneTable", rows...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	deleted := 0.0
	for w := 0; w < 4; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			r := f.Check(f.tb(f.AdminToken, "POST", "/v1/tables/goneTable/rows/delete", map[string]any{"ids": ids}), 200, "deleteTableRows")
			mu.Lock()
			deleted += r.Body["deletedRows"].(float64)
			mu.Unlock()
		}()
		go func() {
			defer wg.Done()
			// Updates racing the deletes (rows gone meanwhile are row errors).
			f.tb(f.AdminToken, "PUT", "/v1/tables/goneTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1 + w, "n": -1}, map[string]any{"id": 150 + w, "n": -1}}})
		}()
	}
	wg.Wait()
	if deleted != 300 {
		t.Fatalf("the concurrent deletes answered %v deleted rows in all, want 300", deleted)
	}
	if g := f.ok("getTable", "GET", "/v1/tables/goneTable", nil); g.Body["rows"] != float64(0) {
		t.Fatalf("row count after deleting every row: %s", g.Raw)
	}
}

// TestTableRowsConcurrentUpdate: concurrent updates of different columns
// of one row all land.
func TestTableRowsConcurrentUpdate(t *testing.T) {
	f := newTablesFixture(t)
	cols := map[string]any{}
	for i := 0; i < 10; i++ {
		cols[fmt.Sprintf("c%d", i)] = tcol("number")
	}
	f.createTable("wideTable", tschema(cols))
	f.rows("wideTable", map[string]any{"c0": -1})
	var wg sync.WaitGroup
	for round := 0; round < 3; round++ {
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := f.tb(f.AdminToken, "PUT", "/v1/tables/wideTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1, fmt.Sprintf("c%d", i): round*100 + i}}})
				f.Check(r, 200, "updateTableRows")
			}()
		}
		wg.Wait()
		row := f.ok("getTableRow", "GET", "/v1/tables/wideTable/row?id=1", nil).Body["row"].(map[string]any)
		for i := 0; i < 10; i++ {
			if row[fmt.Sprintf("c%d", i)] != float64(round*100+i) {
				t.Fatalf("round %d: update of c%d lost: %v", round, i, row)
			}
		}
	}
}

func TestTablesTenancyAndRoles(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("secretTable", tschema(map[string]any{"v": tcol("string")}))
	f.rows("secretTable", map[string]any{"v": "s"})
	viewer, _ := f.invite("viewer@example.com", "viewer")
	developer, _ := f.invite("dev@example.com", "developer")
	outsider, _ := newFixtureOn(f.fixture).invite("outsider@example.com", "owner")
	otherBot := f.createBot(f.AdminToken, nil)
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": otherBot}), 200, "createBotApiKey").Str("value")

	tableID := f.ok("getTable", "GET", "/v1/tables/secretTable", nil).Str("table.id")
	type call struct{ method, path string }
	reads := []call{
		{"GET", "/v1/tables/secretTable"}, {"GET", "/v1/tables/" + tableID}, {"GET", "/v1/tables/secretTable/row?id=1"},
		{"POST", "/v1/tables/secretTable/rows/find"}, {"GET", "/v1/tables/secretTable/jobs"},
	}
	writes := []call{
		{"POST", "/v1/tables/secretTable/rows"}, {"PUT", "/v1/tables/secretTable/rows"}, {"POST", "/v1/tables/secretTable/rows/upsert"},
		{"POST", "/v1/tables/secretTable/rows/delete"}, {"PUT", "/v1/tables/secretTable"}, {"DELETE", "/v1/tables/secretTable"},
		{"PUT", "/v1/tables/secretTable/column"}, {"POST", "/v1/tables/secretTable/duplicate"},
	}
	bodyOf := func(c call) any {
		switch {
		case strings.HasSuffix(c.path, "/rows") || strings.HasSuffix(c.path, "/upsert"):
			return map[string]any{"rows": []any{map[string]any{"id": 1, "v": "x"}}}
		case strings.HasSuffix(c.path, "/delete"):
			return map[string]any{"ids": []int{1}}
		case strings.HasSuffix(c.path, "/column"):
			return map[string]any{"name": "v", "newName": "w"}
		case c.method == "GET" || c.method == "DELETE":
			return nil
		}
		return map[string]any{}
	}
	for _, c := range reads {
		f.Check(f.tb(viewer, c.method, c.path, bodyOf(c)), 200, "")
		// Another tenant sees nothing: 404, never 403.
		f.Check(f.tb(outsider, c.method, c.path, bodyOf(c)), 404, "")
	}
	for _, c := range writes {
		f.Check(f.tb(viewer, c.method, c.path, bodyOf(c)), 403, "")
		f.Check(f.tb(outsider, c.method, c.path, bodyOf(c)), 404, "")
	}
	f.Check(f.tb(viewer, "POST", "/v1/tables", map[string]any{"name": "xTable", "schema": tschema(map[string]any{})}), 403, "")
	f.Check(f.tb(developer, "POST", "/v1/tables/secretTable/rows", map[string]any{"rows": []any{map[string]any{"v": "d"}}}), 200, "createTableRows")
	// Another bot's key, on its own bot, does not see this bot's tables.
	other := f.Do(apitest.Req{Method: "GET", Path: "/v1/tables/" + tableID, Token: key, Headers: map[string]string{"x-bot-id": otherBot}})
	f.Check(other, 404, "")
	l := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/tables", Token: key, Headers: map[string]string{"x-bot-id": otherBot}}), 200, "listTables")
	if len(l.List("tables")) != 0 {
		t.Fatalf("another bot lists this bot's tables: %s", l.Raw)
	}
	// Without x-bot-id: 400.
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/tables", Token: f.AdminToken}), 400, "")
}

func TestTableSchemaValidation(t *testing.T) {
	f := newTablesFixture(t)
	many := map[string]any{}
	for i := 0; i < 21; i++ {
		many[fmt.Sprintf("c%d", i)] = tcol("string")
	}
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"no schema", map[string]any{"name": "aTable"}},
		{"no name", map[string]any{"schema": tschema(map[string]any{})}},
		{"bad name", map[string]any{"name": "my table", "schema": tschema(map[string]any{})}},
		{"name like an id", map[string]any{"name": "table_01ARZ3NDEKTSV4RRFFQ69G5FAV", "schema": tschema(map[string]any{})}},
		{"long name", map[string]any{"name": strings.Repeat("a", 36), "schema": tschema(map[string]any{})}},
		{"schema not object type", map[string]any{"name": "aTable", "schema": map[string]any{"type": "array", "properties": map[string]any{}}}},
		{"no properties", map[string]any{"name": "aTable", "schema": map[string]any{"type": "object"}}},
		{"column without type", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": map[string]any{}})}},
		{"unknown type", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("text")})}},
		{"reserved column", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"id": tcol("string")})}},
		{"bad column name", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a.b": tcol("string")})}},
		{"21 columns", map[string]any{"name": "aTable", "schema": tschema(many)}},
		{"additionalProperties not bool", map[string]any{"name": "aTable", "schema": tschema(map[string]any{}, "additionalProperties", "no")}},
		{"required unknown", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("string")}, "required", []string{"b"})}},
		{"bad pattern", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("string", "pattern", "(")})}},
		{"enum not strings", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("string", "enum", []int{1})})}},
		{"x-zui index not integer", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("string", "x-zui", map[string]any{"index": 1.5})})}},
		{"computed without action", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("string", "x-zui", map[string]any{"computed": map[string]any{}})})}},
		{"computed unknown dependency", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("string", "x-zui", map[string]any{"computed": map[string]any{"action": "ai", "dependencies": []string{"zz"}}})})}},
		{"computed cycle", map[string]any{"name": "aTable", "schema": tschema(map[string]any{
			"a": tcol("string", "x-zui", map[string]any{"computed": map[string]any{"action": "code", "dependencies": []string{"b"}}}),
			"b": tcol("string", "x-zui", map[string]any{"computed": map[string]any{"action": "code", "dependencies": []string{"a"}}}),
		})}},
		{"keyColumn not a column", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("string")}), "keyColumn": "b"}},
		{"keyColumn object", map[string]any{"name": "aTable", "schema": tschema(map[string]any{"a": tcol("object")}), "keyColumn": "a"}},
		{"factor fraction", map[string]any{"name": "aTable", "schema": tschema(map[string]any{}), "factor": 1.5}},
		{"factor 31", map[string]any{"name": "aTable", "schema": tschema(map[string]any{}), "factor": 31}},
		{"unknown field", map[string]any{"name": "aTable", "schema": tschema(map[string]any{}), "color": "red"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.fail(400, "POST", "/v1/tables", tc.body)
		})
	}
	l := f.ok("listTables", "GET", "/v1/tables", nil)
	if len(l.List("tables")) != 0 {
		t.Fatalf("a refused table was created: %s", l.Raw)
	}
	// Accepted: type arrays with null, integer, keyColumn "" (none),
	// annotations that are not kept.
	r := f.ok("createTable", "POST", "/v1/tables", map[string]any{"name": "$okTable", "keyColumn": "", "schema": map[string]any{
		"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "title": "dropped",
		"properties": map[string]any{"a": map[string]any{"type": []string{"integer", "null"}, "minimum": 1}, "b": map[string]any{"type": "null"}},
	}})
	if r.Str("table.schema.properties.a.type") != "number" || r.Body["table"].(map[string]any)["schema"].(map[string]any)["properties"].(map[string]any)["a"].(map[string]any)["nullable"] != true || strings.Contains(string(r.Raw), `"b"`) || r.Str("table.keyColumn") != "" {
		t.Fatalf("normalized schema: %s", r.Raw)
	}
}

func TestTableAdditionalPropertiesAndFrozen(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("strictTable", tschema(map[string]any{"a": tcol("string", "pattern", "^[a-z]+$", "enum", []string{"ab", "cd", "Ab"}), "n": tcol("number", "nullable", false)}, "additionalProperties", false), "frozen", true)
	r := f.fail(400, "POST", "/v1/tables/strictTable/rows", map[string]any{"rows": []any{map[string]any{"a": "ab", "extra": 1}}})
	if !strings.Contains(r.Str("message"), "extra") {
		t.Fatalf("unknown column: %s", r.Raw)
	}
	for _, row := range []map[string]any{{"a": "Ab"}, {"a": "zz"}, {"n": nil}, {"a": 1}} {
		f.fail(400, "POST", "/v1/tables/strictTable/rows", map[string]any{"rows": []any{row}})
	}
	f.rows("strictTable", map[string]any{"a": "cd", "n": 2})
	// Frozen: the name and schema stay; rows change.
	f.fail(409, "PUT", "/v1/tables/strictTable", map[string]any{"schema": map[string]any{"properties": map[string]any{"b": tcol("string")}}})
	f.fail(409, "PUT", "/v1/tables/strictTable", map[string]any{"name": "otherTable"})
	f.fail(409, "PUT", "/v1/tables/strictTable", map[string]any{"frozen": false})
	f.fail(409, "PUT", "/v1/tables/strictTable/column", map[string]any{"name": "a", "newName": "b"})
	f.ok("updateTable", "PUT", "/v1/tables/strictTable", map[string]any{"frozen": true}) // no change
	f.ok("updateTableRows", "PUT", "/v1/tables/strictTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1, "n": 3}}})
	f.ok("deleteTable", "DELETE", "/v1/tables/strictTable", nil)
}

func TestTableComputedColumns(t *testing.T) {
	f := newTablesFixture(t)
	computed := func(deps ...string) map[string]any {
		return map[string]any{"computed": map[string]any{"action": "ai", "prompt": "summarize", "dependencies": deps}}
	}
	f.createTable("docTable", tschema(map[string]any{
		"text":    tcol("string"),
		"lang":    tcol("string"),
		"summary": tcol("string", "x-zui", computed("text")),
		"title":   tcol("string", "x-zui", computed("summary")),
	}), "isComputeEnabled", true)
	c := f.rows("docTable", map[string]any{"text": "hello", "lang": "en"}, map[string]any{"text": "bye", "summary": "s", "title": "t"})
	rows := trows(c, "rows")
	if tjson(rows[0]["stale"]) != `["summary","title"]` || tjson(rows[1]["stale"]) != `[]` {
		t.Fatalf("stale on create: %s", c.Raw)
	}
	if rows[1]["computed"].(map[string]any)["summary"].(map[string]any)["status"] != "computed" || rows[0]["computed"].(map[string]any)["summary"].(map[string]any)["status"] != "stale" {
		t.Fatalf("computed on create: %s", c.Raw)
	}
	g := f.ok("getTable", "GET", "/v1/tables/docTable", nil)
	if g.Body["stale"] != float64(1) {
		t.Fatalf("stale count: %s", g.Raw)
	}
	// A dependency change makes the column, and those depending on it, stale.
	u := f.ok("updateTableRows", "PUT", "/v1/tables/docTable/rows", map[string]any{"rows": []any{map[string]any{"id": 2, "text": "changed"}}, "waitComputed": true})
	if tjson(trows(u, "rows")[0]["stale"]) != `["summary","title"]` || len(u.List("warnings")) != 1 {
		t.Fatalf("stale after dependency change: %s", u.Raw)
	}
	// A change elsewhere does not.
	u = f.ok("updateTableRows", "PUT", "/v1/tables/docTable/rows", map[string]any{"rows": []any{map[string]any{"id": 2, "summary": "new", "title": "t2"}}})
	if tjson(trows(u, "rows")[0]["stale"]) != `[]` {
		t.Fatalf("fresh after writing computed values: %s", u.Raw)
	}
	u = f.ok("updateTableRows", "PUT", "/v1/tables/docTable/rows", map[string]any{"rows": []any{map[string]any{"id": 2, "lang": "fr"}}})
	if tjson(trows(u, "rows")[0]["stale"]) != `[]` {
		t.Fatalf("stale after an unrelated change: %s", u.Raw)
	}
	g = f.ok("getTable", "GET", "/v1/tables/docTable", nil)
	if g.Body["stale"] != float64(1) {
		t.Fatalf("stale count: %s", g.Raw)
	}
	// Changing a computation makes every row's value stale.
	up := f.ok("updateTable", "PUT", "/v1/tables/docTable", map[string]any{"schema": map[string]any{"properties": map[string]any{
		"title": tcol("string", "x-zui", map[string]any{"computed": map[string]any{"action": "ai", "prompt": "a title", "dependencies": []string{"summary"}}}),
	}}})
	if tjson(up.Body["staleColumns"]) != `["title"]` {
		t.Fatalf("staleColumns: %s", up.Raw)
	}
	row := f.ok("getTableRow", "GET", "/v1/tables/docTable/row?id=2", nil).Body["row"].(map[string]any)
	if tjson(row["stale"]) != `["title"]` {
		t.Fatalf("row after a computation change: %v", row)
	}
	g = f.ok("getTable", "GET", "/v1/tables/docTable", nil)
	if g.Body["stale"] != float64(2) {
		t.Fatalf("stale count after a computation change: %s", g.Raw)
	}
}

func TestTableKeyColumn(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("userTable", tschema(map[string]any{"email": tcol("string"), "n": tcol("number")}), "keyColumn", "email")
	c := f.tb(f.AdminToken, "POST", "/v1/tables/userTable/rows", map[string]any{"rows": []any{
		map[string]any{"email": "a@x", "n": 1},
		map[string]any{"email": "b@x", "n": 2},
		map[string]any{"email": "a@x", "n": 3}, // same key in the request
		map[string]any{"n": 4},                 // no key: allowed
	}})
	f.Check(c, 200, "createTableRows")
	if len(c.List("rows")) != 3 || len(c.List("errors")) != 1 {
		t.Fatalf("create with keys: %s", c.Raw)
	}
	// A key another row holds.
	f.fail(400, "POST", "/v1/tables/userTable/rows", map[string]any{"rows": []any{map[string]any{"email": "b@x"}}})
	f.fail(400, "PUT", "/v1/tables/userTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1, "email": "b@x"}}})
	// Moving a key frees the old value.
	f.ok("updateTableRows", "PUT", "/v1/tables/userTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1, "email": "c@x"}}})
	f.rows("userTable", map[string]any{"email": "a@x", "n": 5})
	// Upsert through the index.
	up := f.ok("upsertTableRows", "POST", "/v1/tables/userTable/rows/upsert", map[string]any{"keyColumn": "email", "rows": []any{
		map[string]any{"email": "c@x", "n": 10},
		map[string]any{"email": "d@x", "n": 11},
	}})
	if len(up.List("inserted")) != 1 || len(up.List("updated")) != 1 || len(up.List("warnings")) != 0 || trows(up, "updated")[0]["id"] != float64(1) {
		t.Fatalf("upsert by key column: %s", up.Raw)
	}
	// Deleting a row frees its key.
	f.ok("deleteTableRows", "POST", "/v1/tables/userTable/rows/delete", map[string]any{"ids": []int{2}})
	f.rows("userTable", map[string]any{"email": "b@x"})

	// Concurrent upserts of one new key make one row.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.tb(f.AdminToken, "POST", "/v1/tables/userTable/rows/upsert", map[string]any{"keyColumn": "email", "rows": []any{map[string]any{"email": "race@x", "n": i}}})
			f.Check(r, 200, "upsertTableRows")
		}()
	}
	wg.Wait()
	r := f.find("userTable", map[string]any{"filter": map[string]any{"email": "race@x"}})
	if len(r.List("rows")) != 1 {
		t.Fatalf("concurrent upserts of one key: %s", r.Raw)
	}

	// Switching the key column to a column with duplicates is refused and
	// leaves the key column as it was.
	f.ok("updateTableRows", "PUT", "/v1/tables/userTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1, "n": 7}, map[string]any{"id": 3, "n": 7}}})
	f.fail(400, "PUT", "/v1/tables/userTable", map[string]any{"keyColumn": "n"})
	g := f.ok("getTable", "GET", "/v1/tables/userTable", nil)
	if g.Str("table.keyColumn") != "email" {
		t.Fatalf("key column after a refused switch: %s", g.Raw)
	}
	f.fail(400, "POST", "/v1/tables/userTable/rows", map[string]any{"rows": []any{map[string]any{"email": "b@x"}}})
	// Removing the key column needs keyColumn changed too.
	f.fail(400, "PUT", "/v1/tables/userTable", map[string]any{"schema": map[string]any{"properties": map[string]any{"email": nil}}})
	g = f.ok("updateTable", "PUT", "/v1/tables/userTable", map[string]any{"keyColumn": nil})
	if g.Str("table.keyColumn") != "" {
		t.Fatalf("keyColumn removed: %s", g.Raw)
	}
	f.rows("userTable", map[string]any{"email": "b@x"}) // no index, no uniqueness
	f.fail(400, "PUT", "/v1/tables/userTable", map[string]any{"keyColumn": "email"})
}

// fill creates n rows {i: 0..n-1} in a table, 1000 a request.
func (f *tablesFixture) fill(table string, n int) {
	f.T.Helper()
	for start := 0; start < n; start += 1000 {
		rows := []map[string]any{}
		for i := start; i < min(start+1000, n); i++ {
			rows = append(rows, map[string]any{"i": i, "s": fmt.Sprintf("row %d", i)})
		}
		f.rows(table, rows...)
	}
}

// tablesOnly serves the Tables API over the fixture's store without
// background jobs, as in Lambda.
func (f *tablesFixture) tablesOnly(files ...platform.TableFiles) *apitest.Env {
	cfg := httpapi.Config{Store: f.Platform.Store, PagingKey: []byte("0123456789abcdef")}
	if len(files) > 0 {
		cfg.TableFiles = files[0]
	}
	h := httpapi.New(cfg, httpapi.AreaTables)
	srv := httptest.NewServer(h)
	f.T.Cleanup(srv.Close)
	return &apitest.Env{T: f.T, URL: srv.URL}
}

func TestTableDuplicate(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("srcTable", tschema(map[string]any{"i": tcol("number"), "s": tcol("string")}), "keyColumn", "s", "tags", map[string]string{"a": "b"})
	f.fill("srcTable", 3)
	d := f.ok("duplicateTable", "POST", "/v1/tables/srcTable/duplicate", map[string]any{"tableName": "copyTable"})
	if d.Str("job.status") != "completed" || d.Body["rows"] != float64(3) || d.Str("table.name") != "copyTable" || d.Str("table.keyColumn") != "s" || d.Str("table.tags.a") != "b" {
		t.Fatalf("duplicate: %s", d.Raw)
	}
	g := f.ok("getTable", "GET", "/v1/tables/copyTable", nil)
	if g.Body["rows"] != float64(3) {
		t.Fatalf("copy's rows: %s", g.Raw)
	}
	src := f.find("srcTable", map[string]any{})
	cp := f.find("copyTable", map[string]any{})
	strip := func(r apitest.Response) string {
		var out []string
		for _, row := range trows(r, "rows") {
			out = append(out, fmt.Sprint(row["id"], row["i"], row["s"]))
		}
		return strings.Join(out, ",")
	}
	if strip(src) != strip(cp) {
		t.Fatalf("copy differs:\n%s\n%s", src.Raw, cp.Raw)
	}
	// The copy continues the ids, and its key index.
	c := f.rows("copyTable", map[string]any{"s": "new"})
	if trows(c, "rows")[0]["id"] != float64(4) {
		t.Fatalf("copy's next id: %s", c.Raw)
	}
	f.fail(400, "POST", "/v1/tables/copyTable/rows", map[string]any{"rows": []any{map[string]any{"s": "row 1"}}})
	jobs := f.ok("getTableJobs", "GET", "/v1/tables/copyTable/jobs", nil)
	if len(jobs.List("jobs")) != 1 {
		t.Fatalf("jobs: %s", jobs.Raw)
	}
	if j := jobs.List("jobs")[0].(map[string]any); j["type"] != "duplicate_table" || j["status"] != "completed" || j["tableId"] != d.Str("table.id") {
		t.Fatalf("job: %s", jobs.Raw)
	}

	s := f.ok("duplicateTable", "POST", "/v1/tables/srcTable/duplicate", map[string]any{"schemaOnly": true})
	if s.Str("table.name") != "srcTableCopy" || s.Str("job.status") != "completed" {
		t.Fatalf("schemaOnly: %s", s.Raw)
	}
	if g := f.ok("getTable", "GET", "/v1/tables/srcTableCopy", nil); g.Body["rows"] != float64(0) {
		t.Fatalf("schemaOnly copied rows: %s", g.Raw)
	}
	f.fail(409, "POST", "/v1/tables/srcTable/duplicate", map[string]any{"schemaOnly": true})
	f.fail(404, "POST", "/v1/tables/noTable/duplicate", map[string]any{})
	f.fail(400, "POST", "/v1/tables/srcTable/duplicate", map[string]any{"tableName": "bad name"})
}

// TestTableDuplicateInSteps: a copy larger than what the request copies
// continues through getTableJobs (as in Lambda) or in the background
// (the local platform); meanwhile the copy refuses row writes.
func TestTableDuplicateInSteps(t *testing.T) {
	f := newTablesFixture(t)
	f.createTable("bigTable", tschema(map[string]any{"i": tcol("number"), "s": tcol("string")}))
	f.fill("bigTable", 2600)
	lambda := f.tablesOnly()
	call := func(method, path string, body any) apitest.Response {
		return lambda.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Body: body, Headers: map[string]string{"x-bot-id": f.bot}})
	}
	d := lambda.Check(call("POST", "/v1/tables/bigTable/duplicate", map[string]any{"tableName": "stepTable"}), 200, "duplicateTable")
	if d.Str("job.status") != "in_progress" || d.Body["rows"] != float64(2600) {
		t.Fatalf("large duplicate: %s", d.Raw)
	}
	g := f.ok("getTable", "GET", "/v1/tables/stepTable", nil)
	if g.Body["rows"] != float64(0) {
		t.Fatalf("rows counted before the copy ends: %s", g.Raw)
	}
	r := f.fail(409, "POST", "/v1/tables/stepTable/rows", map[string]any{"rows": []any{map[string]any{"i": 1}}})
	if r.Str("type") != "ResourceLockedConflict" {
		t.Fatalf("write during the copy: %s", r.Raw)
	}
	part := f.find("stepTable", map[string]any{"orderDirection": "desc", "limit": 1})
	if tids(part.List("rows"))[0] != 2000 {
		t.Fatalf("rows copied by the request: %s", part.Raw)
	}
	jobs := lambda.Check(call("GET", "/v1/tables/stepTable/jobs", nil), 200, "getTableJobs")
	if j := jobs.List("jobs")[0].(map[string]any); j["status"] != "completed" || j["progress"] != float64(1) {
		t.Fatalf("job after a poll: %s", jobs.Raw)
	}
	g = f.ok("getTable", "GET", "/v1/tables/stepTable", nil)
	if g.Body["rows"] != float64(2600) {
		t.Fatalf("rows after the copy: %s", g.Raw)
	}
	f.rows("stepTable", map[string]any{"i": -1})

	// Locally, the copy ends in the background without polling.
	d = f.ok("duplicateTable", "POST", "/v1/tables/bigTable/duplicate", map[string]any{"tableName": "bgTable"})
	if d.Str("job.status") != "in_progress" {
		t.Fatalf("background duplicate: %s", d.Raw)
	}
	// (The rows are counted with the last batch; the job completes just after.)
	deadline := time.Now().Add(20 * time.Second)
	var j map[string]any
	for {
		g = f.ok("getTable", "GET", "/v1/tables/bgTable", nil)
		j = f.ok("getTableJobs", "GET", "/v1/tables/bgTable/jobs", nil).List("jobs")[0].(map[string]any)
		if g.Body["rows"] == float64(2600) && j["status"] == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background copy did not finish: %s, job %v", g.Raw, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if j["progress"] != float64(1) {
		t.Fatalf("background job: %v", j)
	}
}

// memTableFiles is a TableFiles keeping files in memory.
type memTableFiles struct {
	mu    sync.Mutex
	files map[string][]byte
	types map[string]string
}

func (m *memTableFiles) SaveTableExport(ctx context.Context, botID, key, contentType string, content []byte) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := platform.NewID(platform.PrefixFile)
	m.files[botID+"/"+id], m.types[id] = content, contentType
	return id, nil
}

func (m *memTableFiles) ReadTableImport(ctx context.Context, botID, fileID string) ([]byte, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[botID+"/"+fileID]
	if !ok {
		return nil, "", platform.NotFound("file", fileID)
	}
	return b, m.types[fileID], nil
}

func (m *memTableFiles) put(botID string, content []byte) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := platform.NewID(platform.PrefixFile)
	m.files[botID+"/"+id] = content
	return id
}

func TestTableExportImport(t *testing.T) {
	f := newTablesFixture(t)
	files := &memTableFiles{files: map[string][]byte{}, types: map[string]string{}}
	api := f.tablesOnly(files)
	call := func(method, path string, body any) apitest.Response {
		return api.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Body: body, Headers: map[string]string{"x-bot-id": f.bot}})
	}
	f.createTable("peopleTable", tPeopleSchema)
	f.rows("peopleTable",
		map[string]any{"name": "Ada, \"the first\"", "age": 36, "tags": []string{"x"}, "address": map[string]any{"city": "London"}},
		map[string]any{"name": "Alan", "active": true},
	)
	for _, format := range []string{"csv", "json"} {
		for _, compress := range []bool{true, false} {
			r := api.Check(call("GET", fmt.Sprintf("/v1/tables/peopleTable/export?format=%s&compress=%v", format, compress), nil), 200, "exportTable")
			job := r.Body["job"].(map[string]any)
			if job["status"] != "completed" || job["type"] != "export" || job["outputFileId"] == nil {
				t.Fatalf("export: %s", r.Raw)
			}
			content := files.files[f.bot+"/"+job["outputFileId"].(string)]
			if compress {
				zr, err := gzip.NewReader(bytes.NewReader(content))
				if err != nil {
					t.Fatalf("export not gzipped: %v", err)
				}
				var buf bytes.Buffer
				_, _ = buf.ReadFrom(zr)
				content = buf.Bytes()
			}
			if !strings.Contains(string(content), "London") {
				t.Fatalf("export content: %s", content)
			}
			// Importing the export into an empty copy of the table gives
			// the same rows (with new ids).
			name := fmt.Sprintf("imp%s%vTable", format, compress)
			f.ok("duplicateTable", "POST", "/v1/tables/peopleTable/duplicate", map[string]any{"tableName": name, "schemaOnly": true})
			id := files.put(f.bot, files.files[f.bot+"/"+job["outputFileId"].(string)])
			im := api.Check(call("POST", "/v1/tables/"+name+"/import", map[string]any{"fileId": id}), 200, "importTable")
			if im.Str("job.status") != "completed" || im.Str("job.inputFileId") != id {
				t.Fatalf("import: %s", im.Raw)
			}
			rows := trows(f.find(name, map[string]any{}), "rows")
			if len(rows) != 2 || rows[0]["name"] != "Ada, \"the first\"" || rows[0]["age"] != float64(36) || tjson(rows[0]["tags"]) != `["x"]` || rows[1]["active"] != true {
				t.Fatalf("imported rows (%s): %v", format, rows)
			}
		}
	}
	jobs := api.Check(call("GET", "/v1/tables/peopleTable/jobs", nil), 200, "getTableJobs")
	if len(jobs.List("jobs")) != 4 {
		t.Fatalf("export jobs: %s", jobs.Raw)
	}
	// A file with an invalid row imports nothing.
	bad := files.put(f.bot, []byte(`[{"name": "ok"}, {"age": "old"}]`))
	api.Check(call("POST", "/v1/tables/peopleTable/import", map[string]any{"fileId": bad}), 400, "")
	api.Check(call("POST", "/v1/tables/peopleTable/import", map[string]any{"fileId": "file_nope"}), 404, "")
	api.Check(call("POST", "/v1/tables/peopleTable/import", map[string]any{"fileId": files.put(f.bot, []byte("name\n\"unterminated"))}), 400, "")
	if g := f.ok("getTable", "GET", "/v1/tables/peopleTable", nil); g.Body["rows"] != float64(2) {
		t.Fatalf("rows after refused imports: %s", g.Raw)
	}
	api.Check(call("GET", "/v1/tables/peopleTable/export?format=xml", nil), 400, "")
	// Without the Files API's storage the operations are not available.
	none := f.tablesOnly()
	for _, req := range []apitest.Req{
		{Method: "GET", Path: "/v1/tables/peopleTable/export"},
		{Method: "POST", Path: "/v1/tables/peopleTable/import", Body: map[string]any{"fileId": bad}},
	} {
		req.Token, req.Headers = f.AdminToken, map[string]string{"x-bot-id": f.bot}
		none.Check(none.Do(req), 405, "")
	}
}

// TestTablesBadInput: every operation answers bad input with a 4xx in the
// error shape (apitest checks it), and writes nothing.
func TestTablesBadInput(t *testing.T) {
	f := newTablesFixture(t)
	id := f.createTable("peopleTable", tPeopleSchema)
	f.rows("peopleTable", map[string]any{"name": "Ada", "age": 1})
	rows1001 := make([]map[string]any, 1001)
	for i := range rows1001 {
		rows1001[i] = map[string]any{"name": "x"}
	}
	huge := strings.Repeat("x", 7000)
	rowsHuge := make([]map[string]any, 1000)
	for i := range rowsHuge {
		rowsHuge[i] = map[string]any{"name": huge}
	}
	for _, tc := range []struct {
		name         string
		method, path string
		body         any
		status       int
	}{
		{"create rows: no rows", "POST", "/v1/tables/peopleTable/rows", map[string]any{}, 400},
		{"create rows: empty", "POST", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{}}, 400},
		{"create rows: 1001", "POST", "/v1/tables/peopleTable/rows", map[string]any{"rows": rows1001}, 400},
		{"create rows: not objects", "POST", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{1, "a"}}, 400},
		{"create rows: wrong types", "POST", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"name": 1}, map[string]any{"name": "a", "age": "b"}}}, 400},
		{"create rows: too big for the factor", "POST", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"name": huge}}}, 400},
		{"create rows: body over 6 MiB", "POST", "/v1/tables/peopleTable/rows", map[string]any{"rows": rowsHuge}, 413},
		{"create rows: unknown table", "POST", "/v1/tables/noTable/rows", map[string]any{"rows": []any{map[string]any{"name": "a"}}}, 404},
		{"create rows: malformed JSON", "POST", "/v1/tables/peopleTable/rows", `{"rows": [`, 400},
		{"create rows: keyColumn", "POST", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"name": "a"}}, "keyColumn": "name"}, 400},
		{"update rows: no id", "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"name": "a"}}}, 400},
		{"update rows: id not a number", "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"id": "1"}}}, 400},
		{"update rows: fractional id", "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1.5, "age": 2}}}, 400},
		{"update rows: id too large", "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1e12}}}, 400},
		{"update rows: wrong type", "PUT", "/v1/tables/peopleTable/rows", map[string]any{"rows": []any{map[string]any{"id": 1, "age": map[string]any{}}}}, 400},
		{"upsert: unknown keyColumn", "POST", "/v1/tables/peopleTable/rows/upsert", map[string]any{"keyColumn": "nope", "rows": []any{map[string]any{"name": "a"}}}, 400},
		{"upsert: no key value", "POST", "/v1/tables/peopleTable/rows/upsert", map[string]any{"keyColumn": "name", "rows": []any{map[string]any{"age": 3}}}, 400},
		{"upsert: object keyColumn", "POST", "/v1/tables/peopleTable/rows/upsert", map[string]any{"keyColumn": "address", "rows": []any{map[string]any{"name": "a"}}}, 400},
		{"delete rows: nothing", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{}, 400},
		{"delete rows: two ways", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"ids": []int{1}, "deleteAllRows": true}, 400},
		{"delete rows: deleteAllRows false", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"deleteAllRows": false}, 400},
		{"delete rows: bad ids", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"ids": []any{"x"}}, 400},
		{"delete rows: fractional id", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"ids": []any{1.5}}, 400},
		{"delete rows: bad filter", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"filter": map[string]any{"$where": "1"}}, 400},
		{"delete rows: unknown column", "POST", "/v1/tables/peopleTable/rows/delete", map[string]any{"filter": map[string]any{"nope": 1}}, 400},
		{"get row: no id", "GET", "/v1/tables/peopleTable/row", nil, 400},
		{"get row: bad id", "GET", "/v1/tables/peopleTable/row?id=abc", nil, 400},
		{"get row: id 0", "GET", "/v1/tables/peopleTable/row?id=0", nil, 400},
		{"get row: id twice", "GET", "/v1/tables/peopleTable/row?id=1&id=2", nil, 400},
		{"get row: missing", "GET", "/v1/tables/peopleTable/row?id=999", nil, 404},
		{"get table: unknown", "GET", "/v1/tables/noTable", nil, 404},
		{"get table: unknown id", "GET", "/v1/tables/table_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"get or create: unknown id", "POST", "/v1/tables/table_01ARZ3NDEKTSV4RRFFQ69G5FAV", map[string]any{"schema": tschema(map[string]any{})}, 404},
		{"get or create: bad schema", "POST", "/v1/tables/newTable", map[string]any{"schema": map[string]any{"type": "object", "properties": 1}}, 400},
		{"get or create: no schema", "POST", "/v1/tables/newTable", map[string]any{}, 400},
		{"update table: bad schema", "PUT", "/v1/tables/peopleTable", map[string]any{"schema": map[string]any{"properties": map[string]any{"x": tcol("nope")}}}, 400},
		{"update table: bad name", "PUT", "/v1/tables/peopleTable", map[string]any{"name": "a b"}, 400},
		{"update table: keyColumn number", "PUT", "/v1/tables/peopleTable", map[string]any{"keyColumn": 5}, 400},
		{"update table: unknown field", "PUT", "/v1/tables/peopleTable", map[string]any{"color": 1}, 400},
		{"update table: unknown table", "PUT", "/v1/tables/noTable", map[string]any{"name": "xTable"}, 404},
		{"rename column: too long", "PUT", "/v1/tables/peopleTable/column", map[string]any{"name": "age", "newName": strings.Repeat("a", 31)}, 400},
		{"rename column: reserved", "PUT", "/v1/tables/peopleTable/column", map[string]any{"name": "age", "newName": "id"}, 400},
		{"rename column: missing field", "PUT", "/v1/tables/peopleTable/column", map[string]any{"name": "age"}, 400},
		{"duplicate: factor 0", "POST", "/v1/tables/peopleTable/duplicate", map[string]any{"factor": 0}, 400},
		{"duplicate: unknown field", "POST", "/v1/tables/peopleTable/duplicate", map[string]any{"name": "x"}, 400},
		{"delete table: unknown", "DELETE", "/v1/tables/noTable", nil, 404},
		{"jobs: unknown table", "GET", "/v1/tables/noTable/jobs", nil, 404},
		{"find: unknown table", "POST", "/v1/tables/noTable/rows/find", map[string]any{}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.fail(tc.status, tc.method, tc.path, tc.body)
		})
	}
	r := f.Do(apitest.Req{Method: "POST", Path: "/v1/tables/peopleTable/rows", Token: f.AdminToken, Body: "rows=1",
		Headers: map[string]string{"x-bot-id": f.bot, "Content-Type": "text/plain"}})
	f.Check(r, 415, "")
	g := f.ok("getTable", "GET", "/v1/tables/"+id, nil)
	if g.Body["rows"] != float64(1) || g.Str("table.name") != "peopleTable" || len(f.ok("listTables", "GET", "/v1/tables", nil).List("tables")) != 1 {
		t.Fatalf("bad input changed the table: %s", g.Raw)
	}
	row := f.ok("getTableRow", "GET", "/v1/tables/peopleTable/row?id=1", nil).Body["row"].(map[string]any)
	if row["age"] != float64(1) || row["name"] != "Ada" {
		t.Fatalf("bad input changed the row: %v", row)
	}
	// 1000 rows of 1.5 KB (more than the default 1 MiB body) are fine.
	big := make([]map[string]any, 1000)
	for i := range big {
		big[i] = map[string]any{"name": strings.Repeat("y", 1500)}
	}
	if c := f.rows("peopleTable", big...); len(c.List("rows")) != 1000 {
		t.Fatalf("1000 rows: %d", len(c.List("rows")))
	}
}
