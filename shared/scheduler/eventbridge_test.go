package scheduler_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/scheduler"
	"github.com/botforge/platform/shared/scheduler/schedulertest"
)

// newEventBridge is the adapter over a fake EventBridge Scheduler endpoint.
func newEventBridge(t *testing.T) (*scheduler.EventBridge, *schedulertest.Server) {
	fake := schedulertest.New()
	t.Cleanup(fake.Close)
	client := awsscheduler.New(awsscheduler.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(fake.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	return &scheduler.EventBridge{Client: client, Group: "platform", TargetARN: "arn:aws:lambda:us-east-1:1:function:scheduler", RoleARN: "arn:aws:iam::1:role/scheduler"}, fake
}

func TestEventBridgeAdapter(t *testing.T) {
	eb, fake := newEventBridge(t)
	ctx := context.Background()
	in := platform.RecurringInput{BotID: "bot_1", Event: "tick", Cron: "0 9 * * 1-5", ScheduledAt: "2025-01-01T00:00:00Z"}
	s := platform.Schedule{Name: platform.ScheduleName("bot_1", "tick"), Cron: in.Cron, Input: in}

	if err := eb.CreateSchedule(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := eb.CreateSchedule(ctx, s); platform.TypeOf(err) != platform.ErrAlreadyExists {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	got := fake.Schedules()
	if len(got) != 1 {
		t.Fatalf("schedules: %+v", got)
	}
	g := got[0]
	if g.Name != s.Name || g.GroupName != "platform" || g.ScheduleExpression != "cron(0 9 ? * 2-6 *)" ||
		g.ScheduleExpressionTimezone != "UTC" || g.State != "ENABLED" || g.FlexibleTimeWindow.Mode != "OFF" {
		t.Fatalf("schedule: %+v", g)
	}
	if g.Target.Arn != eb.TargetARN || g.Target.RoleArn != eb.RoleARN || g.Target.RetryPolicy.MaximumRetryAttempts != 2 {
		t.Fatalf("target: %+v", g.Target)
	}
	var input platform.RecurringInput
	if err := json.Unmarshal([]byte(g.Target.Input), &input); err != nil || input != in {
		t.Fatalf("target input %s: %v", g.Target.Input, err)
	}

	s.Cron, s.Input.Cron = "*/10 * * * *", "*/10 * * * *"
	if err := eb.UpdateSchedule(ctx, s); err != nil {
		t.Fatal(err)
	}
	if e := fake.Schedules()[0].ScheduleExpression; e != "cron(0,10,20,30,40,50 * * * ? *)" {
		t.Fatalf("updated expression %q", e)
	}
	if err := eb.DeleteSchedule(ctx, s.Name); err != nil {
		t.Fatal(err)
	}
	if err := eb.DeleteSchedule(ctx, s.Name); platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("second delete: %v, want ResourceNotFound", err)
	}
	if err := eb.UpdateSchedule(ctx, s); platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("update of a missing schedule: %v", err)
	}
	// PutSchedule creates, then updates.
	if err := platform.PutSchedule(ctx, eb, s); err != nil {
		t.Fatal(err)
	}
	if err := platform.PutSchedule(ctx, eb, s); err != nil {
		t.Fatal(err)
	}
	// An expression EventBridge cannot run is refused before any call.
	n := len(fake.Calls())
	bad := s
	bad.Cron = "*/5 * * * * *"
	if err := eb.CreateSchedule(ctx, bad); platform.TypeOf(err) != platform.ErrInvalidPayload {
		t.Fatalf("seconds: %v", err)
	}
	if err := eb.CheckCron(bad.Cron); err == nil {
		t.Fatal("CheckCron accepted seconds")
	}
	if len(fake.Calls()) != n {
		t.Fatal("an invalid expression reached the service")
	}
}
