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

// Keys of the plugins catalogue (docs/hub.md). As for integrations and
// interfaces: the version record, its (workspace, name, version) slot
// taken once, and a claim making a shared (public or unlisted) name one
// workspace's. The version record counts the bots using it
// (attrInstalls), so a version in use is not deleted.
func pluginPK(id string) string                { return "PLUGIN#" + id }
func pluginNamePK(ws, name string) string      { return "PLUGINNAME#" + ws + "#" + name }
func pluginPubPK(name string) string           { return "PLUGINPUB#" + name }
func workspacePluginsGSI(ws string) string     { return "WS#" + ws + "#PLUGINS" }
func pluginListSK(name, version string) string { return "N#" + name + "#V#" + version }

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
	sum, err := json.Marshal(p.Summary())
	if err != nil {
		return nil, err
	}
	it[attrSummary] = str(string(sum))
	it["version"] = str(p.Version)
	it["workspaceId"] = str(p.WorkspaceID)
	it[attrGSI1PK] = str(workspacePluginsGSI(p.WorkspaceID))
	it[attrGSI1SK] = str(pluginListSK(p.Name, p.Version))
	if p.Visibility == platform.VisibilityPublic {
		it[attrGSI2PK] = str(publicPluginsGSI)
		it[attrGSI2SK] = str(pluginListSK(p.Name, p.Version))
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

func pluginSlot(p platform.Plugin) item {
	it := key(pluginNamePK(p.WorkspaceID, p.Name), intNameSK(p.Version))
	it["pluginId"] = str(p.ID)
	it["visibility"] = str(p.Visibility)
	return it
}

func claimPluginName(ws, name string) types.TransactWriteItem {
	it := key(pluginPubPK(name), skPluginPub)
	it["workspaceId"] = str(ws)
	return types.TransactWriteItem{Put: &types.Put{
		Item:                      it,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR workspaceId = :ws"),
		ExpressionAttributeValues: item{":ws": str(ws)},
	}}
}

func errPluginNameTaken(name string) error {
	return platform.Errorf(platform.ErrAlreadyExists, "the plugin name %q is published by another workspace", name)
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
		items = append(items, claimPluginName(p.WorkspaceID, p.Name))
	}
	return s.transact(ctx, items, func(idx int) error {
		switch idx {
		case 0:
			return platform.NotFound("workspace", p.WorkspaceID)
		case 2:
			return platform.Errorf(platform.ErrAlreadyExists, "plugin %s version %s already exists: publish a new version", p.Name, p.Version)
		case 3:
			return errPluginNameTaken(p.Name)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "plugin %q already exists", p.ID)
	})
}

// GetPlugin reads a plugin version by id (one GetItem).
func (s *Store) GetPlugin(ctx context.Context, id string) (PluginRecord, error) {
	if !platform.HasPrefix(id, platform.PrefixPlugin) {
		return PluginRecord{}, platform.NotFound("plugin", id)
	}
	it, err := s.get(ctx, pluginPK(id), skPlugin)
	if err != nil {
		return PluginRecord{}, err
	}
	if it == nil {
		return PluginRecord{}, platform.NotFound("plugin", id)
	}
	return pluginFrom(it)
}

// PluginsByID reads plugin versions by id (BatchGetItem); missing ones are
// absent from the result.
func (s *Store) PluginsByID(ctx context.Context, ids []string) (map[string]platform.Plugin, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if platform.HasPrefix(id, platform.PrefixPlugin) {
			valid = append(valid, id)
		}
	}
	return batchGetByID(ctx, s, valid, func(id string) item { return key(pluginPK(id), skPlugin) },
		func(it item) (string, platform.Plugin, error) {
			r, err := pluginFrom(it)
			return r.ID, r.Plugin, err
		})
}

// PluginByName finds the version of the plugin named name that workspace
// ws sees: its own first, else the shared versions of the workspace
// publishing the name (ws "": shared versions only). version is a semantic
// version or "latest". One Query of the name's slots (two and a GetItem
// for a foreign name), then one GetItem.
func (s *Store) PluginByName(ctx context.Context, ws, name, version string) (PluginRecord, error) {
	notFound := platform.NotFound("plugin", name+"@"+version)
	pick := func(owner string, sharedOnly bool) (string, error) {
		slots, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: item{":pk": str(pluginNamePK(owner, name))},
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			return "", err
		}
		var best string
		var bestV platform.Semver
		for _, it := range slots {
			vis := getS(it, "visibility")
			if sharedOnly && vis != platform.VisibilityPublic && vis != platform.VisibilityUnlisted {
				continue
			}
			v := getS(it, attrSK)[len("V#"):]
			if version != "latest" {
				if v == version {
					return getS(it, "pluginId"), nil
				}
				continue
			}
			if sv, ok := platform.ParseSemver(v); ok && (best == "" || bestV.Less(sv)) {
				best, bestV = getS(it, "pluginId"), sv
			}
		}
		return best, nil
	}
	id := ""
	if ws != "" {
		var err error
		if id, err = pick(ws, false); err != nil {
			return PluginRecord{}, err
		}
	}
	if id == "" {
		claim, err := s.get(ctx, pluginPubPK(name), skPluginPub)
		if err != nil {
			return PluginRecord{}, err
		}
		if claim == nil || getS(claim, "workspaceId") == ws {
			return PluginRecord{}, notFound
		}
		if id, err = pick(getS(claim, "workspaceId"), true); err != nil {
			return PluginRecord{}, err
		}
	}
	if id == "" {
		return PluginRecord{}, notFound
	}
	r, err := s.GetPlugin(ctx, id)
	if platform.TypeOf(err) == platform.ErrResourceNotFound || (err == nil && !(r.WorkspaceID == ws || r.Shared())) {
		return PluginRecord{}, notFound
	}
	return r, err
}

