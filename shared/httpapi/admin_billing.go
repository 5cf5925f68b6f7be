package httpapi

import (
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// referenceAdminRoutes are the Admin operations added to answer the whole
// reference (issue 15): helpers, billing, account, usage. Kept apart from
// adminRoutes so that its table stays the core of accounts, bots and
// integrations.
func (s *server) referenceAdminRoutes() []route {
	var rs []route
	rs = append(rs, s.helperRoutes()...)
	rs = append(rs, s.transferRoutes()...) // admin_transfer.go: archive import (docs/export-import.md)
	rs = append(rs, s.billingRoutes()...)
	rs = append(rs, s.accountRoutes()...)
	rs = append(rs, s.usageRoutes()...)
	rs = append(rs, s.analyticsRoutes()...)
	rs = append(rs, s.llmCallRoutes()...)
	return rs
}

// billingRoutes: a self-hosted platform bills nobody. It issues no
// invoices, so the lists are empty and the upcoming invoice is zero; there
// is nothing to charge. The AI spend limit is the workspace's
// spendingLimit (the platform spends nothing on AI itself: it is recorded
// for the bots and dashboards that read it). Reading billing needs the
// billing role, as in the reference's roles; changing the limit too.
func (s *server) billingRoutes() []route {
	const billing = platform.RoleBilling
	return []route{
		{pattern: "GET /v1/admin/workspaces/{id}/billing/invoices", op: "listWorkspaceInvoices", scope: scopeWorkspacePath, role: billing, handle: s.listWorkspaceInvoices},
		{pattern: "GET /v1/admin/workspaces/{id}/billing/upcoming-invoice", op: "getUpcomingInvoice", scope: scopeWorkspacePath, role: billing, handle: s.getUpcomingInvoice},
		{pattern: "POST /v1/admin/workspaces/{id}/billing/invoices/charge-unpaid", op: "chargeWorkspaceUnpaidInvoices", scope: scopeWorkspacePath, role: billing, handle: s.chargeWorkspaceUnpaidInvoices},
		{pattern: "PUT /v1/admin/quotas/ai-spend", op: "changeAISpendQuota", scope: scopeWorkspace, role: billing, handle: s.changeAISpendQuota},
	}
}

func (s *server) listWorkspaceInvoices(c *call) (any, error) {
	return map[string]any{"invoices": []any{}}, nil
}

func (s *server) getUpcomingInvoice(c *call) (any, error) {
	return map[string]any{"total": 0, "lineItems": []any{}}, nil
}

// chargeWorkspaceUnpaidInvoices charges nothing: without ids there is no
// unpaid invoice; an id names an invoice that does not exist (404).
func (s *server) chargeWorkspaceUnpaidInvoices(c *call) (any, error) {
	var in struct {
		InvoiceIDs []string `json:"invoiceIds"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if len(in.InvoiceIDs) > 0 {
		return nil, platform.NotFound("invoice", in.InvoiceIDs[0])
	}
	return map[string]any{"chargedInvoices": []any{}, "failedInvoices": []any{}}, nil
}

// changeAISpendQuota sets the workspace's monthly spendingLimit (a
// non-negative amount in dollars), the field getWorkspace answers.
func (s *server) changeAISpendQuota(c *call) (any, error) {
	var in struct {
		MonthlySpendingLimit *float64 `json:"monthlySpendingLimit"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.MonthlySpendingLimit == nil || *in.MonthlySpendingLimit < 0 {
		return nil, platform.Invalid("invalid body: field \"monthlySpendingLimit\": must be a number, 0 or more")
	}
	_, err := s.Store.UpdateWorkspace(c.ctx, c.workspaceID, dynamo.WorkspacePatch{SpendingLimit: in.MonthlySpendingLimit})
	return nil, err
}
