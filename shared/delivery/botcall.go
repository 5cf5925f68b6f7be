package delivery

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// BotRequest is the signed POST of an operation to a bot's url (e.g.
// action_triggered for callAction), with the headers the SDK's bot handler
// requires (x-bot-id, x-bp-operation, a non-empty x-bp-type,
// x-bp-configuration) and the bot user id the ADK runtime also reads.
func BotRequest(bot platform.Bot, operation, typ string, body any, timeout time.Duration) (Request, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return Request{}, err
	}
	h := http.Header{}
	h.Set(HeaderBotID, bot.ID)
	h.Set(HeaderBotUserID, bot.ID)
	h.Set(HeaderOperation, operation)
	h.Set(HeaderType, typ)
	h.Set(HeaderConfiguration, botConfiguration(bot))
	return Request{URL: bot.URL, Secret: bot.SigningSecret, Body: b, Header: h, Timeout: timeout}, nil
}

// botConfiguration is the x-bp-configuration header of a call to a bot:
// base64 of {id, createdAt, updatedAt, type:"bot", payload:"<data JSON>"},
// the shape the ADK runtime parses; the SDK's bot handler only decodes it.
func botConfiguration(bot platform.Bot) string {
	data := json.RawMessage(`{}`)
	var c struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(bot.Configuration, &c) == nil && len(c.Data) > 0 && string(c.Data) != "null" {
		data = c.Data
	}
	cfg, _ := json.Marshal(map[string]string{
		"id": bot.ID, "createdAt": bot.CreatedAt, "updatedAt": bot.UpdatedAt, "type": "bot", "payload": string(data),
	})
	return base64.StdEncoding.EncodeToString(cfg)
}

// BotTimeout is how long a bot gets to answer a call: its
// maxExecutionTime, at most limit; DefaultTimeout (within limit) when unset.
func BotTimeout(bot platform.Bot, limit time.Duration) time.Duration {
	if bot.MaxExecutionTime != nil && *bot.MaxExecutionTime > 0 {
		return min(time.Duration(*bot.MaxExecutionTime*float64(time.Second)), limit)
	}
	return min(DefaultTimeout, limit)
}
