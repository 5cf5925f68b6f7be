package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Integrations: the catalogue (a workspace's own versions and every
// workspace's public ones), integration API keys, and the operations
// ledger of calls made to integrations. See docs/bots.md.

// integrationBody is createIntegration's and updateIntegration's body (each
// a subset of it; the reference schema has validated which). Maps are
// patched entry by entry on update (null removes an entry).
type integrationBody struct {
	Name             *string                    `json:"name"`
	Version          *string                    `json:"version"`
	Configuration    json.RawMessage            `json:"configuration"`
	Configurations   map[string]json.RawMessage `json:"configurations"`
	States           map[string]json.RawMessage `json:"states"`
	Events           map[string]json.RawMessage `json:"events"`
	Actions          map[string]json.RawMessage `json:"actions"`
	Entities         map[string]json.RawMessage `json:"entities"`
	Channels         map[string]json.RawMessage `json:"channels"`
	Interfaces       map[string]json.RawMessage `json:"interfaces"`
	Attributes       map[string]*string         `json:"attributes"`
	Identifier       map[string]*string         `json:"identifier"`
	User             json.RawMessage            `json:"user"`
	ExtraOperations  json.RawMessage            `json:"extraOperations"`
	SDKVersion       *string                    `json:"sdkVersion"`
	Secrets          map[string]*string         `json:"secrets"`
	Code             *string                    `json:"code"`
	URL              json.RawMessage            `json:"url"`
	Dev              *bool                      `json:"dev"`
	Icon             *string                    `json:"icon"`
	Readme           *string                    `json:"readme"`
	Title            *string                    `json:"title"`
	Description      *string                    `json:"description"`
	Public           *bool                      `json:"public"`
	Visibility       *string                    `json:"visibility"`
	Layers           []string                   `json:"layers"`
	MaxExecutionTime *float64                   `json:"maxExecutionTime"`
	MaxConcurrency   *int64                     `json:"maxConcurrency"`
}

var integrationName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9_-]*)?$`)

// stripNulls removes null members of objects, except inside JSON schemas
// (where null is a value): the reference marks some definition fields
// nullable meaning "none".
func stripNulls(raw json.RawMessage) json.RawMessage {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return raw
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if c == nil {
					delete(x, k)
				} else if k != "schema" {
					x[k] = walk(c)
				}
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		}
		return v
	}
	b, _ := json.Marshal(walk(v))
	return b
}

// withDefaults fills the members a response requires: def is a JSON object
// of defaults, merged under raw one level deep (objects in both merge).
func withDefaults(raw json.RawMessage, def string) json.RawMessage {
	var d, v map[string]json.RawMessage
	_ = json.Unmarshal([]byte(def), &d)
	if len(raw) > 0 {
		_ = json.Unmarshal(stripNulls(raw), &v)
	}
	if v == nil {
		v = map[string]json.RawMessage{}
	}
	for k, dv := range d {
		cur, ok := v[k]
		if !ok {
			v[k] = dv
			continue
		}
		if strings.HasPrefix(string(dv), "{") && strings.HasPrefix(strings.TrimSpace(string(cur)), "{") {
			v[k] = withDefaults(cur, string(dv))
		}
	}
	b, _ := json.Marshal(v)
	return b
}

const (
	configurationDefaults = `{"identifier":{"required":false},"schema":{}}`
	channelDefaults       = `{"messages":{},"conversation":{"tags":{},"creation":{"enabled":false,"requiredTags":[]}},"message":{"tags":{}}}`
	userDefaults          = `{"tags":{},"creation":{"enabled":false,"requiredTags":[]}}`
	interfaceDefaults     = `{"version":"","entities":{},"actions":{},"events":{},"channels":{}}`
)

// patchDefinitions applies an entry patch to a definition map, each new
// entry normalized by norm.
func patchDefinitions(dst, patch map[string]json.RawMessage, norm func(k string, v json.RawMessage) json.RawMessage) map[string]json.RawMessage {
	if dst == nil {
		dst = map[string]json.RawMessage{}
	}
	for k, v := range patch {
		if isNull(v) {
			delete(dst, k)
		} else {
			dst[k] = norm(k, v)
		}
	}
	return dst
}

func plain(_ string, v json.RawMessage) json.RawMessage { return stripNulls(v) }

// applyIntegrationBody applies a create or update body to i.
func applyIntegrationBody(i *platform.Integration, in *integrationBody) error {
	if in.Title != nil {
		i.Title = *in.Title
	}
	if in.Description != nil {
		i.Description = *in.Description
	}
	if len(in.URL) > 0 {
		i.URL = ""
		if !isNull(in.URL) {
			_ = json.Unmarshal(in.URL, &i.URL)
			if err := checkURL("url", i.URL); err != nil {
				return err
			}
		}
	}
	if in.MaxExecutionTime != nil {
		if *in.MaxExecutionTime < 1 || *in.MaxExecutionTime > maxBotExecution {
			return platform.Invalid("invalid body: field \"maxExecutionTime\": must be from 1 to %d seconds", maxBotExecution)
		}
		v := *in.MaxExecutionTime
		i.MaxExecutionTime = &v
	}
	if in.MaxConcurrency != nil {
		if *in.MaxConcurrency < 1 {
			return platform.Invalid("invalid body: field \"maxConcurrency\": must be at least 1")
		}
		v := *in.MaxConcurrency
		i.MaxConcurrency = &v
	}
	switch {
	case in.Visibility != nil:
		i.Visibility = *in.Visibility
	case in.Public != nil && *in.Public:
		i.Visibility = platform.VisibilityPublic
	case in.Public != nil:
		i.Visibility = platform.VisibilityPrivate
	}
	i.Public = i.Visibility == platform.VisibilityPublic
	if i.Dev && i.Visibility != platform.VisibilityPrivate {
		return platform.Invalid("invalid body: field \"visibility\": a dev integration is private")
	}
	if len(in.Configuration) > 0 {
		i.Configuration = withDefaults(in.Configuration, configurationDefaults)
	}
	i.Configurations = patchDefinitions(i.Configurations, in.Configurations, func(_ string, v json.RawMessage) json.RawMessage {
		return withDefaults(v, configurationDefaults)
	})
	i.Channels = patchDefinitions(i.Channels, in.Channels, func(_ string, v json.RawMessage) json.RawMessage {
		return withDefaults(v, channelDefaults)
	})
	i.Interfaces = patchDefinitions(i.Interfaces, in.Interfaces, func(k string, v json.RawMessage) json.RawMessage {
		// Without an interface catalogue, an interface is named by the key
		// the integration declares it under.
		n, _ := json.Marshal(map[string]string{"name": k})
		return withDefaults(v, strings.TrimSuffix(interfaceDefaults, "}")+","+strings.TrimPrefix(string(n), "{"))
	})
	i.States = patchDefinitions(i.States, in.States, plain)
	i.Events = patchDefinitions(i.Events, in.Events, plain)
	i.Actions = patchDefinitions(i.Actions, in.Actions, plain)
	i.Entities = patchDefinitions(i.Entities, in.Entities, plain)
	if len(in.User) > 0 {
		i.User = withDefaults(in.User, userDefaults)
	}
	if in.Identifier != nil {
		var id map[string]string
		_ = json.Unmarshal(i.Identifier, &id)
		if id == nil {
			id = map[string]string{}
		}
		for k, v := range in.Identifier {
			if v == nil {
				delete(id, k)
			} else {
				id[k] = *v
			}
		}
		i.Identifier, _ = json.Marshal(id)
	}
	i.Attributes = patchAttributes(i.Attributes, in.Attributes)
	for k, v := range in.Secrets {
		if !secretName.MatchString(k) {
			return platform.Invalid("invalid body: field %q: secret names are SCREAMING_SNAKE_CASE", "secrets."+k)
		}
		if i.SecretValues == nil {
			i.SecretValues = map[string]string{}
		}
		if v == nil {
			delete(i.SecretValues, k)
		} else {
			i.SecretValues[k] = *v
		}
	}
	i.Secrets = keysOf(i.SecretValues)
	return nil
}

// integrationView is an integration as the caller may see it: the signing
// secret only for developers (and above) of the owning workspace.
func integrationView(c *call, i platform.Integration) platform.Integration {
	if i.WorkspaceID != c.workspaceID || !c.role.AtLeast(platform.RoleDeveloper) {
		i.SigningSecret = ""
	}
	if i.Secrets == nil {
		i.Secrets = []string{}
	}
	return i
}

func (s *server) createIntegration(c *call) (any, error) {
	i, err := s.newIntegration(c, true)
	if err != nil {
		return nil, err
	}
	if err := s.Store.CreateIntegration(c.ctx, i); err != nil {
		// Refused (a name or version taken meanwhile): the files stored
		// for this new version name nothing.
		s.dropReplaced(context.WithoutCancel(c.ctx), integrationKeys(i), nil, nil)
		return nil, err
	}
	out := map[string]any{"integration": integrationView(c, i)}
	if err := s.deployIntegration(c, i); err != nil {
		return nil, committed(err, out)
	}
	return out, nil
}

// newIntegration is the version a createIntegration (or its validation)
// body describes, checked, its interfaces named from the catalogue; with
// store, its code, icon and readme are written to the file storage.
func (s *server) newIntegration(c *call, store bool) (platform.Integration, error) {
	var in integrationBody
	if err := c.decode(&in); err != nil {
		return platform.Integration{}, err
	}
	name, version := deref(in.Name), deref(in.Version)
	if err := checkNameVersion(name, version); err != nil {
		return platform.Integration{}, err
	}
	now := platform.Now()
	i := platform.Integration{
		ID: platform.NewID(platform.PrefixIntegration), CreatedAt: now, UpdatedAt: now,
		Identifier: json.RawMessage(`{}`), Sandbox: json.RawMessage(`{}`),
		SigningSecret: platform.NewSecret(), Name: name, Version: version,
		Configuration: json.RawMessage(configurationDefaults), User: json.RawMessage(userDefaults),
		Dev: in.Dev != nil && *in.Dev, Title: name, Visibility: platform.VisibilityPrivate,
		VerificationStatus: platform.VerificationUnapproved, LifecycleStatus: "published",
		WorkspaceID: c.workspaceID,
	}
	if err := applyIntegrationBody(&i, &in); err != nil {
		return i, err
	}
	assets, err := decodeAssets(&in)
	if err != nil {
		return i, err
	}
	if err := s.resolveInterfaces(c, &i); err != nil {
		return i, err
	}
	if store {
		// What CreateIntegration would refuse (a version or shared name
		// taken) is refused before any file is stored.
		if err := s.Store.CheckIntegrationCreation(c.ctx, i); err != nil {
			return i, err
		}
		err = s.storeAssets(c, &i, assets)
	}
	return i, err
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// visibleIntegration reads the integration of path {id} if the caller's
// workspace may see it: its own, or another's public or unlisted one.
func (s *server) visibleIntegration(c *call, id string) (platform.Integration, error) {
	r, err := s.Store.GetIntegration(c.ctx, id)
	if err != nil {
		return platform.Integration{}, err
	}
	if !r.VisibleTo(c.workspaceID) {
		return platform.Integration{}, platform.NotFound("integration", id)
	}
	return r.Integration, nil
}

// ownIntegration reads an integration of the caller's workspace: another
// workspace's is 404 (403 when the caller may see it but not change it).
func (s *server) ownIntegration(c *call, id string) (platform.Integration, error) {
	i, err := s.visibleIntegration(c, id)
	if err == nil && i.WorkspaceID != c.workspaceID {
		return i, platform.Forbidden("integration %q belongs to another workspace", id)
	}
	return i, err
}

func (s *server) getIntegration(c *call) (any, error) {
	i, err := s.visibleIntegration(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"integration": integrationView(c, i)}, nil
}

func (s *server) getIntegrationByName(c *call) (any, error) {
	name, version := c.PathValue("name"), c.PathValue("version")
	if _, ok := platform.ParseSemver(version); !ok && version != "latest" {
		return nil, platform.Invalid("version must be a semantic version or latest")
	}
	r, err := s.Store.IntegrationByName(c.ctx, c.workspaceID, name, version)
	if err != nil {
		return nil, err
	}
	return map[string]any{"integration": integrationView(c, r.Integration)}, nil
}

// integrationChange is the change an updateIntegration (or its
// validation) body describes.
// With store, its code, icon and readme are written to the file storage
// (once, though the change may be applied again on a conflict).
func (s *server) integrationChange(c *call, store bool) (func(*platform.Integration) error, error) {
	var in integrationBody
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	assets, err := decodeAssets(&in)
	if err != nil {
		return nil, err
	}
	var stored *platform.Integration
	return func(i *platform.Integration) error {
		if err := applyIntegrationBody(i, &in); err != nil {
			return err
		}
		if store {
			if stored == nil {
				stored = &platform.Integration{ID: i.ID, CodeKey: i.CodeKey, IconKey: i.IconKey, ReadmeKey: i.ReadmeKey, IconURL: i.IconURL, ReadmeURL: i.ReadmeURL}
				if err := s.storeAssets(c, stored, assets); err != nil {
					stored = nil
					return err
				}
			}
			for n, given := range assets.given {
				if given {
					switch n {
					case 0:
						i.CodeKey = stored.CodeKey
					case 1:
						i.IconKey, i.IconURL = stored.IconKey, stored.IconURL
					case 2:
						i.ReadmeKey, i.ReadmeURL = stored.ReadmeKey, stored.ReadmeURL
					}
				}
			}
		}
		if len(in.Interfaces) == 0 {
			return nil
		}
		return s.resolveInterfaces(c, i)
	}, nil
}

func (s *server) updateIntegration(c *call) (any, error) {
	change, err := s.integrationChange(c, true)
	if err != nil {
		return nil, err
	}
	var before []string
	i, err := s.Store.UpdateIntegration(c.ctx, c.workspaceID, c.PathValue("id"), func(i *platform.Integration) error {
		before = integrationKeys(*i)
		return change(i)
	})
	if err != nil {
		return nil, err
	}
	s.dropReplaced(c.ctx, before, integrationKeys(i), s.integrationKeysNow(i.ID))
	out := map[string]any{"integration": integrationView(c, i)}
	if err := s.deployIntegration(c, i); err != nil {
		return nil, committed(err, out)
	}
	return out, nil
}

// validateIntegrationCreation (bp deploy --dryRun) runs createIntegration's
// checks, the store's included (a version slot taken, a name published by
// another workspace, the size), and writes nothing.
func (s *server) validateIntegrationCreation(c *call) (any, error) {
	i, err := s.newIntegration(c, false)
	if err != nil {
		return nil, err
	}
	return nil, s.Store.CheckIntegrationCreation(c.ctx, i)
}

// validateIntegrationUpdate runs updateIntegration's checks and writes nothing.
func (s *server) validateIntegrationUpdate(c *call) (any, error) {
	change, err := s.integrationChange(c, false)
	if err != nil {
		return nil, err
	}
	return nil, s.Store.CheckIntegrationUpdate(c.ctx, c.workspaceID, c.PathValue("id"), change)
}

func (s *server) deleteIntegration(c *call) (any, error) {
	// Its objects: every key of a version is its own (read before the
	// deletion: whatever it named then is unreferenced after it).
	rec, _ := s.Store.GetIntegration(c.ctx, c.PathValue("id"))
	if err := s.Store.DeleteIntegration(c.ctx, c.workspaceID, c.PathValue("id")); err != nil {
		return nil, err
	}
	s.removeCode(c, "integration", c.PathValue("id"))
	if rec.ID == c.PathValue("id") {
		s.dropReplaced(c.ctx, integrationKeys(rec.Integration), nil, nil)
	}
	return nil, nil
}

func (s *server) requestIntegrationVerification(c *call) (any, error) {
	var in struct {
		IntegrationID string `json:"integrationId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	i, err := s.ownIntegration(c, in.IntegrationID)
	if err != nil {
		return nil, err
	}
	if i.Visibility != platform.VisibilityPublic {
		return nil, platform.Invalid("only a public integration can be verified: integration %q is %s", i.ID, i.Visibility)
	}
	if i.VerificationStatus == platform.VerificationPending {
		return nil, nil // already requested
	}
	_, err = s.Store.SetVerificationStatus(c.ctx, c.workspaceID, i.ID, platform.VerificationPending,
		platform.VerificationUnapproved, platform.VerificationRejected)
	return nil, err
}

