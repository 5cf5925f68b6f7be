package dynamo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Keys of the interfaces catalogue (docs/hub.md). As for integrations: the
// version record, a (workspace, name, version) slot taken once, and a claim
// making a public name one workspace's.
func ifacePK(id string) string                { return "IFACE#" + id }
func ifaceNamePK(ws, name string) string      { return "IFACENAME#" + ws + "#" + name }
func ifacePubPK(name string) string           { return "IFACEPUB#" + name }
func workspaceInterfacesGSI(ws string) string { return "WS#" + ws + "#IFACES" }

const (
	skIface = "IFACE"
	// publicInterfacesGSI gathers (on gsi2) every public interface version.
	publicInterfacesGSI = "IFACES#PUBLIC"
	skIfacePub          = "IFACEPUB"
)

// ifaceListSK orders a catalogue by name, then version: a name's versions
// are one key prefix.
func ifaceListSK(name, version string) string { return "N#" + name + "#V#" + version }

type interfaceDoc struct {
	platform.Interface
	StoredWorkspace string `json:"_ws"`
}

// InterfaceRecord is an interface version with the version its doc was read at.
type InterfaceRecord struct {
	platform.Interface
	ver int64
}

func interfaceItem(i platform.Interface) (item, error) {
	it, err := docItem(ifacePK(i.ID), skIface, interfaceDoc{Interface: i, StoredWorkspace: i.WorkspaceID})
	if err != nil {
		return nil, err
	}
	sum, err := json.Marshal(i.Summary())
	if err != nil {
		return nil, err
	}
	it[attrSummary] = str(string(sum))
	it["version"] = str(i.Version)
	it[attrGSI1PK] = str(workspaceInterfacesGSI(i.WorkspaceID))
	it[attrGSI1SK] = str(ifaceListSK(i.Name, i.Version))
	if i.Public {
		it[attrGSI2PK] = str(publicInterfacesGSI)
		it[attrGSI2SK] = str(ifaceListSK(i.Name, i.Version))
	}
	return it, checkItemSize(it)
}

func interfaceFrom(it item) (InterfaceRecord, error) {
	var d interfaceDoc
	if err := decodeDoc(it, &d); err != nil {
		return InterfaceRecord{}, err
	}
	d.Interface.WorkspaceID = d.StoredWorkspace
	return InterfaceRecord{Interface: d.Interface, ver: getN(it, attrVer)}, nil
}

func ifaceSlot(i platform.Interface) item {
	it := key(ifaceNamePK(i.WorkspaceID, i.Name), intNameSK(i.Version))
	it["interfaceId"] = str(i.ID)
	it["public"] = &types.AttributeValueMemberBOOL{Value: i.Public}
	return it
}

// claimInterfaceName makes ws the publisher of a public interface name.
func claimInterfaceName(ws, name string) types.TransactWriteItem {
	it := key(ifacePubPK(name), skIfacePub)
	it["workspaceId"] = str(ws)
	return types.TransactWriteItem{Put: &types.Put{
		Item:                      it,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR workspaceId = :ws"),
		ExpressionAttributeValues: item{":ws": str(ws)},
	}}
}

var errIfaceNameTaken = func(name string) error {
	return platform.Errorf(platform.ErrAlreadyExists, "the interface name %q is published by another workspace", name)
}

// CreateInterface stores a new interface version in one transaction: the
// record, its (workspace, name, version) slot (so a version is created
// once) and, when public, the claim of its name.
func (s *Store) CreateInterface(ctx context.Context, i platform.Interface) error {
	it, err := interfaceItem(i)
	if err != nil {
		return err
	}
	items := []types.TransactWriteItem{putNew(it), putNew(ifaceSlot(i))}
	if i.Public {
		items = append(items, claimInterfaceName(i.WorkspaceID, i.Name))
	}
	return s.transact(ctx, items, func(idx int) error {
		switch idx {
		case 1:
			return platform.Errorf(platform.ErrAlreadyExists, "interface %s version %s already exists: publish a new version", i.Name, i.Version)
		case 2:
			return errIfaceNameTaken(i.Name)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "interface %q already exists", i.ID)
	})
}

