package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/transfer"
)

// transferJobRoutes: the console's export and import (shared/transfer
// jobs.go, docs/export-import.md "From the console"). Thin: the jobs run
// transfer.Export and transfer.Import against this API with the caller's
// own credentials, so every record is read and written under the
// caller's role as the CLI's would be. An export needs a developer (the
// bot JSON), an import an administrator (as the import operation).
func (s *server) transferJobRoutes() []route {
	dev, admin := platform.RoleDeveloper, platform.RoleAdministrator
	return []route{
		{pattern: "POST /v1/admin/transfer/exports", op: "startTransferExport", scope: scopeWorkspace, role: dev, status: 201, ownBody: true, handle: s.startTransferExport},
		// The archive is the body (any type, streamed to a file): not read
		// as JSON (no ownBody), not capped (the local platform's disk).
		{pattern: "POST /v1/admin/transfer/uploads", op: "uploadTransferArchive", scope: scopeWorkspace, role: admin, status: 201, handle: s.uploadTransferArchive},
		{pattern: "POST /v1/admin/transfer/jobs/{id}/import", op: "runTransferImport", scope: scopeWorkspace, role: admin, ownBody: true, handle: s.runTransferImport},
		{pattern: "GET /v1/admin/transfer/jobs/{id}", op: "getTransferJob", scope: scopeWorkspace, handle: s.getTransferJob},
		{pattern: "DELETE /v1/admin/transfer/jobs/{id}", op: "deleteTransferJob", scope: scopeWorkspace, handle: s.deleteTransferJob},
	}
}

// transferRawRoutes: a finished export's archive, streamed. A browser's
// download sends no token: the job's key in the url is the authorization.
func (s *server) transferRawRoutes() []rawRoute {
	return []rawRoute{{
		route: route{pattern: "GET /v1/admin/transfer/jobs/{id}/archive", op: "downloadTransferArchive", scope: scopeWorkspace,
			signedAccess: func(r *http.Request) bool { return r.URL.Query().Get("key") != "" }},
		open: s.downloadTransferArchive,
	}}
}

func (s *server) transferJobs() (*transfer.Jobs, error) {
	if s.Transfers == nil {
		return nil, platform.Errorf(platform.ErrResourceNotFound, "export and import from the console are run by the local platform; here (AWS) run `local export` and `local import` against this API (docs/export-import.md)")
	}
	return s.Transfers, nil
}

func transferCaller(c *call) transfer.Caller {
	owner := c.principal.AccountID
	if owner == "" {
		owner = c.principal.TokenID
	}
	return transfer.Caller{Owner: owner, Workspace: c.workspaceID, Header: c.Header}
}

// transferError maps the jobs' errors to the API's.
func transferError(err error) error {
	var bad *transfer.InvalidArchiveError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, transfer.ErrNoJob):
		return platform.Errorf(platform.ErrResourceNotFound, "%s", err.Error())
	case errors.Is(err, transfer.ErrRunning):
		return platform.Errorf(platform.ErrResourceLocked, "%s", err.Error())
	case errors.As(err, &bad):
		return platform.Invalid("%s", err.Error())
	}
	return err
}

func decodeStrict(c *call, v any) error {
	if len(c.body) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return platform.Invalid("invalid body: %v", err)
	}
	return nil
}

func (s *server) startTransferExport(c *call) (any, error) {
	jobs, err := s.transferJobs()
	if err != nil {
		return nil, err
	}
	var in struct {
		BotID      string `json:"botId"`
		Passphrase string `json:"passphrase"`
	}
	if err := decodeStrict(c, &in); err != nil {
		return nil, err
	}
	if in.BotID != "" {
		b, err := s.Store.GetBot(c.ctx, in.BotID)
		if err == nil && b.WorkspaceID != c.workspaceID {
			err = platform.NotFound("bot", in.BotID)
		}
		if err != nil {
			return nil, err
		}
	}
	job, err := jobs.StartExport(transferCaller(c), in.BotID, in.Passphrase)
	return map[string]any{"job": job}, transferError(err)
}

func (s *server) uploadTransferArchive(c *call) (any, error) {
	jobs, err := s.transferJobs()
	if err != nil {
		return nil, err
	}
	job, err := jobs.Upload(transferCaller(c), c.Body)
	return map[string]any{"job": job}, transferError(err)
}

func (s *server) runTransferImport(c *call) (any, error) {
	jobs, err := s.transferJobs()
	if err != nil {
		return nil, err
	}
	var in struct {
		DryRun     bool   `json:"dryRun"`
		Remap      bool   `json:"remap"`
		Passphrase string `json:"passphrase"`
	}
	if err := decodeStrict(c, &in); err != nil {
		return nil, err
	}
	job, err := jobs.Run(transferCaller(c), c.PathValue("id"), in.DryRun, in.Remap, in.Passphrase)
	return map[string]any{"job": job}, transferError(err)
}

func (s *server) getTransferJob(c *call) (any, error) {
	jobs, err := s.transferJobs()
	if err != nil {
		return nil, err
	}
	job, err := jobs.Get(transferCaller(c), c.PathValue("id"))
	return map[string]any{"job": job}, transferError(err)
}

func (s *server) deleteTransferJob(c *call) (any, error) {
	jobs, err := s.transferJobs()
	if err != nil {
		return nil, err
	}
	return nil, transferError(jobs.Delete(transferCaller(c), c.PathValue("id")))
}

func (s *server) downloadTransferArchive(c *call) (*rawAnswer, error) {
	jobs, err := s.transferJobs()
	if err != nil {
		return nil, err
	}
	f, job, err := jobs.Archive(c.PathValue("id"), c.URL.Query().Get("key"))
	if err != nil {
		return nil, transferError(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	name := "workspace-" + job.Workspace
	if job.Bot != "" {
		name = "bot-" + job.Bot
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	h.Set("Content-Disposition", `attachment; filename="`+name+`.bfa"`)
	h.Set("Cache-Control", "no-store")
	return &rawAnswer{header: h, body: f}, nil
}
