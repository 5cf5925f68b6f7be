package dynamo_test

import (
	"context"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// embeddedStores returns a function giving a Store over a new table of
// one embedded DynamoDB (apitest's), for tests that play the dispatcher
// on a table no dispatcher works, and that embedded server.
func embeddedStores(t *testing.T) (func(table string) *dynamo.Store, *apitest.Env) {
	env := apitest.New(t)
	db := env.Platform.Store.Client()
	return func(table string) *dynamo.Store {
		t.Helper()
		if err := dynamo.EnsureTable(context.Background(), db, table); err != nil {
			t.Fatal(err)
		}
		return dynamo.New(db, table)
	}, env
}

// newChatUser creates a user of bot, created now (platform.Clock).
func newChatUser(t *testing.T, s *dynamo.Store, bot string) string {
	t.Helper()
	now := platform.Now()
	u := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now, Tags: map[string]string{}}
	if err := s.CreateUser(context.Background(), bot, u); err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// newChatConversation creates a conversation of bot, created now.
func newChatConversation(t *testing.T, s *dynamo.Store, bot string) string {
	t.Helper()
	now := platform.Now()
	c := platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: now, UpdatedAt: now, Channel: "c", Tags: map[string]string{}}
	if err := s.CreateConversation(context.Background(), bot, c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// userText is a user's text message in conv, created now.
func userText(user, conv string) platform.Message {
	now := platform.Now()
	return platform.Message{ID: platform.NewID(platform.PrefixMessage), CreatedAt: now, UpdatedAt: now, Type: "text", Payload: []byte(`{"text":"x"}`),
		Direction: "incoming", UserID: user, ConversationID: conv, Tags: map[string]string{}}
}
