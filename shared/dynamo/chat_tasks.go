package dynamo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Tasks: one record (TASK#<bot>#<id>, "TASK"), listed in the bot's gsi1
// list TASKS, with its activities in the same partition (ACT#<time>#<id>,
// newest read first). Each change writes, in one transaction, the task, an
// activity when its status changed, its task_update event with the event's
// delivery, and the check of its timeout when timeoutAt moved.
const (
	listTasks  = "TASKS"
	skTask     = "TASK"
	skActivity = "ACT#"
)

func taskPK(bot, id string) string { return "TASK#" + bot + "#" + id }

func taskFrom(it item) (platform.Task, int64, error) {
	var t platform.Task
	err := decodeDoc(it, &t)
	return t, getN(it, attrVer), err
}

func taskItem(bot string, t platform.Task) (item, error) {
	it, err := chatItem(taskPK(bot, t.ID), skTask, t)
	if err != nil {
		return nil, err
	}
	it[attrGSI1PK], it[attrGSI1SK] = str(botList(bot, listTasks)), str(timeKey(t.CreatedAt, t.ID))
	return it, nil
}

// taskEffects are the writes that go with a task as it is now: its
// task_update event (updateType "" for none), an activity when its status
// changed (from "" at creation), the check of its timeout.
func taskEffects(bot string, t platform.Task, updateType, fromStatus string, statusChanged, checkTimeout bool) ([]types.TransactWriteItem, error) {
	var out []types.TransactWriteItem
	if updateType != "" {
		payload, err := json.Marshal(map[string]any{"type": updateType, "task": t})
		if err != nil {
			return nil, err
		}
		e := platform.Event{ID: platform.NewID(platform.PrefixEvent), CreatedAt: t.UpdatedAt, Type: platform.EventTaskUpdate,
			Payload: payload, ConversationID: t.ConversationID, UserID: t.UserID, Status: platform.EventPending}
		ev, err := newEventWrites(bot, e)
		if err != nil {
			return nil, err
		}
		out = append(append(out, ev...), usageAdd(bot, UsageEvents, 1))
	}
	if statusChanged {
		data, err := json.Marshal(map[string]any{"from": fromStatus, "to": t.Status})
		if err != nil {
			return nil, err
		}
		desc := "task status: " + t.Status
		if fromStatus != "" {
			desc = "task status: " + fromStatus + " -> " + t.Status
		}
		a := platform.Activity{ID: platform.NewID(platform.PrefixActivity), TaskID: t.ID, Category: platform.ActivityTaskStatus,
			Description: desc, Data: data, CreatedAt: t.UpdatedAt}
		it, err := chatItem(taskPK(bot, t.ID), skActivity+timeKey(a.CreatedAt, a.ID), a)
		if err != nil {
			return nil, err
		}
		out = append(out, putNew(it))
	}
	if checkTimeout && !platform.TaskDone(t.Status) && t.TimeoutAt != "" {
		d := newDelivery(platform.DeliverTaskTimeout, bot, "", t.TimeoutAt)
		d.TaskID, d.ExpiresAt = t.ID, t.TimeoutAt
		put, err := outboxPut(d)
		if err != nil {
			return nil, err
		}
		out = append(out, put)
	}
	return out, nil
}

// CreateTask stores a new task with, in the same transaction, the checks
// that its conversation, user and parent task exist, its first activity,
// its task_update event (task_created) and the check of its timeout.
func (s *Store) CreateTask(ctx context.Context, bot string, t platform.Task) error {
	it, err := taskItem(bot, t)
	if err != nil {
		return err
	}
	refs, kinds, err := recordRefs(bot, t.ConversationID, t.UserID, ref{t.ParentTaskID, platform.PrefixTask, "task", taskPK(bot, t.ParentTaskID), skTask})
	if err != nil {
		return err
	}
	fx, err := taskEffects(bot, t, "task_created", "", true, true)
	if err != nil {
		return err
	}
	err = s.txWrite(ctx, append(append([]types.TransactWriteItem{putNew(it)}, refs...), fx...))
	switch i := failedAt(err); {
	case i == 0:
		return platform.Errorf(platform.ErrAlreadyExists, "task %q already exists", t.ID)
	case i > 0 && i <= len(refs):
		return platform.Errorf(platform.ErrResourceNotFound, "%s not found", kinds[i-1])
	}
	if err == nil {
		s.notifyOutbox()
	}
	return err
}

// GetTask reads a task of the bot.
func (s *Store) GetTask(ctx context.Context, bot, id string) (platform.Task, error) {
	t, _, err := s.getTask(ctx, bot, id)
	return t, err
}

func (s *Store) getTask(ctx context.Context, bot, id string) (platform.Task, int64, error) {
	if !platform.HasPrefix(id, platform.PrefixTask) {
		return platform.Task{}, 0, platform.NotFound("task", id)
	}
	it, err := s.get(ctx, taskPK(bot, id), skTask)
	if err != nil {
		return platform.Task{}, 0, err
	}
	if it == nil {
		return platform.Task{}, 0, platform.NotFound("task", id)
	}
	return taskFrom(it)
}

// TaskChange computes a task's next value; updateType names the
// task_update event to emit ("" for none).
type TaskChange func(t *platform.Task) (updateType string, err error)

// UpdateTask applies change, conditional on the version read (retried on a
// concurrent change), with its event, activity and timeout check in the
// same transaction.
func (s *Store) UpdateTask(ctx context.Context, bot, id string, change TaskChange) (platform.Task, error) {
	var out platform.Task
	err := optimistic(ctx, "task "+id, func() error {
		t, ver, err := s.getTask(ctx, bot, id)
		if err != nil {
			return err
		}
		before, status := t.TimeoutAt, t.Status
		typ, err := change(&t)
		if err != nil {
			return err
		}
		upd, err := replaceVersioned(taskPK(bot, id), skTask, t, ver)
		if err != nil {
			return err
		}
		fx, err := taskEffects(bot, t, typ, status, t.Status != status, t.TimeoutAt != before)
		if err != nil {
			return err
		}
		err = s.txWrite(ctx, append([]types.TransactWriteItem{upd}, fx...))
		if failedAt(err) == 0 {
			return errRetry
		}
		if err == nil {
			out = t
			s.notifyOutbox()
		}
		return err
	})
	return out, err
}

// TimeOutTask ends a task whose timeoutAt has come (and was not moved
// since) with the status timeout and its task_update event; false when
// there was nothing to do.
func (s *Store) TimeOutTask(ctx context.Context, bot, id, timeoutAt string, now time.Time) (bool, error) {
	done := false
	_, err := s.UpdateTask(ctx, bot, id, func(t *platform.Task) (string, error) {
		done = false
		if platform.TaskDone(t.Status) || t.TimeoutAt != timeoutAt || t.TimeoutAt > platform.FormatTime(now) {
			return "", errNothing
		}
		t.Status, t.FailureReason = platform.TaskTimeout, "the task timed out"
		t.UpdatedAt = platform.FormatTime(now)
		done = true
		return "task_timedout", nil
	})
	if err == errNothing || platform.TypeOf(err) == platform.ErrResourceNotFound {
		return false, nil
	}
	return done, err
}

// DeleteTask deletes a task and its activities.
func (s *Store) DeleteTask(ctx context.Context, bot, id string) error {
	if _, _, err := s.getTask(ctx, bot, id); err != nil {
		return err
	}
	return s.purge(ctx, taskPK(bot, id))
}

// TaskFilter selects ListTasks ("" or nil = any).
type TaskFilter struct {
	BotID, ConversationID, UserID, ParentTaskID, Type string
	Statuses                                          []string
	Tags                                              map[string]string
}

func (f TaskFilter) accepts(t platform.Task) bool {
	if (f.ConversationID != "" && t.ConversationID != f.ConversationID) || (f.UserID != "" && t.UserID != f.UserID) ||
		(f.ParentTaskID != "" && t.ParentTaskID != f.ParentTaskID) || (f.Type != "" && t.Type != f.Type) {
		return false
	}
	if len(f.Statuses) > 0 {
		ok := false
		for _, st := range f.Statuses {
			ok = ok || st == t.Status
		}
		if !ok {
			return false
		}
	}
	for k, v := range f.Tags {
		if t.Tags[k] != v {
			return false
		}
	}
	return true
}

// ListTasks lists the bot's tasks, most recent first.
func (s *Store) ListTasks(ctx context.Context, f TaskFilter, p Page) ([]platform.Task, map[string]string, error) {
	sp := span{index: GSI1, pk: botList(f.BotID, listTasks), desc: true}
	decode := func(it item) (platform.Task, bool, error) {
		t, _, err := taskFrom(it)
		return t, err == nil, err
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, keep(decode, f.accepts))
	return out, startOf(next), err
}

// ListActivities lists a task's activities, most recent first (one Query
// of the task's partition; a task of another bot is not found).
func (s *Store) ListActivities(ctx context.Context, bot, taskID string, p Page) ([]platform.Activity, map[string]string, error) {
	if _, _, err := s.getTask(ctx, bot, taskID); err != nil {
		return nil, nil, err
	}
	sp := span{pk: taskPK(bot, taskID), lo: skActivity, hi: skActivity + "~", desc: true}
	decode := func(it item) (platform.Activity, bool, error) {
		var a platform.Activity
		err := decodeDoc(it, &a)
		return a, err == nil, err
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, keep(decode, nil))
	return out, startOf(next), err
}

// purgeBotTasks deletes a deleted bot's tasks with their activities.
func (s *Store) purgeBotTasks(ctx context.Context, bot string) error {
	return s.eachInList(ctx, botList(bot, listTasks), func(pks []string) error {
		for _, pk := range pks {
			if err := s.purge(ctx, pk); err != nil {
				return err
			}
		}
		return nil
	})
}
