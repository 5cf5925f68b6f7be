package httpapi

import (
	"slices"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// actingAlias resolves, once per Chat call, the installation an integration's
// call acts for, by its alias: the x-integration-alias header when sent
// (SDK 7 sends it on every call), else the bot's installation of the
// x-integration-id header's integration. The SDK 0.10 of CLI 0.8.59, which
// Botpress's open-source integrations of that era are built on, sends
// x-integration-id only: without this, their conversations had no
// integration (the bot's replies were never sent back), their tags reached
// the bot unprefixed and their events unnamed. The alias it resolves to is
// used exactly as a sent alias is: the conversation's integration, tag
// prefixing both ways, event-type prefixing, actingInstall.
//
// An integration installed more than once on the bot (under two aliases)
// cannot be told apart by its id: the call is refused (400) rather than
// guessed, as a guess would route one installation's users to another's
// configuration.
func actingAlias(c *call) (string, error) {
	if alias := strings.TrimSpace(c.Header.Get("x-integration-alias")); alias != "" {
		return alias, nil
	}
	id := strings.TrimSpace(c.Header.Get("x-integration-id"))
	if id == "" || c.bot.ID == "" {
		return "", nil
	}
	aliases := installAliases(c.bot.Bot, id)
	switch len(aliases) {
	case 0:
		// Names no installation, as before this resolution existed: the
		// call is still made "as an integration" (its messages are
		// incoming). An integration's own key cannot get here: authorize
		// holds it to the bots that installed it.
		return "", nil
	case 1:
		return aliases[0], nil
	}
	return "", platform.Invalid("x-integration-id %q: the integration is installed %d times on bot %q (as %s) and the call does not say which installation it is for: send x-integration-alias (SDK 0.10 and older integrations do not; install such an integration once per bot)",
		id, len(aliases), c.bot.ID, strings.Join(aliases, ", "))
}

// installAliases lists, sorted, the aliases under which the bot installed
// integration id.
func installAliases(b platform.Bot, id string) []string {
	var out []string
	for alias, in := range b.Installs {
		if in.IntegrationID == id {
			out = append(out, alias)
		}
	}
	slices.Sort(out)
	return out
}
