package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// The audit log (docs/security.md, "Audit records"): every successful
// write of the Admin API within a workspace is recorded, here, for every
// route, whoever adds it: after the handler answered without error, so
// after its write was committed, or with an error it marked as coming after
// the commit (committed: the write stands though the call fails, e.g. a
// 502 when deploying the stored code fails). A record therefore never names
// a write that did not happen; what it can miss is a write whose process died (or
// whose record DynamoDB refused) between the commit and the record, which
// is logged. Writing it in the write's own transaction would need every
// store operation to take it, and the rule could not hold for routes added
// later.

// errAfterCommit is the error of a write that was committed and then
// failed (deploying the code the record names, reading back the bot
// after its registrations): the call answers the error, and the audit log
// records the write all the same, about out (what the handler would have
// answered, for the record's resource; nil: the path's id).
type errAfterCommit struct {
	err error
	out any
}

func (e *errAfterCommit) Error() string { return e.err.Error() }
func (e *errAfterCommit) Unwrap() error { return e.err }

// committed marks err (when not nil) as the failure of a write already
// committed (errAfterCommit).
func committed(err error, out any) error {
	if err == nil {
		return nil
	}
	return &errAfterCommit{err: err, out: out}
}

// auditedOutcome tells whether a call that answered out and err committed
// a write (no error, or an errAfterCommit), and what to record it about.
func auditedOutcome(out any, err error) (any, bool) {
	if err == nil {
		return out, true
	}
	var ac *errAfterCommit
	if errors.As(err, &ac) {
		return ac.out, true
	}
	return nil, false
}

// auditSkip are the Admin operations sent with POST or PUT that write
// nothing (dry runs, checks, helpers).
var auditSkip = map[string]bool{
	"checkHandleAvailability":     true,
	"validateIntegrationCreation": true,
	"validateIntegrationUpdate":   true,
	"introspect":                  true,
	"runVrl":                      true,
}

// auditActions maps operations to the reference's record actions (others
// are UNKNOWN; the record's value names the operation either way).
var auditActions = map[string]string{
	"createWorkspaceMember":     "ADD_WORKSPACE_MEMBER",
	"deleteWorkspaceMember":     "REMOVE_WORKSPACE_MEMBER",
	"updateWorkspaceMember":     "UPDATE_WORKSPACE_MEMBER",
	"deleteWorkspace":           "CLOSE_WORKSPACE",
	"createWorkspace":           "CREATE_WORKSPACE",
	"updateWorkspace":           "UPDATE_WORKSPACE",
	"createBot":                 "CREATE_BOT",
	"deleteBot":                 "DELETE_BOT",
	"updateBot":                 "UPDATE_BOT",
	"transferBot":               "TRANSFER_BOT",
	"changeAISpendQuota":        "SET_AI_SPENDING_LIMIT",
	"setWorkspacePaymentMethod": "UPDATE_PAYMENT_METHOD",
}

// audited tells whether a successful call of rt is recorded, and in which
// workspace.
func audited(c *call, rt route, out any) (string, bool) {
	if !strings.HasPrefix(rt.pattern, "GET ") && strings.Contains(rt.pattern, " /v1/admin/") && !auditSkip[rt.op] {
		switch {
		case rt.scope == scopeWorkspace || rt.scope == scopeWorkspacePath:
			return c.workspaceID, c.workspaceID != ""
		case rt.op == "createWorkspace":
			id, _ := resourceOf(out)
			return id, id != ""
		}
	}
	return "", false
}

// resourceOf finds the id and name of what an answer is about: its own
// id, or that of the one object it holds ({bot: {...}}).
func resourceOf(out any) (id, name string) {
	b, err := json.Marshal(out)
	if err != nil {
		return "", ""
	}
	var top map[string]any
	if json.Unmarshal(b, &top) != nil {
		return "", ""
	}
	pick := func(m map[string]any) (string, string) {
		id, _ := m["id"].(string)
		name, _ := m["name"].(string)
		if name == "" {
			name, _ = m["email"].(string)
		}
		return id, name
	}
	if id, name := pick(top); id != "" {
		return id, name
	}
	var inner map[string]any
	for _, v := range top {
		if m, ok := v.(map[string]any); ok {
			if inner != nil {
				return "", ""
			}
			inner = m
		}
	}
	if inner == nil {
		return "", ""
	}
	return pick(inner)
}

// audit records a successful Admin write (see above).
func (s *server) audit(ctx context.Context, c *call, rt route, out any) {
	ws, ok := audited(c, rt, out)
	if !ok {
		return
	}
	action := auditActions[rt.op]
	if action == "" {
		action = "UNKNOWN"
	}
	var body map[string]json.RawMessage
	_ = json.Unmarshal(c.body, &body)
	switch {
	case rt.op == "updateBot" && body["code"] != nil:
		action = "DEPLOY_BOT"
	case rt.op == "updateWorkspace" && body["spendingLimit"] != nil:
		action = "SET_SPENDING_LIMIT"
	}
	rid, rname := resourceOf(out)
	if p := c.PathValue("id"); p != "" && p != rid {
		rid, rname = p, "" // the path names the resource; the answer is not it
	}
	op := rt.op
	rec := platform.AuditRecord{ID: platform.NewID(platform.PrefixAudit), RecordedAt: platform.FormatTime(platform.Clock()),
		Action: action, Value: &op}
	if rid != "" {
		rec.ResourceID = &rid
	}
	if rname != "" {
		rec.ResourceName = &rname
	}
	switch c.principal.Kind {
	case platform.PrincipalAccount:
		uid := c.principal.AccountID
		rec.UserID = &uid
		if email := c.member.Email; email != "" {
			rec.UserEmail = &email
		} else if a, err := s.Store.GetAccount(ctx, uid); err == nil && a.Email != "" {
			rec.UserEmail = &a.Email
		}
	default:
		v := op + " by " + string(c.principal.Kind) + " key " + c.principal.TokenID
		rec.Value = &v
	}
	if err := s.Store.PutAuditRecord(ctx, ws, rec); err != nil {
		s.Logger.Error("audit record not written", "op", rt.op, "workspace", ws, "resource", rid, "err", err)
	}
	if rt.op == "transferBot" {
		// The workspace the bot went to records its arrival too.
		var in struct {
			TargetWorkspaceID string `json:"targetWorkspaceId"`
		}
		if json.Unmarshal(c.body, &in) == nil && in.TargetWorkspaceID != "" && in.TargetWorkspaceID != ws {
			rec.ID = platform.NewID(platform.PrefixAudit)
			if err := s.Store.PutAuditRecord(ctx, in.TargetWorkspaceID, rec); err != nil {
				s.Logger.Error("audit record not written", "op", rt.op, "workspace", in.TargetWorkspaceID, "resource", rid, "err", err)
			}
		}
	}
}

// getAuditRecords: the workspace's audit records, newest first.
func (s *server) getAuditRecords(c *call) (any, error) {
	return listPage(c, "records", listKey("audit", c.workspaceID), func(p dynamo.Page) ([]platform.AuditRecord, map[string]string, error) {
		return s.Store.ListAuditRecords(c.ctx, c.workspaceID, platform.Clock(), p)
	})
}
