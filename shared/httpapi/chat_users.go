package httpapi

import (
	"encoding/json"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// userBody is the body of createUser and getOrCreateUser.
type userBody struct {
	Tags               map[string]string `json:"tags"`
	IntegrationName    *string           `json:"integrationName"`
	Name               *string           `json:"name"`
	PictureURL         *string           `json:"pictureUrl"`
	DiscriminateByTags []string          `json:"discriminateByTags"`
}

// readUserBody decodes and checks the body.
func readUserBody(c *call) (userBody, error) {
	var in userBody
	if err := c.decode(&in); err != nil {
		return in, err
	}
	return in, chat.BodyTags("tags", in.Tags)
}

func (s *server) createUser(c *call) (any, error) {
	in, err := readUserBody(c)
	if err != nil {
		return nil, err
	}
	integration, err := bodyIntegration(c, in.IntegrationName)
	if err != nil {
		return nil, err
	}
	u := chat.NewUser(integration, in.Tags, in.Name, in.PictureURL)
	if err := s.Store.CreateUser(c.ctx, c.bot.ID, u); err != nil {
		return nil, err
	}
	return map[string]any{"user": u}, nil
}

func (s *server) getUser(c *call) (any, error) {
	u, err := s.Store.GetUser(c.ctx, c.bot.ID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"user": u}, nil
}

func (s *server) listUsers(c *call) (any, error) {
	q := c.query()
	f := dynamo.UserFilter{BotID: c.bot.ID}
	var err error
	if f.ByUpdatedAt, f.Descending, err = sortQuery(c); err != nil {
		return nil, err
	}
	rangeField, err := q.oneOf("rangeField", "createdAt", "createdAt", "updatedAt")
	if err != nil {
		return nil, err
	}
	f.RangeByUpdatedAt = rangeField == "updatedAt"
	if f.Tags, err = tagQuery(c); err != nil {
		return nil, err
	}
	if f.After, f.Before, err = dateRangeQuery(c); err != nil {
		return nil, err
	}
	if f.ConversationID, err = q.str("conversationId"); err != nil {
		return nil, err
	}
	if err := s.conversationExists(c, f.ConversationID); err != nil {
		return nil, err
	}
	return listPage(c, "users", listKey(f), func(p dynamo.Page) ([]platform.User, map[string]string, error) {
		return s.Store.ListUsers(c.ctx, f, p)
	})
}

// nullable reads an optional, nullable string field: nil when absent, ""
// when null (which removes the value), else the value.
func nullable(raw json.RawMessage, field string) (*string, error) {
	if raw == nil {
		return nil, nil
	}
	var v *string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, platform.Invalid("invalid body: field %q: expected a string or null", field)
	}
	if v == nil {
		v = new(string)
	}
	return v, nil
}

func (s *server) updateUser(c *call) (any, error) {
	var in struct {
		Tags       map[string]string `json:"tags"`
		Name       json.RawMessage   `json:"name"`
		PictureURL json.RawMessage   `json:"pictureUrl"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	p := dynamo.UserPatch{Tags: in.Tags}
	var err error
	if p.Name, err = nullable(in.Name, "name"); err != nil {
		return nil, err
	}
	if p.PictureURL, err = nullable(in.PictureURL, "pictureUrl"); err != nil {
		return nil, err
	}
	id := c.PathValue("id")
	if err := checkID("user", id, platform.PrefixUser); err != nil {
		return nil, err
	}
	u, err := s.Store.UpdateUser(c.ctx, c.bot.ID, id, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"user": u}, nil
}

func (s *server) deleteUser(c *call) (any, error) {
	return nil, s.Store.DeleteUser(c.ctx, c.bot.ID, c.PathValue("id"))
}

func (s *server) getOrCreateUser(c *call) (any, error) {
	l, err := userLookup(c)
	if err != nil {
		return nil, err
	}
	u, _, err := s.Store.GetOrCreateUser(c.ctx, l)
	if err != nil {
		return nil, err
	}
	return map[string]any{"user": u}, nil
}

// userLookup reads and checks getOrCreateUser's body, writing nothing.
func userLookup(c *call) (dynamo.UserLookup, error) {
	in, err := readUserBody(c)
	if err != nil {
		return dynamo.UserLookup{}, err
	}
	keys, err := chat.Discriminators(in.Tags, in.DiscriminateByTags)
	if err != nil {
		return dynamo.UserLookup{}, err
	}
	integration, err := bodyIntegration(c, in.IntegrationName)
	if err != nil {
		return dynamo.UserLookup{}, err
	}
	return dynamo.UserLookup{
		BotID: c.bot.ID, Integration: integration,
		Tags: in.Tags, Keys: keys, Name: in.Name, PictureURL: in.PictureURL,
	}, nil
}