// ownPlugin reads a version of workspace ws: another workspace's is 403
// when shared (readable, not changeable), else 404.
func (s *Store) ownPlugin(ctx context.Context, ws, id string) (PluginRecord, error) {
	r, err := s.GetPlugin(ctx, id)
	if err != nil {
		return r, err
	}
	if r.WorkspaceID != ws {
		if r.Shared() {
			return PluginRecord{}, platform.Forbidden("plugin %q belongs to another workspace", id)
		}
		return PluginRecord{}, platform.NotFound("plugin", id)
	}
	return r, nil
}

// UpdatePlugin applies change to a version of workspace ws, replacing it
// only if unchanged since read (retried on conflict); a version made
// shared claims its name, and its slot carries its visibility.
func (s *Store) UpdatePlugin(ctx context.Context, ws, id string, change func(*platform.Plugin) error) (platform.Plugin, error) {
	var out platform.Plugin
	err := optimistic(ctx, fmt.Sprintf("plugin %q", id), func() error {
		rec, err := s.ownPlugin(ctx, ws, id)
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
		it[attrVer] = num(rec.ver + 1)
		// The install counter is kept as it is (ADD by bots' changes).
		put := types.TransactWriteItem{Update: nil}
		names := map[string]string{"#doc": attrDoc, "#ver": attrVer, "#sum": attrSummary, "#g2pk": attrGSI2PK, "#g2sk": attrGSI2SK}
		vals := item{":doc": it[attrDoc], ":next": num(rec.ver + 1), ":ver": num(rec.ver), ":sum": it[attrSummary]}
		expr := "SET #doc = :doc, #ver = :next, #sum = :sum"
		if p.Visibility == platform.VisibilityPublic {
			expr += ", #g2pk = :g2pk, #g2sk = :g2sk"
			vals[":g2pk"], vals[":g2sk"] = it[attrGSI2PK], it[attrGSI2SK]
		} else {
			expr += " REMOVE #g2pk, #g2sk"
		}
		put.Update = &types.Update{
			Key: key(pluginPK(id), skPlugin), UpdateExpression: aws.String(expr),
			ConditionExpression:      aws.String("#ver = :ver"),
			ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
		}
		items := []types.TransactWriteItem{put}
		if p.Visibility != rec.Visibility {
			items = append(items, types.TransactWriteItem{Put: &types.Put{Item: pluginSlot(p)}})
			if p.Shared() {
				items = append(items, claimPluginName(ws, p.Name))
			}
		}
		err = s.transact(ctx, items, func(idx int) error {
			if idx == 2 {
				return errPluginNameTaken(p.Name)
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
	rec, err := s.ownPlugin(ctx, ws, id)
	if err != nil {
		return platform.Plugin{}, err
	}
	err = s.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			Key:                       key(pluginPK(id), skPlugin),
			ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(#n) OR #n <= :zero)"),
			ExpressionAttributeNames:  map[string]string{"#n": attrInstalls},
			ExpressionAttributeValues: item{":zero": num(0)},
		}},
		{Delete: &types.Delete{
			Key:                       key(pluginNamePK(ws, rec.Name), intNameSK(rec.Version)),
			ConditionExpression:       aws.String("pluginId = :id"),
			ExpressionAttributeValues: item{":id": str(id)},
		}},
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

// PluginFilter selects a catalogue's versions: all, a name's, or one name
// and version (a version alone filters the pages).
type PluginFilter struct{ Name, Version string }

// ListPlugins lists the versions of workspace ws (public false) or the
// listed versions of every workspace (public true), by name then version:
// one Query page on gsi1 or gsi2, list attributes only.
func (s *Store) ListPlugins(ctx context.Context, ws string, public bool, f PluginFilter, p Page) ([]platform.PluginSummary, map[string]string, error) {
	index, pkAttr, skAttr, pk := GSI1, attrGSI1PK, attrGSI1SK, workspacePluginsGSI(ws)
	if public {
		index, pkAttr, skAttr, pk = GSI2, attrGSI2PK, attrGSI2SK, publicPluginsGSI
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
		in.ExpressionAttributeValues[":sk"] = str(pluginListSK(f.Name, f.Version))
	case f.Name != "":
		*in.KeyConditionExpression += " AND begins_with(#sk, :sk)"
		in.ExpressionAttributeNames["#sk"] = skAttr
		in.ExpressionAttributeValues[":sk"] = str(pluginListSK(f.Name, ""))
	case f.Version != "":
		in.FilterExpression = aws.String("#v = :v")
		in.ExpressionAttributeNames["#v"] = "version"
		in.ExpressionAttributeValues[":v"] = str(f.Version)
	}
	items, next, err := s.queryPage(ctx, in, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.PluginSummary, 0, len(items))
	for _, it := range items {
		var sum platform.PluginSummary
		if err := json.Unmarshal([]byte(getS(it, attrSummary)), &sum); err != nil {
			return nil, nil, err
		}
		out = append(out, sum)
	}
	return out, next, nil
}

// checkNoPlugins refuses while workspace ws has plugin versions (one Query
// of at most one item).
func (s *Store) checkNoPlugins(ctx context.Context, ws string) error {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(workspacePluginsGSI(ws))},
		Limit:                     aws.Int32(1),
	})
	if err != nil {
		return err
	}
	if len(out.Items) > 0 {
		return platform.Errorf(platform.ErrReferenceConstrain, "workspace %q still has plugins: delete them first", ws)
	}
	return nil
}

// CheckPlugin reports whether p fits in an item (before anything is
// written for it).
func (s *Store) CheckPlugin(p platform.Plugin) error {
	_, err := pluginItem(p)
	return err
}
