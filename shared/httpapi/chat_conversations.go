package httpapi

import (
	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// --- Conversations ---

// conversationBody is the body of createConversation and
// getOrCreateConversation.
type conversationBody struct {
	Channel            string            `json:"channel"`
	Tags               map[string]string `json:"tags"`
	IntegrationName    *string           `json:"integrationName"`
	DiscriminateByTags []string          `json:"discriminateByTags"`
}

// readConversationBody decodes and checks the body, and the tags the
// integration's channel requires at creation; it returns the integration
// acting.
func (s *server) readConversationBody(c *call) (conversationBody, string, error) {
	var in conversationBody
	if err := c.decode(&in); err != nil {
		return in, "", err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return in, "", err
	}
	integration, err := bodyIntegration(c, in.IntegrationName)
	if err != nil {
		return in, "", err
	}
	required, err := s.conversationRequiredTags(c, integration, in.Channel)
	if err != nil {
		return in, "", err
	}
	for _, t := range required {
		// Stored (and so here) under the integration's alias.
		if in.Tags[t] == "" && in.Tags[integration+":"+t] == "" {
			return in, "", platform.Invalid("invalid body: field %q: tag %q is required by channel %q of integration %q", "tags", t, in.Channel, integration)
		}
	}
	return in, integration, nil
}

func (s *server) createConversation(c *call) (any, error) {
	in, integration, err := s.readConversationBody(c)
	if err != nil {
		return nil, err
	}
	conv := chat.NewConversation(in.Channel, integration, in.Tags)
	if err := s.Store.CreateConversation(c.ctx, c.bot.ID, conv); err != nil {
		return nil, err
	}
	return map[string]any{"conversation": conv}, nil
}

func (s *server) getConversation(c *call) (any, error) {
	conv, err := s.Store.GetConversation(c.ctx, c.bot.ID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"conversation": conv}, nil
}

func (s *server) listConversations(c *call) (any, error) {
	q := c.query()
	f := dynamo.ConversationFilter{BotID: c.bot.ID}
	var err error
	if f.ByUpdatedAt, f.Descending, err = sortQuery(c); err != nil {
		return nil, err
	}
	if f.Tags, err = tagQuery(c); err != nil {
		return nil, err
	}
	if f.Participants, err = listQuery(c, "participantIds"); err != nil {
		return nil, err
	}
	for _, id := range f.Participants {
		if !platform.HasPrefix(id, platform.PrefixUser) {
			// No conversation has such a participant.
			return map[string]any{"conversations": []platform.Conversation{}, "meta": meta{}}, nil
		}
	}
	if f.Integration, err = q.str("integrationName"); err != nil {
		return nil, err
	}
	if f.Channel, err = q.str("channel"); err != nil {
		return nil, err
	}
	if f.After, f.Before, err = dateRangeQuery(c); err != nil {
		return nil, err
	}
	if f.MinMessages, err = countQuery(c, "minMessageCount"); err != nil {
		return nil, err
	}
	if f.MaxMessages, err = countQuery(c, "maxMessageCount"); err != nil {
		return nil, err
	}
	return listPage(c, "conversations", listKey(f), func(p dynamo.Page) ([]platform.Conversation, map[string]string, error) {
		return s.Store.ListConversations(c.ctx, f, p)
	})
}

func (s *server) updateConversation(c *call) (any, error) {
	var in struct {
		// currentTaskId is accepted and ignored, as in the current API.
		CurrentTaskID *string           `json:"currentTaskId"`
		Tags          map[string]string `json:"tags"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	id := c.PathValue("id")
	if err := checkID("conversation", id, platform.PrefixConversation); err != nil {
		return nil, err
	}
	conv, err := s.Store.UpdateConversation(c.ctx, c.bot.ID, id, in.Tags)
	if err != nil {
		return nil, err
	}
	return map[string]any{"conversation": conv}, nil
}

func (s *server) deleteConversation(c *call) (any, error) {
	return nil, s.Store.DeleteConversation(c.ctx, c.bot.ID, c.PathValue("id"))
}

func (s *server) getOrCreateConversation(c *call) (any, error) {
	l, err := s.conversationLookup(c)
	if err != nil {
		return nil, err
	}
	conv, created, err := s.Store.GetOrCreateConversation(c.ctx, l)
	if err != nil {
		return nil, err
	}
	return map[string]any{"conversation": conv, "meta": map[string]bool{"created": created}}, nil
}

// conversationLookup reads and checks getOrCreateConversation's body,
// writing nothing.
func (s *server) conversationLookup(c *call) (dynamo.ConversationLookup, error) {
	in, integration, err := s.readConversationBody(c)
	if err != nil {
		return dynamo.ConversationLookup{}, err
	}
	keys, err := chat.Discriminators(in.Tags, in.DiscriminateByTags)
	if err != nil {
		return dynamo.ConversationLookup{}, err
	}
	return dynamo.ConversationLookup{
		BotID: c.bot.ID, Channel: in.Channel, Integration: integration, Tags: in.Tags, Keys: keys,
	}, nil
}

// --- Participants ---

func (s *server) listParticipants(c *call) (any, error) {
	id := c.PathValue("id")
	if _, err := s.Store.GetConversation(c.ctx, c.bot.ID, id); err != nil {
		return nil, err
	}
	f := dynamo.UserFilter{BotID: c.bot.ID, ConversationID: id, Descending: false}
	return listPage(c, "participants", listKey(c.bot.ID, id), func(p dynamo.Page) ([]platform.User, map[string]string, error) {
		return s.Store.ListUsers(c.ctx, f, p)
	})
}

func (s *server) addParticipant(c *call) (any, error) {
	var in struct {
		UserID string `json:"userId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	u, err := s.Store.AddParticipant(c.ctx, c.bot.ID, c.PathValue("id"), in.UserID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"participant": u}, nil
}

func (s *server) getParticipant(c *call) (any, error) {
	u, err := s.Store.GetParticipant(c.ctx, c.bot.ID, c.PathValue("id"), c.PathValue("userId"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"participant": u}, nil
}

func (s *server) removeParticipant(c *call) (any, error) {
	return nil, s.Store.RemoveParticipant(c.ctx, c.bot.ID, c.PathValue("id"), c.PathValue("userId"))
}
