package runtime

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/hitl"
	"github.com/botforge/platform/shared/listen"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/llmbuiltin"
	"github.com/botforge/platform/shared/platform"
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
	gw, err := LLM(context.Background(), false)
	if err != nil {
		// The API refuses to start on it (AreaHandler, local.Open).
		slog.Default().Error("the llm integration has no provider", "err", err)
	}
	return BuiltinsWith(listen.NewHub(), gw, nil, nil)
}

// BuiltinsWith is Builtins over the given listener hub (on AWS, a
// chatrelay.Relay, so that the signals a function publishes reach the
// streams the streaming function holds: docs/chat-api.md), with the LLM
// gateway the process already has and the meter of the bots' LLM usage
// (the store; nil: not counted). "llm" is there when the operator
// configured an LLM provider (PLATFORM_LLM_*, docs/llm.md): without one it
// could only refuse. limits are the store's limits shared across processes
// (the Chat API's streams and user creations; nil: per process).
func BuiltinsWith(hub chatapi.Hub, gw *llm.Gateway, meter llm.Meter, limits platform.SharedLimits) *builtin.Registry {
	all := []builtin.Integration{chatapi.New(hub, limits), webchat.New(hub, limits)}
	if gw.DefaultProvider() != "" {
		all = append(all, &llmbuiltin.Integration{Gateway: gw, Meter: meter})
	}
	// hitl (docs/hitl.md) keeps its sessions in the store: the meter is
	// the store wherever one is given.
	if st, ok := meter.(hitl.Store); ok {
		desk := hitl.New(st)
		desk.Hub = hub // the inbox's live updates (docs/hitl.md)
		all = append(all, desk)
	}
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