// --- listIntegrations ---

// integrationQuery is listIntegrations' filters and order.
type integrationQuery struct {
	Name, Version, InterfaceID, InterfaceName string
	InstalledByBotID, VerificationStatus      string
	Search, SortBy, Direction, Visibility     string
	Dev                                       bool
}

func (c *call) integrationQuery() (integrationQuery, int32, error) {
	q := c.query()
	var f integrationQuery
	var err error
	for name, dst := range map[string]*string{
		"name": &f.Name, "version": &f.Version, "interfaceId": &f.InterfaceID, "interfaceName": &f.InterfaceName,
		"installedByBotId": &f.InstalledByBotID, "search": &f.Search,
	} {
		if *dst, err = q.str(name); err != nil {
			return f, 0, err
		}
	}
	if f.Version != "" && f.Version != "latest" {
		if _, ok := platform.ParseSemver(f.Version); !ok {
			return f, 0, platform.Invalid("query parameter \"version\" must be a semantic version or latest")
		}
	}
	if f.VerificationStatus, err = q.oneOf("verificationStatus", "", platform.VerificationUnapproved, platform.VerificationPending, platform.VerificationApproved, platform.VerificationRejected); err != nil {
		return f, 0, err
	}
	if f.SortBy, err = q.oneOf("sortBy", "createdAt", "popularity", "name", "createdAt", "updatedAt", "installCount"); err != nil {
		return f, 0, err
	}
	def := "desc"
	if f.SortBy == "name" {
		def = "asc"
	}
	if f.Direction, err = q.oneOf("direction", def, "asc", "desc"); err != nil {
		return f, 0, err
	}
	if f.Visibility, err = q.oneOf("visibility", "", platform.VisibilityPublic, platform.VisibilityPrivate); err != nil {
		return f, 0, err
	}
	dev, err := q.boolean("dev")
	if err != nil {
		return f, 0, err
	}
	f.Dev = dev != nil && *dev
	var limit int32
	if l, err := q.str("limit"); err != nil {
		return f, 0, err
	} else if l != "" {
		n, err := strconv.ParseFloat(l, 64)
		if err != nil || n != float64(int(n)) || n < 1 || n > maxPageSize {
			return f, 0, platform.Invalid("query parameter \"limit\" must be an integer from 1 to %d", maxPageSize)
		}
		limit = int32(n)
	}
	return f, limit, nil
}

