package dynamo

import (
	"context"
	"encoding/json"
	"maps"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

func botPK(id string) string            { return "BOT#" + id }
func bakPK(id string) string            { return "BAK#" + id }
func workspaceBotsGSI(ws string) string { return "WS#" + ws + "#BOTS" }
func botKeysGSI(bot string) string      { return "BOT#" + bot + "#BAKS" }

const (
	skBot = "BOT"
	skBAK = "BAK"
)

// botDoc is how a bot is stored: its wire shape plus the fields the wire
// shape does not carry.
type botDoc struct {
	platform.Bot
	StoredURL     string                                  `json:"_url,omitempty"`
	StoredCode    string                                  `json:"_code,omitempty"`
	StoredCodeKey string                                  `json:"_codeKey,omitempty"`
	StoredSecrets map[string]string                       `json:"_secrets,omitempty"`
	StoredInstall map[string]platform.IntegrationInstance `json:"_installs,omitempty"`
}

// storedBot is the doc of b: the wire field integrations is rendered from
// the installs at read time, so it is not stored.
func storedBot(b platform.Bot) botDoc {
	d := botDoc{Bot: b, StoredURL: b.URL, StoredCode: b.Code, StoredCodeKey: b.CodeKey, StoredSecrets: b.SecretValues, StoredInstall: b.Installs}
	d.Integrations = map[string]json.RawMessage{}
	return d
}

// BotRecord is a bot with the version its doc was read at.
type BotRecord struct {
	platform.Bot
	ver int64
}

func botItem(b platform.Bot) (item, error) {
	it, err := docItem(botPK(b.ID), skBot, storedBot(b))
	if err != nil {
		return nil, err
	}
	it["workspaceId"] = str(b.WorkspaceID)
	it["dev"] = &types.AttributeValueMemberBOOL{Value: b.Dev}
	// Tags are kept as a map attribute for listBots' filter; an empty map is
	// left out (a missing map filters the same, and the embedded DynamoDB
	// mishandles empty maps, see shared/localdynamo).
	if len(b.Tags) > 0 {
		tags := item{}
		for k, v := range b.Tags {
			tags[k] = str(v)
		}
		it["tags"] = &types.AttributeValueMemberM{Value: tags}
	}
	it[attrGSI1PK] = str(workspaceBotsGSI(b.WorkspaceID))
	it[attrGSI1SK] = str(b.CreatedAt + "#" + b.ID)
	it[attrGSI2PK] = str(workspaceBotsGSI(b.WorkspaceID))
	it[attrGSI2SK] = str(b.UpdatedAt + "#" + b.ID)
	return it, nil
}

func botFrom(it item) (BotRecord, error) {
	var d botDoc
	if err := decodeDoc(it, &d); err != nil {
		return BotRecord{}, err
	}
	b := d.Bot
	b.WorkspaceID, b.URL, b.Code = getS(it, "workspaceId"), d.StoredURL, d.StoredCode
	b.SecretValues, b.Installs, b.CodeKey = d.StoredSecrets, d.StoredInstall, d.StoredCodeKey
	if b.Installs == nil {
		b.Installs = map[string]platform.IntegrationInstance{}
	}
	return BotRecord{Bot: b, ver: getN(it, attrVer)}, nil
}

// CreateBot stores a new bot and counts it in its workspace, atomically.
func (s *Store) CreateBot(ctx context.Context, b platform.Bot) error {
	it, err := botItem(b)
	if err != nil {
		return err
	}
	if n := len(getS(it, attrDoc)); n > maxItemBytes {
		return platform.Errorf(platform.ErrPayloadTooLarge, "the bot definition is too large (%d bytes of at most %d)", n, maxItemBytes)
	}
	return s.transact(ctx, []types.TransactWriteItem{
		putNew(it),
		addCounter(workspacePK(b.WorkspaceID), skWorkspace, attrBots, 1, 0),
	}, func(i int) error {
		if i == 1 {
			return platform.NotFound("workspace", b.WorkspaceID)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "bot %q already exists", b.ID)
	})
}

// GetBot reads a bot (one GetItem).
func (s *Store) GetBot(ctx context.Context, id string) (BotRecord, error) {
	if !platform.HasPrefix(id, platform.PrefixBot) {
		return BotRecord{}, platform.NotFound("bot", id)
	}
	it, err := s.get(ctx, botPK(id), skBot)
	if err != nil {
		return BotRecord{}, err
	}
	if it == nil {
		return BotRecord{}, platform.NotFound("bot", id)
	}
	return botFrom(it)
}

// BotFilter selects bots in ListBots.
type BotFilter struct {
	WorkspaceID string
	Dev         bool
	Tags        map[string]string
	SortField   string // createdAt (default) or updatedAt
	Descending  bool
}

// ListBots lists a workspace's bots by creation or update time: one Query on
// GSI1 or GSI2 a page; dev and tags are filters on that query.
func (s *Store) ListBots(ctx context.Context, f BotFilter, p Page) ([]platform.BotSummary, map[string]string, error) {
	idx, pkName := GSI1, attrGSI1PK
	if f.SortField == "updatedAt" {
		idx, pkName = GSI2, attrGSI2PK
	}
	names := map[string]string{"#pk": pkName, "#dev": "dev"}
	vals := item{":pk": str(workspaceBotsGSI(f.WorkspaceID)), ":dev": &types.AttributeValueMemberBOOL{Value: f.Dev}}
	filter := "#dev = :dev"
	tagNames := make([]string, 0, len(f.Tags))
	for k := range f.Tags {
		tagNames = append(tagNames, k)
	}
	sort.Strings(tagNames)
	for i, k := range tagNames {
		n, v := "#t"+strconv.Itoa(i), ":t"+strconv.Itoa(i)
		names[n], vals[v] = k, str(f.Tags[k])
		filter += " AND tags." + n + " = " + v
	}
	items, next, err := s.queryPage(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(idx),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		FilterExpression:          aws.String(filter),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ScanIndexForward:          aws.Bool(!f.Descending),
	}, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.BotSummary, 0, len(items))
	for _, it := range items {
		b, err := botFrom(it)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, platform.BotSummary{ID: b.ID, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, Name: b.Name, DeployedAt: b.DeployedAt, Tags: b.Tags})
	}
	return out, next, nil
}

