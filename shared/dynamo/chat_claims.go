package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Claims make getOrCreate calls agree under concurrency. A claim item
// (CLAIM#<bot>#<kind>#<hash>) names the record that answers one lookup (its
// scope and discriminating tags, hashed); it is written in the transaction
// that creates or adopts the record, under the condition that it is still
// as read, so of concurrent callers exactly one creates. The record keeps a
// back-reference (CLAIM#<kind>#<hash> in its partition) so deleting it
// releases its claims. A claim whose record no longer matches (deleted, or
// tags changed) is stale and is replaced, under the same condition.
const skClaimItem = "CLAIM"

// claimed reads the claim of (kind, hash). found: it names a record that
// check accepts. Otherwise stale is the id it names ("" when there is none).
func (s *Store) claimed(ctx context.Context, bot, kind, hash string, check func(id string) (bool, error)) (found bool, stale string, err error) {
	it, err := s.get(ctx, claimPK(bot, kind, hash), skClaimItem)
	if err != nil || it == nil {
		return false, "", err
	}
	id := getS(it, attrObject)
	ok, err := check(id)
	if err != nil || ok {
		return ok, "", err
	}
	return false, id, nil
}

// claimWrites point the claim of (kind, hash) at record id (whose partition
// is holderPK), conditional on the claim being as read: absent, or naming
// stale.
func claimWrites(bot, kind, hash, stale, holderPK, id string) []types.TransactWriteItem {
	c := key(claimPK(bot, kind, hash), skClaimItem)
	c[attrObject] = str(id)
	p := &types.Put{Item: c, ConditionExpression: aws.String("attribute_not_exists(pk)")}
	if stale != "" {
		p.ConditionExpression = aws.String("#oid = :stale")
		p.ExpressionAttributeNames = map[string]string{"#oid": attrObject}
		p.ExpressionAttributeValues = item{":stale": str(stale)}
	}
	back := key(holderPK, skClaim+kind+"#"+hash)
	back[attrObject] = str(id)
	return []types.TransactWriteItem{{Put: p}, put(back)}
}
