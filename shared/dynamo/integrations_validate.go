package dynamo

import (
	"context"

	"github.com/botforge/platform/shared/platform"
)

// Dry runs of CreateIntegration and UpdateIntegration (validateIntegration*):
// the same checks, made with reads only. A dry run that passes says the
// write would have passed at that moment; the write itself stays
// conditional, so a version or name taken in between still gets its 409.

// CheckIntegrationCreation checks a new version as CreateIntegration
// would: its size, its (workspace, name, version) slot free, and for a
// public or unlisted version its name not published by another workspace.
// At most two GetItems; writes nothing.
func (s *Store) CheckIntegrationCreation(ctx context.Context, i platform.Integration) error {
	it, err := integrationItem(i)
	if err != nil {
		return err
	}
	if err := checkItemSize(it); err != nil {
		return err
	}
	if i.Dev {
		return nil
	}
	slot, err := s.get(ctx, intNamePK(i.WorkspaceID, i.Name), intNameSK(i.Version))
	if err != nil {
		return err
	}
	if slot != nil {
		return platform.Errorf(platform.ErrAlreadyExists, "integration %s version %s already exists: versions are immutable, publish a new version", i.Name, i.Version)
	}
	if shared(i) {
		return s.checkNameFree(ctx, i)
	}
	return nil
}

func (s *Store) checkNameFree(ctx context.Context, i platform.Integration) error {
	claim, err := s.get(ctx, intPubPK(i.Name), skIntPub)
	if err != nil {
		return err
	}
	if claim != nil && getS(claim, "workspaceId") != i.WorkspaceID {
		return platform.Errorf(platform.ErrAlreadyExists, "the integration name %q is published by another workspace", i.Name)
	}
	return nil
}

// CheckIntegrationUpdate applies change to a copy of version id of
// workspace ws as UpdateIntegration would (same tenancy, same checks),
// and writes nothing.
func (s *Store) CheckIntegrationUpdate(ctx context.Context, ws, id string, change func(*platform.Integration) error) error {
	rec, i, _, err := s.changedIntegration(ctx, ws, id, change)
	if err != nil {
		return err
	}
	if !i.Dev && i.Visibility != rec.Visibility && shared(i) {
		return s.checkNameFree(ctx, i)
	}
	return nil
}
