package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

func iakPK(id string) string              { return "IAK#" + id }
func integrationKeysGSI(id string) string { return "INT#" + id + "#IAKS" }

const skIAK = "IAK"

// CreateIntegrationAPIKey creates a key acting as an integration version,
// while the version exists.
func (s *Store) CreateIntegrationAPIKey(ctx context.Context, i platform.Integration, note string) (platform.NewToken, error) {
	value, hash := newTokenValue("bp_iak_")
	t := platform.NewToken{TokenInfo: platform.TokenInfo{ID: platform.NewID(platform.PrefixIntegrationAPIKey), CreatedAt: platform.Now(), Note: note}, Value: value}
	meta, err := docItem(iakPK(t.ID), skIAK, t.TokenInfo)
	if err != nil {
		return t, err
	}
	meta["hash"] = str(hash)
	meta["integrationId"] = str(i.ID)
	meta["workspaceId"] = str(i.WorkspaceID)
	meta[attrGSI1PK] = str(integrationKeysGSI(i.ID))
	meta[attrGSI1SK] = str(t.CreatedAt + "#" + t.ID)
	tok := tokenItem(hash, platform.Principal{Kind: platform.PrincipalIntegration, TokenID: t.ID, IntegrationID: i.ID, WorkspaceID: i.WorkspaceID})
	err = s.transact(ctx, []types.TransactWriteItem{mustExist(intPK(i.ID), skInt), putNew(meta), putNew(tok)},
		func(int) error { return platform.NotFound("integration", i.ID) })
	return t, err
}

// ListIntegrationAPIKeys lists an integration version's keys (Query on gsi1).
func (s *Store) ListIntegrationAPIKeys(ctx context.Context, integrationID string) ([]platform.TokenInfo, error) {
	return queryAllDocs[platform.TokenInfo](ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(integrationKeysGSI(integrationID))},
	})
}

// DeleteIntegrationAPIKey deletes a key of an integration of workspace ws;
// the key stops authenticating in the same transaction.
func (s *Store) DeleteIntegrationAPIKey(ctx context.Context, ws, id string) error {
	if !platform.HasPrefix(id, platform.PrefixIntegrationAPIKey) {
		return platform.NotFound("integration API key", id)
	}
	it, err := s.get(ctx, iakPK(id), skIAK)
	if err != nil {
		return err
	}
	if it == nil || getS(it, "workspaceId") != ws {
		return platform.NotFound("integration API key", id)
	}
	return s.deleteWithToken(ctx, key(iakPK(id), skIAK), getS(it, "hash"), "integration API key", id)
}
