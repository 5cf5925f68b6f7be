package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Keys of the plugins catalogue (docs/hub.md). As for integrations and
// interfaces: the version record, its (workspace, name, version) slot
// taken once, and a claim making a shared (public or unlisted) name one
// workspace's. The version record counts the bots using it
// (attrInstalls), so a version in use is not deleted.
func pluginPK(id string) string            { return "PLUGIN#" + id }
func pluginNamePK(ws, name string) string  { return "PLUGINNAME#" + ws + "#" + name }
func pluginPubPK(name string) string       { return "PLUGINPUB#" + name }
func workspacePluginsGSI(ws string) string { return "WS#" + ws + "#PLUGINS" }

const (
	skPlugin    = "PLUGIN"
	skPluginPub = "PLUGINPUB"
	// publicPluginsGSI gathers (on gsi2) every listed (public) plugin
	// version of every workspace: the hub's plugins.
	publicPluginsGSI = "PLUGINS#PUBLIC"
)

type pluginDoc struct {
	platform.Plugin
	StoredWorkspace string `json:"_ws"`
	StoredSDK       string `json:"_sdk,omitempty"`
	StoredNode      string `json:"_codeNode,omitempty"`
	StoredBrowser   string `json:"_codeBrowser,omitempty"`
	StoredIcon      string `json:"_iconKey,omitempty"`
	StoredReadme    string `json:"_readmeKey,omitempty"`
}

// PluginRecord is a plugin version with the version its doc was read at
// and the number of bots using it.
type PluginRecord struct {
	platform.Plugin
	Installs int64
	ver      int64
}

func storedPlugin(p platform.Plugin) pluginDoc {
	return pluginDoc{Plugin: p, StoredWorkspace: p.WorkspaceID, StoredSDK: p.SDKVersion, StoredNode: p.CodeNodeKey,
		StoredBrowser: p.CodeBrowserKey, StoredIcon: p.IconKey, StoredReadme: p.ReadmeKey}
}

func pluginItem(p platform.Plugin) (item, error) {
	it, err := docItem(pluginPK(p.ID), skPlugin, storedPlugin(p))
	if err != nil {
		return nil, err
	}
	it["workspaceId"] = str(p.WorkspaceID)
	if err := pluginsCatalogue.setListAttrs(it, p.Summary(), p.WorkspaceID, p.Name, p.Version, p.Visibility == platform.VisibilityPublic); err != nil {
		return nil, err
	}
	return it, checkItemSize(it)
}

func pluginFrom(it item) (PluginRecord, error) {
	var d pluginDoc
	if err := decodeDoc(it, &d); err != nil {
		return PluginRecord{}, err
	}
	p := d.Plugin
	p.WorkspaceID, p.SDKVersion, p.CodeNodeKey, p.CodeBrowserKey = d.StoredWorkspace, d.StoredSDK, d.StoredNode, d.StoredBrowser
	p.IconKey, p.ReadmeKey = d.StoredIcon, d.StoredReadme
	return PluginRecord{Plugin: p, Installs: getN(it, attrInstalls), ver: getN(it, attrVer)}, nil
}

// pluginSlot is a plugin version's slot: it carries its visibility, for
// PluginByName's reads of another workspace's name.
func pluginSlot(p platform.Plugin) item {
	it := pluginsCatalogue.slot(p.WorkspaceID, p.Name, p.Version, p.ID)
	it["visibility"] = str(p.Visibility)
	return it
}

// CreatePlugin stores a new plugin version in one transaction: the record,
// its (workspace, name, version) slot, and, when shared, the claim of its
// name; the workspace must exist.
func (s *Store) CreatePlugin(ctx context.Context, p platform.Plugin) error {
	it, err := pluginItem(p)
	if err != nil {
		return err
	}
	it[attrInstalls] = num(0)
	items := []types.TransactWriteItem{mustExist(workspacePK(p.WorkspaceID), skWorkspace), putNew(it), putNew(pluginSlot(p))}
	if p.Shared() {
		items = append(items, pluginsCatalogue.claimName(p.WorkspaceID, p.Name))
	}
	return s.transact(ctx, items, func(idx int) error {
		switch idx {
		case 0:
			return platform.NotFound("workspace", p.WorkspaceID)
		case 2:
			return platform.Errorf(platform.ErrAlreadyExists, "plugin %s version %s already exists: publish a new version", p.Name, p.Version)
		case 3:
			return pluginsCatalogue.errNameTaken(p.Name)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "plugin %q already exists", p.ID)
	})
}

// GetPlugin reads a plugin version by id (one GetItem).
func (s *Store) GetPlugin(ctx context.Context, id string) (PluginRecord, error) {
	it, err := s.getVersion(ctx, pluginsCatalogue, id)
	if err != nil {
		return PluginRecord{}, err
	}
	return pluginFrom(it)
}

// PluginsByID reads plugin versions by id (BatchGetItem); missing ones are
// absent from the result.
func (s *Store) PluginsByID(ctx context.Context, ids []string) (map[string]platform.Plugin, error) {
	return versionsByID(ctx, s, pluginsCatalogue, ids, func(it item) (string, platform.Plugin, error) {
		r, err := pluginFrom(it)
		return r.ID, r.Plugin, err
	})
}

