package awslocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/botforge/platform/shared/fsutil"
)

// schedules is the EventBridge Scheduler of the stack: the REST API the
// admin and scheduler functions call (CreateSchedule, UpdateSchedule,
// DeleteSchedule, GetSchedule), its schedules kept in a file, and each
// schedule fired at its times: its target invoked with its input, by the
// role the schedule names (checked against that role's policy in the
// template), retried as its RetryPolicy says.
type schedules struct {
	path   string
	log    *slog.Logger
	invoke func(ctx context.Context, roleARN, functionARN string, payload []byte) error

	mu    sync.Mutex
	items map[string]*schedule // group/name
	next  map[string]time.Time
}

type schedule struct {
	Name                       string
	GroupName                  string
	ScheduleExpression         string
	ScheduleExpressionTimezone string `json:",omitempty"`
	State                      string `json:",omitempty"`
	FlexibleTimeWindow         json.RawMessage
	Target                     scheduleTarget
	CreationDate               float64
	LastModificationDate       float64
	Description                string `json:",omitempty"`
}

type scheduleTarget struct {
	Arn         string
	RoleArn     string
	Input       string `json:",omitempty"`
	RetryPolicy *struct {
		MaximumRetryAttempts     *int `json:",omitempty"`
		MaximumEventAgeInSeconds *int `json:",omitempty"`
	} `json:",omitempty"`
}

func openSchedules(path string, log *slog.Logger) (*schedules, error) {
	s := &schedules{path: path, log: log, items: map[string]*schedule{}, next: map[string]time.Time{}}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if len(b) > 0 {
		var list []*schedule
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, x := range list {
			s.items[x.GroupName+"/"+x.Name] = x
		}
	}
	return s, nil
}

func (s *schedules) saveLocked() error {
	list := make([]*schedule, 0, len(s.items))
	for _, x := range s.items {
		list = append(list, x)
	}
	b, _ := json.MarshalIndent(list, "", "  ")
	return fsutil.WriteFileAtomic(s.path, b)
}

func schedulerError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Message": msg})
}

func (s *schedules) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/schedules/")
	if !ok || name == "" {
		schedulerError(w, 400, "ValidationException", "aws-local: only schedules are served here")
		return
	}
	var in schedule
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			schedulerError(w, 400, "ValidationException", err.Error())
			return
		}
	}
	group := r.URL.Query().Get("groupName")
	if in.GroupName != "" {
		group = in.GroupName
	}
	if group == "" {
		group = "default"
	}
	key := group + "/" + name
	arn := "arn:aws:scheduler:" + Region + ":" + Account + ":schedule/" + key
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.items[key]
	now := float64(time.Now().UnixMilli()) / 1000
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		if r.Method == http.MethodPost && cur != nil {
			schedulerError(w, 409, "ConflictException", "Schedule "+name+" already exists.")
			return
		}
		if r.Method == http.MethodPut && cur == nil {
			schedulerError(w, 404, "ResourceNotFoundException", "Schedule "+name+" does not exist.")
			return
		}
		if _, err := nextFire(in.ScheduleExpression, time.Now()); err != nil {
			schedulerError(w, 400, "ValidationException", "Invalid Schedule Expression "+in.ScheduleExpression+": "+err.Error())
			return
		}
		in.Name, in.GroupName, in.LastModificationDate = name, group, now
		in.CreationDate = now
		if cur != nil {
			in.CreationDate = cur.CreationDate
		}
		if in.State == "" {
			in.State = "ENABLED"
		}
		s.items[key] = &in
		delete(s.next, key)
		if err := s.saveLocked(); err != nil {
			schedulerError(w, 500, "InternalServerException", err.Error())
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"ScheduleArn": arn})
	case http.MethodDelete:
		if cur == nil {
			schedulerError(w, 404, "ResourceNotFoundException", "Schedule "+name+" does not exist.")
			return
		}
		delete(s.items, key)
		delete(s.next, key)
		if err := s.saveLocked(); err != nil {
			schedulerError(w, 500, "InternalServerException", err.Error())
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{})
	case http.MethodGet:
		if cur == nil {
			schedulerError(w, 404, "ResourceNotFoundException", "Schedule "+name+" does not exist.")
			return
		}
		out := map[string]any{"Arn": arn}
		b, _ := json.Marshal(cur)
		_ = json.Unmarshal(b, &out)
		_ = json.NewEncoder(w).Encode(out)
	default:
		schedulerError(w, 400, "ValidationException", "unsupported method")
	}
}