func (s *server) listIntegrations(c *call) (any, error) {
	f, limit, err := c.integrationQuery()
	if err != nil {
		return nil, err
	}
	list := listKey(c.workspaceID, f)
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		p.Limit = limit
	}
	var cands []dynamo.IntegrationListing
	if f.InstalledByBotID != "" {
		b, err := s.Store.GetBot(c.ctx, f.InstalledByBotID)
		if err == nil && b.WorkspaceID != c.workspaceID {
			err = platform.NotFound("bot", f.InstalledByBotID)
		}
		if err != nil {
			return nil, err
		}
		ids := []string{}
		for _, in := range b.Installs {
			ids = append(ids, in.IntegrationID)
		}
		if cands, err = s.Store.IntegrationListingsByID(c.ctx, ids); err != nil {
			return nil, err
		}
	} else if cands, err = s.Store.ListIntegrationCandidates(c.ctx, c.workspaceID); err != nil {
		return nil, err
	}
	matched := filterIntegrations(c.workspaceID, cands, f)
	page, next := listingPage(matched, f, p)
	owners := make([]string, 0, len(page))
	for _, l := range page {
		owners = append(owners, l.WorkspaceID)
	}
	wss, err := s.Store.WorkspacesByID(c.ctx, owners)
	if err != nil {
		return nil, err
	}
	out := make([]platform.IntegrationSummary, 0, len(page))
	for _, l := range page {
		sum := l.IntegrationSummary
		if w, ok := wss[l.WorkspaceID]; ok {
			var h *string
			if w.Handle != "" {
				h = &w.Handle
			}
			sum.OwnerWorkspace = &platform.OwnerWorkspace{ID: w.ID, Handle: h, Name: w.Name}
		}
		if f.Search == "" {
			sum.MatchedOn = nil
		}
		out = append(out, sum)
	}
	return map[string]any{"integrations": out, "meta": c.meta(list, next)}, nil
}

