package httpapi

import (
	"net/http"

	"github.com/botforge/platform/shared/platform"
)

// filesRoutes is the route table of the Files API: the files of the bot
// named by x-bot-id (docs/files.md). Viewers read, developers write. Paths
// of one file take its id or its key ({id} and {idOrKey}; a key containing
// "/" is sent URL-encoded).
func (s *server) filesRoutes() []route {
	const (
		viewer    = platform.RoleViewer
		developer = platform.RoleDeveloper
	)
	return append([]route{
		{pattern: "PUT /v1/files", op: "upsertFile", scope: scopeBot, role: developer, handle: s.upsertFile},
		{pattern: "GET /v1/files", op: "listFiles", scope: scopeBot, role: viewer, handle: s.listFiles},
		{pattern: "GET /v1/files/search", op: "searchFiles", scope: scopeBot, role: viewer, handle: s.searchFiles},
		{pattern: "GET /v1/files/tags", op: "listFileTags", scope: scopeBot, role: viewer, handle: s.listFileTags},
		{pattern: "GET /v1/files/tags/{tag}/values", op: "listFileTagValues", scope: scopeBot, role: viewer, handle: s.listFileTagValues},
		// Knowledge bases (files_kb.go): before {id} in meaning.
		{pattern: "POST /v1/files/knowledge-bases", op: "createKnowledgeBase", scope: scopeBot, role: developer, handle: s.createKnowledgeBase},
		{pattern: "GET /v1/files/knowledge-bases", op: "listKnowledgeBases", scope: scopeBot, role: viewer, handle: s.listKnowledgeBases},
		// "PUT /v1/files/knowledge-bases/{id}" would overlap "PUT /v1/files/{id}/passages".
		{pattern: "PUT /v1/files/{kb}/{id}", op: "updateKnowledgeBase", scope: scopeBot, role: developer, handle: s.updateKnowledgeBase,
			only: func(r *http.Request) bool { return r.PathValue("kb") == "knowledge-bases" }},
		{pattern: "DELETE /v1/files/knowledge-bases/{id}", op: "deleteKnowledgeBase", scope: scopeBot, role: developer, handle: s.deleteKnowledgeBase},
		{pattern: "GET /v1/files/{id}", op: "getFile", scope: scopeBot, role: viewer, handle: s.getFile},
		{pattern: "PUT /v1/files/{id}", op: "updateFileMetadata", scope: scopeBot, role: developer, handle: s.updateFileMetadata},
		{pattern: "DELETE /v1/files/{id}", op: "deleteFile", scope: scopeBot, role: developer, handle: s.deleteFile},
		{pattern: "POST /v1/files/{idOrKey}/{destinationKey}", op: "copyFile", scope: scopeBot, role: developer, handle: s.copyFile},
		{pattern: "GET /v1/files/{id}/passages", op: "listFilePassages", scope: scopeBot, role: viewer, handle: s.listFilePassages},
		{pattern: "PUT /v1/files/{id}/passages", op: "setFilePassages", scope: scopeBot, role: developer, handle: s.setFilePassages},
	}, s.filesTransferRoutes()...) // admin_transfer.go: files of an archive import (docs/export-import.md)
}

// filesRawRoutes are the Files operations answering raw bytes: Download
// Exact File Ref (files_download.go).
func (s *server) filesRawRoutes() []rawRoute {
	return []rawRoute{
		// A file's url is signed: it is read without a token too.
		{route: route{pattern: "GET /v1/files/{id}/content", op: "downloadFileRef", scope: scopeBot, role: platform.RoleViewer, signedAccess: hasSignature}, open: s.downloadFileRef},
	}
}
