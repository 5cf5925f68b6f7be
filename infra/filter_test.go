package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// matchesFilter applies a Lambda event filter pattern to a record, for the
// pattern forms the stack uses: nested objects, and arrays of values one of
// which the record's value must equal, or of {"prefix": p} a string record
// must start with. Any other form fails the test (the matcher would not
// know what it means).
func matchesFilter(t *testing.T, pattern, record any) bool {
	t.Helper()
	switch p := pattern.(type) {
	case map[string]any:
		r, ok := record.(map[string]any)
		if !ok {
			return false
		}
		for k, sub := range p {
			v, present := r[k]
			if !present || !matchesFilter(t, sub, v) {
				return false
			}
		}
		return true
	case []any:
		for _, want := range p {
			switch w := want.(type) {
			case string, float64, bool, nil:
			case map[string]any:
				prefix, ok := w["prefix"].(string)
				if len(w) != 1 || !ok {
					t.Fatalf("filter operator %v is not understood by this test", want)
				}
				if s, ok := record.(string); ok && strings.HasPrefix(s, prefix) {
					return true
				}
				continue
			default:
				t.Fatalf("filter operator %v is not understood by this test", want)
			}
			if record == want {
				return true
			}
		}
		return false
	}
	t.Fatalf("filter pattern %v is not understood by this test", pattern)
	return false
}

// TestDispatcherStreamFilter: the dispatcher's stream filter (template.yaml's;
// the agreement test holds the CDK app to it) lets through the sample
// record of events/dispatcher-stream.json, an outbox entry inserted, and
// none of the records the dispatcher must not wake for: its own writes to
// an entry (lease, retry: MODIFY; removal: REMOVE) and the insert of any
// other item.
func TestDispatcherStreamFilter(t *testing.T) {
	src, ok := samModel(t, samTemplate).StreamSources["DispatcherFunction <- ${Table.StreamArn}"]
	if !ok || len(src.Filters) != 1 {
		t.Fatalf("the dispatcher's stream source: %+v", src)
	}
	var pattern any
	if err := json.Unmarshal([]byte(src.Filters[0]), &pattern); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../events/dispatcher-stream.json")
	if err != nil {
		t.Fatal(err)
	}
	record := func(mutate func(r map[string]any)) map[string]any {
		var ev struct{ Records []map[string]any }
		if err := json.Unmarshal(raw, &ev); err != nil || len(ev.Records) != 1 {
			t.Fatalf("dispatcher-stream.json: %v, %d records", err, len(ev.Records))
		}
		if mutate != nil {
			mutate(ev.Records[0])
		}
		return ev.Records[0]
	}
	keys := func(r map[string]any) map[string]any { return r["dynamodb"].(map[string]any)["Keys"].(map[string]any) }
	for _, tc := range []struct {
		name   string
		record map[string]any
		want   bool
	}{
		{"the sample: an outbox entry inserted", record(nil), true},
		{"an entry of another shard inserted", record(func(r map[string]any) {
			keys(r)["pk"] = map[string]any{"S": "OUTBOX#bot_2#conv_9"}
		}), true},
		{"an entry of the previous layout's single partition", record(func(r map[string]any) {
			keys(r)["pk"] = map[string]any{"S": "OUTBOX"}
		}), false},
		{"an outbox entry leased or put back for a retry", record(func(r map[string]any) { r["eventName"] = "MODIFY" }), false},
		{"an outbox entry removed", record(func(r map[string]any) { r["eventName"] = "REMOVE" }), false},
		{"another item inserted", record(func(r map[string]any) {
			keys(r)["pk"] = map[string]any{"S": "EVT#bot_1"}
		}), false},
	} {
		if got := matchesFilter(t, pattern, tc.record); got != tc.want {
			t.Errorf("%s: passes the filter: %v, want %v", tc.name, got, tc.want)
		}
	}
}
