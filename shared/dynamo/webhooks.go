package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// A webhook id is the public address of one installation (a bot's instance
// of an integration): <base>/webhooks/<webhookId>. Ingress must find the
// installation from the id alone, so each installation has a lookup item
//
//	WEBHOOK#<webhookId> / WEBHOOK  -> botId, alias
//
// written and deleted in the transaction that creates or removes the
// installation (UpdateBot). The bot stays the source of truth: a lookup is
// trusted only when the bot still has an installation under that alias with
// that webhook id, so a stale item (a bot deleted before its cleanup) only
// ever answers "not found".

func webhookPK(id string) string { return "WEBHOOK#" + id }

const skWebhook = "WEBHOOK"

// WebhookInstall is the installation a webhook id addresses.
type WebhookInstall struct {
	Bot     platform.Bot
	Install platform.IntegrationInstance
}

// InstallByWebhook finds the installation of a webhook id: one GetItem for
// the lookup, one for the bot. ErrResourceNotFound when there is none.
func (s *Store) InstallByWebhook(ctx context.Context, webhookID string) (WebhookInstall, error) {
	notFound := platform.NotFound("webhook", webhookID)
	if !platform.HasPrefix(webhookID, platform.PrefixWebhook) {
		return WebhookInstall{}, notFound
	}
	it, err := s.get(ctx, webhookPK(webhookID), skWebhook)
	if err != nil {
		return WebhookInstall{}, err
	}
	if it == nil {
		return WebhookInstall{}, notFound
	}
	b, err := s.GetBot(ctx, getS(it, "botId"))
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return WebhookInstall{}, notFound
	}
	if err != nil {
		return WebhookInstall{}, err
	}
	in, ok := b.Installs[getS(it, "alias")]
	if !ok || in.WebhookID != webhookID {
		return WebhookInstall{}, notFound
	}
	return WebhookInstall{Bot: b.Bot, Install: in}, nil
}

// webhookWrites are the lookup items to put and delete when a bot's
// installations go from old to new: an installation keeps its webhook id
// for its life, so only created and removed ones are written, plus the
// ones (re)registered by this change (a new registration operation): the
// put is idempotent, and it gives installations made before lookup items
// existed their webhook address at their next registration.
func webhookWrites(botID string, old, new map[string]platform.IntegrationInstance) []types.TransactWriteItem {
	oldIDs, newIDs := webhookIDs(old), webhookIDs(new)
	var out []types.TransactWriteItem
	for _, id := range sortedKeys(newIDs) {
		if _, had := oldIDs[id]; had && old[newIDs[id]].OperationID == new[newIDs[id]].OperationID {
			continue
		}
		it := key(webhookPK(id), skWebhook)
		it["botId"], it["alias"] = str(botID), str(newIDs[id])
		out = append(out, types.TransactWriteItem{Put: &types.Put{Item: it}})
	}
	for _, id := range sortedKeys(oldIDs) {
		if _, kept := newIDs[id]; kept {
			continue
		}
		out = append(out, types.TransactWriteItem{Delete: &types.Delete{Key: key(webhookPK(id), skWebhook)}})
	}
	return out
}

// webhookIDs maps each installation's webhook id to its alias.
func webhookIDs(installs map[string]platform.IntegrationInstance) map[string]string {
	out := map[string]string{}
	for alias, in := range installs {
		if in.WebhookID != "" {
			out[in.WebhookID] = alias
		}
	}
	return out
}

// deleteWebhooks removes the lookup items of a deleted bot's installations
// (after the bot's own delete: a leftover item resolves to nothing).
func (s *Store) deleteWebhooks(ctx context.Context, b platform.Bot) error {
	var keys []item
	for id := range webhookIDs(b.Installs) {
		keys = append(keys, key(webhookPK(id), skWebhook))
	}
	if len(keys) == 0 {
		return nil
	}
	return s.batchDelete(ctx, keys)
}

// ConfigureInstall records configureIntegration on a bot's installation
// (the one under alias, while it still has webhookID): identifier when not
// nil ("" clears it), the register schedule when not nil. A conditional
// rewrite of the bot that leaves its updatedAt alone.
func (s *Store) ConfigureInstall(ctx context.Context, botID, alias, webhookID string, identifier, schedule *string) error {
	return s.touchBot(ctx, botID, func(b *platform.Bot) (bool, error) {
		in, ok := b.Installs[alias]
		if !ok || in.WebhookID != webhookID {
			return false, platform.Errorf(platform.ErrResourceNotFound, "no integration is installed under the alias %q on bot %q", alias, botID)
		}
		changed := false
		if identifier != nil && in.Identifier != *identifier {
			in.Identifier, changed = *identifier, true
		}
		if schedule != nil && in.RegisterSchedule != *schedule {
			in.RegisterSchedule, changed = *schedule, true
		}
		if changed {
			in.UpdatedAt = platform.Now()
			b.Installs[alias] = in
		}
		return changed, nil
	})
}
