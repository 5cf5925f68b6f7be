package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/vrl"
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

// runVrl runs a VRL script on data with the platform's VRL interpreter
// (shared/vrl: the subset Botpress integrations use, docs/account.md) and
// answers data as the script left it and the script's value. A script that
// does not compile or fails is the caller's bad input (400, with the
// position and reason).
func (s *server) runVrl(c *call) (any, error) {
	var in struct {
		Data   json.RawMessage `json:"data"`
		Script string          `json:"script"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	// Integers stay integers (VRL tells them from floats).
	var data map[string]any
	dec := json.NewDecoder(bytes.NewReader(in.Data))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil || data == nil {
		return nil, platform.Invalid("invalid body: field \"data\": must be an object")
	}
	p, err := vrl.Compile(in.Script)
	if err != nil {
		return nil, platform.Invalid("invalid body: field \"script\": %v", err)
	}
	result, target, err := p.Transform(data)
	if err != nil {
		return nil, platform.Invalid("the script failed: %v", err)
	}
	out, ok := target.(map[string]any)
	if !ok {
		return nil, platform.Invalid("the script failed: it left \".\" a %T, not an object", target)
	}
	return map[string]any{"data": out, "result": result}, nil
}