// run fires due schedules until ctx is done.
func (s *schedules) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s.fireDue(ctx, now)
		}
	}
}

func (s *schedules) fireDue(ctx context.Context, now time.Time) {
	s.mu.Lock()
	var due []*schedule
	for key, x := range s.items {
		if x.State == "DISABLED" {
			continue
		}
		at, ok := s.next[key]
		if !ok {
			n, err := nextFire(x.ScheduleExpression, now)
			if err != nil {
				continue
			}
			s.next[key] = n
			continue
		}
		if now.Before(at) {
			continue
		}
		due = append(due, x)
		n, err := nextFire(x.ScheduleExpression, now)
		if err != nil {
			delete(s.next, key)
			continue
		}
		s.next[key] = n
	}
	s.mu.Unlock()
	for _, x := range due {
		go s.fire(ctx, *x)
	}
}

// fireAll fires every enabled schedule once now, waiting for each.
func (s *schedules) fireAll(ctx context.Context) {
	s.mu.Lock()
	var all []schedule
	for _, x := range s.items {
		if x.State != "DISABLED" {
			all = append(all, *x)
		}
	}
	s.mu.Unlock()
	for _, x := range all {
		s.fire(ctx, x)
	}
}

func (s *schedules) fire(ctx context.Context, x schedule) {
	retries := 185
	if x.Target.RetryPolicy != nil && x.Target.RetryPolicy.MaximumRetryAttempts != nil {
		retries = *x.Target.RetryPolicy.MaximumRetryAttempts
	}
	payload := []byte(x.Target.Input)
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	for attempt := 0; ; attempt++ {
		err := s.invoke(ctx, x.Target.RoleArn, x.Target.Arn, payload)
		if err == nil || attempt >= retries || ctx.Err() != nil {
			if err != nil {
				s.log.Warn("aws-local: scheduler: target failed", "schedule", x.GroupName+"/"+x.Name, "err", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(attempt+1) * time.Second):
		}
	}
}

var (
	rateExpr = regexp.MustCompile(`^rate\((\d+) (minutes?|hours?|days?)\)$`)
	cronExpr = regexp.MustCompile(`^cron\((.+)\)$`)
	atExpr   = regexp.MustCompile(`^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$`)
	digits   = regexp.MustCompile(`\d+`)
	cronSpec = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
)

// nextFire is the first time after now a schedule expression fires (UTC).
func nextFire(expr string, now time.Time) (time.Time, error) {
	if m := rateExpr.FindStringSubmatch(expr); m != nil {
		n, _ := strconv.Atoi(m[1])
		unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[m[2][0]]
		if n <= 0 {
			return time.Time{}, errors.New("rate must be positive")
		}
		return now.Add(time.Duration(n) * unit), nil
	}
	if m := atExpr.FindStringSubmatch(expr); m != nil {
		t, err := time.Parse("2006-01-02T15:04:05", m[1])
		if err != nil || !t.After(now) {
			return time.Time{}, errors.New("at() in the past")
		}
		return t, nil
	}
	m := cronExpr.FindStringSubmatch(expr)
	if m == nil {
		return time.Time{}, errors.New("not rate(), cron() or at()")
	}
	f := strings.Fields(m[1])
	if len(f) != 6 {
		return time.Time{}, errors.New("cron() has six fields")
	}
	if f[5] != "*" {
		return time.Time{}, errors.New("aws-local fires only schedules of every year")
	}
	// EventBridge numbers weekdays 1 (Sunday) to 7; robfig 0 to 6.
	dow := f[4]
	if dow != "?" && dow != "*" {
		var bad error
		dow = digits.ReplaceAllStringFunc(dow, func(d string) string {
			n, _ := strconv.Atoi(d)
			if n < 1 || n > 7 {
				bad = fmt.Errorf("day of week %q", f[4])
			}
			return strconv.Itoa(n - 1)
		})
		if bad != nil {
			return time.Time{}, bad
		}
	}
	sched, err := cronSpec.Parse(strings.Join([]string{f[0], f[1], f[2], f[3], dow}, " "))
	if err != nil {
		return time.Time{}, err
	}
	return sched.Next(now.UTC()), nil
}