// DeleteBot deletes a bot of a workspace, uncounts it and its installed
// integrations atomically (conditional on the bot being unchanged since
// read) with a deletion marker for the Sweeper, which deletes the bot's
// data, then deletes its API keys. It returns the bot as it was, so the
// caller can delete its schedules and unregister its integrations. A key of
// a deleted bot cannot authenticate even before its cleanup: every
// bot-scoped call reads the bot.
func (s *Store) DeleteBot(ctx context.Context, workspaceID, id string) (platform.Bot, error) {
	defer s.forgetBot(id) // authz_cache.go
	var b BotRecord
	for attempt := 0; ; attempt++ {
		var err error
		if b, err = s.GetBot(ctx, id); err != nil {
			return platform.Bot{}, err
		}
		if b.WorkspaceID != workspaceID {
			return platform.Bot{}, platform.NotFound("bot", id)
		}
		items := []types.TransactWriteItem{
			{Delete: &types.Delete{
				Key:                       key(botPK(id), skBot),
				ConditionExpression:       aws.String("workspaceId = :ws AND #ver = :ver"),
				ExpressionAttributeNames:  map[string]string{"#ver": attrVer},
				ExpressionAttributeValues: item{":ws": str(workspaceID), ":ver": num(b.ver)},
			}},
			addCounter(workspacePK(workspaceID), skWorkspace, attrBots, -1, 0),
		}
		for intID, n := range installCounts(b.Installs) {
			items = append(items, addCounter(intPK(intID), skInt, attrInstalls, -n, 0))
		}
		for pid, n := range PluginCounts(b.Plugins) {
			items = append(items, addCounter(pluginPK(pid), skPlugin, attrInstalls, -n, 0))
		}
		// The bot's data (chat, files, tables, issues) is deleted after
		// this, by the Sweeper, from this marker.
		items = append(items, deletionMarker(deletionBot, id, id, item{attrStateOwners: stateOwners(b.Bot)}))
		err = s.transact(ctx, items, func(int) error { return errRetry })
		if err == errRetry {
			if attempt < 5 {
				continue
			}
			return platform.Bot{}, platform.Errorf(platform.ErrResourceLocked, "bot %q is being changed concurrently, retry", id)
		}
		if err != nil {
			return platform.Bot{}, err
		}
		break
	}
	if err := s.deleteWebhooks(ctx, b.Bot); err != nil {
		return b.Bot, err
	}
	keys, err := s.ListBotAPIKeys(ctx, id)
	if err != nil {
		return b.Bot, err
	}
	for _, k := range keys {
		if err := s.DeleteBotAPIKey(ctx, workspaceID, k.ID); err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
			return b.Bot, err
		}
	}
	return b.Bot, nil
}

