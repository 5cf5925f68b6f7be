package platform

import "encoding/json"

// PrefixInterface prefixes interface version ids: integration versions'
// prefix, as Botpress does. The CLI tells an id from a name by its prefix
// (@bpinternal/const knows no other), so `bp interfaces get <id>` needs it;
// the two kinds live under different keys, so an id of one is never found
// as the other.
const PrefixInterface = PrefixIntegration

// Interface is an interface version (the reference's Interface): what
// integrations implementing it must provide. Like an integration version,
// a (workspace, name, version) is created once; a public interface's name
// is one namespace across workspaces.
type Interface struct {
	ID           string                     `json:"id"`
	CreatedAt    string                     `json:"createdAt"`
	UpdatedAt    string                     `json:"updatedAt"`
	Name         string                     `json:"name"`
	Version      string                     `json:"version"`
	Entities     map[string]json.RawMessage `json:"entities"`
	Events       map[string]json.RawMessage `json:"events"`
	Actions      map[string]json.RawMessage `json:"actions"`
	Channels     map[string]json.RawMessage `json:"channels"`
	NameTemplate json.RawMessage            `json:"nameTemplate,omitempty"`
	Attributes   map[string]string          `json:"attributes,omitempty"`
	Title        string                     `json:"title"`
	Description  string                     `json:"description"`
	IconURL      string                     `json:"iconUrl"`
	ReadmeURL    string                     `json:"readmeUrl"`
	Public       bool                       `json:"public"`

	// Not on the wire: the owning workspace.
	WorkspaceID string `json:"-"`
}

// VisibleTo reports whether workspace ws may read the interface: its own
// workspace, or any when it is public.
func (i Interface) VisibleTo(ws string) bool { return i.WorkspaceID == ws || i.Public }

// InterfaceSummary is an interface as lists answer it.
type InterfaceSummary struct {
	ID          string `json:"id"`
	CreatedAt   string `json:"createdAt"`
	UpdatedAt   string `json:"updatedAt"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	Title       string `json:"title"`
	Description string `json:"description"`
	IconURL     string `json:"iconUrl"`
	ReadmeURL   string `json:"readmeUrl"`
	Public      bool   `json:"public"`
}

// Summary is the list form of the interface.
func (i Interface) Summary() InterfaceSummary {
	return InterfaceSummary{ID: i.ID, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt, Name: i.Name, Version: i.Version,
		Title: i.Title, Description: i.Description, IconURL: i.IconURL, ReadmeURL: i.ReadmeURL, Public: i.Public}
}
