package dynamo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// What a bot keeps besides its definition (docs/bots.md): versions
// (snapshots of its definition), its allowlist, the shareable ids of its
// installations, and the record of its action runs. All are keyed by the
// bot, never by its workspace, so a transferred bot keeps them, and a
// deleted bot's are purged with its data (sweeper.go).
func botVersionsPK(bot string) string { return "BOTVER#" + bot }
func botExtrasPK(bot string) string   { return "BOTX#" + bot }
func actionRunsPK(bot string) string  { return "ACTRUN#" + bot }

const (
	skAllowlist      = "ALLOWLIST"
	skSharePrefix    = "SHARE#"
	maxBotVersions   = 100
	actionRunsKept   = 30 * 24 * time.Hour
	PrefixBotVersion = "botver_"
)

// BotVersion is a snapshot of a bot's definition: its list form, and
// where the file storage keeps the snapshot (the bot JSON).
type BotVersion struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	CreatedAt   string `json:"-"`
	Key         string `json:"-"`
}

type botVersionDoc struct {
	BotVersion
	StoredCreated string `json:"_createdAt"`
	StoredKey     string `json:"_key"`
}

// CreateBotVersion records a version of a bot (its snapshot already in the
// file storage), while the bot exists and has fewer than 100 versions.
func (s *Store) CreateBotVersion(ctx context.Context, bot string, v BotVersion) error {
	n, err := s.countPK(ctx, botVersionsPK(bot))
	if err != nil {
		return err
	}
	if n >= maxBotVersions {
		return platform.Errorf(platform.ErrLimitExceeded, "bot %q has %d versions, the most it may keep", bot, maxBotVersions)
	}
	it, err := docItem(botVersionsPK(bot), v.ID, botVersionDoc{BotVersion: v, StoredCreated: v.CreatedAt, StoredKey: v.Key})
	if err != nil {
		return err
	}
	return s.transact(ctx, []types.TransactWriteItem{mustExist(botPK(bot), skBot), putNew(it)}, func(i int) error {
		if i == 0 {
			return platform.NotFound("bot", bot)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "version %q already exists", v.ID)
	})
}

func (s *Store) countPK(ctx context.Context, pk string) (int, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(pk)},
		Select:                    types.SelectCount,
	}
	n := 0
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return 0, err
		}
		n += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return n, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func botVersionFrom(it item) (BotVersion, error) {
	var d botVersionDoc
	if err := decodeDoc(it, &d); err != nil {
		return BotVersion{}, err
	}
	v := d.BotVersion
	v.CreatedAt, v.Key = d.StoredCreated, d.StoredKey
	return v, nil
}

