package chat

import "github.com/botforge/platform/shared/platform"

// NewConversation is a conversation created now, as createConversation and
// getOrCreateConversation make it: tags as passed to ApplyTags (an empty
// value is no tag).
func NewConversation(channel, integration string, tags map[string]string) platform.Conversation {
	now := platform.Now()
	return platform.Conversation{
		ID: platform.NewID(platform.PrefixConversation), CreatedAt: now, UpdatedAt: now,
		Channel: channel, Integration: integration, Tags: ApplyTags(nil, tags),
		Properties: map[string]string{},
	}
}

// NewUser is a user created now, as createUser and getOrCreateUser make it;
// a nil name or picture is none.
func NewUser(integration string, tags map[string]string, name, pictureURL *string) platform.User {
	now := platform.Now()
	u := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now,
		Tags: ApplyTags(nil, tags), Integration: integration}
	if name != nil {
		u.Name = *name
	}
	if pictureURL != nil {
		u.PictureURL = *pictureURL
	}
	return u
}
