// Package chat holds the Chat API's rules that need neither HTTP nor
// DynamoDB: tags (validation, updates, matching) and states (declarations,
// JSON-schema validation of payloads, patches).
package chat

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/botforge/platform/shared/platform"
)

// Limits of tags. A record's tags are indexed one item per tag, written in
// the same transaction as the record; an update may delete one entry per
// old tag and write one per new tag, and DynamoDB allows 100 items in a
// transaction, so the number of tags is bounded.
const (
	MaxTags        = 40
	MaxTagKeyLen   = 500 // characters
	MaxTagValueLen = 500 // characters, as the reference's request bodies
)

// CheckTags reports malformed tags: an empty or too long name, a too long
// value, or too many tags. The error describes the problem; callers say
// where (BodyTags for a request body).
func CheckTags(tags map[string]string) error {
	if len(tags) > MaxTags {
		return fmt.Errorf("at most %d tags are allowed, got %d", MaxTags, len(tags))
	}
	for k, v := range tags {
		if k == "" {
			return errors.New("a tag name must not be empty")
		}
		if utf8.RuneCountInString(k) > MaxTagKeyLen {
			return fmt.Errorf("tag name %.40q... is longer than %d characters", k, MaxTagKeyLen)
		}
		if utf8.RuneCountInString(v) > MaxTagValueLen {
			return fmt.Errorf("the value of tag %q is longer than %d characters", k, MaxTagValueLen)
		}
	}
	return nil
}

// BodyTags checks the tags of a request body's field.
func BodyTags(field string, tags map[string]string) error {
	if err := CheckTags(tags); err != nil {
		return platform.Invalid("invalid body: field %q: %v", field, err)
	}
	return nil
}

// ApplyTags returns old updated with patch: a tag set to a value takes it, a
// tag set to the empty string is removed, others stay. The result is never
// nil; old is not modified.
func ApplyTags(old, patch map[string]string) map[string]string {
	out := make(map[string]string, len(old)+len(patch))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range patch {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// Discriminators returns the tag names that identify a record in a
// getOrCreate call: the ones listed in discriminateByTags, or every tag of the
// call when the list is absent. Each listed name must be among the tags.
func Discriminators(tags map[string]string, by []string) ([]string, error) {
	if by == nil {
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys, nil
	}
	seen := map[string]bool{}
	keys := make([]string, 0, len(by))
	for _, k := range by {
		if _, ok := tags[k]; !ok {
			return nil, platform.Invalid("invalid body: field %q: tag %q is not among the tags of the call", "discriminateByTags", k)
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// Matches reports whether a record with tags have matches the call's tags
// want on every discriminating tag: equal values, and an empty value in the
// call (a removal) matching only a record without the tag.
func Matches(have, want map[string]string, keys []string) bool {
	for _, k := range keys {
		if have[k] != want[k] {
			return false
		}
	}
	return true
}

// SameTags reports whether two tag sets are equal.
func SameTags(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// UnprefixRecords strips alias from the tags of the records of root (a
// body sent to or answered to the integration).
func UnprefixRecords(root map[string]any, alias string) {
	fix := func(obj map[string]any) {
		tags, ok := obj["tags"].(map[string]any)
		if !ok {
			return
		}
		out := make(map[string]any, len(tags))
		for k, v := range tags {
			out[strings.TrimPrefix(k, alias+":")] = v
		}
		obj["tags"] = out
	}
	fix(root)
	for _, v := range root {
		switch x := v.(type) {
		case map[string]any:
			fix(x)
		case []any:
			for _, e := range x {
				if obj, ok := e.(map[string]any); ok {
					fix(obj)
				}
			}
		}
	}
}