// ListBotVersions lists a bot's versions, newest first (one Query: at most
// 100 items).
func (s *Store) ListBotVersions(ctx context.Context, bot string) ([]BotVersion, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(botVersionsPK(bot))},
		ScanIndexForward:          aws.Bool(false),
	})
	if err != nil {
		return nil, err
	}
	out := make([]BotVersion, 0, len(items))
	for _, it := range items {
		v, err := botVersionFrom(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// GetBotVersion reads a version of a bot (one GetItem).
func (s *Store) GetBotVersion(ctx context.Context, bot, id string) (BotVersion, error) {
	it, err := s.getRecord(ctx, "bot version", PrefixBotVersion, id, botVersionsPK(bot), id)
	if err != nil {
		return BotVersion{}, err
	}
	return botVersionFrom(it)
}

// Allowlist is who may use a bot, as the reference's getBotAllowlist
// answers it.
type Allowlist struct {
	Setting string   `json:"setting"`
	Users   []string `json:"users"`
}

// GetAllowlist reads a bot's allowlist (one GetItem); a bot that never set
// one allows all its workspace's users.
func (s *Store) GetAllowlist(ctx context.Context, bot string) (Allowlist, error) {
	it, err := s.get(ctx, botExtrasPK(bot), skAllowlist)
	a := Allowlist{Setting: "ALL_WORKSPACE_USERS", Users: []string{}}
	if err != nil || it == nil {
		return a, err
	}
	err = decodeDoc(it, &a)
	if a.Users == nil {
		a.Users = []string{}
	}
	return a, err
}

// UpdateAllowlist applies change to a bot's allowlist, only if unchanged
// since read (retried on conflict), while the bot exists.
func (s *Store) UpdateAllowlist(ctx context.Context, bot string, change func(*Allowlist) error) error {
	return optimistic(ctx, "allowlist of bot "+bot, func() error {
		it, err := s.get(ctx, botExtrasPK(bot), skAllowlist)
		if err != nil {
			return err
		}
		a := Allowlist{Setting: "ALL_WORKSPACE_USERS", Users: []string{}}
		ver := int64(0)
		if it != nil {
			if err := decodeDoc(it, &a); err != nil {
				return err
			}
			ver = getN(it, attrVer)
		}
		if err := change(&a); err != nil {
			return err
		}
		doc, err := docItem(botExtrasPK(bot), skAllowlist, a)
		if err != nil {
			return err
		}
		doc[attrVer] = num(ver + 1)
		put := &types.Put{Item: doc, ConditionExpression: aws.String("attribute_not_exists(pk)")}
		if it != nil {
			put.ConditionExpression = aws.String("#ver = :ver")
			put.ExpressionAttributeNames = map[string]string{"#ver": attrVer}
			put.ExpressionAttributeValues = item{":ver": num(ver)}
		}
		return s.transact(ctx, []types.TransactWriteItem{mustExist(botPK(bot), skBot), {Put: put}}, func(i int) error {
			if i == 0 {
				return platform.NotFound("bot", bot)
			}
			return errRetry
		})
	})
}

// ShareableID is the shareable id of a bot's installation.
type ShareableID struct {
	ID            string `json:"shareableId"`
	IntegrationID string `json:"integrationId"`
	CreatedAt     string `json:"createdAt"`
	ExpiresAt     string `json:"expiresAt"`
}

// GetShareableID reads the shareable id of a bot's installation alias.
func (s *Store) GetShareableID(ctx context.Context, bot, alias string) (ShareableID, bool, error) {
	it, err := s.get(ctx, botExtrasPK(bot), skSharePrefix+alias)
	if err != nil || it == nil {
		return ShareableID{}, false, err
	}
	var sh ShareableID
	err = decodeDoc(it, &sh)
	return sh, err == nil, err
}

// PutShareableID stores the shareable id of a bot's installation alias,
// replacing the one it had if it is still prev ("" : none), while the bot
// exists.
func (s *Store) PutShareableID(ctx context.Context, bot, alias, prev string, sh ShareableID) error {
	doc, err := docItem(botExtrasPK(bot), skSharePrefix+alias, sh)
	if err != nil {
		return err
	}
	doc["shareableId"] = str(sh.ID)
	put := &types.Put{Item: doc, ConditionExpression: aws.String("attribute_not_exists(pk)")}
	if prev != "" {
		put.ConditionExpression = aws.String("shareableId = :prev")
		put.ExpressionAttributeValues = item{":prev": str(prev)}
	}
	return s.transact(ctx, []types.TransactWriteItem{mustExist(botPK(bot), skBot), {Put: put}}, func(i int) error {
		if i == 0 {
			return platform.NotFound("bot", bot)
		}
		return platform.Errorf(platform.ErrResourceLocked, "the shareable id of %q changed meanwhile, retry", alias)
	})
}

// DeleteShareableID deletes the shareable id of a bot's installation alias
// (none is not an error).
func (s *Store) DeleteShareableID(ctx context.Context, bot, alias string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(botExtrasPK(bot), skSharePrefix+alias)})
	return err
}

// ActionRun is one call of an integration's action through callAction, as
// listActionRuns answers it.
type ActionRun struct {
	Timestamp       string          `json:"timestamp"`
	IntegrationName string          `json:"integrationName"`
	ActionType      string          `json:"actionType"`
	Input           json.RawMessage `json:"input"`
	InputTruncated  bool            `json:"inputTruncated,omitempty"`
	Output          json.RawMessage `json:"output"`
	OutputTruncated bool            `json:"outputTruncated,omitempty"`
	Status          string          `json:"status"`
	DurationMs      int64           `json:"durationMs"`
	Cached          bool            `json:"cached"`
	ErrorMessage    *string         `json:"errorMessage"`
}

// PutActionRun records an action run of a bot (one PutItem), kept 30 days
// (the table's TTL). The sort key orders a bot's runs by alias, then time.
func (s *Store) PutActionRun(ctx context.Context, bot string, r ActionRun) error {
	it, err := docItem(actionRunsPK(bot), r.IntegrationName+"#"+r.Timestamp+"#"+platform.NewID(""), r)
	if err != nil {
		return err
	}
	if t, err := time.Parse(time.RFC3339Nano, r.Timestamp); err == nil {
		it[attrTTL] = num(t.Add(actionRunsKept).Unix())
	}
	if err := checkItemSize(it); err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it})
	return err
}

