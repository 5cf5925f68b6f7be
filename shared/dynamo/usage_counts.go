package dynamo

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// The counts behind the usage operations (docs/account.md): only what the
// platform keeps anyway, read, never estimated.

// WorkspaceCounts are a workspace's counters.
type WorkspaceCounts struct {
	Bots         int64 // the workspace's bot counter (createBot, deleteBot)
	Integrations int64 // its integration versions (createIntegration, deleteIntegration)
	Members      int64 // its memberships, counted by a Query (Select COUNT)
}

// CountWorkspace reads a workspace's counters: one GetItem, one Query
// counting its member items (keys only, bounded by its members).
func (s *Store) CountWorkspace(ctx context.Context, id string) (WorkspaceCounts, error) {
	var c WorkspaceCounts
	it, err := s.get(ctx, workspacePK(id), skWorkspace)
	if err != nil {
		return c, err
	}
	if it == nil {
		return c, platform.NotFound("workspace", id)
	}
	c.Bots, c.Integrations = max(getN(it, attrBots), 0), max(getN(it, attrIntegrations), 0)
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(workspacePK(id)), ":p": str(skMember)},
		Select:                    types.SelectCount,
		ConsistentRead:            aws.Bool(true),
	}
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return c, err
		}
		c.Members += int64(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return c, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// BotTableRows sums the row counters of a bot's tables (one Query over its
// tables).
func (s *Store) BotTableRows(ctx context.Context, botID string) (int64, error) {
	ts, err := s.ListTables(ctx, botID)
	var n int64
	for _, t := range ts {
		n += t.Rows
	}
	return n, err
}

// WorkspaceBotIDs lists the ids of a workspace's bots, dev bots included
// (Queries on gsi1, keys only; bounded by its bot count).
func (s *Store) WorkspaceBotIDs(ctx context.Context, workspaceID string) ([]string, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(workspaceBotsGSI(workspaceID))},
		ProjectionExpression:      aws.String("pk"),
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, strings.TrimPrefix(getS(it, attrPK), "BOT#"))
	}
	return ids, nil
}
