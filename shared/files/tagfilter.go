package files

import (
	"bytes"
	"encoding/json"
	"net/url"
	"sort"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// TagCond is the condition on one tag of a tag filter: the file's value
// must be one of In (when In is not empty) and none of NotIn. A file without
// the tag fails In and passes NotIn.
type TagCond struct {
	Key   string
	In    []string
	NotIn []string
}

// TagFilter is the tags filter of listFiles and searchFiles: every
// condition must hold. Conditions are sorted by key.
type TagFilter []TagCond

// MaxTagConditions bounds the conditions of a filter.
const MaxTagConditions = 50

// ParseTagFilter reads the filter from a query: either the reference's
// form, tags=<URL-encoded JSON object> (a string value must be present, an
// array of strings means any of them, {"not": string or array} excludes),
// or the form the official client sends, tags.<name>=<value> (repeated:
// any of them) and tags.<name>.not=<value> (repeated: none of them);
// tags[<name>] is read like tags.<name>.
func ParseTagFilter(q url.Values) (TagFilter, error) {
	conds := map[string]*TagCond{}
	cond := func(k string) *TagCond {
		c := conds[k]
		if c == nil {
			c = &TagCond{Key: k}
			conds[k] = c
		}
		return c
	}
	if vs, ok := q["tags"]; ok {
		if len(vs) != 1 {
			return nil, platform.Invalid("query parameter \"tags\" must be given once")
		}
		if err := parseTagJSON(vs[0], cond); err != nil {
			return nil, err
		}
	}
	for name, vs := range q {
		var sub string
		switch {
		case strings.HasPrefix(name, "tags."):
			sub = name[len("tags."):]
		case strings.HasPrefix(name, "tags[") && strings.HasSuffix(name, "]"):
			sub = strings.ReplaceAll(strings.ReplaceAll(name[len("tags["):len(name)-1], "][", "."), "[]", "")
		default:
			continue
		}
		k, not := sub, false
		if base, ok := strings.CutSuffix(sub, ".not"); ok && base != "" {
			k, not = base, true
		}
		if k == "" {
			return nil, platform.Invalid("query parameter %q: tag name missing", name)
		}
		c := cond(k)
		if not {
			c.NotIn = append(c.NotIn, vs...)
		} else {
			c.In = append(c.In, vs...)
		}
	}
	if len(conds) > MaxTagConditions {
		return nil, platform.Invalid("query parameter \"tags\": at most %d tag conditions", MaxTagConditions)
	}
	f := make(TagFilter, 0, len(conds))
	for _, c := range conds {
		c.In, c.NotIn = dedupe(c.In), dedupe(c.NotIn)
		f = append(f, *c)
	}
	sort.Slice(f, func(i, j int) bool { return f[i].Key < f[j].Key })
	return f, nil
}

var errTagJSON = platform.Invalid(`query parameter "tags": must be a JSON object of tag names to a string, an array of strings, or {"not": string or array of strings}`)

func parseTagJSON(s string, cond func(string) *TagCond) error {
	dec := json.NewDecoder(strings.NewReader(s))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
		return errTagJSON
	}
	for k, raw := range obj {
		if k == "" {
			return errTagJSON
		}
		vals, isObj, err := tagValues(raw)
		if err != nil {
			return err
		}
		if !isObj {
			cond(k).In = append(cond(k).In, vals...)
			continue
		}
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(raw, &inner); err != nil || len(inner) != 1 || inner["not"] == nil {
			return errTagJSON
		}
		not, isObj, err := tagValues(inner["not"])
		if err != nil || isObj {
			return errTagJSON
		}
		cond(k).NotIn = append(cond(k).NotIn, not...)
	}
	return nil
}

// tagValues reads a string or a non-empty array of strings; an object is
// reported as such.
func tagValues(raw json.RawMessage) ([]string, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		return nil, true, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, false, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, false, nil
	}
	return nil, false, errTagJSON
}

func dedupe(vs []string) []string {
	if len(vs) == 0 {
		return nil
	}
	sort.Strings(vs)
	out := vs[:1]
	for _, v := range vs[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// Match reports whether tags satisfy every condition.
func (f TagFilter) Match(tags map[string]string) bool {
	for _, c := range f {
		v, has := tags[c.Key]
		if len(c.In) > 0 && (!has || !contains(c.In, v)) {
			return false
		}
		if has && contains(c.NotIn, v) {
			return false
		}
	}
	return true
}

func contains(sorted []string, v string) bool {
	i := sort.SearchStrings(sorted, v)
	return i < len(sorted) && sorted[i] == v
}

// Equalities returns the conditions requiring one exact value: candidates
// to drive a listing from the tag index.
func (f TagFilter) Equalities() [][2]string {
	var out [][2]string
	for _, c := range f {
		if len(c.In) == 1 {
			out = append(out, [2]string{c.Key, c.In[0]})
		}
	}
	return out
}

// String is a canonical form of the filter (to bind pagination tokens to it).
func (f TagFilter) String() string {
	b, _ := json.Marshal(f)
	return string(b)
}
