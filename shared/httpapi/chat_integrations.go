package httpapi

import (
	"github.com/botforge/platform/shared/platform"
)

// conversationRequiredTags returns the tags a conversation of the channel of
// the integration must be created with (the channel's
// conversation.creation.requiredTags in the integration's definition).
// createConversation and getOrCreateConversation answer 400 when one is
// missing. integrationName is the alias of an integration installed on
// c.bot, or the name of an installed integration. An integration the bot
// has not installed declares nothing (nil); a channel the installed
// integration does not have is an InvalidPayload. One BatchGetItem when the
// bot has integrations, none otherwise.
func (s *server) conversationRequiredTags(c *call, integrationName, channel string) ([]string, error) {
	if integrationName == "" || len(c.bot.Installs) == 0 {
		return nil, nil
	}
	ints, err := s.installedIntegrations(c.ctx, c.bot.Bot)
	if err != nil {
		return nil, err
	}
	var found *platform.Integration
	if in, ok := c.bot.Installs[integrationName]; ok {
		if i, ok := ints[in.IntegrationID]; ok {
			found = &i
		}
	}
	for _, alias := range keysOf(c.bot.Installs) {
		if found != nil {
			break
		}
		if i, ok := ints[c.bot.Installs[alias].IntegrationID]; ok && i.Name == integrationName {
			found = &i
		}
	}
	if found == nil {
		return nil, nil
	}
	tags, ok := found.ChannelRequiredTags(channel)
	if !ok {
		return nil, platform.Invalid("invalid body: field %q: integration %q has no channel %q", "channel", integrationName, channel)
	}
	return tags, nil
}
