package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/platform"
)

// Audit records: AUDIT#<workspace>, sorted by "<recordedAt>#<id>", read
// newest first; each expires (TTL) after platform.AuditRetention.
func auditPK(ws string) string { return "AUDIT#" + ws }

// PutAuditRecord stores an audit record of a workspace.
func (s *Store) PutAuditRecord(ctx context.Context, ws string, r platform.AuditRecord) error {
	it, err := chatItem(auditPK(ws), timeKey(r.RecordedAt, r.ID), r)
	if err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, r.RecordedAt)
	if err != nil {
		return err
	}
	it[attrTTL] = num(at.Add(platform.AuditRetention).Unix())
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it})
	return err
}

// ListAuditRecords lists a workspace's audit records, newest first (one
// Query; records past their retention are skipped).
func (s *Store) ListAuditRecords(ctx context.Context, ws string, now time.Time, p Page) ([]platform.AuditRecord, map[string]string, error) {
	oldest := platform.FormatTime(now.Add(-platform.AuditRetention))
	sp := span{pk: auditPK(ws), lo: oldest, desc: true}
	decode := func(it item) (platform.AuditRecord, bool, error) {
		var r platform.AuditRecord
		err := decodeDoc(it, &r)
		return r, err == nil, err
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, keep(decode, nil))
	return out, startOf(next), err
}
