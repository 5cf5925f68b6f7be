package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	if err := interfacesCatalogue.setListAttrs(it, i.Summary(), i.WorkspaceID, i.Name, i.Version, i.Public); err != nil {
		return nil, err
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

// ifaceSlot is an interface version's slot: it carries its visibility, for
// InterfaceByName's reads of another workspace's name.
func ifaceSlot(i platform.Interface) item {
	it := interfacesCatalogue.slot(i.WorkspaceID, i.Name, i.Version, i.ID)
	it["public"] = &types.AttributeValueMemberBOOL{Value: i.Public}
	return it
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
		items = append(items, interfacesCatalogue.claimName(i.WorkspaceID, i.Name))
	}
	return s.transact(ctx, items, func(idx int) error {
		switch idx {
		case 1:
			return platform.Errorf(platform.ErrAlreadyExists, "interface %s version %s already exists: publish a new version", i.Name, i.Version)
		case 2:
			return interfacesCatalogue.errNameTaken(i.Name)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "interface %q already exists", i.ID)
	})
}

// GetInterface reads an interface version by id (one GetItem).
func (s *Store) GetInterface(ctx context.Context, id string) (InterfaceRecord, error) {
	it, err := s.getVersion(ctx, interfacesCatalogue, id)
	if err != nil {
		return InterfaceRecord{}, err
	}
	return interfaceFrom(it)
}

// InterfaceByName finds the version of the interface named name that
// workspace ws sees (see versionIDByName; ws "": public versions only).
// version is a semantic version or "latest". One Query of the name's slots
// (two and a GetItem for a foreign name), then one GetItem.
func (s *Store) InterfaceByName(ctx context.Context, ws, name, version string) (InterfaceRecord, error) {
	notFound := platform.NotFound("interface", name+"@"+version)
	id, err := s.versionIDByName(ctx, interfacesCatalogue.versionNames, ws, name, version)
	if err != nil {
		return InterfaceRecord{}, err
	}
	if id == "" {
		return InterfaceRecord{}, notFound
	}
	r, err := s.GetInterface(ctx, id)
	if platform.TypeOf(err) == platform.ErrResourceNotFound || (err == nil && !r.VisibleTo(ws)) {
		return InterfaceRecord{}, notFound
	}
	return r, err
}

// ownInterface reads a version of workspace ws: another workspace's is
// 403 when public (readable, not changeable), else 404.
func (s *Store) ownInterface(ctx context.Context, ws, id string) (InterfaceRecord, error) {
	r, err := s.GetInterface(ctx, id)
	if err == nil {
		err = interfacesCatalogue.checkOwner(id, r.WorkspaceID, ws, r.Public)
	}
	if err != nil {
		return InterfaceRecord{}, err
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
				items = append(items, interfacesCatalogue.claimName(ws, i.Name))
			}
		}
		err = s.transact(ctx, items, func(idx int) error {
			if idx == 2 {
				return interfacesCatalogue.errNameTaken(i.Name)
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
		interfacesCatalogue.freeSlot(ws, rec.Name, rec.Version, id),
	}, func(int) error { return platform.NotFound("interface", id) })
}

// InterfaceFilter selects the interfaces catalogue's versions.
type InterfaceFilter = CatalogueFilter

// ListInterfaces lists the versions of workspace ws (public false) or of
// the public catalogue of every workspace (public true), by name then
// version: one Query page on gsi1 or gsi2, list attributes only.
func (s *Store) ListInterfaces(ctx context.Context, ws string, public bool, f InterfaceFilter, p Page) ([]platform.InterfaceSummary, map[string]string, error) {
	return listVersions[platform.InterfaceSummary](ctx, s, interfacesCatalogue, ws, public, f, p)
}

// InterfacesByID reads interface versions by id (BatchGetItem); missing
// ones are absent from the result.
func (s *Store) InterfacesByID(ctx context.Context, ids []string) (map[string]platform.Interface, error) {
	return versionsByID(ctx, s, interfacesCatalogue, ids, func(it item) (string, platform.Interface, error) {
		r, err := interfaceFrom(it)
		return r.ID, r.Interface, err
	})
}
