package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// accountRoutes: the account's profile and deletion, account and
// workspace preferences, public workspaces (docs/account.md).
func (s *server) accountRoutes() []route {
	const (
		viewer = platform.RoleViewer
		admin  = platform.RoleAdministrator
	)
	return []route{
		{pattern: "PUT /v1/admin/account/me", op: "updateAccount", scope: scopeAccount, handle: s.updateAccount},
		{pattern: "POST /v1/admin/account/me", op: "deleteAccount", scope: scopeAccount, handle: s.deleteAccount},
		{pattern: "GET /v1/admin/account/preferences/{key}", op: "getAccountPreference", scope: scopeAccount, handle: s.getAccountPreference},
		{pattern: "POST /v1/admin/account/preferences/{key}", op: "setAccountPreference", scope: scopeAccount, handle: s.setAccountPreference},

		// GET /v1/admin/workspaces/preferences/{key} overlaps the reference's
		// GET /v1/admin/workspaces/{id}/public, /quota, ... without either
		// being more specific, which ServeMux refuses: it is registered as
		// {id}/{key}, narrowed to {id} = "preferences".
		{pattern: "GET /v1/admin/workspaces/{id}/{key}", op: "getWorkspacePreference", scope: scopeWorkspace, role: viewer, only: isPreferences, handle: s.getWorkspacePreference},
		{pattern: "POST /v1/admin/workspaces/preferences/{key}", op: "setWorkspacePreference", scope: scopeWorkspace, role: admin, handle: s.setWorkspacePreference},

		// Public workspaces: any authenticated caller reads them.
		{pattern: "GET /v1/admin/workspaces/public", op: "listPublicWorkspaces", scope: scopeAnyone, handle: s.listPublicWorkspaces},
		{pattern: "GET /v1/admin/workspaces/{id}/public", op: "getPublicWorkspace", scope: scopeAnyone, handle: s.getPublicWorkspace},
	}
}

func isPreferences(r *http.Request) bool { return r.PathValue("id") == "preferences" }

func (s *server) updateAccount(c *call) (any, error) {
	var in struct {
		DisplayName    *string `json:"displayName"`
		ProfilePicture *string `json:"profilePicture"`
		// refresh asks the reference to re-read the profile from its
		// identity provider; there is none here, so it changes nothing.
		Refresh *bool `json:"refresh"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.DisplayName != nil && len([]rune(*in.DisplayName)) > 100 {
		return nil, platform.Invalid("invalid body: field \"displayName\": must be at most 100 characters")
	}
	if in.ProfilePicture != nil && len(*in.ProfilePicture) > 2048 {
		return nil, platform.Invalid("invalid body: field \"profilePicture\": must be at most 2048 characters")
	}
	a, err := s.Store.UpdateAccount(c.ctx, c.principal.AccountID, dynamo.AccountPatch{DisplayName: in.DisplayName, ProfilePicture: in.ProfilePicture})
	if err != nil {
		return nil, err
	}
	return map[string]any{"account": a}, nil
}

func (s *server) deleteAccount(c *call) (any, error) {
	var in struct{}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if s.signin != nil { // its sessions, links and identities go first (signin.go)
		if err := s.signin.AccountDeleted(c.ctx, c.principal.AccountID); err != nil {
			return nil, err
		}
	}
	return nil, s.Store.DeleteAccount(c.ctx, c.principal.AccountID)
}

// prefKey is what a preference key may be: it is part of a DynamoDB sort
// key, and a name, not data.
var prefKey = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,100}$`)

// maxPreferenceBytes caps a preference's JSON value: preferences are
// settings, and the item must stay well below DynamoDB's 400 KB.
const maxPreferenceBytes = 64 << 10

func (c *call) preferenceKey() (string, error) {
	k := c.PathValue("key")
	if !prefKey.MatchString(k) {
		return "", platform.Invalid("preference key %q must be 1 to 100 letters, digits, '_', '.', ':' or '-'", k)
	}
	return k, nil
}

func (s *server) getPreference(c *call, o dynamo.PreferenceOwner) (any, error) {
	k, err := c.preferenceKey()
	if err != nil {
		return nil, err
	}
	v, found, err := s.Store.GetPreference(c.ctx, o, k)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, platform.NotFound("preference", k)
	}
	return map[string]json.RawMessage{"value": v}, nil
}