// attrStateOwners lists, on a bot's deletion marker, the ids and aliases
// of the integrations installed (integration states are stored under
// either), since the bot record is gone when the sweeper runs.
const attrStateOwners = "stateOwners"

func stateOwners(b platform.Bot) types.AttributeValue {
	seen := map[string]bool{}
	l := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	for alias, in := range b.Installs {
		for _, o := range []string{alias, in.IntegrationID} {
			if o != "" && !seen[o] {
				seen[o] = true
				l.Value = append(l.Value, str(o))
			}
		}
	}
	return l
}

// PluginCounts counts a bot's plugin instances per plugin version.
func PluginCounts(plugins map[string]json.RawMessage) map[string]int64 {
	n := map[string]int64{}
	for _, raw := range plugins {
		var p struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &p) == nil && p.ID != "" {
			n[p.ID]++
		}
	}
	return n
}

// installCounts counts a bot's installs per integration version.
func installCounts(installs map[string]platform.IntegrationInstance) map[string]int64 {
	n := map[string]int64{}
	for _, in := range installs {
		n[in.IntegrationID]++
	}
	return n
}

// CreateBotAPIKey creates a key acting as the bot, while the bot exists
// in its workspace. It moves the bot's version, so a transfer that read
// the bot before the key was made fails and retries rather than leave the
// key behind in the old workspace (TransferBot).
func (s *Store) CreateBotAPIKey(ctx context.Context, b platform.Bot, note string) (platform.NewToken, error) {
	value, hash := newTokenValue("bp_bak_")
	t := platform.NewToken{TokenInfo: platform.TokenInfo{ID: platform.NewID(platform.PrefixBAK), CreatedAt: platform.Now(), Note: note}, Value: value}
	meta, err := docItem(bakPK(t.ID), skBAK, t.TokenInfo)
	if err != nil {
		return t, err
	}
	meta["hash"] = str(hash)
	meta["botId"] = str(b.ID)
	meta["workspaceId"] = str(b.WorkspaceID)
	meta[attrGSI1PK] = str(botKeysGSI(b.ID))
	meta[attrGSI1SK] = str(t.CreatedAt + "#" + t.ID)
	tok := tokenItem(hash, platform.Principal{Kind: platform.PrincipalBot, TokenID: t.ID, BotID: b.ID, WorkspaceID: b.WorkspaceID})
	still := types.TransactWriteItem{Update: &types.Update{
		Key:                       key(botPK(b.ID), skBot),
		UpdateExpression:          aws.String("ADD #ver :one"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND workspaceId = :ws"),
		ExpressionAttributeNames:  map[string]string{"#ver": attrVer},
		ExpressionAttributeValues: item{":one": num(1), ":ws": str(b.WorkspaceID)},
	}}
	err = s.transact(ctx, []types.TransactWriteItem{still, putNew(meta), putNew(tok)},
		func(int) error { return platform.NotFound("bot", b.ID) })
	return t, err
}

// ListBotAPIKeys lists a bot's API keys (Query on GSI1).
func (s *Store) ListBotAPIKeys(ctx context.Context, botID string) ([]platform.TokenInfo, error) {
	return queryAllDocs[platform.TokenInfo](ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(botKeysGSI(botID))},
	})
}

// DeleteBotAPIKey deletes a key of a bot of the workspace; the key stops
// authenticating in the same transaction.
func (s *Store) DeleteBotAPIKey(ctx context.Context, workspaceID, id string) error {
	it, err := s.get(ctx, bakPK(id), skBAK)
	if err != nil {
		return err
	}
	if it == nil || getS(it, "workspaceId") != workspaceID {
		return platform.NotFound("bot API key", id)
	}
	return s.deleteWithToken(ctx, key(bakPK(id), skBAK), getS(it, "hash"), "bot API key", id)
}

