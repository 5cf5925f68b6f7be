package scheduler

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/botforge/platform/shared/platform"
)

// EventBridge is platform.Scheduler over Amazon EventBridge Scheduler: one
// schedule per recurring event, in one schedule group, each invoking the
// scheduler function (functions/scheduler) with the event's RecurringInput.
type EventBridge struct {
	Client *scheduler.Client
	// Group is the schedule group holding the platform's schedules.
	Group string
	// TargetARN is the scheduler function's ARN; RoleARN the IAM role
	// EventBridge Scheduler assumes to invoke it.
	TargetARN, RoleARN string
}

var _ platform.Scheduler = (*EventBridge)(nil)

// CheckCron accepts what EventBridge can run: see Cron.EventBridge.
func (e *EventBridge) CheckCron(cron string) error {
	_, err := ToEventBridge(cron)
	return err
}

// target is the schedule's target: the function, the role, the input.
// Retries are few and short: a recurring event fired late is worth little,
// and the function records delivery failures itself instead of failing.
func (e *EventBridge) target(s platform.Schedule) (*types.Target, error) {
	in, err := json.Marshal(s.Input)
	if err != nil {
		return nil, err
	}
	return &types.Target{
		Arn:     aws.String(e.TargetARN),
		RoleArn: aws.String(e.RoleARN),
		Input:   aws.String(string(in)),
		RetryPolicy: &types.RetryPolicy{
			MaximumRetryAttempts:     aws.Int32(2),
			MaximumEventAgeInSeconds: aws.Int32(60),
		},
	}, nil
}

// CreateSchedule is CreateSchedule; a taken name is ErrAlreadyExists.
func (e *EventBridge) CreateSchedule(ctx context.Context, s platform.Schedule) error {
	expr, err := ToEventBridge(s.Cron)
	if err != nil {
		return err
	}
	t, err := e.target(s)
	if err != nil {
		return err
	}
	_, err = e.Client.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name:                       aws.String(s.Name),
		GroupName:                  aws.String(e.Group),
		ScheduleExpression:         aws.String(expr),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		State:                      types.ScheduleStateEnabled,
		Target:                     t,
	})
	return mapErr(err, s.Name)
}

// UpdateSchedule is UpdateSchedule (a full replacement of the schedule); a
// missing schedule is ErrResourceNotFound.
func (e *EventBridge) UpdateSchedule(ctx context.Context, s platform.Schedule) error {
	expr, err := ToEventBridge(s.Cron)
	if err != nil {
		return err
	}
	t, err := e.target(s)
	if err != nil {
		return err
	}
	_, err = e.Client.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
		Name:                       aws.String(s.Name),
		GroupName:                  aws.String(e.Group),
		ScheduleExpression:         aws.String(expr),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		State:                      types.ScheduleStateEnabled,
		Target:                     t,
	})
	return mapErr(err, s.Name)
}

// DeleteSchedule is DeleteSchedule; a missing schedule is ErrResourceNotFound.
func (e *EventBridge) DeleteSchedule(ctx context.Context, name string) error {
	_, err := e.Client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{
		Name: aws.String(name), GroupName: aws.String(e.Group),
	})
	return mapErr(err, name)
}

func mapErr(err error, name string) error {
	if err == nil {
		return nil
	}
	var conflict *types.ConflictException
	var notFound *types.ResourceNotFoundException
	var invalid *types.ValidationException
	switch {
	case errors.As(err, &conflict):
		return platform.Errorf(platform.ErrAlreadyExists, "schedule %q already exists", name)
	case errors.As(err, &notFound):
		return platform.NotFound("schedule", name)
	case errors.As(err, &invalid):
		return platform.Invalid("the scheduler refused schedule %q: %s", name, aws.ToString(invalid.Message))
	}
	return err
}
