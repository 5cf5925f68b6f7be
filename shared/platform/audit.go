package platform

import "time"

// AuditRecord is one entry of a workspace's audit log (the reference's
// getAuditRecords record): who (an account: its id and email; a bot or
// integration key: null), which operation (Value: its operationId; Action:
// the reference's action it is, else UNKNOWN), which resource, when.
type AuditRecord struct {
	ID           string  `json:"id"`
	RecordedAt   string  `json:"recordedAt"`
	UserID       *string `json:"userId"`
	UserEmail    *string `json:"userEmail"`
	ResourceID   *string `json:"resourceId"`
	ResourceName *string `json:"resourceName"`
	Value        *string `json:"value"`
	Action       string  `json:"action"`
}

// PrefixAudit starts audit record ids.
const PrefixAudit = "audit_"

// AuditRetention is how long an audit record is kept (DynamoDB's TTL
// deletes it; reads treat an older one as gone).
const AuditRetention = 365 * 24 * time.Hour
