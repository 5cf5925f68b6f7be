package dynamo

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// A versioned catalogue (interfaces, plugins: docs/hub.md) keeps
// name+version records the same way whatever they describe: the version
// record under its id, a (workspace, name, version) slot taken once, a
// claim making a shared name one workspace's, the workspace's versions on
// gsi1 and the listed ones of every workspace on gsi2, both by name then
// version. catalogue names one catalogue's keys, so that the code reading
// and writing them is written once; each kind keeps its own key functions
// (the stored layout is theirs and must not change).
type catalogue struct {
	versionNames
	plural    string // what errors call several versions: "interfaces", "plugins"
	idPrefix  string
	recordPK  func(id string) string
	recordSK  string
	wsGSI     func(ws string) string // gsi1pk of a workspace's versions
	publicGSI string                 // gsi2pk of every listed version
}

// versionNames are the name slots and claims of a catalogue: the part that
// integrations, listed by creation rather than by name, share with the hub
// catalogues.
type versionNames struct {
	kind      string                       // what errors call a version: "interface", "plugin"
	namePK    func(ws, name string) string // a name's version slots
	slotIDAtt string                       // the slot attribute naming its version's id
	pubPK     func(name string) string     // a shared name's claim
	pubSK     string
	// sharedSlot reports whether a slot's version is reachable from other
	// workspaces: each kind stores its visibility in its own attribute.
	sharedSlot func(slot item) bool
}

var interfacesCatalogue = catalogue{
	versionNames: versionNames{kind: "interface", namePK: ifaceNamePK, slotIDAtt: "interfaceId", pubPK: ifacePubPK, pubSK: skIfacePub,
		sharedSlot: func(slot item) bool {
			b, _ := slot["public"].(*types.AttributeValueMemberBOOL)
			return b != nil && b.Value
		}},
	plural: "interfaces", idPrefix: platform.PrefixInterface, recordPK: ifacePK, recordSK: skIface,
	wsGSI: workspaceInterfacesGSI, publicGSI: publicInterfacesGSI,
}

var pluginsCatalogue = catalogue{
	versionNames: versionNames{kind: "plugin", namePK: pluginNamePK, slotIDAtt: "pluginId", pubPK: pluginPubPK, pubSK: skPluginPub,
		sharedSlot: sharedSlotVisibility},
	plural: "plugins", idPrefix: platform.PrefixPlugin, recordPK: pluginPK, recordSK: skPlugin,
	wsGSI: workspacePluginsGSI, publicGSI: publicPluginsGSI,
}

// integrationNames are the integrations' name slots and claims.
var integrationNames = versionNames{kind: "integration", namePK: intNamePK, slotIDAtt: "integrationId", pubPK: intPubPK, pubSK: skIntPub,
	sharedSlot: sharedSlotVisibility}

// sharedSlotVisibility reads a slot that keeps its version's visibility
// (plugins, integrations).
func sharedSlotVisibility(slot item) bool { return platform.SharedVisibility(getS(slot, "visibility")) }

// catalogueListSK orders a catalogue by name, then version: a name's
// versions are one key prefix.
func catalogueListSK(name, version string) string { return "N#" + name + "#V#" + version }

// setListAttrs sets what lists read of a version (its summary and version)
// and the index keys listing it: its workspace's list and, when listed,
// the public one.
func (c catalogue) setListAttrs(it item, summary any, ws, name, version string, listed bool) error {
	sum, err := json.Marshal(summary)
	if err != nil {
		return err
	}
	it[attrSummary] = str(string(sum))
	it["version"] = str(version)
	it[attrGSI1PK] = str(c.wsGSI(ws))
	it[attrGSI1SK] = str(catalogueListSK(name, version))
	if listed {
		it[attrGSI2PK] = str(c.publicGSI)
		it[attrGSI2SK] = str(catalogueListSK(name, version))
	}
	return nil
}

// slot is the (workspace, name, version) slot of version id; the caller
// adds the visibility attribute its kind keeps there.
func (c versionNames) slot(ws, name, version, id string) item {
	it := key(c.namePK(ws, name), intNameSK(version))
	it[c.slotIDAtt] = str(id)
	return it
}

// freeSlot deletes a version's slot, only while it still names the version.
func (c versionNames) freeSlot(ws, name, version, id string) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{
		Key:                       key(c.namePK(ws, name), intNameSK(version)),
		ConditionExpression:       aws.String(c.slotIDAtt + " = :id"),
		ExpressionAttributeValues: item{":id": str(id)},
	}}
}

// claimName makes ws the publisher of a shared name of the catalogue.
func (c versionNames) claimName(ws, name string) types.TransactWriteItem {
	return claimPublisher(c.pubPK(name), c.pubSK, ws)
}

// claimPublisher puts the claim (pk, sk) making ws the publisher of a
// name: shared names are one namespace across workspaces, first come first
// served, so the put fails when another workspace holds it.
func claimPublisher(pk, sk, ws string) types.TransactWriteItem {
	it := key(pk, sk)
	it["workspaceId"] = str(ws)
	return types.TransactWriteItem{Put: &types.Put{
		Item:                      it,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR workspaceId = :ws"),
		ExpressionAttributeValues: item{":ws": str(ws)},
	}}
}

func (c versionNames) errNameTaken(name string) error {
	return platform.Errorf(platform.ErrAlreadyExists, "the %s name %q is published by another workspace", c.kind, name)
}