// BotByID reads a bot (one GetItem): the scheduler function's read.
func (s *Store) BotByID(ctx context.Context, id string) (platform.Bot, error) {
	b, err := s.GetBot(ctx, id)
	return b.Bot, err
}

// BotEffects are the writes that go with a change of a bot's definition,
// in the same transaction: install counters of integration versions moved
// by (un)installs, and the operations (registrations) the change starts.
type BotEffects struct {
	Installs   map[string]int64 // integration version id -> delta
	Plugins    map[string]int64 // plugin version id -> delta
	Operations []platform.Operation
}

// UpdateBot applies change to a bot of workspace ws. The bot is replaced
// only if unchanged since read, together with its effects, in one
// transaction; on a concurrent change the bot is read again and change
// applied anew (so change must derive everything from the bot it gets).
func (s *Store) UpdateBot(ctx context.Context, ws, id string, change func(*platform.Bot) (BotEffects, error)) (platform.Bot, error) {
	defer s.forgetBot(id) // authz_cache.go
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return platform.Bot{}, err
			}
		}
		rec, err := s.GetBot(ctx, id)
		if err != nil {
			return platform.Bot{}, err
		}
		if rec.WorkspaceID != ws {
			return platform.Bot{}, platform.NotFound("bot", id)
		}
		b := rec.Bot
		// change edits the installs map in place: keep what it was.
		oldInstalls := maps.Clone(rec.Installs)
		fx, err := change(&b)
		if err != nil {
			return platform.Bot{}, err
		}
		b.UpdatedAt = platform.Now()
		upd, err := botUpdate(b, rec.ver)
		if err != nil {
			return b, err
		}
		items := []types.TransactWriteItem{upd}
		var refs []string
		for _, intID := range sortedInt64Keys(fx.Installs) {
			if n := fx.Installs[intID]; n != 0 {
				items = append(items, addCounter(intPK(intID), skInt, attrInstalls, n, 0))
				refs = append(refs, "integration "+strconv.Quote(intID))
			}
		}
		for _, pid := range sortedInt64Keys(fx.Plugins) {
			if n := fx.Plugins[pid]; n != 0 {
				items = append(items, addCounter(pluginPK(pid), skPlugin, attrInstalls, n, 0))
				refs = append(refs, "plugin "+strconv.Quote(pid))
			}
		}
		for _, op := range fx.Operations {
			t, err := putOperation(op)
			if err != nil {
				return b, err
			}
			items = append(items, t)
		}
		items = append(items, webhookWrites(b.ID, oldInstalls, b.Installs)...)
		if len(items) > 100 {
			return b, platform.Errorf(platform.ErrLimitExceeded, "the change touches too many integrations at once (%d writes of at most 100)", len(items))
		}
		err = s.transact(ctx, items, func(i int) error {
			if i >= 1 && i <= len(refs) {
				return platform.Errorf(platform.ErrReferenceNotFound, "%s no longer exists", refs[i-1])
			}
			return errRetry
		})
		if err == errRetry {
			continue
		}
		return b, err
	}
	return platform.Bot{}, platform.Errorf(platform.ErrResourceLocked, "bot %q is being updated concurrently, retry", id)
}

