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

func (s *server) createUser(c *call) (any, error) {
	var in userBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	now := platform.Now()
	u := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now,
		Tags: chat.ApplyTags(nil, in.Tags), Integration: integrationOf(c, in.IntegrationName)}
	if in.Name != nil {
		u.Name = *in.Name
	}
	if in.PictureURL != nil {
		u.PictureURL = *in.PictureURL
	}
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
	sortField, err := q.oneOf("sortField", "createdAt", "createdAt", "updatedAt")
	if err != nil {
		return nil, err
	}
	dir, err := q.oneOf("sortDirection", "desc", "asc", "desc")
	if err != nil {
		return nil, err
	}
	rangeField, err := q.oneOf("rangeField", "createdAt", "createdAt", "updatedAt")
	if err != nil {
		return nil, err
	}
	f.ByUpdatedAt, f.Descending, f.RangeByUpdatedAt = sortField == "updatedAt", dir == "desc", rangeField == "updatedAt"
	if f.Tags, err = tagQuery(c); err != nil {
		return nil, err
	}
	if f.After, err = dateQuery(c, "afterDate", false); err != nil {
		return nil, err
	}
	if f.Before, err = dateQuery(c, "beforeDate", true); err != nil {
		return nil, err
	}
	if f.ConversationID, err = q.str("conversationId"); err != nil {
		return nil, err
	}
	if f.ConversationID != "" {
		if _, err := s.Store.GetConversation(c.ctx, c.bot.ID, f.ConversationID); err != nil {
			return nil, err
		}
	}
	list := listKey(f)
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	users, next, err := s.Store.ListUsers(c.ctx, f, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"users": users, "meta": c.meta(list, next)}, nil
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
	var in userBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := chat.BodyTags("tags", in.Tags); err != nil {
		return nil, err
	}
	keys, err := chat.Discriminators(in.Tags, in.DiscriminateByTags)
	if err != nil {
		return nil, err
	}
	u, _, err := s.Store.GetOrCreateUser(c.ctx, dynamo.UserLookup{
		BotID: c.bot.ID, Integration: integrationOf(c, in.IntegrationName),
		Tags: in.Tags, Keys: keys, Name: in.Name, PictureURL: in.PictureURL,
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"user": u}, nil
}
