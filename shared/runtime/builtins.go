package runtime

import (
	"os"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/listen"
	"github.com/botforge/platform/shared/webchat"
)

// Builtins is the registry of the integrations built into the platform
// (shared/builtin, docs/builtin.md), the same in every process: the API
// serves their webhooks and actions, the dispatcher hands them the bots'
// messages, and the admin function (locally: the platform at start)
// publishes them in the hub.
//
// PLATFORM_BUILTINS chooses them: unset or "all", every one; "none", none
// (the hub holds only what workspaces publish); else a comma-separated
// list of names. An installation of one left out is an integration like
// any other, with no url: its deliveries fail saying so.
//
// The listener hub holds the end users' streams of this process (the
// chat integration's listenConversation, the webchat's /initialize).
func Builtins() *builtin.Registry {
	hub := listen.NewHub()
	all := []builtin.Integration{chatapi.New(hub), webchat.New(hub)}
	choice := strings.TrimSpace(os.Getenv("PLATFORM_BUILTINS"))
	r := builtin.NewRegistry()
	for _, b := range all {
		if choice == "" || choice == "all" || listed(choice, b.Definition().Name) {
			r.Add(b)
		}
	}
	return r
}

func listed(list, name string) bool {
	for _, n := range strings.Split(list, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}
