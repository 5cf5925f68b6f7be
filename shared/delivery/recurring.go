package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Headers of a delivery to a bot, as the Botpress SDK's bot handler reads them.
const (
	HeaderBotID         = "x-bot-id"
	HeaderOperation     = "x-bp-operation"
	HeaderType          = "x-bp-type"
	HeaderConfiguration = "x-bp-configuration"
)

// Bots is what firing a recurring event reads and records.
type Bots interface {
	// BotByID reads a bot; ErrResourceNotFound when it does not exist.
	BotByID(ctx context.Context, id string) (platform.Bot, error)
	// RecordRecurringOutcome records the outcome of a firing on the bot's
	// recurring event: failure nil resets failedAttempts and
	// lastFailureReason, otherwise failedAttempts grows by one.
	RecordRecurringOutcome(ctx context.Context, botID, event string, failure *string) error
}

// EventRecorder persists the events recurring events create, where the
// Chat API's getEvent reads them (dynamo.Store). Optional.
type EventRecorder interface {
	CreateEvent(ctx context.Context, botID string, ev platform.Event) error
}

// EventStatusRecorder, when the EventRecorder also is one, records how the
// delivery of an event went (processed, or failed with the reason).
type EventStatusRecorder interface {
	SetEventStatus(ctx context.Context, botID, eventID, status string, failureReason *string) error
}

// Recurring fires bots' recurring events: it is the scheduler function
// (functions/scheduler in Lambda, shared/scheduler.Local locally).
type Recurring struct {
	Bots   Bots
	Events EventRecorder // nil: events are delivered but not stored
	// PruneEvents, when set, runs after each firing's event is stored:
	// the local platform deletes the bot's events past their retention
	// there (DynamoDB's TTL does it in AWS). Failures are only logged.
	PruneEvents func(ctx context.Context, botID string) error
	Scheduler   platform.Scheduler
	Client      *http.Client
	Observer    Observer // nil: none
	Log         *slog.Logger
	// Code runs deployed code (a bot with code and no url); nil: none.
	Code platform.CodeRunner
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// orphanGrace is how old a schedule must be before it deletes itself for
// lack of a bot or entry: a younger one may belong to a definition being
// committed (schedules are written before the definition).
const orphanGrace = time.Minute

// MaxBotTimeout caps the time a bot gets to answer a delivery.
const MaxBotTimeout = 2 * time.Minute

// Handle is the scheduler function: it fires the recurring event named by
// input. Errors are returned only when the platform itself failed (so the
// scheduler may retry); a bot that fails is recorded, not retried.
func (r *Recurring) Handle(ctx context.Context, input json.RawMessage) error {
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	var in platform.RecurringInput
	if err := json.Unmarshal(input, &in); err != nil || in.BotID == "" || in.Event == "" {
		log.Error("recurring event: unusable schedule input", "input", string(input), "err", err)
		return nil
	}
	name := platform.ScheduleName(in.BotID, in.Event)
	orphan := func(why string) error {
		at, err := time.Parse(time.RFC3339Nano, in.ScheduledAt)
		if err == nil && now().Sub(at) < orphanGrace {
			return nil
		}
		log.Info("recurring event: deleting an orphan schedule", "schedule", name, "why", why)
		if r.Scheduler == nil {
			return nil
		}
		return platform.DeleteScheduleIfAny(ctx, r.Scheduler, name)
	}
	bot, err := r.Bots.BotByID(ctx, in.BotID)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return orphan("the bot no longer exists")
	}
	if err != nil {
		return err
	}
	raw, ok := bot.RecurringEvents[in.Event]
	if !ok {
		return orphan("the bot no longer declares the recurring event")
	}
	var def platform.RecurringEvent
	if err := json.Unmarshal(raw, &def); err != nil {
		return fmt.Errorf("recurring event %s of bot %s: %w", in.Event, bot.ID, err)
	}
	payload := def.Payload
	if len(payload) == 0 || string(payload) == "null" {
		payload = json.RawMessage(`{}`)
	}
	ev := platform.Event{
		ID: platform.NewID(platform.PrefixEvent), CreatedAt: platform.FormatTime(now()),
		Type: def.Type, Payload: payload, Status: platform.EventPending,
	}
	if r.Events != nil {
		if err := r.Events.CreateEvent(ctx, bot.ID, ev); err != nil {
			return err
		}
	}
	if r.PruneEvents != nil {
		if err := r.PruneEvents(ctx, bot.ID); err != nil {
			log.WarnContext(ctx, "expired events not pruned", "bot", bot.ID, "err", err)
		}
	}
	res := r.deliver(ctx, bot, ev)
	var failure *string
	if res.Outcome != Delivered {
		msg := res.Err
		failure = &msg
	}
	if err := r.Bots.RecordRecurringOutcome(ctx, bot.ID, in.Event, failure); err != nil &&
		platform.TypeOf(err) != platform.ErrResourceNotFound {
		return err
	}
	if st, ok := r.Events.(EventStatusRecorder); ok {
		status := "processed"
		if failure != nil {
			status = "failed"
		}
		if err := st.SetEventStatus(ctx, bot.ID, ev.ID, status, failure); err != nil {
			return err
		}
	}
	if r.Observer != nil {
		r.Observer(ctx, Result{
			Kind: "recurring_event", BotID: bot.ID, WorkspaceID: bot.WorkspaceID, Name: in.Event,
			EventID: ev.ID, EventType: ev.Type, URL: bot.URL, Outcome: res.Outcome,
			StatusCode: res.StatusCode, Error: res.Err, At: now(), Duration: res.Duration,
		})
	}
	return nil
}

