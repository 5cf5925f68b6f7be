package chat_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/platform"
)

func TestTags(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= chat.MaxTags; i++ {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name string
		tags map[string]string
		ok   bool
	}{
		{"none", nil, true},
		{"some", map[string]string{"a": "1", "b": ""}, true},
		{"empty name", map[string]string{"": "x"}, false},
		{"long name", map[string]string{strings.Repeat("é", chat.MaxTagKeyLen+1): "x"}, false},
		{"long value", map[string]string{"a": strings.Repeat("é", chat.MaxTagValueLen+1)}, false},
		{"longest value", map[string]string{"a": strings.Repeat("é", chat.MaxTagValueLen)}, true},
		{"too many", many, false},
	} {
		if err := chat.CheckTags(tc.tags); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err := chat.BodyTags("tags", tc.tags); err != nil && platform.TypeOf(err) != platform.ErrInvalidPayload {
			t.Errorf("%s: BodyTags answered %v", tc.name, err)
		}
	}

	old := map[string]string{"a": "1", "b": "2"}
	got := chat.ApplyTags(old, map[string]string{"b": "", "c": "3", "a": "9"})
	if !chat.SameTags(got, map[string]string{"a": "9", "c": "3"}) || old["b"] != "2" {
		t.Fatalf("ApplyTags: %v (old %v)", got, old)
	}
	if got := chat.ApplyTags(nil, map[string]string{"x": ""}); got == nil || len(got) != 0 {
		t.Fatalf("ApplyTags of nothing: %#v", got)
	}

	keys, err := chat.Discriminators(map[string]string{"b": "1", "a": "2"}, nil)
	if err != nil || strings.Join(keys, ",") != "a,b" {
		t.Fatalf("Discriminators: %v %v", keys, err)
	}
	if keys, err := chat.Discriminators(map[string]string{"b": "1", "a": "2"}, []string{"b", "b"}); err != nil || strings.Join(keys, ",") != "b" {
		t.Fatalf("Discriminators listed: %v %v", keys, err)
	}
	if _, err := chat.Discriminators(map[string]string{"a": "1"}, []string{"z"}); platform.TypeOf(err) != platform.ErrInvalidPayload {
		t.Fatalf("unknown discriminator: %v", err)
	}
	have := map[string]string{"a": "1", "b": "2"}
	for _, tc := range []struct {
		want map[string]string
		keys []string
		ok   bool
	}{
		{map[string]string{"a": "1"}, []string{"a"}, true},
		{map[string]string{"a": "1", "b": "3"}, []string{"a"}, true},
		{map[string]string{"a": "1", "b": "3"}, []string{"a", "b"}, false},
		{map[string]string{"c": ""}, []string{"c"}, true}, // an empty value matches an absent tag
		{map[string]string{"a": ""}, []string{"a"}, false},
	} {
		if chat.Matches(have, tc.want, tc.keys) != tc.ok {
			t.Errorf("Matches(%v, %v): want %v", tc.want, tc.keys, tc.ok)
		}
	}
}

func TestStateDeclarations(t *testing.T) {
	states := map[string]json.RawMessage{
		"profile": json.RawMessage(`{"type":"user","schema":{"type":"object","properties":{"age":{"type":"integer","minimum":0}},"required":["age"]},"expiry":1500.5}`),
		"free":    json.RawMessage(`{"type":"conversation","schema":{}}`),
		"broken":  json.RawMessage(`{"type":"bot","schema":{"type":12}}`),
		"sneaky":  json.RawMessage(`{"type":"bot","schema":{"$ref":"file:///etc/passwd"}}`),
	}
	if _, err := chat.Declared(states, "task", "profile"); platform.TypeOf(err) != platform.ErrInvalidPayload {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := chat.Declared(states, "user", "nope"); platform.TypeOf(err) != platform.ErrInvalidPayload {
		t.Fatalf("undeclared: %v", err)
	}
	if _, err := chat.Declared(states, "conversation", "profile"); platform.TypeOf(err) != platform.ErrInvalidPayload {
		t.Fatalf("declared with another type: %v", err)
	}
	d, err := chat.Declared(states, "user", "profile")
	if err != nil || *d.DefaultExpiry() != 1501 {
		t.Fatalf("profile: %v %v", d, err)
	}
	for _, tc := range []struct {
		payload string
		ok      bool
	}{
		{`{"age":3}`, true},
		{`{"age":3,"name":"x"}`, true},
		{`{}`, false},
		{`{"age":-1}`, false},
		{`{"age":"3"}`, false},
		{`{"age":3.5}`, false},
	} {
		err := d.Validate("profile", json.RawMessage(tc.payload))
		if (err == nil) != tc.ok || (err != nil && platform.TypeOf(err) != platform.ErrInvalidPayload) {
			t.Errorf("%s: %v", tc.payload, err)
		}
	}
	if free, _ := chat.Declared(states, "conversation", "free"); free.Validate("free", json.RawMessage(`{"any":[1]}`)) != nil {
		t.Error("empty schema refuses")
	}
	for _, name := range []string{"broken", "sneaky"} {
		d, _ := chat.Declared(states, "bot", name)
		if err := d.Validate(name, json.RawMessage(`{}`)); platform.TypeOf(err) != platform.ErrInvalidJSONSchema {
			t.Errorf("%s schema: %v", name, err)
		}
	}

	merged, err := chat.MergePayload(json.RawMessage(`{"a":1,"b":{"c":2}}`), json.RawMessage(`{"b":{"d":3},"e":null}`))
	if err != nil || string(merged) != `{"a":1,"b":{"d":3},"e":null}` {
		t.Fatalf("MergePayload: %s %v", merged, err)
	}
}
