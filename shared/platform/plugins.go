package platform

import "encoding/json"

// PrefixPlugin prefixes plugin version ids: integration versions' prefix,
// as for interfaces (the CLI tells an id from a name by a prefix that
// @bpinternal/const knows, and it knows no plugin one). Plugins live under
// their own keys, so an id of one kind is never found as another.
const PrefixPlugin = PrefixIntegration

// PluginDependency is an interface or integration a plugin version needs:
// resolved from the catalogue when the version is created or updated.
type PluginDependency struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// PluginDependencies are a plugin version's dependencies, keyed by the
// alias the plugin's code uses for them.
type PluginDependencies struct {
	Interfaces   map[string]PluginDependency `json:"interfaces"`
	Integrations map[string]PluginDependency `json:"integrations"`
}

// PluginTags are the tag definitions a plugin declares on users or
// conversations.
type PluginTags struct {
	Tags map[string]json.RawMessage `json:"tags"`
}

// Plugin is a plugin version (the reference's Plugin): like an integration
// version, a (workspace, name, version) is created once, and a shared
// (public or unlisted) plugin's name belongs to one workspace.
type Plugin struct {
	ID              string                     `json:"id"`
	Name            string                     `json:"name"`
	Version         string                     `json:"version"`
	CreatedAt       string                     `json:"createdAt"`
	UpdatedAt       string                     `json:"updatedAt"`
	Configuration   json.RawMessage            `json:"configuration"`
	States          map[string]json.RawMessage `json:"states"`
	Events          map[string]json.RawMessage `json:"events"`
	Actions         map[string]json.RawMessage `json:"actions"`
	Dependencies    PluginDependencies         `json:"dependencies"`
	User            PluginTags                 `json:"user"`
	Conversation    PluginTags                 `json:"conversation"`
	Attributes      map[string]string          `json:"attributes,omitempty"`
	Title           string                     `json:"title"`
	Description     string                     `json:"description"`
	IconURL         string                     `json:"iconUrl"`
	ReadmeURL       string                     `json:"readmeUrl"`
	Public          bool                       `json:"public"`
	Visibility      string                     `json:"visibility"`
	LifecycleStatus string                     `json:"lifecycleStatus"`

	// Not on the wire: the owning workspace, the SDK version it was built
	// with, and where the file storage keeps its code, icon and readme.
	WorkspaceID    string `json:"-"`
	SDKVersion     string `json:"-"`
	CodeNodeKey    string `json:"-"`
	CodeBrowserKey string `json:"-"`
	IconKey        string `json:"-"`
	ReadmeKey      string `json:"-"`
}

// Shared reports whether other workspaces may reach the version (public or
// unlisted).
func (p Plugin) Shared() bool {
	return SharedVisibility(p.Visibility)
}

// VisibleTo reports whether workspace ws may read the version.
func (p Plugin) VisibleTo(ws string) bool { return p.WorkspaceID == ws || p.Shared() }

// PluginSummary is a plugin version as lists answer it.
type PluginSummary struct {
	ID              string `json:"id"`
	CreatedAt       string `json:"createdAt"`
	UpdatedAt       string `json:"updatedAt"`
	Name            string `json:"name"`
	Version         string `json:"version"`
	Title           string `json:"title"`
	Description     string `json:"description"`
	IconURL         string `json:"iconUrl"`
	ReadmeURL       string `json:"readmeUrl"`
	Public          bool   `json:"public"`
	Visibility      string `json:"visibility"`
	LifecycleStatus string `json:"lifecycleStatus"`
}

// Summary is the list form of the version.
func (p Plugin) Summary() PluginSummary {
	return PluginSummary{ID: p.ID, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Name: p.Name, Version: p.Version,
		Title: p.Title, Description: p.Description, IconURL: p.IconURL, ReadmeURL: p.ReadmeURL,
		Public: p.Public, Visibility: p.Visibility, LifecycleStatus: p.LifecycleStatus}
}
