package functions_test

// Deleting a bot on AWS: the admin function deletes its files' contents
// from the bucket, and the sweeper function, on its schedule, finishes a
// deletion the admin function could not (here: S3 refusing the deletes).

import (
	"context"
	"errors"
	"testing"

	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/runtime"
)

// objectExists tells whether the bucket holds key.
func (s *standIns) objectExists(t *testing.T, key string) bool {
	t.Helper()
	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = runtime.FileStorage(cfg, runtime.FromEnv()).Head(context.Background(), key)
	if errors.Is(err, platform.ErrNoObject) {
		return false
	}
	if err != nil {
		t.Fatalf("head %s: %v", key, err)
	}
	return true
}

func (s *standIns) pending(t *testing.T) int {
	t.Helper()
	n, err := s.Store.PendingDeletions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// deleteBot deletes the bot through the admin function's handler.
func (s *standIns) deleteBot(t *testing.T, workspaceID, botID string) {
	t.Helper()
	s.call(t, httpapi.AreaAdmin, "DELETE", "/v1/admin/bots/"+botID, map[string]string{"x-workspace-id": workspaceID}, nil)
}

// sweeperHandler is the sweeper function's handler, built as
// runtime.StartSweeper builds it.
func sweeperHandler(t *testing.T) func(context.Context, []byte) error {
	t.Helper()
	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := runtime.SweepDeletions(runtime.Sweeper(cfg, runtime.FromEnv()))
	return func(ctx context.Context, ev []byte) error { return h(ctx, ev) }
}

// TestDeleteBotDeletesFileContents: deleteBot, answered by the admin
// function, leaves none of the bot's files in the bucket, and no deletion
// pending.
func TestDeleteBotDeletesFileContents(t *testing.T) {
	s := newStandIns(t)
	ws, botID := s.bot(t)
	_, key := s.uploadedFile(t, botID, "hello, world")
	if !s.objectExists(t, key) {
		t.Fatalf("the upload did not store %s", key)
	}
	s.deleteBot(t, ws, botID)
	if s.objectExists(t, key) {
		t.Fatalf("%s is still in the bucket after deleteBot", key)
	}
	if n := s.pending(t); n != 0 {
		t.Fatalf("%d deletions pending after deleteBot", n)
	}
}

// TestScheduledSweepFinishesAnInterruptedDelete: when S3 refuses the
// admin function's deletes, deleteBot still answers (the bot is gone) and
// the deletion stays pending, file record included; the sweeper function,
// invoked by its schedule once S3 accepts deletes again, deletes the
// contents and the record and drops the pending deletion.
func TestScheduledSweepFinishesAnInterruptedDelete(t *testing.T) {
	s := newStandIns(t)
	ws, botID := s.bot(t)
	fileID, key := s.uploadedFile(t, botID, "hello, world")

	s.DenyS3Deletes.Store(true)
	s.deleteBot(t, ws, botID)
	if !s.objectExists(t, key) {
		t.Fatal("S3 refused deletes, yet the object is gone")
	}
	if n := s.pending(t); n != 1 {
		t.Fatalf("%d deletions pending after deleteBot with S3 refusing deletes; want the bot's (its file's contents were not deleted)", n)
	}
	if _, err := s.Store.GetFile(context.Background(), fileID); err != nil {
		t.Fatalf("the file's record, the only name of its contents, is gone before them: %v", err)
	}

	sweep := sweeperHandler(t)
	ev := sampleEvent(t, "sweeper-schedule.json", nil)
	// S3 still refusing: the run fails, and keeps the deletion pending.
	if err := sweep(context.Background(), ev); err == nil {
		t.Fatal("a sweep that could not delete the contents reported success")
	}
	if n := s.pending(t); n != 1 {
		t.Fatalf("%d deletions pending after a failed sweep, want 1", n)
	}

	s.DenyS3Deletes.Store(false)
	if err := sweep(context.Background(), ev); err != nil {
		t.Fatalf("scheduled sweep: %v", err)
	}
	if s.objectExists(t, key) {
		t.Fatalf("%s is still in the bucket after the scheduled sweep", key)
	}
	if _, err := s.Store.GetFile(context.Background(), fileID); platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("the file's record after the sweep: %v", err)
	}
	if n := s.pending(t); n != 0 {
		t.Fatalf("%d deletions pending after the scheduled sweep", n)
	}
}
