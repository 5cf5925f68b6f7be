// Package schedulertest is a fake Amazon EventBridge Scheduler endpoint for
// tests: it speaks the service's REST-JSON protocol for CreateSchedule,
// UpdateSchedule, GetSchedule and DeleteSchedule, keeps the schedules in
// memory and records every call, so tests can check what the platform asked
// of the real service.
package schedulertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Schedule is a schedule as the fake received it.
type Schedule struct {
	Name                       string
	GroupName                  string
	ScheduleExpression         string
	ScheduleExpressionTimezone string
	State                      string
	FlexibleTimeWindow         struct{ Mode string }
	Target                     struct {
		Arn, RoleArn, Input string
		RetryPolicy         struct{ MaximumRetryAttempts, MaximumEventAgeInSeconds int }
	}
}

// Call is one request the fake served.
type Call struct {
	Op     string // CreateSchedule, UpdateSchedule, GetSchedule, DeleteSchedule
	Name   string
	Status int
}

// Server is the fake endpoint.
type Server struct {
	*httptest.Server
	mu        sync.Mutex
	schedules map[string]Schedule // by group/name
	calls     []Call
}

// New starts a fake endpoint; close it with Close.
func New() *Server {
	f := &Server{schedules: map[string]Schedule{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.EscapedPath(), "/schedules/")
	if !ok {
		apiError(w, 400, "ValidationException", "unsupported path "+r.URL.Path)
		return
	}
	name, _ = url.PathUnescape(name)
	var in Schedule
	if r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			apiError(w, 400, "ValidationException", err.Error())
			return
		}
	}
	in.Name = name
	group := in.GroupName
	if g := r.URL.Query().Get("groupName"); g != "" {
		group = g
	}
	if group == "" {
		group = "default"
	}
	key := group + "/" + name
	f.mu.Lock()
	defer f.mu.Unlock()
	record := func(op string, status int) { f.calls = append(f.calls, Call{Op: op, Name: name, Status: status}) }
	_, exists := f.schedules[key]
	switch r.Method {
	case http.MethodPost:
		if exists {
			record("CreateSchedule", 409)
			apiError(w, 409, "ConflictException", "Schedule "+name+" already exists.")
			return
		}
		if !strings.HasPrefix(in.ScheduleExpression, "cron(") && !strings.HasPrefix(in.ScheduleExpression, "rate(") && !strings.HasPrefix(in.ScheduleExpression, "at(") {
			record("CreateSchedule", 400)
			apiError(w, 400, "ValidationException", "Invalid Schedule Expression "+in.ScheduleExpression)
			return
		}
		f.schedules[key] = in
		record("CreateSchedule", 200)
		writeJSON(w, map[string]string{"ScheduleArn": "arn:aws:scheduler:us-east-1:123456789012:schedule/" + key})
	case http.MethodPut:
		if !exists {
			record("UpdateSchedule", 404)
			apiError(w, 404, "ResourceNotFoundException", "Schedule "+name+" does not exist.")
			return
		}
		f.schedules[key] = in
		record("UpdateSchedule", 200)
		writeJSON(w, map[string]string{"ScheduleArn": "arn:aws:scheduler:us-east-1:123456789012:schedule/" + key})
	case http.MethodDelete:
		if !exists {
			record("DeleteSchedule", 404)
			apiError(w, 404, "ResourceNotFoundException", "Schedule "+name+" does not exist.")
			return
		}
		delete(f.schedules, key)
		record("DeleteSchedule", 200)
		writeJSON(w, map[string]string{})
	case http.MethodGet:
		s, ok := f.schedules[key]
		if !ok {
			record("GetSchedule", 404)
			apiError(w, 404, "ResourceNotFoundException", "Schedule "+name+" does not exist.")
			return
		}
		record("GetSchedule", 200)
		writeJSON(w, s)
	default:
		apiError(w, 405, "ValidationException", "method not allowed")
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Message": msg})
}

// Schedules returns the schedules held, sorted by name.
func (f *Server) Schedules() []Schedule {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Schedule, 0, len(f.schedules))
	for _, s := range f.schedules {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Calls returns the calls served so far.
func (f *Server) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}
