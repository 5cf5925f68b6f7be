package httpapi

import (
	"github.com/botforge/platform/shared/platform"
)

// The local platform's backups (docs/backup.md, shared/backup): listed,
// taken and restored from the console's Backups page. Only the operator (the
// machine's first account, Backups.Operator) may call them: a backup holds
// every workspace's data. A restore is staged, not done: the running stores
// cannot be swapped under the platform, so the next start restores it.
// Not served on AWS (Config.Backups nil), where the table's point-in-time
// recovery and the bucket's versions are the backups.

func (s *server) backupRoutes() []route {
	return []route{
		{pattern: "GET /v1/admin/backups", op: "listBackups", scope: scopeAccount, handle: s.listBackups},
		{pattern: "POST /v1/admin/backups", op: "createBackup", scope: scopeAccount, status: 201, handle: s.createBackup},
		{pattern: "POST /v1/admin/backups/{name}/restore", op: "restoreBackup", scope: scopeAccount, handle: s.restoreBackup},
		{pattern: "DELETE /v1/admin/backups/restore", op: "cancelBackupRestore", scope: scopeAccount, handle: s.cancelBackupRestore},
	}
}

// backupOperator checks that backups are kept here and that the caller is
// their operator.
func (s *server) backupOperator(c *call) error {
	if s.Backups == nil {
		return platform.Errorf(platform.ErrResourceNotFound, "backups are kept by the local platform only; on AWS restore from the table's point-in-time recovery and the bucket's versions (docs/backup.md)")
	}
	acct, ok, err := s.Store.AccountByEmail(c.ctx, s.Backups.Operator())
	if err != nil {
		return err
	}
	if !ok || acct.ID != c.principal.AccountID {
		return platform.Forbidden("only the platform's operator (%s) manages backups", s.Backups.Operator())
	}
	return nil
}

func (s *server) listBackups(c *call) (any, error) {
	if err := s.backupOperator(c); err != nil {
		return nil, err
	}
	return s.Backups.Status()
}

func (s *server) createBackup(c *call) (any, error) {
	if err := s.backupOperator(c); err != nil {
		return nil, err
	}
	b, err := s.Backups.Take(c.ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"backup": b}, nil
}

func (s *server) restoreBackup(c *call) (any, error) {
	if err := s.backupOperator(c); err != nil {
		return nil, err
	}
	if err := s.Backups.StageRestore(c.PathValue("name")); err != nil {
		return nil, err
	}
	return s.Backups.Status()
}

func (s *server) cancelBackupRestore(c *call) (any, error) {
	if err := s.backupOperator(c); err != nil {
		return nil, err
	}
	if err := s.Backups.CancelRestore(); err != nil {
		return nil, err
	}
	return s.Backups.Status()
}
