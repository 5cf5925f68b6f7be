package httpapi

import (
	"github.com/botforge/platform/shared/platform"
)

// helperRoutes are the reference's helper operations: introspect (who is
// calling, for which bot) and runVrl.
func (s *server) helperRoutes() []route {
	return []route{
		// Any token may ask who it is; the bot it names must be one it can act on.
		{pattern: "POST /v1/admin/introspect", op: "introspect", scope: scopeAnyone, handle: s.introspect},
		{pattern: "POST /v1/admin/helper/vrl", op: "runVrl", scope: scopeAnyone, handle: s.runVrl},
	}
}

// introspect answers who the caller is for the bot of the body: that bot's
// workspace, the bot, and the caller's id (the account of a personal
// access token, the bot of a bot API key, the integration of an
// integration API key). A bot the caller cannot act on is a 404, as if it
// did not exist.
func (s *server) introspect(c *call) (any, error) {
	var in struct {
		BotID string `json:"botId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	p := c.principal
	notFound := platform.NotFound("bot", in.BotID)
	if p.Kind == platform.PrincipalBot && in.BotID != p.BotID {
		return nil, notFound
	}
	bot, err := s.Store.GetBot(c.ctx, in.BotID)
	if err != nil {
		return nil, err
	}
	userID := p.AccountID
	switch p.Kind {
	case platform.PrincipalBot:
		userID = p.BotID
	case platform.PrincipalIntegration:
		if _, installed := bot.Install(p.IntegrationID); !installed {
			return nil, notFound
		}
		userID = p.IntegrationID
	default:
		if _, ok, err := s.Store.GetMember(c.ctx, bot.WorkspaceID, p.AccountID); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			return nil, notFound
		}
	}
	return map[string]any{"workspaceId": bot.WorkspaceID, "botId": bot.ID, "userId": userID}, nil
}

// errNoVRL: VRL (Vector Remap Language) has one implementation, in Rust;
// no maintained evaluator exists for Go, so the platform refuses rather
// than run a script with different semantics.
var errNoVRL = platform.Forbidden("runVrl is not available on this self-hosted platform: no maintained VRL evaluator exists for Go (see docs/account.md)")

func (s *server) runVrl(c *call) (any, error) {
	var in struct {
		Data   map[string]any `json:"data"`
		Script string         `json:"script"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return nil, errNoVRL
}
