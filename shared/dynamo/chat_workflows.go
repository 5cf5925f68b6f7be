package dynamo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Workflows: one record (WF#<bot>#<id>, "WF", the partition its states live
// in), listed in the bot's gsi1 list WFS. What the runtime must do about
// one is queued in the outbox in the same transaction: the workflow_update
// event of a start, the check of its timeout.
const listWorkflows = "WFS"

func workflowFrom(it item) (platform.Workflow, int64, error) {
	var w platform.Workflow
	err := decodeDoc(it, &w)
	return w, getN(it, attrVer), err
}

func workflowItem(bot string, w platform.Workflow) (item, error) {
	it, err := chatItem(workflowPK(bot, w.ID), skWorkflow, w)
	if err != nil {
		return nil, err
	}
	it[attrGSI1PK], it[attrGSI1SK] = str(botList(bot, listWorkflows)), str(timeKey(w.CreatedAt, w.ID))
	return it, nil
}

// workflowEffects are the runtime's writes for a workflow as it is now:
// the workflow_update event of a change (updateType "" for none) and the
// check of its timeout (when it has not ended). The bot's events counter
// is the caller's to add, once per transaction (eventsCounted).
func workflowEffects(bot string, w platform.Workflow, updateType string, checkTimeout bool) ([]types.TransactWriteItem, error) {
	var out []types.TransactWriteItem
	if updateType != "" {
		ev, err := workflowUpdate(bot, updateType, w, nil, w.UpdatedAt)
		if err != nil {
			return nil, err
		}
		out = append(out, ev...)
	}
	if checkTimeout && !platform.WorkflowDone(w.Status) && w.TimeoutAt != "" {
		d := newDelivery(platform.DeliverWorkflowTimeout, bot, "", w.TimeoutAt)
		d.WorkflowID, d.ExpiresAt = w.ID, w.TimeoutAt
		put, err := outboxPut(d)
		if err != nil {
			return nil, err
		}
		out = append(out, put)
	}
	return out, nil
}

// eventsCounted adds to items the bot's events counter for the event of
// updateType ("" for none).
func eventsCounted(bot string, items []types.TransactWriteItem, updateType string) []types.TransactWriteItem {
	if updateType == "" {
		return items
	}
	return eventsCountedN(bot, items, 1)
}

// eventsCountedN adds to items the bot's events counter for n events: one
// update of the counter item however many events (a transaction may not
// touch an item twice).
func eventsCountedN(bot string, items []types.TransactWriteItem, n int) []types.TransactWriteItem {
	if n == 0 {
		return items
	}
	return append(items, usageAdd(bot, UsageEvents, int64(n)))
}

// workflowUpdate is a workflow_update event of workflow w (payload
// {type, workflow, childWorkflow?}) and its delivery.
func workflowUpdate(bot, updateType string, w platform.Workflow, child *platform.Workflow, at string) ([]types.TransactWriteItem, error) {
	body := map[string]any{"type": updateType, "workflow": w}
	if child != nil {
		body["childWorkflow"] = child
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	e := platform.Event{ID: platform.NewID(platform.PrefixEvent), CreatedAt: at, Type: platform.EventWorkflowUpdate,
		Payload: payload, ConversationID: w.ConversationID, UserID: w.UserID, Status: platform.EventPending, WorkflowID: w.ID}
	return newEventWrites(bot, e)
}

// childUpdate is the workflow_update event a parent workflow gets when its
// child w finished or was deleted (updateType child_workflow_finished or
// child_workflow_deleted); none when w has no parent or the parent is gone.
func (s *Store) childUpdate(ctx context.Context, bot, updateType string, w platform.Workflow) ([]types.TransactWriteItem, error) {
	if w.ParentWorkflowID == "" {
		return nil, nil
	}
	parent, _, err := s.getWorkflow(ctx, bot, w.ParentWorkflowID)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return workflowUpdate(bot, updateType, parent, &w, platform.Now())
}

// workflowRefs checks what a new workflow names: its conversation, user
// and parent workflow must exist in the bot.
func workflowRefs(bot string, w platform.Workflow) ([]types.TransactWriteItem, []string, error) {
	return recordRefs(bot, w.ConversationID, w.UserID, ref{w.ParentWorkflowID, platform.PrefixWorkflow, "workflow", workflowPK(bot, w.ParentWorkflowID), skWorkflow})
}

// ref is a record a new one names, which must exist: its id, id prefix,
// kind (for errors) and key.
type ref struct{ id, prefix, kind, pk, sk string }

// recordRefs are the checks, in a creating transaction, that what a new
// record names exists in the bot: its conversation and user (live: not
// being deleted) and its parent; with each check's "kind id", for the
// error of a failed one. An id that cannot be the kind's is not found.
func recordRefs(bot, conversationID, userID string, parent ref) ([]types.TransactWriteItem, []string, error) {
	var w []types.TransactWriteItem
	var kinds []string
	for _, r := range []ref{
		{conversationID, platform.PrefixConversation, "conversation", convPK(bot, conversationID), skConv},
		{userID, platform.PrefixUser, "user", userPK(bot, userID), skUser},
		parent,
	} {
		if r.id == "" {
			continue
		}
		if r.prefix != "" && !platform.HasPrefix(r.id, r.prefix) {
			return nil, nil, platform.NotFound(r.kind, r.id)
		}
		if r.kind == "conversation" || r.kind == "user" {
			w = append(w, liveCheck(r.pk, r.sk))
		} else {
			w = append(w, mustExist(r.pk, r.sk))
		}
		kinds = append(kinds, r.kind+" "+r.id)
	}
	return w, kinds, nil
}

// CreateWorkflow stores a new workflow with, in the same transaction, its
// workflow_started event when pending and the check of its timeout.
func (s *Store) CreateWorkflow(ctx context.Context, bot string, w platform.Workflow) error {
	return s.createWorkflow(ctx, bot, w, nil)
}

func (s *Store) createWorkflow(ctx context.Context, bot string, w platform.Workflow, extra []types.TransactWriteItem) error {
	it, err := workflowItem(bot, w)
	if err != nil {
		return err
	}
	refs, kinds, err := workflowRefs(bot, w)
	if err != nil {
		return err
	}
	start := ""
	if w.Status == platform.WorkflowPending {
		start = "workflow_started"
	}
	fx, err := workflowEffects(bot, w, start, true)
	if err != nil {
		return err
	}
	fx = eventsCounted(bot, fx, start)
	tx := append(append(append([]types.TransactWriteItem{putNew(it)}, refs...), extra...), fx...)
	err = s.txWrite(ctx, tx)
	switch i := failedAt(err); {
	case i == 0:
		return platform.Errorf(platform.ErrAlreadyExists, "workflow %q already exists", w.ID)
	case i > 0 && i <= len(refs):
		return platform.Errorf(platform.ErrResourceNotFound, "%s not found", kinds[i-1])
	case i > len(refs):
		return errRetry // a claim moved (getOrCreate)
	}
	if err == nil {
		s.notifyOutbox()
	}
	return err
}

// GetWorkflow reads a workflow of the bot.
func (s *Store) GetWorkflow(ctx context.Context, bot, id string) (platform.Workflow, error) {
	w, _, err := s.getWorkflow(ctx, bot, id)
	return w, err
}

func (s *Store) getWorkflow(ctx context.Context, bot, id string) (platform.Workflow, int64, error) {
	if !platform.HasPrefix(id, platform.PrefixWorkflow) {
		return platform.Workflow{}, 0, platform.NotFound("workflow", id)
	}
	it, err := s.get(ctx, workflowPK(bot, id), skWorkflow)
	if err != nil {
		return platform.Workflow{}, 0, err
	}
	if it == nil {
		return platform.Workflow{}, 0, platform.NotFound("workflow", id)
	}
	return workflowFrom(it)
}

// WorkflowChange computes a workflow's next value; updateType names the
// workflow_update event to emit ("" for none).
type WorkflowChange func(w *platform.Workflow) (updateType string, err error)

// UpdateWorkflow applies change, conditional on the version read (retried
// on a concurrent change), with its event and, when timeoutAt moved, a new
// timeout check, in the same transaction.
func (s *Store) UpdateWorkflow(ctx context.Context, bot, id string, change WorkflowChange) (platform.Workflow, error) {
	var out platform.Workflow
	err := optimistic(ctx, "workflow "+id, func() error {
		w, ver, err := s.getWorkflow(ctx, bot, id)
		if err != nil {
			return err
		}
		before, wasDone, userBefore := w.TimeoutAt, platform.WorkflowDone(w.Status), w.UserID
		typ, err := change(&w)
		if err != nil {
			return err
		}
		upd, err := replaceVersioned(workflowPK(bot, id), skWorkflow, w, ver)
		if err != nil {
			return err
		}
		// A user the update names must exist in the bot, as at creation:
		// checked in the same transaction (a 404, nothing written).
		var refs []types.TransactWriteItem
		var kinds []string
		if w.UserID != userBefore && w.UserID != "" {
			if refs, kinds, err = recordRefs(bot, "", w.UserID, ref{}); err != nil {
				return err
			}
		}
		fx, err := workflowEffects(bot, w, typ, w.TimeoutAt != before)
		if err != nil {
			return err
		}
		n := 0 // events written
		if typ != "" {
			n++
		}
		if !wasDone && platform.WorkflowDone(w.Status) {
			// Its parent hears that it finished, in the same transaction.
			child, err := s.childUpdate(ctx, bot, "child_workflow_finished", w)
			if err != nil {
				return err
			}
			fx = append(fx, child...)
			if len(child) > 0 {
				n++
			}
		}
		fx = eventsCountedN(bot, fx, n)
		err = s.txWrite(ctx, append(append([]types.TransactWriteItem{upd}, refs...), fx...))
		switch i := failedAt(err); {
		case i == 0:
			return errRetry
		case i > 0 && i <= len(refs):
			return platform.Errorf(platform.ErrResourceNotFound, "%s not found", kinds[i-1])
		}
		if err == nil {
			out = w
			if len(fx) > 0 {
				s.notifyOutbox()
			}
		}
		return err
	})
	return out, err
}

// TimeOutWorkflow ends a workflow whose timeoutAt has come (and is still
// timeoutAt: not moved since), with its workflow_timedout event; false when
// there was nothing to do.
func (s *Store) TimeOutWorkflow(ctx context.Context, bot, id, timeoutAt string, now time.Time) (bool, error) {
	done := false
	_, err := s.UpdateWorkflow(ctx, bot, id, func(w *platform.Workflow) (string, error) {
		done = false
		if platform.WorkflowDone(w.Status) || w.TimeoutAt != timeoutAt || w.TimeoutAt > platform.FormatTime(now) {
			return "", errNothing
		}
		w.Status, w.FailureReason = platform.WorkflowTimedOut, "the workflow timed out"
		w.UpdatedAt = platform.FormatTime(now)
		w.CompletedAt = w.UpdatedAt
		done = true
		return "workflow_timedout", nil
	})
	if err == errNothing {
		return false, nil
	}
	return done, err
}

// errNothing ends a change with nothing to write.
var errNothing = platform.Errorf(platform.ErrInternal, "nothing to change")

// DeleteWorkflow deletes a workflow and its states.
// A child workflow's parent then gets child_workflow_deleted (after the
// purge: an event is never sent for a workflow still there).
func (s *Store) DeleteWorkflow(ctx context.Context, bot, id string) error {
	w, _, err := s.getWorkflow(ctx, bot, id)
	if err != nil {
		return err
	}
	if err := s.purge(ctx, workflowPK(bot, id)); err != nil {
		return err
	}
	ev, err := s.childUpdate(ctx, bot, "child_workflow_deleted", w)
	if err != nil || len(ev) == 0 {
		return err
	}
	if err := s.txWrite(ctx, eventsCountedN(bot, ev, 1)); err != nil {
		return err
	}
	s.notifyOutbox()
	return nil
}

// WorkflowFilter selects ListWorkflows ("" or nil = any).
type WorkflowFilter struct {
	BotID, ConversationID, UserID, ParentWorkflowID, Name string
	Statuses                                              []string
	Tags                                                  map[string]string
}

func (f WorkflowFilter) accepts(w platform.Workflow) bool {
	if (f.ConversationID != "" && w.ConversationID != f.ConversationID) || (f.UserID != "" && w.UserID != f.UserID) ||
		(f.ParentWorkflowID != "" && w.ParentWorkflowID != f.ParentWorkflowID) || (f.Name != "" && w.Name != f.Name) {
		return false
	}
	if len(f.Statuses) > 0 {
		ok := false
		for _, st := range f.Statuses {
			ok = ok || st == w.Status
		}
		if !ok {
			return false
		}
	}
	for k, v := range f.Tags {
		if w.Tags[k] != v {
			return false
		}
	}
	return true
}

// ListWorkflows lists the bot's workflows, most recent first.
func (s *Store) ListWorkflows(ctx context.Context, f WorkflowFilter, p Page) ([]platform.Workflow, map[string]string, error) {
	sp := span{index: GSI1, pk: botList(f.BotID, listWorkflows), desc: true}
	decode := func(it item) (platform.Workflow, bool, error) {
		w, _, err := workflowFrom(it)
		return w, err == nil, err
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, keep(decode, f.accepts))
	return out, startOf(next), err
}

// GetOrCreateWorkflow answers the bot's workflow of the same name, scope
// (conversation, user) and discriminating tags that has not ended, or
// creates w. Concurrent callers agree (a claim, as for messages).
func (s *Store) GetOrCreateWorkflow(ctx context.Context, bot string, w platform.Workflow, keys []string) (platform.Workflow, bool, error) {
	hash := claimHash([]string{"workflow", w.Name, w.ConversationID, w.UserID}, w.Tags, keys)
	var (
		out     platform.Workflow
		created bool
	)
	err := optimistic(ctx, "the workflow", func() error {
		found, stale, err := s.claimed(ctx, bot, "wf", hash, claimCheck(func(id string) (platform.Workflow, error) {
			return s.GetWorkflow(ctx, bot, id)
		}, func(x platform.Workflow) bool { return !platform.WorkflowDone(x.Status) }, &out))
		if err != nil || found {
			return err
		}
		claim := claimWrites(bot, "wf", hash, stale, workflowPK(bot, w.ID), w.ID)
		if err := s.createWorkflow(ctx, bot, w, claim); err != nil {
			return err
		}
		out, created = w, true
		return nil
	})
	return out, created, err
}