// filterIntegrations keeps what the query selects and ws may see listed:
// its own versions, others' listed public ones.
func filterIntegrations(ws string, cands []dynamo.IntegrationListing, f integrationQuery) []dynamo.IntegrationListing {
	var out []dynamo.IntegrationListing
	for _, l := range cands {
		if l.WorkspaceID != ws && (l.Visibility != platform.VisibilityPublic || l.Dev) && f.InstalledByBotID == "" {
			continue
		}
		if l.WorkspaceID != ws && l.Visibility == platform.VisibilityPrivate {
			continue // never another workspace's private version, installed or not
		}
		if l.Dev != f.Dev {
			continue
		}
		out = append(out, l)
	}
	if f.Version == "latest" {
		out = latestOnly(out)
	}
	kept := out[:0]
	for _, l := range out {
		switch {
		case f.Name != "" && l.Name != f.Name,
			f.Version != "" && f.Version != "latest" && l.Version != f.Version,
			f.VerificationStatus != "" && l.VerificationStatus != f.VerificationStatus,
			f.Visibility != "" && l.Visibility != f.Visibility,
			f.InterfaceID != "" && !contains(l.InterfaceIDs, f.InterfaceID),
			f.InterfaceName != "" && !contains(l.Interfaces, f.InterfaceName):
			continue
		}
		if f.Search != "" {
			m := matchIntegration(l, f.Search)
			if m == nil {
				continue
			}
			l.MatchedOn = m
		}
		kept = append(kept, l)
	}
	return kept
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// latestOnly keeps the highest version of each integration (per owner and
// name).
func latestOnly(ls []dynamo.IntegrationListing) []dynamo.IntegrationListing {
	best := map[string]int{}
	for i, l := range ls {
		k := l.WorkspaceID + "\x00" + l.Name
		j, ok := best[k]
		if !ok || versionLess(ls[j].Version, l.Version) {
			best[k] = i
		}
	}
	out := make([]dynamo.IntegrationListing, 0, len(best))
	for i, l := range ls {
		if best[l.WorkspaceID+"\x00"+l.Name] == i {
			out = append(out, l)
		}
	}
	return out
}

func versionLess(a, b string) bool {
	va, okA := platform.ParseSemver(a)
	vb, okB := platform.ParseSemver(b)
	if okA && okB {
		return va.Less(vb)
	}
	return a < b
}

// matchIntegration matches a search term (case-insensitive substring) on
// name, title, description, action names and titles, and interface names.
func matchIntegration(l dynamo.IntegrationListing, term string) *platform.MatchedOn {
	t := strings.ToLower(strings.TrimSpace(term))
	has := func(s string) bool { return t != "" && strings.Contains(strings.ToLower(s), t) }
	m := &platform.MatchedOn{Name: has(l.Name), Title: has(l.Title), Description: has(l.Description), Actions: []string{}, Interfaces: []string{}}
	for i, a := range l.Actions {
		if has(a) || has(l.ActionTitles[i]) {
			m.Actions = append(m.Actions, a)
		}
	}
	for _, n := range l.Interfaces {
		if has(n) {
			m.Interfaces = append(m.Interfaces, n)
		}
	}
	if !m.Name && !m.Title && !m.Description && len(m.Actions) == 0 && len(m.Interfaces) == 0 {
		return nil
	}
	return m
}

// lessIntegration orders listings by the query's sort, ties by id.
func lessIntegration(a, b dynamo.IntegrationListing, f integrationQuery) bool {
	cmp := 0
	switch f.SortBy {
	case "name":
		if cmp = strings.Compare(a.Name, b.Name); cmp == 0 && a.Version != b.Version {
			cmp = -1
			if versionLess(b.Version, a.Version) {
				cmp = 1
			}
		}
	case "updatedAt":
		cmp = strings.Compare(a.UpdatedAt, b.UpdatedAt)
	case "popularity", "installCount":
		switch {
		case a.InstallCount < b.InstallCount:
			cmp = -1
		case a.InstallCount > b.InstallCount:
			cmp = 1
		}
	default:
		cmp = strings.Compare(a.CreatedAt, b.CreatedAt)
	}
	if cmp == 0 {
		cmp = strings.Compare(a.ID, b.ID)
	}
	if f.Direction == "desc" {
		return cmp > 0
	}
	return cmp < 0
}

func sortIntegrations(ls []dynamo.IntegrationListing, f integrationQuery) {
	sort.SliceStable(ls, func(i, j int) bool { return lessIntegration(ls[i], ls[j], f) })
}

// keyOfListing is the position after a listing, carried in a nextToken:
// every field a sort may use.
func keyOfListing(l dynamo.IntegrationListing) map[string]string {
	return map[string]string{
		"id": l.ID, "name": l.Name, "version": l.Version, "createdAt": l.CreatedAt,
		"updatedAt": l.UpdatedAt, "installCount": strconv.FormatInt(l.InstallCount, 10),
	}
}

func listingFromKey(k map[string]string) dynamo.IntegrationListing {
	var l dynamo.IntegrationListing
	l.ID, l.Name, l.Version, l.CreatedAt, l.UpdatedAt = k["id"], k["name"], k["version"], k["createdAt"], k["updatedAt"]
	l.InstallCount, _ = strconv.ParseInt(k["installCount"], 10, 64)
	return l
}

// --- Integration API keys ---

func (s *server) listIntegrationAPIKeys(c *call) (any, error) {
	id, err := c.query().str("integrationId")
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, platform.Invalid("query parameter \"integrationId\" is required")
	}
	if _, err := s.ownIntegration(c, id); err != nil {
		return nil, err
	}
	keys, err := s.Store.ListIntegrationAPIKeys(c.ctx, id)
	sort.Slice(keys, func(i, j int) bool { return keys[i].CreatedAt < keys[j].CreatedAt })
	return map[string]any{"iaks": keys}, err
}

