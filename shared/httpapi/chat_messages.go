package httpapi

import (
	"encoding/json"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// messageBody is the body of createMessage and getOrCreateMessage.
type messageBody struct {
	Payload        json.RawMessage   `json:"payload"`
	UserID         string            `json:"userId"`
	ConversationID string            `json:"conversationId"`
	Type           string            `json:"type"`
	Tags           map[string]string `json:"tags"`
	// Schedule is accepted; delivering messages is the runtime's, which the
	// specification leaves out.
	Schedule           json.RawMessage `json:"schedule"`
	Origin             string          `json:"origin"`
	DiscriminateByTags []string        `json:"discriminateByTags"`
}

// readMessageBody decodes the body and the new message it describes. It is
// incoming when an integration writes it (a user spoke), outgoing when the
// bot does.
func readMessageBody(c *call) (messageBody, platform.Message, error) {
	var in messageBody
	if err := c.decode(&in); err != nil {
		return in, platform.Message{}, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return in, platform.Message{}, err
	}
	now := platform.Now()
	m := platform.Message{
		ID: platform.NewID(platform.PrefixMessage), CreatedAt: now, UpdatedAt: now,
		Type: in.Type, Payload: in.Payload, Direction: platform.DirectionOutgoing,
		UserID: in.UserID, ConversationID: in.ConversationID,
		Tags: chat.ApplyTags(nil, in.Tags), Origin: in.Origin,
	}
	if byIntegration(c) {
		m.Direction = platform.DirectionIncoming
	}
	return in, m, nil
}

func (s *server) createMessage(c *call) (any, error) {
	_, m, err := readMessageBody(c)
	if err != nil {
		return nil, err
	}
	if err := s.Store.CreateMessage(c.ctx, c.bot.ID, m); err != nil {
		return nil, err
	}
	return map[string]any{"message": m}, nil
}

func (s *server) getOrCreateMessage(c *call) (any, error) {
	l, err := messageLookup(c)
	if err != nil {
		return nil, err
	}
	m, _, err := s.Store.GetOrCreateMessage(c.ctx, l)
	if err != nil {
		return nil, err
	}
	return map[string]any{"message": m}, nil
}

// messageLookup reads and checks getOrCreateMessage's body, writing
// nothing.
func messageLookup(c *call) (dynamo.MessageLookup, error) {
	in, m, err := readMessageBody(c)
	if err != nil {
		return dynamo.MessageLookup{}, err
	}
	keys, err := chat.Discriminators(in.Tags, in.DiscriminateByTags)
	if err != nil {
		return dynamo.MessageLookup{}, err
	}
	return dynamo.MessageLookup{BotID: c.bot.ID, Tags: in.Tags, Keys: keys, New: m, AuthorLive: c.liveUser}, nil
}

func (s *server) getMessage(c *call) (any, error) {
	m, err := s.Store.GetMessage(c.ctx, c.bot.ID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"message": m}, nil
}

func (s *server) updateMessage(c *call) (any, error) {
	var in struct {
		Tags    map[string]string `json:"tags"`
		Payload json.RawMessage   `json:"payload"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	id := c.PathValue("id")
	if err := checkID("message", id, platform.PrefixMessage); err != nil {
		return nil, err
	}
	m, err := s.Store.UpdateMessage(c.ctx, c.bot.ID, id, in.Tags, in.Payload)
	if err != nil {
		return nil, err
	}
	return map[string]any{"message": m}, nil
}

func (s *server) deleteMessage(c *call) (any, error) {
	return nil, s.Store.DeleteMessage(c.ctx, c.bot.ID, c.PathValue("id"))
}

func (s *server) listMessages(c *call) (any, error) {
	q := c.query()
	f := dynamo.MessageFilter{BotID: c.bot.ID}
	var err error
	if f.ConversationID, err = q.str("conversationId"); err != nil {
		return nil, err
	}
	if f.Tags, err = tagQuery(c); err != nil {
		return nil, err
	}
	if f.After, f.Before, err = dateRangeQuery(c); err != nil {
		return nil, err
	}
	if err := s.conversationExists(c, f.ConversationID); err != nil {
		return nil, err
	}
	return listPage(c, "messages", listKey(f), func(p dynamo.Page) ([]platform.Message, map[string]string, error) {
		return s.Store.ListMessages(c.ctx, f, p)
	})
}