// GetInterface reads an interface version by id (one GetItem).
func (s *Store) GetInterface(ctx context.Context, id string) (InterfaceRecord, error) {
	if !platform.HasPrefix(id, platform.PrefixInterface) {
		return InterfaceRecord{}, platform.NotFound("interface", id)
	}
	it, err := s.get(ctx, ifacePK(id), skIface)
	if err != nil {
		return InterfaceRecord{}, err
	}
	if it == nil {
		return InterfaceRecord{}, platform.NotFound("interface", id)
	}
	return interfaceFrom(it)
}

// InterfaceByName finds the version of the interface named name that
// workspace ws sees: its own first, else the public versions of the
// workspace publishing the name (ws "" : public versions only). version is
// a semantic version or "latest". One Query of the name's slots (two and a
// GetItem for a foreign name), then one GetItem.
func (s *Store) InterfaceByName(ctx context.Context, ws, name, version string) (InterfaceRecord, error) {
	notFound := platform.NotFound("interface", name+"@"+version)
	pick := func(owner string, publicOnly bool) (string, error) {
		slots, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: item{":pk": str(ifaceNamePK(owner, name))},
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			return "", err
		}
		var best string
		var bestV platform.Semver
		for _, it := range slots {
			if b, _ := it["public"].(*types.AttributeValueMemberBOOL); publicOnly && (b == nil || !b.Value) {
				continue
			}
			v := getS(it, attrSK)[len("V#"):]
			if version != "latest" {
				if v == version {
					return getS(it, "interfaceId"), nil
				}
				continue
			}
			if sv, ok := platform.ParseSemver(v); ok && (best == "" || bestV.Less(sv)) {
				best, bestV = getS(it, "interfaceId"), sv
			}
		}
		return best, nil
	}
	id := ""
	if ws != "" {
		var err error
		if id, err = pick(ws, false); err != nil {
			return InterfaceRecord{}, err
		}
	}
	if id == "" {
		claim, err := s.get(ctx, ifacePubPK(name), skIfacePub)
		if err != nil {
			return InterfaceRecord{}, err
		}
		if claim == nil || getS(claim, "workspaceId") == ws {
			return InterfaceRecord{}, notFound
		}
		if id, err = pick(getS(claim, "workspaceId"), true); err != nil {
			return InterfaceRecord{}, err
		}
	}
	if id == "" {
		return InterfaceRecord{}, notFound
	}
	r, err := s.GetInterface(ctx, id)
	if platform.TypeOf(err) == platform.ErrResourceNotFound || (err == nil && !(r.WorkspaceID == ws || r.Public)) {
		return InterfaceRecord{}, notFound
	}
	return r, err
}

// ownInterface reads a version of workspace ws: another workspace's is
// 403 when public (readable, not changeable), else 404.
func (s *Store) ownInterface(ctx context.Context, ws, id string) (InterfaceRecord, error) {
	r, err := s.GetInterface(ctx, id)
	if err != nil {
		return r, err
	}
	if r.WorkspaceID != ws {
		if r.Public {
			return InterfaceRecord{}, platform.Forbidden("interface %q belongs to another workspace", id)
		}
		return InterfaceRecord{}, platform.NotFound("interface", id)
	}
	return r, nil
}

// UpdateInterface applies change to a version of workspace ws, replacing
// it only if unchanged since read (retried on conflict); a version made
// public claims its name, and its slot carries its visibility.
func (s *Store) UpdateInterface(ctx context.Context, ws, id string, change func(*platform.Interface) error) (platform.Interface, error) {
	var out platform.Interface
	err := optimistic(ctx, fmt.Sprintf("interface %q", id), func() error {
		rec, err := s.ownInterface(ctx, ws, id)
		if err != nil {
			return err
		}
		i := rec.Interface
		if err := change(&i); err != nil {
			return err
		}
		i.UpdatedAt = platform.Now()
		it, err := interfaceItem(i)
		if err != nil {
			return err
		}
		it[attrVer] = num(rec.ver + 1)
		items := []types.TransactWriteItem{{Put: &types.Put{
			Item: it, ConditionExpression: aws.String("#ver = :ver"),
			ExpressionAttributeNames: map[string]string{"#ver": attrVer}, ExpressionAttributeValues: item{":ver": num(rec.ver)},
		}}}
		if i.Public != rec.Public {
			items = append(items, types.TransactWriteItem{Put: &types.Put{Item: ifaceSlot(i)}})
			if i.Public {
				items = append(items, claimInterfaceName(ws, i.Name))
			}
		}
		err = s.transact(ctx, items, func(idx int) error {
			if idx == 2 {
				return errIfaceNameTaken(i.Name)
			}
			return errRetry
		})
		if err == nil {
			out = i
		}
		return err
	})
	return out, err
}

