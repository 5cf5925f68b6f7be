package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/platform"
)

// The hub: the integrations every workspace publishes (listed: public and
// not dev), read without a workspace. Private versions are never in the
// hub's index (gsi2 INTS#PUBLIC) nor reachable by its reads.

var hubProjection = struct {
	expr  *string
	names map[string]string
}{aws.String("pk, sk, gsi2pk, gsi2sk, #sum, #n"), map[string]string{"#sum": attrSummary, "#n": attrInstalls}}

// PublicIntegrationsPage reads one page of the hub in creation order
// (newest first unless ascending): one Query on gsi2, O(page).
func (s *Store) PublicIntegrationsPage(ctx context.Context, p Page, ascending bool) ([]IntegrationListing, map[string]string, error) {
	items, next, err := s.queryPage(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI2),
		KeyConditionExpression:    aws.String("gsi2pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(publicIntegrationsGSI)},
		ProjectionExpression:      hubProjection.expr, ExpressionAttributeNames: hubProjection.names,
		ScanIndexForward: aws.Bool(ascending),
	}, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]IntegrationListing, 0, len(items))
	for _, it := range items {
		l, err := listingFrom(it)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, l)
	}
	return out, next, nil
}

// PublicIntegrationCandidates reads the whole hub (Query on gsi2, list
// attributes only), for the filters and orders no index serves (search,
// interfaces, verification status, sort by name or installs): one pass
// over the public catalogue per call (docs/hub.md).
func (s *Store) PublicIntegrationCandidates(ctx context.Context) ([]IntegrationListing, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI2),
		KeyConditionExpression:    aws.String("gsi2pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(publicIntegrationsGSI)},
		ProjectionExpression:      hubProjection.expr, ExpressionAttributeNames: hubProjection.names,
	})
	if err != nil {
		return nil, err
	}
	out := make([]IntegrationListing, 0, len(items))
	for _, it := range items {
		l, err := listingFrom(it)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// PublicIntegrationVersions reads the shared versions of the integration
// published under name: the name's claim (one GetItem), the publisher's
// versions of it (one Query), their list form (one BatchGetItem).
func (s *Store) PublicIntegrationVersions(ctx context.Context, name string) ([]IntegrationListing, error) {
	claim, err := s.get(ctx, intPubPK(name), skIntPub)
	if err != nil || claim == nil {
		return []IntegrationListing{}, err
	}
	slots, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(intNamePK(getS(claim, "workspaceId"), name))},
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, it := range slots {
		if sharedSlotVisibility(it) {
			ids = append(ids, getS(it, "integrationId"))
		}
	}
	return s.IntegrationListingsByID(ctx, ids)
}

// PublicIntegrationByName finds a shared (public or unlisted, not dev)
// version of the integration published under name, as a workspace that
// has none of its own by that name sees it: version is a semantic
// version or "latest".
func (s *Store) PublicIntegrationByName(ctx context.Context, name, version string) (IntegrationRecord, error) {
	// No workspace: IntegrationByName goes straight to the name's publisher
	// and keeps its shared versions only.
	return s.IntegrationByName(ctx, "", name, version)
}

// PublicIntegration reads a shared version by id: another workspace's
// private or dev version is not found.
func (s *Store) PublicIntegration(ctx context.Context, id string) (IntegrationRecord, error) {
	r, err := s.GetIntegration(ctx, id)
	if err == nil && !shared(r.Integration) {
		return IntegrationRecord{}, platform.NotFound("integration", id)
	}
	return r, err
}
