package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// ImportTask stores a task of an archive (docs/export-import.md) as
// CreateTask does, without its task_update event or first activity: the
// archive carries the source's events, and a past creation is not news to
// the bot. Its timeout is still checked.
func (s *Store) ImportTask(ctx context.Context, bot string, t platform.Task) error {
	it, err := taskItem(bot, t)
	if err != nil {
		return err
	}
	refs, kinds, err := recordRefs(bot, t.ConversationID, t.UserID, ref{t.ParentTaskID, platform.PrefixTask, "task", taskPK(bot, t.ParentTaskID), skTask})
	if err != nil {
		return err
	}
	fx, err := taskEffects(bot, t, "", "", false, true)
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

// ImportWorkflow stores a workflow of an archive as CreateWorkflow does,
// without its workflow_started event (as ImportTask); its timeout is
// still checked.
func (s *Store) ImportWorkflow(ctx context.Context, bot string, w platform.Workflow) error {
	it, err := workflowItem(bot, w)
	if err != nil {
		return err
	}
	refs, kinds, err := workflowRefs(bot, w)
	if err != nil {
		return err
	}
	fx, err := workflowEffects(bot, w, "", true)
	if err != nil {
		return err
	}
	err = s.txWrite(ctx, append(append([]types.TransactWriteItem{putNew(it)}, refs...), fx...))
	switch i := failedAt(err); {
	case i == 0:
		return platform.Errorf(platform.ErrAlreadyExists, "workflow %q already exists", w.ID)
	case i > 0 && i <= len(refs):
		return platform.Errorf(platform.ErrResourceNotFound, "%s not found", kinds[i-1])
	}
	if err == nil {
		s.notifyOutbox()
	}
	return err
}
