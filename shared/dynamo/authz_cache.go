package dynamo

import (
	"context"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// The records every bot-scoped call authorizes with (the bot, and for a
// personal access token the caller's membership of its workspace) are
// remembered for authcache.TTL in this process, as tokens are (accounts.go):
// at thousands of messages a second of one bot, reading BOT#<bot> on every
// call would take one key past DynamoDB's 3,000 read units a second
// (docs/data-model.md, "Heat"). The trade is the tokens' bound: a change
// made elsewhere (a deleted bot, an uninstalled integration, a removed or
// demoted member) is seen within authcache.TTL in every process, at once
// in the process that made it (the Store's writes forget what they change).
// A call that writes still re-reads its bot strongly consistent after its
// write (RecheckBot), so nothing written by a call racing deleteBot is
// left behind; and a cached bot that would refuse the call is read again
// (CachedBot's fresh), so a change that grants is seen at once.

func memberKey(ws, account string) string { return ws + "/" + account }

// CachedBot reads a bot for a call's authorization: from this process's
// cache while it is at most authcache.TTL old, else one GetItem. A missing
// bot is never kept.
func (s *Store) CachedBot(ctx context.Context, id string) (BotRecord, error) {
	b, ok, err := s.bots.Get(ctx, id, func(ctx context.Context) (BotRecord, bool, error) {
		b, err := s.GetBot(ctx, id)
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			return b, false, nil
		}
		return b, err == nil, err
	})
	if err == nil && !ok {
		err = platform.NotFound("bot", id)
	}
	return b, err
}

// FreshBot reads a bot past the cache (one GetItem) and keeps what it read.
func (s *Store) FreshBot(ctx context.Context, id string) (BotRecord, error) {
	s.bots.Forget(id)
	return s.CachedBot(ctx, id)
}

// CachedBotByID is the dispatcher's read of a bot to deliver an event to
// (its url, code and subscriptions), from the cache CachedBot fills: at one
// busy bot's rate, a GetItem per delivery would take BOT#<bot> past a
// key's 3,000 read units a second (docs/data-model.md, "Heat"). A change
// made by another process (a new url or code, subscriptions, the bot
// deleted) is seen within authcache.TTL; by this process at once (its
// writes forget the bot). A cached bot that would refuse the delivery is
// read again (FreshBotByID), so a change that grants is seen at once.
func (s *Store) CachedBotByID(ctx context.Context, id string) (platform.Bot, error) {
	b, err := s.CachedBot(ctx, id)
	return b.Bot, err
}

// FreshBotByID is CachedBotByID past the cache (one GetItem), keeping what
// it read.
func (s *Store) FreshBotByID(ctx context.Context, id string) (platform.Bot, error) {
	b, err := s.FreshBot(ctx, id)
	return b.Bot, err
}

// CachedMember is GetMember for a call's authorization, remembered as
// CachedBot is (a non-member is never kept).
func (s *Store) CachedMember(ctx context.Context, ws, account string) (platform.Member, bool, error) {
	return s.members.Get(ctx, memberKey(ws, account), func(ctx context.Context) (platform.Member, bool, error) {
		return s.GetMember(ctx, ws, account)
	})
}

// FreshMember reads a membership past the cache and keeps what it read.
func (s *Store) FreshMember(ctx context.Context, ws, account string) (platform.Member, bool, error) {
	s.members.Forget(memberKey(ws, account))
	return s.CachedMember(ctx, ws, account)
}

// SetAuthzCacheTTL sets how long the bot and membership reads are kept
// (a negative TTL keeps nothing: tests that count every read).
func (s *Store) SetAuthzCacheTTL(d time.Duration) {
	s.bots.SetTTL(d)
	s.members.SetTTL(d)
}

func (s *Store) forgetBot(id string) { s.bots.Forget(id) }

func (s *Store) forgetMember(ws, account string) { s.members.Forget(memberKey(ws, account)) }
