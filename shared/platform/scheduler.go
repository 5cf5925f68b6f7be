package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Scheduler manages the schedules of bots' recurring events: EventBridge
// Scheduler in AWS (shared/scheduler.EventBridge), an in-process scheduler
// locally (shared/scheduler.Local). Its methods are the EventBridge Scheduler
// calls the platform makes, with the errors mapped to the domain's:
// CreateSchedule answers ErrAlreadyExists for a taken name, UpdateSchedule
// and DeleteSchedule ErrResourceNotFound for a missing one.
type Scheduler interface {
	// CheckCron reports, as an InvalidPayload error, a cron expression this
	// scheduler cannot run. It makes no call.
	CheckCron(cron string) error
	CreateSchedule(ctx context.Context, s Schedule) error
	UpdateSchedule(ctx context.Context, s Schedule) error
	DeleteSchedule(ctx context.Context, name string) error
}

// Schedule is the schedule of one recurring event of a bot.
type Schedule struct {
	Name string // ScheduleName(botID, event)
	// Cron is the expression the bot declares: five fields (minute hour
	// day-of-month month day-of-week, UTC), or six with leading seconds
	// where the scheduler supports it (locally).
	Cron string
	// Input is what the schedule hands the scheduler function when it fires.
	Input RecurringInput
}

// RecurringInput is the payload of a schedule's target: which recurring
// event of which bot to fire. The event's type and payload are read from the
// bot when it fires, so a schedule never delivers a stale definition.
type RecurringInput struct {
	BotID string `json:"botId"`
	Event string `json:"recurringEvent"`
	Cron  string `json:"cron"`
	// ScheduledAt is when the schedule was written. A schedule whose bot or
	// entry is missing deletes itself when it fires, unless it is younger
	// than a minute (its definition may be being committed).
	ScheduledAt string `json:"scheduledAt"`
}

// ScheduleName is the schedule name of a bot's recurring event: unique,
// within EventBridge's 64 characters of [0-9a-zA-Z-_.], and stable.
func ScheduleName(botID, event string) string {
	sum := sha256.Sum256([]byte(event))
	return botID + "-" + hex.EncodeToString(sum[:8])
}

// PutSchedule creates a schedule or, when one by that name exists, updates it.
func PutSchedule(ctx context.Context, s Scheduler, sch Schedule) error {
	err := s.CreateSchedule(ctx, sch)
	if TypeOf(err) == ErrAlreadyExists {
		err = s.UpdateSchedule(ctx, sch)
		if TypeOf(err) == ErrResourceNotFound { // deleted in between
			err = s.CreateSchedule(ctx, sch)
		}
	}
	return err
}

// DeleteScheduleIfAny deletes a schedule; a missing one is not an error.
func DeleteScheduleIfAny(ctx context.Context, s Scheduler, name string) error {
	if err := s.DeleteSchedule(ctx, name); err != nil && TypeOf(err) != ErrResourceNotFound {
		return err
	}
	return nil
}

// RecurringEvent is an entry of a bot's recurringEvents, with its run
// bookkeeping.
type RecurringEvent struct {
	Schedule struct {
		Cron string `json:"cron"`
	} `json:"schedule"`
	Type              string          `json:"type"`
	Payload           json.RawMessage `json:"payload"`
	FailedAttempts    int             `json:"failedAttempts"`
	LastFailureReason *string         `json:"lastFailureReason"`
}
