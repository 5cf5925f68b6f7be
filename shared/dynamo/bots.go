package dynamo

import (
	"context"
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
	StoredURL  string `json:"_url,omitempty"`
	StoredCode string `json:"_code,omitempty"`
}

// BotRecord is a bot with the version its doc was read at.
type BotRecord struct {
	platform.Bot
	ver int64
}

func botItem(b platform.Bot) (item, error) {
	it, err := docItem(botPK(b.ID), skBot, botDoc{Bot: b, StoredURL: b.URL, StoredCode: b.Code})
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
	return BotRecord{Bot: b, ver: getN(it, attrVer)}, nil
}

// CreateBot stores a new bot and counts it in its workspace, atomically.
func (s *Store) CreateBot(ctx context.Context, b platform.Bot) error {
	it, err := botItem(b)
	if err != nil {
		return err
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

// DeleteBot deletes a bot of a workspace and uncounts it atomically, then
// its API keys. A key of a deleted bot cannot authenticate even before its
// cleanup: every bot-scoped call reads the bot.
func (s *Store) DeleteBot(ctx context.Context, workspaceID, id string) error {
	err := s.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			Key:                       key(botPK(id), skBot),
			ConditionExpression:       aws.String("workspaceId = :ws"),
			ExpressionAttributeValues: item{":ws": str(workspaceID)},
		}},
		addCounter(workspacePK(workspaceID), skWorkspace, attrBots, -1, 0),
	}, func(int) error { return platform.NotFound("bot", id) })
	if err != nil {
		return err
	}
	keys, err := s.ListBotAPIKeys(ctx, id)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.DeleteBotAPIKey(ctx, workspaceID, k.ID); err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
			return err
		}
	}
	return nil
}

// CreateBotAPIKey creates a key acting as the bot, while the bot exists.
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
	err = s.transact(ctx, []types.TransactWriteItem{mustExist(botPK(b.ID), skBot), putNew(meta), putNew(tok)},
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