// botUpdate is the conditional rewrite of a bot's item: its doc and the
// attributes derived from it (update-time index key, dev flag, tags).
func botUpdate(b platform.Bot, ver int64) (types.TransactWriteItem, error) {
	it, err := botItem(b)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	if n := len(getS(it, attrDoc)); n > maxItemBytes {
		return types.TransactWriteItem{}, platform.Errorf(platform.ErrPayloadTooLarge, "the bot definition is too large (%d bytes of at most %d)", n, maxItemBytes)
	}
	names := map[string]string{"#doc": attrDoc, "#ver": attrVer, "#g2sk": attrGSI2SK, "#dev": "dev", "#tags": "tags"}
	vals := item{":doc": it[attrDoc], ":next": num(ver + 1), ":ver": num(ver), ":g2sk": it[attrGSI2SK], ":dev": it["dev"]}
	expr := "SET #doc = :doc, #ver = :next, #g2sk = :g2sk, #dev = :dev"
	if tags, ok := it["tags"]; ok {
		expr += ", #tags = :tags"
		vals[":tags"] = tags
	} else {
		expr += " REMOVE #tags"
	}
	return types.TransactWriteItem{Update: &types.Update{
		Key: key(botPK(b.ID), skBot), UpdateExpression: aws.String(expr),
		ConditionExpression:      aws.String("#ver = :ver"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	}}, nil
}

// touchBot rewrites a bot's doc as patched by fix, conditional on its
// version, retrying on conflict, without changing updatedAt: run
// bookkeeping (recurring-event outcomes, registration results) is not a
// change of the definition. fix returns false when there is nothing to write.
func (s *Store) touchBot(ctx context.Context, id string, fix func(*platform.Bot) (bool, error)) error {
	return s.touchBotWith(ctx, id, func(b *platform.Bot) ([]types.TransactWriteItem, bool, error) {
		changed, err := fix(b)
		return nil, changed, err
	})
}

// touchBotWith is touchBot whose fix may also name items to write in the
// same transaction (an outbox entry, an operation record).
func (s *Store) touchBotWith(ctx context.Context, id string, fix func(*platform.Bot) ([]types.TransactWriteItem, bool, error)) error {
	defer s.forgetBot(id) // authz_cache.go
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return err
			}
		}
		rec, err := s.GetBot(ctx, id)
		if err != nil {
			return err
		}
		b := rec.Bot
		extra, changed, err := fix(&b)
		if err != nil || !changed {
			return err
		}
		upd, err := botUpdate(b, rec.ver)
		if err != nil {
			return err
		}
		err = s.transact(ctx, append([]types.TransactWriteItem{upd}, extra...), func(int) error { return errRetry })
		if err == errRetry {
			continue
		}
		return err
	}
	return platform.Errorf(platform.ErrResourceLocked, "bot %q is being updated concurrently", id)
}

// maxFailureReason bounds lastFailureReason (the reference's maxLength).
const maxFailureReason = 2000

// RecordRecurringOutcome records a firing of a bot's recurring event:
// failure nil resets failedAttempts and lastFailureReason (written only when
// they were set), otherwise failedAttempts grows by one and
// lastFailureReason is failure.
func (s *Store) RecordRecurringOutcome(ctx context.Context, botID, event string, failure *string) error {
	return s.touchBot(ctx, botID, func(b *platform.Bot) (bool, error) {
		raw, ok := b.RecurringEvents[event]
		if !ok {
			return false, platform.NotFound("recurring event", event)
		}
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(raw, &ev); err != nil {
			return false, err
		}
		var n int
		_ = json.Unmarshal(ev["failedAttempts"], &n)
		if failure == nil {
			if n == 0 && (len(ev["lastFailureReason"]) == 0 || string(ev["lastFailureReason"]) == "null") {
				return false, nil
			}
			ev["failedAttempts"], ev["lastFailureReason"] = json.RawMessage("0"), json.RawMessage("null")
		} else {
			reason := *failure
			if len(reason) > maxFailureReason {
				reason = reason[:maxFailureReason]
			}
			ev["failedAttempts"] = json.RawMessage(strconv.Itoa(n + 1))
			ev["lastFailureReason"], _ = json.Marshal(reason)
		}
		b.RecurringEvents[event], _ = json.Marshal(ev)
		return true, nil
	})
}

// SetInstallStatus records the result of an integration's registration on
// a bot: the instance under alias moves to status (with reason), but only
// while it still names operation opID (a newer registration supersedes an
// older one's result).
func (s *Store) SetInstallStatus(ctx context.Context, botID, alias, opID, status string, reason *string) error {
	err := s.touchBot(ctx, botID, func(b *platform.Bot) (bool, error) {
		in, ok := b.Installs[alias]
		if !ok || in.OperationID != opID {
			return false, nil
		}
		if reason != nil && len(*reason) > maxFailureReason {
			r := (*reason)[:maxFailureReason]
			reason = &r
		}
		in.Status, in.StatusReason, in.UpdatedAt = status, reason, platform.Now()
		b.Installs[alias] = in
		return true, nil
	})
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return nil // the bot is gone: nothing to record
	}
	return err
}

// maxAttempts bounds the optimistic retries of a read-modify-write.
const maxAttempts = 16

func sortedInt64Keys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
