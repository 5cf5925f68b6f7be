package httpapi

import (
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// The hub: every workspace's public integrations (and interfaces, in
// admin_interfaces.go), readable by any authenticated caller without a
// workspace. Only listed versions (public, not dev) are listed; public and
// unlisted ones are reachable by id and name; private ones never. See
// docs/hub.md.

func (s *server) listPublicIntegrations(c *call) (any, error) {
	f, limit, err := c.integrationQuery()
	if err != nil {
		return nil, err
	}
	list := listKey("hub", f)
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		p.Limit = limit
	}
	type out struct {
		Integrations []platform.PublicIntegrationSummary `json:"integrations"`
		Meta         meta                                `json:"meta"`
	}
	if f.Dev || (f.Visibility != "" && f.Visibility != platform.VisibilityPublic) {
		return out{Integrations: []platform.PublicIntegrationSummary{}}, nil // the hub lists none
	}
	// The hub in creation order, unfiltered: one Query page on its index.
	if f.SortBy == "createdAt" && f.Search == "" && f.Name == "" && f.Version == "" && f.InterfaceID == "" &&
		f.InterfaceName == "" && f.InstalledByBotID == "" && f.VerificationStatus == "" {
		page, next, err := s.Store.PublicIntegrationsPage(c.ctx, p, f.Direction == "asc")
		if err != nil {
			return nil, err
		}
		sums, err := s.hubSummaries(c, page, false)
		return out{Integrations: sums, Meta: c.meta(list, next)}, err
	}
	var cands []dynamo.IntegrationListing
	switch {
	case f.InstalledByBotID != "":
		b, err := s.hubBot(c, f.InstalledByBotID)
		if err != nil {
			return nil, err
		}
		ids := make([]string, 0, len(b.Installs))
		for _, in := range b.Installs {
			ids = append(ids, in.IntegrationID)
		}
		cands, err = s.Store.IntegrationListingsByID(c.ctx, ids)
		if err != nil {
			return nil, err
		}
	case f.Name != "":
		// The versions of one name: its publisher's, not the whole hub.
		if cands, err = s.Store.PublicIntegrationVersions(c.ctx, f.Name); err != nil {
			return nil, err
		}
	default:
		if cands, err = s.Store.PublicIntegrationCandidates(c.ctx); err != nil {
			return nil, err
		}
	}
	listed := cands[:0]
	for _, l := range cands {
		if l.Visibility == platform.VisibilityPublic && !l.Dev {
			listed = append(listed, l)
		}
	}
	matched := filterIntegrations("", listed, f)
	page, next := listingPage(matched, f, p)
	sums, err := s.hubSummaries(c, page, f.Search != "")
	return out{Integrations: sums, Meta: c.meta(list, next)}, err
}

// hubSummaries renders listings with their publishers (one BatchGetItem).
func (s *server) hubSummaries(c *call, page []dynamo.IntegrationListing, searched bool) ([]platform.PublicIntegrationSummary, error) {
	owners := make([]string, 0, len(page))
	for _, l := range page {
		owners = append(owners, l.WorkspaceID)
	}
	wss, err := s.Store.WorkspacesByID(c.ctx, owners)
	if err != nil {
		return nil, err
	}
	out := make([]platform.PublicIntegrationSummary, 0, len(page))
	for _, l := range page {
		sum := l.IntegrationSummary
		ow := ownerOf(l.WorkspaceID, wss)
		sum.OwnerWorkspace = &ow
		if !searched {
			sum.MatchedOn = nil
		}
		out = append(out, platform.PublicIntegrationSummary{IntegrationSummary: sum, Meta: platform.HubMeta{Installs: l.InstallCount}})
	}
	return out, nil
}

func ownerOf(ws string, wss map[string]platform.Workspace) platform.OwnerWorkspace {
	ow := platform.OwnerWorkspace{ID: ws}
	if w, ok := wss[ws]; ok {
		ow.Name = w.Name
		if w.Handle != "" {
			h := w.Handle
			ow.Handle = &h
		}
	}
	return ow
}

// hubBot reads the bot of an installedByBotId filter if the caller may see
// it: a member of its workspace, or the bot itself; otherwise not found.
func (s *server) hubBot(c *call, id string) (dynamo.BotRecord, error) {
	notFound := platform.NotFound("bot", id)
	b, err := s.Store.GetBot(c.ctx, id)
	if err != nil {
		return b, err
	}
	switch c.principal.Kind {
	case platform.PrincipalAccount:
		if _, member, err := s.Store.GetMember(c.ctx, b.WorkspaceID, c.principal.AccountID); err != nil || !member {
			if err == nil {
				err = notFound
			}
			return dynamo.BotRecord{}, err
		}
		return b, nil
	case platform.PrincipalBot:
		if c.principal.BotID == id {
			return b, nil
		}
	}
	return dynamo.BotRecord{}, notFound
}

// publicIntegration renders a shared version with its publisher.
func (s *server) publicIntegration(c *call, r dynamo.IntegrationRecord) (any, error) {
	wss, err := s.Store.WorkspacesByID(c.ctx, []string{r.WorkspaceID})
	if err != nil {
		return nil, err
	}
	return map[string]any{"integration": r.HubForm(ownerOf(r.WorkspaceID, wss))}, nil
}

func (s *server) getPublicIntegrationByID(c *call) (any, error) {
	r, err := s.Store.PublicIntegration(c.ctx, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.publicIntegration(c, r)
}

func (s *server) getPublicIntegration(c *call) (any, error) {
	name, version, err := c.nameVersionParams()
	if err != nil {
		return nil, err
	}
	r, err := s.Store.PublicIntegrationByName(c.ctx, name, version)
	if err != nil {
		return nil, err
	}
	return s.publicIntegration(c, r)
}
