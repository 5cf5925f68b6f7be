package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// EnsureWorkspace creates workspace w, without members, unless it exists
// (a conditional put: every process may call it at start, one write wins
// and the others change nothing). The platform's own workspace, which
// publishes the built-in integrations (shared/builtin), is made this way:
// no account is a member, so no one can change or delete what it owns.
func (s *Store) EnsureWorkspace(ctx context.Context, w platform.Workspace) error {
	it, err := docItem(workspacePK(w.ID), skWorkspace, w)
	if err != nil {
		return err
	}
	it[attrBots] = num(0)
	it[attrOwners] = num(0)
	err = s.transact(ctx, []types.TransactWriteItem{putNew(it)}, func(int) error { return errExists })
	if err == errExists {
		return nil
	}
	return err
}

var errExists = platform.Errorf(platform.ErrAlreadyExists, "exists")
