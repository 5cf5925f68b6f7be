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
func (s *Store) ConfigureInstall(ctx context.Context, botID, alias, webhookID string, scope IdentityScope, identifier, schedule *string, webhookURL string) error {
	return s.touchBotWith(ctx, botID, func(b *platform.Bot) ([]types.TransactWriteItem, bool, error) {
		in, ok := b.Installs[alias]
		if !ok || in.WebhookID != webhookID {
			return nil, false, platform.Errorf(platform.ErrResourceNotFound, "no integration is installed under the alias %q on bot %q", alias, botID)
		}
		changed := false
		var extra []types.TransactWriteItem
		if identifier != nil && in.Identifier != *identifier {
			extra = append(extra, identWrites(scope, botID, alias, in.Identifier, *identifier)...)
			in.Identifier, changed = *identifier, true
		}
		if schedule != nil && in.RegisterSchedule != *schedule {
			// A new schedule: a new ticket, and its first register() due
			// one period from now, queued with the change. Entries of the
			// old ticket find it replaced and end.
			in.RegisterSchedule, in.RegisterTicket, changed = *schedule, "", true
			if *schedule != "" {
				now := platform.Clock()
				due, ok := platform.NextRegister(*schedule, now)
				if !ok {
					return nil, false, platform.Invalid("invalid body: field \"scheduleRegisterCall\": unknown schedule %q", *schedule)
				}
				in.RegisterTicket = platform.NewID("rsch_")
				put, err := outboxPut(platform.Delivery{
					ID: platform.NewID(PrefixDelivery), Kind: platform.DeliverRegister, BotID: botID,
					CreatedAt: platform.FormatTime(now), DueAt: platform.FormatTime(due),
					Alias: alias, Ticket: in.RegisterTicket, WebhookURL: webhookURL,
				})
				if err != nil {
					return nil, false, err
				}
				extra = append(extra, put)
			}
		}
		if changed {
			in.UpdatedAt = platform.Now()
			b.Installs[alias] = in
		}
		return extra, changed, nil
	})
}

// StartScheduledRegister records operation op, a periodic register() of
// the installation alias, and names it on the installation (so its result
// is recorded there), in one transaction; false when the schedule ticket
// is no longer the installation's (the schedule changed, the integration
// was removed or disabled, the bot deleted): nothing to call.
func (s *Store) StartScheduledRegister(ctx context.Context, botID, alias, ticket string, op platform.Operation) (bool, error) {
	current := false
	err := s.touchBotWith(ctx, botID, func(b *platform.Bot) ([]types.TransactWriteItem, bool, error) {
		in, ok := b.Installs[alias]
		if current = ok && in.Enabled && in.RegisterTicket == ticket; !current {
			return nil, false, nil
		}
		put, err := putOperation(op)
		if err != nil {
			return nil, false, err
		}
		in.OperationID = op.ID
		b.Installs[alias] = in
		return []types.TransactWriteItem{put}, true, nil
	})
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return false, nil
	}
	return current && err == nil, err
}
