package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// An integration-level webhook (one URL for every installation of an
// integration, docs/runtime.md) reaches the installation whose identifier
// (configureIntegration) its integration's extractScript reads from the
// request. Each identified installation has a lookup item
//
//	IDENT#<publisher workspace>#<integration name>#<identifier> / BOT#<botId>#<alias>
//
// written and deleted in the transaction that sets or changes the
// identifier. Keyed by the publishing workspace and the name, not the
// version: an installation keeps its identifier across versions, and an
// integration of the same name in another workspace never shares a
// partition. The bot stays the source of truth: a lookup is trusted only
// while the bot's installation under that alias still has that identifier
// (a stale item, of a bot deleted or an integration removed, answers
// nothing).

// IdentityScope names the integration an identifier belongs to: the
// workspace that publishes it and its name.
type IdentityScope struct{ WorkspaceID, Name string }

func identPK(s IdentityScope, identifier string) string {
	return "IDENT#" + s.WorkspaceID + "#" + s.Name + "#" + identifier
}

func identSK(botID, alias string) string { return "BOT#" + botID + "#" + alias }

// identWrites are the lookup items to write when an installation's
// identifier goes from old to new.
func identWrites(scope IdentityScope, botID, alias, old, new string) []types.TransactWriteItem {
	var out []types.TransactWriteItem
	if old != "" {
		out = append(out, types.TransactWriteItem{Delete: &types.Delete{Key: key(identPK(scope, old), identSK(botID, alias))}})
	}
	if new != "" {
		it := key(identPK(scope, new), identSK(botID, alias))
		it["botId"], it["alias"] = str(botID), str(alias)
		out = append(out, types.TransactWriteItem{Put: &types.Put{Item: it}})
	}
	return out
}

// maxIdentified bounds the installations one identifier is looked up
// among (the first page of its partition).
const maxIdentified = 25

// InstallsByIdentifier finds the installations of the integration scope
// whose identifier is identifier, oldest bot first: one Query, then one
// GetItem per candidate bot. Stale lookups are left out; none found is an
// empty list, not an error.
func (s *Store) InstallsByIdentifier(ctx context.Context, scope IdentityScope, identifier string) ([]WebhookInstall, error) {
	if identifier == "" {
		return nil, nil
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(identPK(scope, identifier))},
		Limit:                     aws.Int32(maxIdentified),
	})
	if err != nil {
		return nil, err
	}
	var found []WebhookInstall
	for _, it := range out.Items {
		b, err := s.GetBot(ctx, getS(it, "botId"))
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		in, ok := b.Installs[getS(it, "alias")]
		if !ok || in.Identifier != identifier {
			continue
		}
		found = append(found, WebhookInstall{Bot: b.Bot, Install: in})
	}
	return found, nil
}
