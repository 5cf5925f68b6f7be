package httpapi

import (
	"encoding/json"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Interfaces: what integrations implementing them must provide. Versions
// as for integrations: (workspace, name, version) created once, a public
// name one workspace's; a workspace reads its own and every public one,
// changes only its own. See docs/hub.md.

// interfaceBody is createInterface's and updateInterface's body (each a
// subset; the reference schema has validated which). Maps are patched
// entry by entry on update (null removes an entry).
type interfaceBody struct {
	Name         *string                    `json:"name"`
	Version      *string                    `json:"version"`
	Entities     map[string]json.RawMessage `json:"entities"`
	Events       map[string]json.RawMessage `json:"events"`
	Actions      map[string]json.RawMessage `json:"actions"`
	Channels     map[string]json.RawMessage `json:"channels"`
	NameTemplate json.RawMessage            `json:"nameTemplate"`
	Attributes   map[string]*string         `json:"attributes"`
	SDKVersion   *string                    `json:"sdkVersion"`
	// Icon and readme (base64) are accepted; storing them is the code
	// storage's work (iconUrl and readmeUrl stay empty until then).
	Icon        *string `json:"icon"`
	Readme      *string `json:"readme"`
	Title       *string `json:"title"`
	Description *string `json:"description"`
	Public      *bool   `json:"public"`
}

func applyInterfaceBody(i *platform.Interface, in *interfaceBody) {
	i.Entities = patchDefinitions(i.Entities, in.Entities, plain)
	i.Events = patchDefinitions(i.Events, in.Events, plain)
	i.Actions = patchDefinitions(i.Actions, in.Actions, plain)
	i.Channels = patchDefinitions(i.Channels, in.Channels, plain)
	if len(in.NameTemplate) > 0 {
		i.NameTemplate = nil
		if !isNull(in.NameTemplate) {
			i.NameTemplate = stripNulls(in.NameTemplate)
		}
	}
	i.Attributes = patchAttributes(i.Attributes, in.Attributes)
	if in.Title != nil {
		i.Title = *in.Title
	}
	if in.Description != nil {
		i.Description = *in.Description
	}
	if in.Public != nil {
		i.Public = *in.Public
	}
}

func (s *server) createInterface(c *call) (any, error) {
	var in interfaceBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	name, version := deref(in.Name), deref(in.Version)
	if err := checkNameVersion(name, version); err != nil {
		return nil, err
	}
	now := platform.Now()
	i := platform.Interface{
		ID: platform.NewID(platform.PrefixInterface), CreatedAt: now, UpdatedAt: now,
		Name: name, Version: version, Title: name, WorkspaceID: c.workspaceID,
	}
	applyInterfaceBody(&i, &in)
	if err := s.Store.CreateInterface(c.ctx, i); err != nil {
		return nil, err
	}
	return map[string]any{"interface": i}, nil
}

// visibleInterface reads an interface the caller's workspace may read:
// its own, or another's public one; else not found.
func (s *server) visibleInterface(c *call, id string) (platform.Interface, error) {
	r, err := s.Store.GetInterface(c.ctx, id)
	if err == nil && !r.VisibleTo(c.workspaceID) {
		err = platform.NotFound("interface", id)
	}
	return r.Interface, err
}

func (s *server) getInterface(c *call) (any, error) {
	i, err := s.visibleInterface(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"interface": i}, nil
}

func (s *server) getInterfaceByName(c *call) (any, error) {
	name, version, err := c.nameVersionParams()
	if err != nil {
		return nil, err
	}
	r, err := s.Store.InterfaceByName(c.ctx, c.workspaceID, name, version)
	if err != nil {
		return nil, err
	}
	return map[string]any{"interface": r.Interface}, nil
}

func (s *server) updateInterface(c *call) (any, error) {
	var in interfaceBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	i, err := s.Store.UpdateInterface(c.ctx, c.workspaceID, c.PathValue("id"), func(i *platform.Interface) error {
		applyInterfaceBody(i, &in)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"interface": i}, nil
}

func (s *server) deleteInterface(c *call) (any, error) {
	return nil, s.Store.DeleteInterface(c.ctx, c.workspaceID, c.PathValue("id"))
}

// listInterfaces lists the workspace's own versions, by name then version.
func (s *server) listInterfaces(c *call) (any, error) {
	return s.interfaceList(c, c.workspaceID, false)
}

// listPublicInterfaces lists every workspace's public versions.
func (s *server) listPublicInterfaces(c *call) (any, error) {
	return s.interfaceList(c, "", true)
}

func (s *server) interfaceList(c *call, ws string, public bool) (any, error) {
	return catalogueList(c, "interfaces", []any{ws, public}, func(f dynamo.CatalogueFilter, p dynamo.Page) ([]platform.InterfaceSummary, map[string]string, error) {
		return s.Store.ListInterfaces(c.ctx, ws, public, f, p)
	})
}

func (s *server) getPublicInterfaceByID(c *call) (any, error) {
	id := c.PathValue("id")
	r, err := s.Store.GetInterface(c.ctx, id)
	if err == nil && !r.Public {
		err = platform.NotFound("interface", id)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"interface": r.Interface}, nil
}

func (s *server) getPublicInterface(c *call) (any, error) {
	name, version, err := c.nameVersionParams()
	if err != nil {
		return nil, err
	}
	r, err := s.Store.InterfaceByName(c.ctx, "", name, version)
	if err != nil {
		return nil, err
	}
	return map[string]any{"interface": r.Interface}, nil
}

// resolveInterfaces names the interfaces an integration version implements
// from the catalogue: an entry whose id is an interface the workspace may
// read (its own or a public one) takes that interface's name and version,
// as the CLI's deploy sends only the id (one BatchGetItem). An entry naming
// no such interface keeps its key as name and an empty version.
func (s *server) resolveInterfaces(c *call, i *platform.Integration) error {
	if len(i.Interfaces) == 0 {
		return nil
	}
	type ref struct {
		ID string `json:"id"`
	}
	ids := make([]string, 0, len(i.Interfaces))
	for _, raw := range i.Interfaces {
		var r ref
		if json.Unmarshal(raw, &r) == nil && r.ID != "" {
			ids = append(ids, r.ID)
		}
	}
	found, err := s.Store.InterfacesByID(c.ctx, ids)
	if err != nil {
		return err
	}
	for k, raw := range i.Interfaces {
		var entry map[string]json.RawMessage
		if json.Unmarshal(raw, &entry) != nil {
			continue
		}
		var id string
		_ = json.Unmarshal(entry["id"], &id)
		f, ok := found[id]
		if !ok || !f.VisibleTo(c.workspaceID) {
			continue
		}
		entry["name"], _ = json.Marshal(f.Name)
		entry["version"], _ = json.Marshal(f.Version)
		i.Interfaces[k], _ = json.Marshal(entry)
	}
	return nil
}
