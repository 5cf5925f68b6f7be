package runtime

import (
	"github.com/botforge/platform/shared/builtin"
)

// Builtins is the registry of the integrations built into the platform
// (shared/builtin, docs/builtin.md), the same in every process: the API
// serves their webhooks and actions, the dispatcher hands them the bots'
// messages, and the admin function (locally: the platform at start)
// publishes them in the hub.
func Builtins() *builtin.Registry {
	return builtin.NewRegistry()
}