// DeleteInterface deletes a version of workspace ws and frees its slot (one
// transaction). Its name stays claimed by the workspace.
func (s *Store) DeleteInterface(ctx context.Context, ws, id string) error {
	rec, err := s.ownInterface(ctx, ws, id)
	if err != nil {
		return err
	}
	return s.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{Key: key(ifacePK(id), skIface), ConditionExpression: aws.String("attribute_exists(pk)")}},
		{Delete: &types.Delete{
			Key:                       key(ifaceNamePK(ws, rec.Name), intNameSK(rec.Version)),
			ConditionExpression:       aws.String("interfaceId = :id"),
			ExpressionAttributeValues: item{":id": str(id)},
		}},
	}, func(int) error { return platform.NotFound("interface", id) })
}

// InterfaceFilter selects a catalogue's versions: all, a name's, or one
// name and version. A version without a name filters the catalogue's
// pages (a FilterExpression: reads what it skips).
type InterfaceFilter struct{ Name, Version string }

// ListInterfaces lists the versions of workspace ws (public false) or of
// the public catalogue of every workspace (public true), by name then
// version: one Query page on gsi1 or gsi2, list attributes only.
func (s *Store) ListInterfaces(ctx context.Context, ws string, public bool, f InterfaceFilter, p Page) ([]platform.InterfaceSummary, map[string]string, error) {
	index, pkAttr, skAttr, pk := GSI1, attrGSI1PK, attrGSI1SK, workspaceInterfacesGSI(ws)
	if public {
		index, pkAttr, skAttr, pk = GSI2, attrGSI2PK, attrGSI2SK, publicInterfacesGSI
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
		in.ExpressionAttributeValues[":sk"] = str(ifaceListSK(f.Name, f.Version))
	case f.Name != "":
		*in.KeyConditionExpression += " AND begins_with(#sk, :sk)"
		in.ExpressionAttributeNames["#sk"] = skAttr
		in.ExpressionAttributeValues[":sk"] = str(ifaceListSK(f.Name, ""))
	case f.Version != "":
		in.FilterExpression = aws.String("#v = :v")
		in.ExpressionAttributeNames["#v"] = "version"
		in.ExpressionAttributeValues[":v"] = str(f.Version)
	}
	items, next, err := s.queryPage(ctx, in, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.InterfaceSummary, 0, len(items))
	for _, it := range items {
		var sum platform.InterfaceSummary
		if err := json.Unmarshal([]byte(getS(it, attrSummary)), &sum); err != nil {
			return nil, nil, err
		}
		out = append(out, sum)
	}
	return out, next, nil
}

// checkNoInterfaces refuses while workspace ws has interface versions (one
// Query of at most one item): deleting the workspace would leave them, the
// public ones in the hub, without an owner.
func (s *Store) checkNoInterfaces(ctx context.Context, ws string) error {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(workspaceInterfacesGSI(ws))},
		Limit:                     aws.Int32(1),
	})
	if err != nil {
		return err
	}
	if len(out.Items) > 0 {
		return platform.Errorf(platform.ErrReferenceConstrain, "workspace %q still has interfaces: delete them first", ws)
	}
	return nil
}

// InterfacesByID reads interface versions by id (BatchGetItem); missing
// ones are absent from the result.
func (s *Store) InterfacesByID(ctx context.Context, ids []string) (map[string]platform.Interface, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if platform.HasPrefix(id, platform.PrefixInterface) {
			valid = append(valid, id)
		}
	}
	return batchGetByID(ctx, s, valid, func(id string) item { return key(ifacePK(id), skIface) },
		func(it item) (string, platform.Interface, error) {
			r, err := interfaceFrom(it)
			return r.ID, r.Interface, err
		})
}
