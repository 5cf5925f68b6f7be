package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Plugins: versions as for integrations and interfaces ((workspace, name,
// version) created once, a shared name one workspace's; a workspace reads
// its own and every shared one, changes only its own). Their code (node
// and browser bundles), icon and readme live in the file storage, keyed by
// their content's hash; the DynamoDB item names them. Dependencies name
// interfaces and integrations of the catalogue, resolved when written. See
// docs/hub.md.

// pluginBody is createPlugin's and updatePlugin's body (the reference
// schema has validated which fields each takes). Maps are patched entry by
// entry on update (null removes an entry).
type pluginBody struct {
	Name          *string                    `json:"name"`
	Version       *string                    `json:"version"`
	Configuration json.RawMessage            `json:"configuration"`
	States        map[string]json.RawMessage `json:"states"`
	Events        map[string]json.RawMessage `json:"events"`
	Actions       map[string]json.RawMessage `json:"actions"`
	User          *tagsPatch                 `json:"user"`
	Conversation  *tagsPatch                 `json:"conversation"`
	Attributes    map[string]*string         `json:"attributes"`
	SDKVersion    *string                    `json:"sdkVersion"`
	Code          *struct {
		Node    *string `json:"node"`
		Browser *string `json:"browser"`
	} `json:"code"`
	Icon         *string `json:"icon"`
	Readme       *string `json:"readme"`
	Title        *string `json:"title"`
	Description  *string `json:"description"`
	Public       *bool   `json:"public"`
	Visibility   *string `json:"visibility"`
	Dependencies *struct {
		Interfaces   map[string]json.RawMessage `json:"interfaces"`
		Integrations map[string]json.RawMessage `json:"integrations"`
	} `json:"dependencies"`
}

const pluginConfigurationDefault = `{"schema":{}}`

// pluginAssets are a body's decoded code bundles, icon and readme, to
// store before the record that names them.
type pluginAssets struct {
	node, browser *string
	icons         integrationAssets
}

func applyPluginBody(p *platform.Plugin, in *pluginBody) {
	if len(in.Configuration) > 0 {
		p.Configuration = json.RawMessage(pluginConfigurationDefault)
		if !isNull(in.Configuration) {
			p.Configuration = stripNulls(in.Configuration)
		}
	}
	p.States = patchDefinitions(p.States, in.States, plain)
	p.Events = patchDefinitions(p.Events, in.Events, plain)
	p.Actions = patchDefinitions(p.Actions, in.Actions, plain)
	if in.User != nil {
		p.User.Tags = patchDefinitions(p.User.Tags, in.User.Tags, plain)
	}
	if in.Conversation != nil {
		p.Conversation.Tags = patchDefinitions(p.Conversation.Tags, in.Conversation.Tags, plain)
	}
	p.Attributes = patchAttributes(p.Attributes, in.Attributes)
	if in.SDKVersion != nil {
		p.SDKVersion = *in.SDKVersion
	}
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Description != nil {
		p.Description = *in.Description
	}
	switch {
	case in.Visibility != nil:
		p.Visibility = *in.Visibility
	case in.Public != nil && *in.Public:
		p.Visibility = platform.VisibilityPublic
	case in.Public != nil:
		p.Visibility = platform.VisibilityPrivate
	}
	p.Public = p.Visibility == platform.VisibilityPublic
}

// resolvePluginDependencies names each dependency from the catalogue: an
// entry gives an id, or a name and a version (or "latest"), of an
// interface or integration the workspace may read. Anything else is a
// ReferenceNotFound naming the entry.
func (s *server) resolvePluginDependencies(c *call, p *platform.Plugin, in *pluginBody) error {
	if p.Dependencies.Interfaces == nil {
		p.Dependencies.Interfaces = map[string]platform.PluginDependency{}
	}
	if p.Dependencies.Integrations == nil {
		p.Dependencies.Integrations = map[string]platform.PluginDependency{}
	}
	if in.Dependencies == nil {
		return nil
	}
	for _, kind := range []string{"interfaces", "integrations"} {
		patch, dst := in.Dependencies.Interfaces, p.Dependencies.Interfaces
		if kind == "integrations" {
			patch, dst = in.Dependencies.Integrations, p.Dependencies.Integrations
		}
		for _, alias := range keysOf(patch) {
			field := "dependencies." + kind + "." + alias
			if isNull(patch[alias]) {
				delete(dst, alias)
				continue
			}
			var ref platform.PluginDependency
			if err := json.Unmarshal(patch[alias], &ref); err != nil {
				return platform.Invalid("invalid body: field %q: %v", field, err)
			}
			dep, err := s.resolveDependency(c, kind, ref)
			if err != nil {
				return platform.Errorf(platform.ErrReferenceNotFound, "invalid body: field %q: %s", field, errMessage(err))
			}
			dst[alias] = dep
		}
	}
	return nil
}

func (s *server) resolveDependency(c *call, kind string, ref platform.PluginDependency) (platform.PluginDependency, error) {
	what := strings.TrimSuffix(kind, "s")
	switch {
	case ref.ID != "":
		if kind == "interfaces" {
			r, err := s.visibleInterface(c, ref.ID)
			return platform.PluginDependency{ID: r.ID, Name: r.Name, Version: r.Version}, err
		}
		r, err := s.Store.GetIntegration(c.ctx, ref.ID)
		if err == nil && (!r.VisibleTo(c.workspaceID) || r.Dev) {
			err = platform.NotFound(what, ref.ID)
		}
		return platform.PluginDependency{ID: r.ID, Name: r.Name, Version: r.Version}, err
	case ref.Name != "" && ref.Version != "":
		if err := checkVersionParam(ref.Version); err != nil {
			return platform.PluginDependency{}, err
		}
		if kind == "interfaces" {
			r, err := s.Store.InterfaceByName(c.ctx, c.workspaceID, ref.Name, ref.Version)
			return platform.PluginDependency{ID: r.ID, Name: r.Name, Version: r.Version}, err
		}
		r, err := s.Store.IntegrationByName(c.ctx, c.workspaceID, ref.Name, ref.Version)
		return platform.PluginDependency{ID: r.ID, Name: r.Name, Version: r.Version}, err
	}
	return platform.PluginDependency{}, platform.Invalid("give the %s's id, or its name and version", what)
}

// checkSharedPluginInterfaces refuses a shared (public or unlisted) version
// depending on an interface that is not public: the workspaces and the hub
// reading the plugin may not read that interface, and its dereferenced view
// would otherwise carry the interface's schemas to them.
func (s *server) checkSharedPluginInterfaces(c *call, p platform.Plugin) error {
	if !p.Shared() || len(p.Dependencies.Interfaces) == 0 {
		return nil
	}
	ids := make([]string, 0, len(p.Dependencies.Interfaces))
	for _, d := range p.Dependencies.Interfaces {
		ids = append(ids, d.ID)
	}
	found, err := s.Store.InterfacesByID(c.ctx, ids)
	if err != nil {
		return err
	}
	for _, alias := range keysOf(p.Dependencies.Interfaces) {
		d := p.Dependencies.Interfaces[alias]
		if i, ok := found[d.ID]; ok && !i.Public {
			return platform.Invalid("invalid body: field %q: interface %s %s is not public; a %s plugin may depend only on public interfaces", "dependencies.interfaces."+alias, d.Name, d.Version, p.Visibility)
		}
	}
	return nil
}

// decodePluginAssets checks a body's code, icon and readme.
func decodePluginAssets(in *pluginBody) (pluginAssets, error) {
	var a pluginAssets
	if in.Code != nil {
		a.node, a.browser = in.Code.Node, in.Code.Browser
	}
	var err error
	a.icons, err = decodeAssets(&integrationBody{Icon: in.Icon, Readme: in.Readme})
	return a, err
}

// storePluginAssets writes the given assets of p to the file storage and
// points p at them (content-addressed: a retry writes the same keys).
func (s *server) storePluginAssets(c *call, p *platform.Plugin, a pluginAssets) error {
	origin := strings.TrimSuffix(webhookBase(c), "/webhooks")
	bytesOf := func(code *string) []byte {
		if code == nil {
			return nil
		}
		return []byte(*code)
	}
	return s.storeFiles(c, CodeKeyPrefix+"plugins/"+p.ID+"/", origin+"/v1/admin/plugins/"+p.ID+"/assets/", []assetFile{
		{a.node != nil, bytesOf(a.node), "node-%s.js", "application/javascript", &p.CodeNodeKey, nil},
		{a.browser != nil, bytesOf(a.browser), "browser-%s.js", "application/javascript", &p.CodeBrowserKey, nil},
		{a.icons.given[1], a.icons.icon, "icon-%s.svg", "image/svg+xml", &p.IconKey, &p.IconURL},
		{a.icons.given[2], a.icons.readme, "readme-%s.md", "text/markdown; charset=utf-8", &p.ReadmeKey, &p.ReadmeURL},
	})
}

// pluginKeys are the file storage keys a plugin version names.
func pluginKeys(p platform.Plugin) []string {
	return []string{p.CodeNodeKey, p.CodeBrowserKey, p.IconKey, p.ReadmeKey}
}

func (s *server) createPlugin(c *call) (any, error) {
	var in pluginBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	name, version := deref(in.Name), deref(in.Version)
	if err := checkNameVersion(name, version); err != nil {
		return nil, err
	}
	if in.Code == nil || in.Code.Node == nil || in.Code.Browser == nil || *in.Code.Node == "" {
		return nil, platform.Invalid("invalid body: field \"code.node\": a plugin version needs its code (node and browser)")
	}
	now := platform.Now()
	p := platform.Plugin{
		ID: platform.NewID(platform.PrefixPlugin), CreatedAt: now, UpdatedAt: now, Name: name, Version: version,
		Configuration: json.RawMessage(pluginConfigurationDefault), Title: name, Visibility: platform.VisibilityPrivate,
		LifecycleStatus: "published", WorkspaceID: c.workspaceID,
		States: map[string]json.RawMessage{}, Events: map[string]json.RawMessage{}, Actions: map[string]json.RawMessage{},
		User: platform.PluginTags{Tags: map[string]json.RawMessage{}}, Conversation: platform.PluginTags{Tags: map[string]json.RawMessage{}},
	}
	applyPluginBody(&p, &in)
	if err := s.resolvePluginDependencies(c, &p, &in); err != nil {
		return nil, err
	}
	if err := s.checkSharedPluginInterfaces(c, p); err != nil {
		return nil, err
	}
	assets, err := decodePluginAssets(&in)
	if err != nil {
		return nil, err
	}
	// The record is checked whole (size included), and its name and
	// version free, before any object is written: a refused version leaves
	// nothing behind. A slot taken between the check and the write (the
	// write is conditional) gets its 409 too, and the objects stored for
	// the refused version (under its new id: nothing else names them) are
	// deleted.
	if err := s.Store.CheckPluginCreation(c.ctx, p); err != nil {
		return nil, err
	}
	if err := s.storePluginAssets(c, &p, assets); err != nil {
		s.dropReplaced(context.WithoutCancel(c.ctx), pluginKeys(p), nil, nil)
		return nil, err
	}
	if err := s.Store.CreatePlugin(c.ctx, p); err != nil {
		s.dropReplaced(context.WithoutCancel(c.ctx), pluginKeys(p), nil, nil)
		return nil, err
	}
	return map[string]any{"plugin": p}, nil
}

// visiblePlugin reads a plugin version the caller's workspace may read: its
// own, or another's shared one; else not found.
func (s *server) visiblePlugin(c *call, id string) (dynamo.PluginRecord, error) {
	r, err := s.Store.GetPlugin(c.ctx, id)
	if err == nil && !r.VisibleTo(c.workspaceID) {
		err = platform.NotFound("plugin", id)
	}
	return r, err
}

// sharedPlugin reads a shared (public or unlisted) version: the hub's reads.
func (s *server) sharedPlugin(c *call, id string) (dynamo.PluginRecord, error) {
	r, err := s.Store.GetPlugin(c.ctx, id)
	if err == nil && !r.Shared() {
		err = platform.NotFound("plugin", id)
	}
	return r, err
}

func (s *server) getPlugin(c *call) (any, error) {
	r, err := s.visiblePlugin(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"plugin": r.Plugin}, nil
}

func (s *server) getPluginByName(c *call) (any, error) {
	name, version, err := c.nameVersionParams()
	if err != nil {
		return nil, err
	}
	r, err := s.Store.PluginByName(c.ctx, c.workspaceID, name, version)
	if err != nil {
		return nil, err
	}
	return map[string]any{"plugin": r.Plugin}, nil
}

func (s *server) updatePlugin(c *call) (any, error) {
	var in pluginBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	id := c.PathValue("id")
	assets, err := decodePluginAssets(&in)
	if err != nil {
		return nil, err
	}
	// Dependencies and assets are resolved and written once, for a version
	// the workspace owns, before the record is changed.
	cur, err := s.Store.OwnPlugin(c.ctx, c.workspaceID, id)
	if err != nil {
		return nil, err
	}
	deps := cur.Plugin
	if err := s.resolvePluginDependencies(c, &deps, &in); err != nil {
		return nil, err
	}
	probe := cur.Plugin
	applyPluginBody(&probe, &in)
	probe.Dependencies = deps.Dependencies
	if err := s.checkSharedPluginInterfaces(c, probe); err != nil {
		return nil, err
	}
	if err := s.Store.CheckPlugin(probe); err != nil {
		return nil, err
	}
	if err := s.storePluginAssets(c, &probe, assets); err != nil {
		return nil, err
	}
	p, err := s.Store.UpdatePlugin(c.ctx, c.workspaceID, id, func(p *platform.Plugin) error {
		applyPluginBody(p, &in)
		p.Dependencies = deps.Dependencies
		if in.Code != nil && in.Code.Node != nil {
			p.CodeNodeKey = probe.CodeNodeKey
		}
		if in.Code != nil && in.Code.Browser != nil {
			p.CodeBrowserKey = probe.CodeBrowserKey
		}
		if assets.icons.given[1] {
			p.IconKey, p.IconURL = probe.IconKey, probe.IconURL
		}
		if assets.icons.given[2] {
			p.ReadmeKey, p.ReadmeURL = probe.ReadmeKey, probe.ReadmeURL
		}
		return nil
	})
	// Files the version no longer names (replaced; or written for an
	// update that failed) go, once the record is read again.
	before := append(pluginKeys(cur.Plugin), pluginKeys(probe)...)
	if err != nil {
		s.dropReplaced(context.WithoutCancel(c.ctx), before, pluginKeys(cur.Plugin), s.pluginKeysNow(id))
		return nil, err
	}
	s.dropReplaced(c.ctx, before, pluginKeys(p), s.pluginKeysNow(id))
	return map[string]any{"plugin": p}, nil
}

// pluginKeysNow reads the file storage keys plugin id names now.
func (s *server) pluginKeysNow(id string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		rec, err := s.Store.GetPlugin(ctx, id)
		return pluginKeys(rec.Plugin), err
	}
}

func (s *server) deletePlugin(c *call) (any, error) {
	p, err := s.Store.DeletePlugin(c.ctx, c.workspaceID, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	// Its files are its own (code/plugins/<id>/...): nothing else names them.
	s.dropReplaced(c.ctx, pluginKeys(p), nil, nil)
	return nil, nil
}

// listPlugins lists the workspace's own versions, by name then version.
func (s *server) listPlugins(c *call) (any, error) { return s.pluginList(c, c.workspaceID, false) }

// listPublicPlugins lists every workspace's public versions (unlisted ones
// are reachable by id and name only).
func (s *server) listPublicPlugins(c *call) (any, error) { return s.pluginList(c, "", true) }

func (s *server) pluginList(c *call, ws string, public bool) (any, error) {
	return catalogueList(c, "plugins", []any{"plugins", ws, public}, func(f dynamo.CatalogueFilter, p dynamo.Page) ([]platform.PluginSummary, map[string]string, error) {
		return s.Store.ListPlugins(c.ctx, ws, public, f, p)
	})
}

func (s *server) getPublicPluginByID(c *call) (any, error) {
	r, err := s.sharedPlugin(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"plugin": r.Plugin}, nil
}

func (s *server) getPublicPlugin(c *call) (any, error) {
	name, version, err := c.nameVersionParams()
	if err != nil {
		return nil, err
	}
	r, err := s.Store.PluginByName(c.ctx, "", name, version)
	if err != nil {
		return nil, err
	}
	return map[string]any{"plugin": r.Plugin}, nil
}

func (s *server) getPluginCode(c *call) (any, error) {
	r, err := s.visiblePlugin(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.pluginCode(c, r.Plugin)
}

func (s *server) getPublicPluginCode(c *call) (any, error) {
	r, err := s.sharedPlugin(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.pluginCode(c, r.Plugin)
}

// pluginCode answers a version's bundle for a platform (node or browser),
// read from the file storage.
func (s *server) pluginCode(c *call, p platform.Plugin) (any, error) {
	k := p.CodeNodeKey
	switch c.PathValue("platform") {
	case "node":
	case "browser":
		k = p.CodeBrowserKey
	default:
		return nil, platform.Invalid("platform must be node or browser")
	}
	if k == "" {
		return map[string]any{"code": ""}, nil
	}
	if s.Files == nil {
		return nil, errors.New("no file storage configured for plugin code")
	}
	body, _, err := s.Files.Open(c.ctx, k, "")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	return map[string]any{"code": string(b)}, nil
}

func (s *server) getDereferencedPlugin(c *call) (any, error) {
	r, err := s.visiblePlugin(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.dereferencedPlugin(c, r.Plugin, c.workspaceID)
}

func (s *server) getDereferencedPublicPluginByID(c *call) (any, error) {
	r, err := s.sharedPlugin(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.dereferencedPlugin(c, r.Plugin, "")
}

// dereferencedPlugin resolves the plugin's references to its interfaces'
// entities ({"$ref": "interface:<alias>/entities/<entity>"}, as the SDK
// writes them) with the entity schemas of the integrations the query's
// interfaces.<alias>=<integration id> map names: the entity the
// integration implements the interface's with, else the interface's own
// schema (only when the caller may read the interface). ws is the
// workspace whose integrations and interfaces the caller may use besides
// the shared ones ("" in the hub: shared ones only).
func (s *server) dereferencedPlugin(c *call, p platform.Plugin, ws string) (any, error) {
	mapping := c.query().object("interfaces")
	for alias := range mapping {
		if _, ok := p.Dependencies.Interfaces[alias]; !ok {
			return nil, platform.Invalid("query parameter \"interfaces.%s\": plugin %s %s has no interface %q", alias, p.Name, p.Version, alias)
		}
	}
	ids, ifaceIDs := []string{}, []string{}
	for _, alias := range keysOf(p.Dependencies.Interfaces) {
		if mapping[alias] == "" {
			return nil, platform.Invalid("query parameter \"interfaces.%s\" is required: the integration implementing the plugin's interface %q", alias, alias)
		}
		ids = append(ids, mapping[alias])
		ifaceIDs = append(ifaceIDs, p.Dependencies.Interfaces[alias].ID)
	}
	ints, err := s.Store.IntegrationsByID(c.ctx, ids)
	if err != nil {
		return nil, err
	}
	ifaces, err := s.Store.InterfacesByID(c.ctx, ifaceIDs)
	if err != nil {
		return nil, err
	}
	schemas := map[string]json.RawMessage{} // "interface:<alias>/entities/<name>" -> schema
	for _, alias := range keysOf(p.Dependencies.Interfaces) {
		dep := p.Dependencies.Interfaces[alias]
		i, ok := ints[mapping[alias]]
		shared := !i.Dev && platform.SharedVisibility(i.Visibility)
		if !ok || !(ws != "" && i.WorkspaceID == ws || shared) {
			return nil, platform.Errorf(platform.ErrReferenceNotFound, "query parameter \"interfaces.%s\": integration %q not found", alias, mapping[alias])
		}
		impl, _, ok := implementationOf(i, dep, "")
		if !ok {
			return nil, platform.Errorf(platform.ErrReferenceNotFound, "query parameter \"interfaces.%s\": integration %s %s does not implement interface %s %s", alias, i.Name, i.Version, dep.Name, dep.Version)
		}
		// Only an interface the caller may read lends its schemas (its own
		// workspace's, or a public one; the hub's, public ones only): one
		// it may not is as if absent, so a reference only it would resolve
		// is a ReferenceNotFound that reveals nothing of it.
		iface, ok := ifaces[dep.ID]
		if ok && !iface.Public && (ws == "" || iface.WorkspaceID != ws) {
			iface = platform.Interface{}
		}
		for name, raw := range iface.Entities {
			var e struct {
				Schema json.RawMessage `json:"schema"`
			}
			_ = json.Unmarshal(raw, &e)
			if target := impl.Entities[name].Name; target != "" {
				var ie struct {
					Schema json.RawMessage `json:"schema"`
				}
				if json.Unmarshal(i.Entities[target], &ie) == nil && len(ie.Schema) > 0 {
					e.Schema = ie.Schema
				}
			}
			schemas["interface:"+alias+"/entities/"+name] = e.Schema
		}
		// Entities the integration maps without the interface declaring them.
		for name, m := range impl.Entities {
			ref := "interface:" + alias + "/entities/" + name
			if _, ok := schemas[ref]; ok {
				continue
			}
			var ie struct {
				Schema json.RawMessage `json:"schema"`
			}
			if json.Unmarshal(i.Entities[m.Name], &ie) == nil && len(ie.Schema) > 0 {
				schemas[ref] = ie.Schema
			}
		}
	}
	out := p
	var unresolved string
	deref := func(defs map[string]json.RawMessage) map[string]json.RawMessage {
		res := make(map[string]json.RawMessage, len(defs))
		for k, raw := range defs {
			var v any
			if json.Unmarshal(raw, &v) != nil {
				res[k] = raw
				continue
			}
			v = replaceRefs(v, schemas, &unresolved)
			res[k], _ = json.Marshal(v)
		}
		return res
	}
	out.States, out.Events, out.Actions = deref(p.States), deref(p.Events), deref(p.Actions)
	if unresolved != "" {
		return nil, platform.Errorf(platform.ErrReferenceNotFound, "the plugin refers to %q, which no interface of the mapping declares", unresolved)
	}
	return map[string]any{"plugin": out}, nil
}

// interfaceImpl is an integration's implementation of an interface: its
// entities mapped to the integration's.
type interfaceImpl struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	Entities map[string]struct {
		Name string `json:"name"`
	} `json:"entities"`
}

// replaceRefs replaces, anywhere in v, an object {"$ref": "interface:..."}
// by the schema it names (its other keys kept over the schema's).
func replaceRefs(v any, schemas map[string]json.RawMessage, unresolved *string) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			name := strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/")
			if strings.HasPrefix(name, "interface:") {
				raw, found := schemas[name]
				if !found {
					if *unresolved == "" {
						*unresolved = ref
					}
					return x
				}
				var sch map[string]any
				_ = json.Unmarshal(raw, &sch)
				if sch == nil {
					sch = map[string]any{}
				}
				for k, val := range x {
					if k != "$ref" {
						sch[k] = replaceRefs(val, schemas, unresolved)
					}
				}
				return sch
			}
		}
		for k, val := range x {
			x[k] = replaceRefs(val, schemas, unresolved)
		}
		return x
	case []any:
		for i := range x {
			x[i] = replaceRefs(x[i], schemas, unresolved)
		}
	}
	return v
}
