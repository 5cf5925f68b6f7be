package httpapi

import (
	"encoding/json"
	"time"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// importMessages (docs/chat.md, "Importing messages"): up to 100 past
// messages, each created unless a message of its conversation matches its
// tags (as getOrCreateMessage; empty tags or discriminateByTags always
// create), with its own createdAt, and no runtime delivery (an imported
// message reaches no bot or integration). Every message is checked, and
// every conversation and user it names read, and all of them checked against
// the size limit of a record and the messages quota (CheckMessageImport),
// before the first is written: bad input writes nothing.
func (s *server) importMessages(c *call) (any, error) {
	var in struct {
		Messages []struct {
			Payload            json.RawMessage   `json:"payload"`
			UserID             string            `json:"userId"`
			ConversationID     string            `json:"conversationId"`
			Type               string            `json:"type"`
			Tags               map[string]string `json:"tags"`
			CreatedAt          string            `json:"createdAt"`
			DiscriminateByTags []string          `json:"discriminateByTags"`
		} `json:"messages"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	type todo struct {
		m    platform.Message
		keys []string
	}
	bot := c.bot.ID
	work := make([]todo, 0, len(in.Messages))
	convs, users := map[string]bool{}, map[string]bool{}
	for i, x := range in.Messages {
		if err := chat.BodyTags("messages.tags", x.Tags); err != nil {
			return nil, err
		}
		at, err := time.Parse(time.RFC3339Nano, x.CreatedAt)
		if err != nil {
			return nil, platform.Invalid("invalid body: field %q of message %d: must be an ISO 8601 date-time", "createdAt", i)
		}
		if x.Type == "" {
			return nil, platform.Invalid("invalid body: field %q of message %d: must not be empty", "type", i)
		}
		var keys []string
		if len(x.Tags) > 0 && len(x.DiscriminateByTags) > 0 {
			if keys, err = chat.Discriminators(x.Tags, x.DiscriminateByTags); err != nil {
				return nil, err
			}
		}
		ts := platform.FormatTime(at)
		m := platform.Message{
			ID: platform.NewID(platform.PrefixMessage), CreatedAt: ts, UpdatedAt: ts,
			Type: x.Type, Payload: x.Payload, Direction: platform.DirectionIncoming,
			UserID: x.UserID, ConversationID: x.ConversationID, Tags: chat.ApplyTags(nil, x.Tags),
		}
		if m.UserID == bot {
			m.Direction = platform.DirectionOutgoing
		} else {
			users[m.UserID] = true
		}
		convs[m.ConversationID] = true
		work = append(work, todo{m, keys})
	}
	for id := range convs {
		if _, err := s.Store.GetConversation(c.ctx, bot, id); err != nil {
			return nil, err
		}
	}
	for id := range users {
		if _, err := s.Store.GetUser(c.ctx, bot, id); err != nil {
			return nil, err
		}
	}
	ms := make([]platform.Message, len(work))
	for i, w := range work {
		ms[i] = w.m
	}
	if err := s.Store.CheckMessageImport(c.ctx, bot, ms); err != nil {
		return nil, err
	}
	out := make([]platform.Message, 0, len(work))
	for _, w := range work {
		m := w.m
		var err error
		if w.keys == nil {
			err = s.Store.ImportMessage(c.ctx, bot, m)
		} else {
			m, _, err = s.Store.GetOrCreateMessage(c.ctx, dynamo.MessageLookup{BotID: bot, Tags: w.m.Tags, Keys: w.keys, New: m, Import: true})
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return map[string]any{"messages": out}, nil
}
