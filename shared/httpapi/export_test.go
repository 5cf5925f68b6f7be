package httpapi

import (
	"net/http"

	"github.com/botforge/platform/shared/platform"
)

// NewBotScopeProbe serves two bot-scoped probe operations (a read needing
// viewer, a write needing developer) that answer the bot and role the call
// was authorized for: the x-bot-id scope is tested through them.
func NewBotScopeProbe(cfg Config) http.Handler {
	s := newServer(cfg)
	probe := func(c *call) (any, error) {
		return map[string]any{"botId": c.bot.ID, "workspaceId": c.workspaceID, "role": c.role}, nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /probe", s.handler(route{pattern: "GET /probe", op: "probeRead", scope: scopeBot, role: platform.RoleViewer, handle: probe}))
	mux.Handle("POST /probe", s.handler(route{pattern: "POST /probe", op: "probeWrite", scope: scopeBot, role: platform.RoleDeveloper, handle: probe}))
	return mux
}