func (s *server) createIntegrationAPIKey(c *call) (any, error) {
	var in struct {
		IntegrationID string `json:"integrationId"`
		Note          string `json:"note"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	i, err := s.ownIntegration(c, in.IntegrationID)
	if err != nil {
		return nil, err
	}
	return s.Store.CreateIntegrationAPIKey(c.ctx, i, in.Note)
}

func (s *server) deleteIntegrationAPIKey(c *call) (any, error) {
	return nil, s.Store.DeleteIntegrationAPIKey(c.ctx, c.workspaceID, c.PathValue("id"))
}

// --- Integration operations (the ledger) ---

// workspaceOperation reads an operation of a bot of the caller's workspace.
func (s *server) workspaceOperation(c *call) (platform.Operation, error) {
	id := c.PathValue("id")
	r, err := s.Store.GetOperation(c.ctx, id)
	if err != nil {
		return r.Operation, err
	}
	// The bot's workspace now (it may have been transferred since), else
	// the one recorded (a deleted bot's).
	ws := r.WorkspaceID
	if b, err := s.Store.GetBot(c.ctx, r.BotID); err == nil {
		ws = b.WorkspaceID
	} else if platform.TypeOf(err) != platform.ErrResourceNotFound {
		return r.Operation, err
	}
	if ws != c.workspaceID {
		return r.Operation, platform.NotFound("operation", id)
	}
	return r.Operation, nil
}

// getIntegrationOperation answers an operation as of now: one left pending
// or running past its deadline is outcome_unknown.
func (s *server) getIntegrationOperation(c *call) (any, error) {
	op, err := s.workspaceOperation(c)
	if err != nil {
		return nil, err
	}
	return map[string]any{"operation": op.Effective(platform.Now())}, nil
}

func (s *server) listBotIntegrationOperations(c *call) (any, error) {
	b, err := s.workspaceBot(c)
	if err != nil {
		return nil, err
	}
	ops, err := s.Store.ListBotOperations(c.ctx, b.ID, maxPageSize)
	if err != nil {
		return nil, err
	}
	now := platform.Now()
	for i := range ops {
		ops[i] = ops[i].Effective(now)
	}
	return map[string]any{"operations": ops}, nil
}

// reconcileIntegrationOperation lets an administrator of the bot's
// workspace resolve an operation whose outcome is unknown, after checking
// with the integration: {"status": "succeeded"|"failed", "note": "..."}. A
// registration's instance moves accordingly.
func (s *server) reconcileIntegrationOperation(c *call) (any, error) {
	var in struct {
		Status string `json:"status"`
		Note   string `json:"note"`
	}
	if err := decodeOwnBody(c, &in); err != nil {
		return nil, err
	}
	if in.Status != platform.OperationSucceeded && in.Status != platform.OperationFailed {
		return nil, platform.Invalid("invalid body: field \"status\": must be succeeded or failed")
	}
	if len(in.Note) > 2000 {
		return nil, platform.Invalid("invalid body: field \"note\": at most 2000 characters")
	}
	op, err := s.workspaceOperation(c)
	if err != nil {
		return nil, err
	}
	op, err = s.Store.ReconcileOperation(c.ctx, op.ID, in.Status, platform.Reconciliation{By: c.principal.AccountID, Note: in.Note})
	if err != nil {
		return nil, err
	}
	if op.Type == platform.OperationRegister {
		status, reason := platform.InstallRegistered, (*string)(nil)
		if in.Status == platform.OperationFailed {
			r := "registration failed (reconciled by an operator)"
			if in.Note != "" {
				r += ": " + in.Note
			}
			status, reason = platform.InstallRegistrationFailed, &r
		}
		if err := s.Store.SetInstallStatus(c.ctx, op.BotID, op.Alias, op.ID, status, reason); err != nil {
			return nil, err
		}
	}
	return map[string]any{"operation": op}, nil
}

// decodeOwnBody reads the JSON body of an operation the reference does not
// have (so no schema validated it): bounded, unknown fields refused.
func decodeOwnBody(c *call, v any) error {
	if ct := c.Header.Get("Content-Type"); ct != "" && !strings.Contains(strings.ToLower(ct), "json") {
		return platform.Errorf(platform.ErrUnsupportedMedia, "content type %q is not supported: send application/json", ct)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(nil, c.Body, 64<<10))
	if err != nil {
		return platform.Errorf(platform.ErrPayloadTooLarge, "request body too large or unreadable")
	}
	if strings.TrimSpace(string(raw)) == "" {
		raw = []byte("{}")
	}
	c.body = raw
	return c.decode(v)
}

// listingPage sorts the listings that matched and cuts page p of them,
// with the key of the next page (nil at the end).
func listingPage(matched []dynamo.IntegrationListing, f integrationQuery, p dynamo.Page) ([]dynamo.IntegrationListing, map[string]string) {
	sortIntegrations(matched, f)
	start := 0
	if p.Start != nil {
		after := listingFromKey(p.Start)
		start = sort.Search(len(matched), func(i int) bool { return lessIntegration(after, matched[i], f) })
	}
	end := min(start+int(p.Limit), len(matched))
	page := matched[start:end]
	var next map[string]string
	if end < len(matched) && len(page) > 0 {
		next = keyOfListing(page[len(page)-1])
	}
	return page, next
}

// patchAttributes applies a body's attributes to an integration's or an
// interface's: a null removes one; none left is nil.
func patchAttributes(cur map[string]string, patch map[string]*string) map[string]string {
	for k, v := range patch {
		if cur == nil {
			cur = map[string]string{}
		}
		if v == nil {
			delete(cur, k)
		} else {
			cur[k] = *v
		}
	}
	if len(cur) == 0 {
		return nil
	}
	return cur
}
