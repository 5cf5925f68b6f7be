package dynamo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// The operations ledger: every call made to an integration, with its
// status, progress, result or error, and deadline (docs/bots.md).

func opPK(id string) string              { return "OP#" + id }
func botOperationsGSI(bot string) string { return "BOT#" + bot + "#OPS" }

const skOp = "OP"

// finishedTTL is how long a finished operation is kept; unresolved ones
// are kept until reconciled.
const finishedTTL = 90 * 24 * time.Hour

type operationDoc struct {
	platform.Operation
	StoredWorkspace string `json:"_ws"`
}

// OperationRecord is an operation with the version its doc was read at.
type OperationRecord struct {
	platform.Operation
	ver int64
}

func operationItem(op platform.Operation) (item, error) {
	it, err := docItem(opPK(op.ID), skOp, operationDoc{Operation: op, StoredWorkspace: op.WorkspaceID})
	if err != nil {
		return nil, err
	}
	it["workspaceId"] = str(op.WorkspaceID)
	it["status"] = str(op.Status)
	it[attrGSI1PK] = str(botOperationsGSI(op.BotID))
	it[attrGSI1SK] = str(op.CreatedAt + "#" + op.ID)
	return it, nil
}

// putOperation is the write creating an operation, for the transaction of
// the change that starts it.
func putOperation(op platform.Operation) (types.TransactWriteItem, error) {
	it, err := operationItem(op)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return putNew(it), nil
}

func operationFrom(it item) (OperationRecord, error) {
	var d operationDoc
	if err := decodeDoc(it, &d); err != nil {
		return OperationRecord{}, err
	}
	op := d.Operation
	op.WorkspaceID = d.StoredWorkspace
	return OperationRecord{Operation: op, ver: getN(it, attrVer)}, nil
}

// CreateOperation records a new operation on its own (one conditional PutItem).
func (s *Store) CreateOperation(ctx context.Context, op platform.Operation) error {
	t, err := putOperation(op)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: t.Put.Item, ConditionExpression: t.Put.ConditionExpression,
	})
	if isConditionFailed(err) {
		return platform.Errorf(platform.ErrAlreadyExists, "operation %q already exists", op.ID)
	}
	return err
}

// GetOperation reads an operation (one GetItem), as stored: see
// platform.Operation.Effective for its status as of now.
func (s *Store) GetOperation(ctx context.Context, id string) (OperationRecord, error) {
	it, err := s.getRecord(ctx, "operation", platform.PrefixOperation, id, opPK(id), skOp)
	if err != nil {
		return OperationRecord{}, err
	}
	return operationFrom(it)
}

// ListBotOperations lists a bot's operations, newest first (Query on gsi1),
// at most limit.
func (s *Store) ListBotOperations(ctx context.Context, botID string, limit int32) ([]platform.Operation, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(botOperationsGSI(botID))},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(limit),
	})
	if err != nil {
		return nil, err
	}
	ops := make([]platform.Operation, 0, len(out.Items))
	for _, it := range out.Items {
		r, err := operationFrom(it)
		if err != nil {
			return nil, err
		}
		ops = append(ops, r.Operation)
	}
	return ops, nil
}

// errStale reports an operation changed since it was read.
var errStale = platform.Errorf(platform.ErrResourceLocked, "the operation changed concurrently, retry")

// writeOperation replaces an operation's doc if its version is still the
// one read (one conditional UpdateItem). Final operations get a TTL.
func (s *Store) writeOperation(ctx context.Context, r OperationRecord) error {
	b, err := json.Marshal(operationDoc{Operation: r.Operation, StoredWorkspace: r.WorkspaceID})
	if err != nil {
		return err
	}
	expr := "SET #doc = :doc, #ver = :next, #st = :st"
	names := map[string]string{"#doc": attrDoc, "#ver": attrVer, "#st": "status"}
	vals := item{":doc": str(string(b)), ":next": num(r.ver + 1), ":ver": num(r.ver), ":st": str(r.Status)}
	if r.Done() {
		expr += ", #ttl = :ttl"
		names["#ttl"] = attrTTL
		vals[":ttl"] = num(platform.Clock().Add(finishedTTL).Unix())
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(opPK(r.ID), skOp),
		UpdateExpression:         aws.String(expr),
		ConditionExpression:      aws.String("#ver = :ver"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	})
	if isConditionFailed(err) {
		return errStale
	}
	return err
}

// StartOperation marks a pending operation running, right before its
// request is sent (GetItem, conditional UpdateItem).
func (s *Store) StartOperation(ctx context.Context, id string) (platform.Operation, error) {
	r, err := s.GetOperation(ctx, id)
	if err != nil {
		return platform.Operation{}, err
	}
	if r.Status != platform.OperationPending {
		return r.Operation, platform.Errorf(platform.ErrRelationConflict, "operation %q is %s, not pending: it is never sent twice", id, r.Status)
	}
	now := platform.Now()
	r.Status, r.StartedAt, r.UpdatedAt = platform.OperationRunning, now, now
	return r.Operation, s.writeOperation(ctx, r)
}

// FinishOperation records the end of a running (or pending) operation:
// succeeded or failed with its result or error, or outcome_unknown. An
// operation already ended is left as it is (ErrRelationConflict).
func (s *Store) FinishOperation(ctx context.Context, id, status string, result json.RawMessage, opErr *platform.OperationError) (platform.Operation, error) {
	for attempt := 0; attempt < 3; attempt++ {
		r, err := s.GetOperation(ctx, id)
		if err != nil {
			return platform.Operation{}, err
		}
		if r.Status != platform.OperationPending && r.Status != platform.OperationRunning {
			return r.Operation, platform.Errorf(platform.ErrRelationConflict, "operation %q already ended %s", id, r.Status)
		}
		now := platform.Now()
		r.Status, r.Result, r.Error, r.UpdatedAt, r.EndedAt = status, result, opErr, now, now
		if status != platform.OperationOutcomeUnknown {
			r.Progress = 1
		}
		if err := s.writeOperation(ctx, r); err == errStale {
			continue
		} else if err != nil {
			return r.Operation, err
		}
		return r.Operation, nil
	}
	return platform.Operation{}, errStale
}

// ReconcileOperation resolves an operation whose outcome is unknown (as of
// now) to succeeded or failed, recording who did it and why.
func (s *Store) ReconcileOperation(ctx context.Context, id, status string, rec platform.Reconciliation) (platform.Operation, error) {
	r, err := s.GetOperation(ctx, id)
	if err != nil {
		return platform.Operation{}, err
	}
	if eff := r.Effective(platform.Now()); eff.Status != platform.OperationOutcomeUnknown {
		return eff, platform.Errorf(platform.ErrRelationConflict, "operation %q is %s: only an operation whose outcome is unknown can be reconciled", id, eff.Status)
	}
	now := platform.Now()
	rec.At, rec.Status = now, status
	r.Status, r.UpdatedAt, r.Reconciliation, r.Progress = status, now, &rec, 1
	if r.EndedAt == "" {
		r.EndedAt = now
	}
	if err := s.writeOperation(ctx, r); err != nil {
		return r.Operation, err
	}
	return r.Operation, nil
}