// getVersion reads a version record by id (one GetItem).
func (s *Store) getVersion(ctx context.Context, c catalogue, id string) (item, error) {
	return s.getRecord(ctx, c.kind, c.idPrefix, id, c.recordPK(id), c.recordSK)
}

// versionsByID reads versions by id (BatchGetItem); ids not of the kind,
// and missing versions, are absent from the result.
func versionsByID[T any](ctx context.Context, s *Store, c catalogue, ids []string, decode func(item) (string, T, error)) (map[string]T, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if platform.HasPrefix(id, c.idPrefix) {
			valid = append(valid, id)
		}
	}
	return batchGetByID(ctx, s, valid, func(id string) item { return key(c.recordPK(id), c.recordSK) }, decode)
}

// versionIDByName finds the id of the version named name that workspace ws
// sees: its own first, else the shared versions of the workspace
// publishing the name (ws "": shared versions only). version is a semantic
// version or "latest" (the highest). "" when there is none. One Query of
// the name's slots (two and a GetItem for a foreign name).
func (s *Store) versionIDByName(ctx context.Context, c versionNames, ws, name, version string) (string, error) {
	pick := func(owner string, sharedOnly bool) (string, error) {
		slots, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: item{":pk": str(c.namePK(owner, name))},
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			return "", err
		}
		var best string
		var bestV platform.Semver
		for _, it := range slots {
			if sharedOnly && !c.sharedSlot(it) {
				continue
			}
			v := getS(it, attrSK)[len("V#"):]
			if version != "latest" {
				if v == version {
					return getS(it, c.slotIDAtt), nil
				}
				continue
			}
			if sv, ok := platform.ParseSemver(v); ok && (best == "" || bestV.Less(sv)) {
				best, bestV = getS(it, c.slotIDAtt), sv
			}
		}
		return best, nil
	}
	if ws != "" {
		if id, err := pick(ws, false); err != nil || id != "" {
			return id, err
		}
	}
	claim, err := s.get(ctx, c.pubPK(name), c.pubSK)
	if err != nil || claim == nil || getS(claim, "workspaceId") == ws {
		return "", err
	}
	return pick(getS(claim, "workspaceId"), true)
}

// checkOwner refuses a change to version id by workspace ws when another
// workspace owns it: 403 when shared (readable, not changeable), else 404.
func (c versionNames) checkOwner(id, owner, ws string, shared bool) error {
	switch {
	case owner == ws:
		return nil
	case shared:
		return platform.Forbidden("%s %q belongs to another workspace", c.kind, id)
	}
	return platform.NotFound(c.kind, id)
}

// CatalogueFilter selects a catalogue's versions: all, a name's, or one
// name and version. A version without a name filters the catalogue's
// pages (a FilterExpression: reads what it skips).
type CatalogueFilter struct{ Name, Version string }

// listVersions lists the versions of workspace ws (public false) or the
// listed versions of every workspace (public true), by name then version:
// one Query page on gsi1 or gsi2, list attributes only, each decoded as
// the summary T.
func listVersions[T any](ctx context.Context, s *Store, c catalogue, ws string, public bool, f CatalogueFilter, p Page) ([]T, map[string]string, error) {
	index, pkAttr, skAttr, pk := GSI1, attrGSI1PK, attrGSI1SK, c.wsGSI(ws)
	if public {
		index, pkAttr, skAttr, pk = GSI2, attrGSI2PK, attrGSI2SK, c.publicGSI
	}
	in := &dynamodb.QueryInput{
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": pkAttr, "#sum": attrSummary},
		ExpressionAttributeValues: item{":pk": str(pk)},
		ProjectionExpression:      aws.String("pk, sk, gsi1pk, gsi1sk, gsi2pk, gsi2sk, #sum"),
	}
	switch {
	case f.Name != "" && f.Version != "":
		*in.KeyConditionExpression += " AND #sk = :sk"
		in.ExpressionAttributeNames["#sk"] = skAttr
		in.ExpressionAttributeValues[":sk"] = str(catalogueListSK(f.Name, f.Version))
	case f.Name != "":
		*in.KeyConditionExpression += " AND begins_with(#sk, :sk)"
		in.ExpressionAttributeNames["#sk"] = skAttr
		in.ExpressionAttributeValues[":sk"] = str(catalogueListSK(f.Name, ""))
	case f.Version != "":
		in.FilterExpression = aws.String("#v = :v")
		in.ExpressionAttributeNames["#v"] = "version"
		in.ExpressionAttributeValues[":v"] = str(f.Version)
	}
	items, next, err := s.queryPage(ctx, in, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		var sum T
		if err := json.Unmarshal([]byte(getS(it, attrSummary)), &sum); err != nil {
			return nil, nil, err
		}
		out = append(out, sum)
	}
	return out, next, nil
}

// checkNoVersions refuses while workspace ws has versions in the
// catalogue (one Query of at most one item): deleting the workspace would
// leave them, the shared ones in the hub, without an owner.
func (s *Store) checkNoVersions(ctx context.Context, c catalogue, ws string) error {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(c.wsGSI(ws))},
		Limit:                     aws.Int32(1),
	})
	if err != nil {
		return err
	}
	if len(out.Items) > 0 {
		return platform.Errorf(platform.ErrReferenceConstrain, "workspace %q still has %s: delete them first", ws, c.plural)
	}
	return nil
}