// PluginByName finds the version of the plugin named name that workspace
// ws sees (see versionIDByName; ws "": shared versions only). version is a
// semantic version or "latest". One Query of the name's slots (two and a
// GetItem for a foreign name), then one GetItem.
func (s *Store) PluginByName(ctx context.Context, ws, name, version string) (PluginRecord, error) {
	notFound := platform.NotFound("plugin", name+"@"+version)
	id, err := s.versionIDByName(ctx, pluginsCatalogue.versionNames, ws, name, version)
	if err != nil {
		return PluginRecord{}, err
	}
	if id == "" {
		return PluginRecord{}, notFound
	}
	r, err := s.GetPlugin(ctx, id)
	if platform.TypeOf(err) == platform.ErrResourceNotFound || (err == nil && !r.VisibleTo(ws)) {
		return PluginRecord{}, notFound
	}
	return r, err
}

// OwnPlugin reads a version of workspace ws, to change it: another
// workspace's is 403 when shared (readable, not changeable), else 404.
func (s *Store) OwnPlugin(ctx context.Context, ws, id string) (PluginRecord, error) {
	r, err := s.GetPlugin(ctx, id)
	if err == nil {
		err = pluginsCatalogue.checkOwner(id, r.WorkspaceID, ws, r.Shared())
	}
	if err != nil {
		return PluginRecord{}, err
	}
	return r, nil
}

// UpdatePlugin applies change to a version of workspace ws, replacing it
// only if unchanged since read (retried on conflict); a version made
// shared claims its name, and its slot carries its visibility.
func (s *Store) UpdatePlugin(ctx context.Context, ws, id string, change func(*platform.Plugin) error) (platform.Plugin, error) {
	var out platform.Plugin
	err := optimistic(ctx, fmt.Sprintf("plugin %q", id), func() error {
		rec, err := s.OwnPlugin(ctx, ws, id)
		if err != nil {
			return err
		}
		p := rec.Plugin
		if err := change(&p); err != nil {
			return err
		}
		p.UpdatedAt = platform.Now()
		it, err := pluginItem(p)
		if err != nil {
			return err
		}
		items := []types.TransactWriteItem{replaceCountedDoc(key(pluginPK(id), skPlugin), it[attrDoc], it, rec.ver, p.Visibility == platform.VisibilityPublic)}
		if p.Visibility != rec.Visibility {
			items = append(items, types.TransactWriteItem{Put: &types.Put{Item: pluginSlot(p)}})
			if p.Shared() {
				items = append(items, pluginsCatalogue.claimName(ws, p.Name))
			}
		}
		err = s.transact(ctx, items, func(idx int) error {
			if idx == 2 {
				return pluginsCatalogue.errNameTaken(p.Name)
			}
			return errRetry
		})
		if err == nil {
			out = p
		}
		return err
	})
	return out, err
}

// DeletePlugin deletes a version of workspace ws that no bot uses (a
// condition on its install counter) and frees its slot, in one
// transaction. Its name stays claimed by the workspace.
func (s *Store) DeletePlugin(ctx context.Context, ws, id string) (platform.Plugin, error) {
	rec, err := s.OwnPlugin(ctx, ws, id)
	if err != nil {
		return platform.Plugin{}, err
	}
	err = s.transact(ctx, []types.TransactWriteItem{
		deleteUninstalled(key(pluginPK(id), skPlugin)),
		pluginsCatalogue.freeSlot(ws, rec.Name, rec.Version, id),
	}, func(idx int) error {
		if idx == 0 {
			return errRetry
		}
		return platform.NotFound("plugin", id)
	})
	if err == errRetry {
		again, gerr := s.GetPlugin(ctx, id)
		if gerr != nil {
			return platform.Plugin{}, gerr
		}
		return platform.Plugin{}, platform.Errorf(platform.ErrReferenceConstrain, "plugin %q is used by %d bot(s): remove it from them first", id, again.Installs)
	}
	return rec.Plugin, err
}

// PluginFilter selects the plugins catalogue's versions.
type PluginFilter = CatalogueFilter

// ListPlugins lists the versions of workspace ws (public false) or the
// listed versions of every workspace (public true), by name then version:
// one Query page on gsi1 or gsi2, list attributes only.
func (s *Store) ListPlugins(ctx context.Context, ws string, public bool, f PluginFilter, p Page) ([]platform.PluginSummary, map[string]string, error) {
	return listVersions[platform.PluginSummary](ctx, s, pluginsCatalogue, ws, public, f, p)
}

// CheckPlugin reports whether p fits in an item (before anything is
// written for it).
func (s *Store) CheckPlugin(p platform.Plugin) error {
	_, err := pluginItem(p)
	return err
}

// CheckPluginCreation checks a new version as CreatePlugin would, with
// reads only: its size, its (workspace, name, version) slot free and, for
// a shared (public or unlisted) version, its name not published by another
// workspace. At most two GetItems; writes nothing. CreatePlugin stays
// conditional: a slot or name taken in between still gets its 409.
func (s *Store) CheckPluginCreation(ctx context.Context, p platform.Plugin) error {
	if _, err := pluginItem(p); err != nil {
		return err
	}
	slot, err := s.get(ctx, pluginNamePK(p.WorkspaceID, p.Name), intNameSK(p.Version))
	if err != nil {
		return err
	}
	if slot != nil {
		return platform.Errorf(platform.ErrAlreadyExists, "plugin %s version %s already exists: publish a new version", p.Name, p.Version)
	}
	if !p.Shared() {
		return nil
	}
	claim, err := s.get(ctx, pluginPubPK(p.Name), skPluginPub)
	if err != nil {
		return err
	}
	if claim != nil && getS(claim, "workspaceId") != p.WorkspaceID {
		return pluginsCatalogue.errNameTaken(p.Name)
	}
	return nil
}
