package runtime

import (
	"context"
	"log/slog"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/llmbuiltin"
)

// Builtins is the registry of the integrations built into the platform
// (shared/builtin, docs/builtin.md), the same in every process: the API
// serves their webhooks and actions, the dispatcher hands them the bots'
// messages, and the admin function (locally: the platform at start)
// publishes them in the hub.
func Builtins() *builtin.Registry {
	gw, err := LLM(context.Background(), false)
	if err != nil {
		// The API refuses to start on it (AreaHandler, local.Open).
		slog.Default().Error("the llm integration has no provider", "err", err)
	}
	return BuiltinsWith(gw, nil)
}

// BuiltinsWith is Builtins with the LLM gateway the process already has,
// and the meter of the bots' LLM usage (the store; nil: not counted).
// "llm" is there when the operator configured an LLM provider
// (PLATFORM_LLM_*, docs/llm.md): without one it could only refuse.
func BuiltinsWith(gw *llm.Gateway, meter llm.Meter) *builtin.Registry {
	r := builtin.NewRegistry()
	if gw.DefaultProvider() != "" {
		r.Add(&llmbuiltin.Integration{Gateway: gw, Meter: meter})
	}
	return r
}
