package webchat

import (
	"encoding/json"
	"net/url"
	"unicode/utf8"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/platform"
)

// userDataTag is the user's tag that keeps the userData the component
// sends (`updateUser({data})` of @botpress/webchat sends PUT /users/me
// {userData}), as compact JSON of a flat object of strings: the bot reads
// it with getUserData. A tag value is at most chat.MaxTagValueLen
// characters, which bounds the data (a clear 400 beyond).
const userDataTag = "userData"

// getMe is GET /users/me: the Chat API's user with its `data`.
func (q *req) getMe() (any, error) {
	me, u, err := q.me()
	if err != nil {
		return nil, err
	}
	return map[string]any{"user": withData(me, u)}, nil
}

// me reads the caller's user: as the Chat API answers it, and as the
// platform's user (its tags).
func (q *req) me() (map[string]any, platform.User, error) {
	var me struct {
		User map[string]any `json:"user"`
	}
	if err := q.chat("GET", "/users/me", q.key(), nil, &me); err != nil {
		return nil, platform.User{}, err
	}
	u, err := q.platformUser(me.User)
	return me.User, u, err
}

// updateMe is PUT /users/me {name?, pictureUrl?, userData?}: one update of
// the user (name, picture and the userData tag together); userData null
// removes it. Signed userData (a JWT string) and attributes are refused.
func (q *req) updateMe() (any, error) {
	b, err := q.body()
	if err != nil {
		return nil, err
	}
	var in struct {
		Name       json.RawMessage `json:"name"`
		PictureURL json.RawMessage `json:"pictureUrl"`
		UserData   json.RawMessage `json:"userData"`
		Attributes json.RawMessage `json:"attributes"`
	}
	if err := decodeStrict(b, &in); err != nil {
		return nil, err
	}
	if len(in.Attributes) > 0 && string(in.Attributes) != "null" {
		return nil, platform.Invalid("invalid body: field \"attributes\": user attributes are not supported by this webchat")
	}
	patch := map[string]any{}
	for field, raw := range map[string]json.RawMessage{"name": in.Name, "pictureUrl": in.PictureURL} {
		if len(raw) == 0 {
			continue
		}
		var s *string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, platform.Invalid("invalid body: field %q: must be a string", field)
		}
		if s == nil {
			patch[field] = nil
		} else {
			patch[field] = *s
		}
	}
	if len(in.UserData) > 0 {
		tag, err := userDataValue(in.UserData)
		if err != nil {
			return nil, err
		}
		patch["tags"] = map[string]string{userDataTag: tag} // "" removes it
	}
	me, u, err := q.me()
	if err != nil {
		return nil, err
	}
	if len(patch) > 0 {
		var out struct {
			User platform.User `json:"user"`
		}
		if err := q.in.API.Call(q.ctx, q.in, "PUT", "/v1/chat/users/"+url.PathEscape(u.ID), patch, &out); err != nil {
			return nil, err
		}
		u = out.User
		if u.Name != "" {
			me["name"] = u.Name
		} else {
			delete(me, "name")
		}
		if u.PictureURL != "" {
			me["pictureUrl"] = u.PictureURL
		} else {
			delete(me, "pictureUrl")
		}
		me["updatedAt"] = u.UpdatedAt
	}
	return map[string]any{"user": withData(me, u)}, nil
}

// userDataValue checks the userData of a body and answers the tag's value
// ("" for null: removed). It must be a flat object: strings kept, numbers
// and booleans as their JSON text (Botpress's getUserData answers strings).
func userDataValue(raw json.RawMessage) (string, error) {
	if string(raw) == "null" {
		return "", nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "", platform.Invalid("invalid body: field \"userData\": signed user data (a JWT) is not supported by this webchat; send an object")
		}
		return "", platform.Invalid("invalid body: field \"userData\": must be an object of strings")
	}
	flat := make(map[string]string, len(obj))
	for k, v := range obj {
		var s string
		if json.Unmarshal(v, &s) == nil {
			flat[k] = s
			continue
		}
		var scalar any
		_ = json.Unmarshal(v, &scalar)
		switch scalar.(type) {
		case float64, bool:
			flat[k] = string(v)
		default:
			return "", platform.Invalid("invalid body: field \"userData.%s\": must be a string, a number or a boolean (userData is a flat object)", k)
		}
	}
	if len(flat) == 0 {
		return "", nil
	}
	b, _ := json.Marshal(flat)
	if n := utf8.RuneCount(b); n > chat.MaxTagValueLen {
		return "", platform.Invalid("invalid body: field \"userData\": at most %d characters as JSON, got %d", chat.MaxTagValueLen, n)
	}
	return string(b), nil
}

// platformUser is the stored user behind the Chat API user of the key.
func (q *req) platformUser(chatUser map[string]any) (platform.User, error) {
	fid, _ := chatUser["id"].(string)
	var out struct {
		Users []platform.User `json:"users"`
	}
	if err := q.in.API.Call(q.ctx, q.in, "GET", "/v1/chat/users?tags%5Bfid%5D="+url.QueryEscape(fid), nil, &out); err != nil {
		return platform.User{}, err
	}
	for _, u := range out.Users {
		if u.Tags["fid"] == fid {
			return u, nil
		}
	}
	return platform.User{}, platform.NotFound("user", fid)
}

// withData is the Chat API user with `data`, as the Webchat API answers.
func withData(chatUser map[string]any, u platform.User) map[string]any {
	data := map[string]string{}
	if s := u.Tags[userDataTag]; s != "" {
		_ = json.Unmarshal([]byte(s), &data)
	}
	chatUser["data"] = data
	return chatUser
}
