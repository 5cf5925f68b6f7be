package httpapi

import "github.com/botforge/platform/shared/platform"

// tableRowsBody caps the body of the row writes: 1000 rows of several KB
// do not fit the default 1 MiB (Lambda's own limit is 6 MB).
const tableRowsBody = 6 << 20

// tablesRoutes is the route table of the Tables API: the bot's tables and rows.
// Every operation acts on the bot of x-bot-id: reads need the viewer role,
// writes developer (docs/security.md). Handlers are in tables_*.go.
func (s *server) tablesRoutes() []route {
	const (
		viewer    = platform.RoleViewer
		developer = platform.RoleDeveloper
	)
	return []route{
		// Tables (tables_tables.go).
		{pattern: "GET /v1/tables", op: "listTables", scope: scopeBot, role: viewer, handle: s.listTables},
		{pattern: "POST /v1/tables", op: "createTable", scope: scopeBot, role: developer, handle: s.createTable},
		{pattern: "GET /v1/tables/{table}", op: "getTable", scope: scopeBot, role: viewer, handle: s.getTable},
		{pattern: "POST /v1/tables/{table}", op: "getOrCreateTable", scope: scopeBot, role: developer, handle: s.getOrCreateTable},
		{pattern: "PUT /v1/tables/{table}", op: "updateTable", scope: scopeBot, role: developer, handle: s.updateTable},
		{pattern: "DELETE /v1/tables/{table}", op: "deleteTable", scope: scopeBot, role: developer, handle: s.deleteTable},
		{pattern: "PUT /v1/tables/{table}/column", op: "renameTableColumn", scope: scopeBot, role: developer, handle: s.renameTableColumn},

		// Rows (tables_rows.go).
		{pattern: "GET /v1/tables/{table}/row", op: "getTableRow", scope: scopeBot, role: viewer, handle: s.getTableRow},
		{pattern: "POST /v1/tables/{table}/rows/find", op: "findTableRows", scope: scopeBot, role: viewer, handle: s.findTableRows},
		{pattern: "POST /v1/tables/{table}/rows", op: "createTableRows", scope: scopeBot, role: developer, maxBody: tableRowsBody, handle: s.createTableRows},
		{pattern: "PUT /v1/tables/{table}/rows", op: "updateTableRows", scope: scopeBot, role: developer, maxBody: tableRowsBody, handle: s.updateTableRows},
		{pattern: "POST /v1/tables/{table}/rows/upsert", op: "upsertTableRows", scope: scopeBot, role: developer, maxBody: tableRowsBody, handle: s.upsertTableRows},
		{pattern: "POST /v1/tables/{table}/rows/delete", op: "deleteTableRows", scope: scopeBot, role: developer, handle: s.deleteTableRows},

		// Duplication, jobs, export and import (tables_jobs.go).
		{pattern: "POST /v1/tables/{sourceTableId}/duplicate", op: "duplicateTable", scope: scopeBot, role: developer, handle: s.duplicateTable},
		{pattern: "GET /v1/tables/{table}/jobs", op: "getTableJobs", scope: scopeBot, role: viewer, handle: s.getTableJobs},
		{pattern: "GET /v1/tables/{table}/export", op: "exportTable", scope: scopeBot, role: developer, handle: s.exportTable},
		{pattern: "POST /v1/tables/{table}/import", op: "importTable", scope: scopeBot, role: developer, handle: s.importTable},
	}
}
