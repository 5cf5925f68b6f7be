package httpapi

import (
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// What the versioned catalogues (integrations, interfaces, plugins: see
// docs/hub.md) check and read alike: a version's name and version, a
// by-name read's path, a list's name/version filter and its page.

// checkNameVersion checks a new version's name and version: the three
// kinds share the CLI's naming rules and answer the same messages.
func checkNameVersion(name, version string) error {
	if len(name) > 200 || !integrationName.MatchString(name) {
		return platform.Invalid("invalid body: field \"name\": lower-case letters, digits, - and _ (optionally one namespace/name), at most 200 characters")
	}
	if _, ok := platform.ParseSemver(version); !ok {
		return platform.Invalid("invalid body: field \"version\": must be a semantic version (e.g. 1.2.3)")
	}
	return nil
}

func checkVersionParam(version string) error {
	if _, ok := platform.ParseSemver(version); !ok && version != "latest" {
		return platform.Invalid("version must be a semantic version (e.g. 1.2.3) or latest; ranges are not supported")
	}
	return nil
}

// nameVersionParams reads a by-name read's name and version path
// parameters: a version is a semantic version or "latest".
func (c *call) nameVersionParams() (name, version string, err error) {
	name, version = c.PathValue("name"), c.PathValue("version")
	return name, version, checkVersionParam(version)
}

// catalogueFilter reads the name and version filters of a catalogue list.
func (c *call) catalogueFilter() (dynamo.CatalogueFilter, error) {
	q := c.query()
	var f dynamo.CatalogueFilter
	var err error
	if f.Name, err = q.str("name"); err != nil {
		return f, err
	}
	if f.Version, err = q.str("version"); err != nil {
		return f, err
	}
	if f.Version != "" {
		if _, ok := platform.ParseSemver(f.Version); !ok {
			return f, platform.Invalid("query parameter \"version\" must be a semantic version")
		}
	}
	return f, nil
}

// catalogueList answers a page of a catalogue list as {field, meta}. The
// page token is bound to the list (keyParts) and its filter, so a token
// is not taken for another list's.
func catalogueList[T any](c *call, field string, keyParts []any, list func(dynamo.CatalogueFilter, dynamo.Page) ([]T, map[string]string, error)) (any, error) {
	f, err := c.catalogueFilter()
	if err != nil {
		return nil, err
	}
	key := listKey(append(keyParts, f)...)
	p, err := c.page(key)
	if err != nil {
		return nil, err
	}
	items, next, err := list(f, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{field: items, "meta": c.meta(key, next)}, nil
}