// ListActionRuns lists a bot's runs of one installation alias, newest
// first, from and until (inclusive, "" : unbounded) in the wire time
// format: one Query page (O(page)).
func (s *Store) ListActionRuns(ctx context.Context, bot, alias, from, until string, p Page) ([]ActionRun, map[string]string, error) {
	lo, hi := alias+"#"+from, alias+"#~"
	if until != "" {
		hi = alias + "#" + until + "#~"
	}
	items, next, err := s.queryPage(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: item{":pk": str(actionRunsPK(bot)), ":lo": str(lo), ":hi": str(hi)},
		ScanIndexForward:          aws.Bool(false),
	}, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]ActionRun, 0, len(items))
	for _, it := range items {
		var r ActionRun
		if err := decodeDoc(it, &r); err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	return out, next, nil
}

// purgeBotExtras deletes a deleted bot's versions, allowlist, shareable
// ids, action runs and humans-in-the-loop sessions (hitl.go).
func (s *Store) purgeBotExtras(ctx context.Context, bot string) error {
	for _, pk := range []string{botVersionsPK(bot), botExtrasPK(bot), actionRunsPK(bot), hitlPK(bot)} {
		if err := s.purge(ctx, pk); err != nil {
			return err
		}
	}
	return nil
}

// TransferBot moves bot b (as read) from its workspace to workspace to, in
// one transaction: the bot (conditional on being unchanged since read and
// still in its workspace), both workspaces' bot counters (the target must
// exist: a workspace being deleted cannot receive it), and its API keys
// with the tokens they authenticate with (a key acts within its bot's
// workspace). Everything else a bot owns is keyed by the bot and moves
// with it.
func (s *Store) TransferBot(ctx context.Context, b BotRecord, to string) error {
	defer s.forgetBot(b.ID) // authz_cache.go
	from := b.WorkspaceID
	keys, err := s.botKeyItems(ctx, b.ID)
	if err != nil {
		return err
	}
	if 3+2*len(keys) > 100 {
		return platform.Errorf(platform.ErrLimitExceeded, "bot %q has %d API keys: at most 48 move with a bot, delete some first", b.ID, len(keys))
	}
	moved := b.Bot
	moved.WorkspaceID = to
	it, err := botItem(moved)
	if err != nil {
		return err
	}
	items := []types.TransactWriteItem{
		{Update: &types.Update{
			Key:                      key(botPK(b.ID), skBot),
			UpdateExpression:         aws.String("SET workspaceId = :to, #g1 = :g, #g2 = :g, #ver = :next"),
			ConditionExpression:      aws.String("workspaceId = :from AND #ver = :ver"),
			ExpressionAttributeNames: map[string]string{"#g1": attrGSI1PK, "#g2": attrGSI2PK, "#ver": attrVer},
			ExpressionAttributeValues: item{":to": str(to), ":g": it[attrGSI1PK], ":from": str(from),
				":ver": num(b.ver), ":next": num(b.ver + 1)},
		}},
		addCounter(workspacePK(from), skWorkspace, attrBots, -1, 0),
		addCounter(workspacePK(to), skWorkspace, attrBots, 1, 0),
	}
	for _, k := range keys {
		items = append(items, moveKey(k, from, to)...)
		defer s.tokens.Forget(getS(k, "hash"))
	}
	err = s.transact(ctx, items, func(i int) error {
		if i == 2 {
			return platform.NotFound("workspace", to)
		}
		return platform.Errorf(platform.ErrResourceLocked, "bot %q changed during its transfer, retry", b.ID)
	})
	if err != nil {
		return err
	}
	// A key made just before the bot was read, which the index did not
	// show yet (its entries lag the table on AWS), moves now: no key is
	// made for the old workspace any more (CreateBotAPIKey's condition).
	late, err := s.botKeyItems(ctx, b.ID)
	if err != nil {
		return err
	}
	for _, k := range late {
		if getS(k, "workspaceId") != from {
			continue
		}
		err := s.txWrite(ctx, moveKey(k, from, to))
		s.tokens.Forget(getS(k, "hash"))
		if err != nil && failedAt(err) < 0 {
			return err
		}
	}
	return nil
}

// botKeyItems lists a bot's API key records (Query on gsi1).
func (s *Store) botKeyItems(ctx context.Context, bot string) ([]item, error) {
	return queryAllItems(ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(botKeysGSI(bot))},
	})
}

// moveKey moves an API key (its record and the token it authenticates
// with) from workspace from to workspace to.
// (Its callers forget the token in this process: its principal names the
// workspace.)
func moveKey(k item, from, to string) []types.TransactWriteItem {
	set := func(pk, sk string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{
			Key:                       key(pk, sk),
			UpdateExpression:          aws.String("SET workspaceId = :to"),
			ConditionExpression:       aws.String("attribute_exists(pk) AND workspaceId = :from"),
			ExpressionAttributeValues: item{":to": str(to), ":from": str(from)},
		}}
	}
	return []types.TransactWriteItem{set(getS(k, attrPK), getS(k, attrSK)), set(tokenPK(getS(k, "hash")), skToken)}
}