// deliver posts the event to the bot's url, signed with its signing secret.
func (r *Recurring) deliver(ctx context.Context, bot platform.Bot, ev platform.Event) Response {
	var err error
	if bot.URL, err = platform.BotTarget(ctx, r.Code, bot); err != nil {
		return Response{Outcome: Failed, Err: err.Error()}
	}
	req, err := BotRequest(bot, "event_received", ev.Type, map[string]any{"event": ev})
	if err != nil {
		return Response{Outcome: Failed, Err: err.Error()}
	}
	client := r.Client
	if client == nil {
		client = Client(false)
	}
	return Send(ctx, client, req)
}

// BotRequest is a call to a bot as the Botpress SDK's bot handler reads it
// (docs/runtime.md): the operation and type headers, the bot's
// configuration, its id and its user's, signed with its signing secret,
// bounded by its maxExecutionTime. A bot without a url cannot be called.
func BotRequest(bot platform.Bot, operation, typ string, body any) (Request, error) {
	if bot.URL == "" {
		return Request{}, errors.New("the bot has no url to deliver events to")
	}
	b, err := json.Marshal(body)
	if err != nil {
		return Request{}, err
	}
	// The bot's configuration as the SDK's bot server reads it: an object
	// whose payload is the JSON text of the configuration's data (the
	// protocol notes, 2.1).
	data := json.RawMessage(`{}`)
	var c struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(bot.Configuration, &c) == nil && len(c.Data) > 0 && string(c.Data) != "null" {
		data = c.Data
	}
	cfg, err := json.Marshal(map[string]any{"id": bot.ID, "createdAt": bot.CreatedAt, "updatedAt": bot.UpdatedAt, "type": "bot", "payload": string(data)})
	if err != nil {
		return Request{}, err
	}
	h := http.Header{}
	h.Set(HeaderBotID, bot.ID)
	h.Set(HeaderBotUserID, bot.ID)
	h.Set(HeaderOperation, operation)
	h.Set(HeaderType, typ)
	h.Set(HeaderConfiguration, base64.StdEncoding.EncodeToString(cfg))
	return Request{URL: bot.URL, Secret: bot.SigningSecret, Body: b, Header: h, Timeout: BotTimeout(bot)}, nil
}

// BotTimeout is how long a bot gets to answer: its maxExecutionTime, within
// bounds.
func BotTimeout(bot platform.Bot) time.Duration {
	if bot.MaxExecutionTime != nil && *bot.MaxExecutionTime > 0 {
		return min(time.Duration(*bot.MaxExecutionTime*float64(time.Second)), MaxBotTimeout)
	}
	return DefaultTimeout
}
