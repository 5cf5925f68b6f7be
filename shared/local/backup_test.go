package local_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestBackupOperations: the console's backup operations take and list
// backups and stage a restore, for the platform's operator (the first
// account) only: a workspace owner who is not the operator gets 403, no
// token 401, a bad or unknown backup name 400 / 404, all in the API's error
// shape.
func TestBackupOperations(t *testing.T) {
	e := apitest.New(t)
	e.Platform.Backups.Dir = t.TempDir()
	ws := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "b"}}), 200, "").Str("id")
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": ws},
		Body: map[string]any{"email": "owner@example.com", "role": "owner"}}), 200, "")
	owner := e.AccountToken("owner@example.com")

	r := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/backups", Token: e.AdminToken}), 200, "")
	if len(r.List("backups")) != 0 || r.Str("dir") != e.Platform.Backups.Dir {
		t.Fatalf("before any backup: %s", r.Raw)
	}
	b := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/backups", Token: e.AdminToken}), 201, "")
	name := b.Str("backup.name")
	if b.Body["backup"].(map[string]any)["size"].(float64) <= 0 {
		t.Fatalf("createBackup: %s", b.Raw)
	}
	r = e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/backups", Token: e.AdminToken}), 200, "")
	if l := r.List("backups"); len(l) != 1 || l[0].(map[string]any)["name"] != name {
		t.Fatalf("after a backup: %s", r.Raw)
	}
	r = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/backups/" + name + "/restore", Token: e.AdminToken}), 200, "")
	if r.Str("pendingRestore") != name {
		t.Fatalf("restoreBackup: %s", r.Raw)
	}
	r = e.Check(e.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/backups/restore", Token: e.AdminToken}), 200, "")
	if r.Body["pendingRestore"] != nil {
		t.Fatalf("cancelBackupRestore: %s", r.Raw)
	}
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"no token", "GET", "/v1/admin/backups", "", 401},
		{"not the operator: list", "GET", "/v1/admin/backups", owner, 403},
		{"not the operator: take", "POST", "/v1/admin/backups", owner, 403},
		{"not the operator: restore", "POST", "/v1/admin/backups/" + name + "/restore", owner, 403},
		{"not the operator: cancel", "DELETE", "/v1/admin/backups/restore", owner, 403},
		{"a name that is no backup's", "POST", "/v1/admin/backups/..%2Fetc/restore", e.AdminToken, 400},
		{"an unknown backup", "POST", "/v1/admin/backups/backup-20000101T000000.000Z/restore", e.AdminToken, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.Check(e.Do(apitest.Req{Method: tc.method, Path: tc.path, Token: tc.token}), tc.want, "")
		})
	}
	if l := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/backups", Token: e.AdminToken}), 200, "").List("backups"); len(l) != 1 {
		t.Fatalf("refused calls changed the backups: %v", l)
	}
}