func (s *server) setPreference(c *call, o dynamo.PreferenceOwner) (any, error) {
	k, err := c.preferenceKey()
	if err != nil {
		return nil, err
	}
	var in struct {
		Value json.RawMessage `json:"value"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if len(in.Value) == 0 {
		in.Value = json.RawMessage("null")
	}
	if len(in.Value) > maxPreferenceBytes {
		return nil, platform.Errorf(platform.ErrPayloadTooLarge, "a preference value must be at most %d bytes of JSON", maxPreferenceBytes)
	}
	return nil, s.Store.SetPreference(c.ctx, o, k, in.Value)
}

func (s *server) getAccountPreference(c *call) (any, error) {
	return s.getPreference(c, dynamo.PreferenceOwner{AccountID: c.principal.AccountID})
}

func (s *server) setAccountPreference(c *call) (any, error) {
	return s.setPreference(c, dynamo.PreferenceOwner{AccountID: c.principal.AccountID})
}

func (s *server) getWorkspacePreference(c *call) (any, error) {
	return s.getPreference(c, dynamo.PreferenceOwner{WorkspaceID: c.workspaceID})
}

func (s *server) setWorkspacePreference(c *call) (any, error) {
	return s.setPreference(c, dynamo.PreferenceOwner{WorkspaceID: c.workspaceID})
}

// publicWorkspace is a workspace as anyone may see it once it is public.
type publicWorkspace struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	CreatedAt      string   `json:"createdAt"`
	UpdatedAt      string   `json:"updatedAt"`
	About          string   `json:"about"`
	ProfilePicture string   `json:"profilePicture"`
	ContactEmail   string   `json:"contactEmail"`
	Website        string   `json:"website"`
	SocialAccounts []string `json:"socialAccounts"`
	Handle         string   `json:"handle"`
}

func toPublic(w platform.Workspace) publicWorkspace {
	sa := w.SocialAccounts
	if sa == nil {
		sa = []string{}
	}
	return publicWorkspace{ID: w.ID, Name: w.Name, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, About: w.About,
		ProfilePicture: w.ProfilePicture, ContactEmail: w.ContactEmail, Website: w.Website, SocialAccounts: sa, Handle: w.Handle}
}

// getPublicWorkspace answers a workspace marked public (updateWorkspace
// isPublic); a private one is a 404, as if it did not exist.
func (s *server) getPublicWorkspace(c *call) (any, error) {
	id := c.PathValue("id")
	if !platform.HasPrefix(id, platform.PrefixWorkspace) {
		return nil, platform.NotFound("workspace", id)
	}
	w, err := s.Store.GetWorkspace(c.ctx, id)
	if err != nil {
		return nil, err
	}
	if !w.IsPublic {
		return nil, platform.NotFound("workspace", id)
	}
	return toPublic(w.Workspace), nil
}

// listPublicWorkspaces pages through the public workspaces in creation
// order (one index range), or reads the public ones among workspaceIds
// (at most 100, one BatchGetItem); search filters by name.
func (s *server) listPublicWorkspaces(c *call) (any, error) {
	q := c.query()
	search, err := q.str("search")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, v := range q.v["workspaceIds"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	out := []publicWorkspace{}
	if len(ids) > 0 {
		if len(ids) > 100 {
			return nil, platform.Invalid("workspaceIds: at most 100 ids")
		}
		var known []string
		for _, id := range ids {
			if platform.HasPrefix(id, platform.PrefixWorkspace) {
				known = append(known, id)
			}
		}
		found, err := s.Store.WorkspacesByID(c.ctx, known)
		if err != nil {
			return nil, err
		}
		for _, id := range known {
			if w, ok := found[id]; ok && w.IsPublic && strings.Contains(strings.ToLower(w.Name), strings.ToLower(search)) {
				out = append(out, toPublic(w))
			}
		}
		return map[string]any{"workspaces": out, "meta": meta{}}, nil
	}
	p, err := c.page(search)
	if err != nil {
		return nil, err
	}
	ws, next, err := s.Store.PublicWorkspacesPage(c.ctx, search, p)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		out = append(out, toPublic(w))
	}
	return map[string]any{"workspaces": out, "meta": c.meta(search, next)}, nil
}
