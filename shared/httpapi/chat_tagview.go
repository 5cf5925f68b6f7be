package httpapi

import (
	"encoding/json"
	"strings"

	"github.com/botforge/platform/shared/chat"
)

// An integration's tags are its own: it writes and reads them without a
// prefix ({"id": "42"}), the bot sees them as <alias>:<tag>
// ({"telegram:id": "42"}), which is how they are stored. For a Chat call
// made as an integration (x-integration-alias, or x-integration-id alone:
// chat_acting.go), the request's tags are
// prefixed with the alias and the answer's tags of that alias unprefixed.
// Names that already hold a ':' are left as they are (older integrations
// wrote the prefixed names themselves). Only the tags of records are
// touched: a top-level "tags" map, those of the top-level objects and
// lists (conversation, user, message, conversations...), and
// discriminateByTags; never anything inside a payload.

// tagAlias is the alias whose view a Chat call gets ("" for the bot's).
func tagAlias(c *call, rt route) string {
	if !isChat(rt) || !byIntegration(c) {
		return ""
	}
	return integrationOf(c, nil)
}

// isChat reports whether a route is a Chat operation.
func isChat(rt route) bool { return strings.Contains(rt.pattern, " /v1/chat/") }

func prefixed(alias, name string) string {
	if strings.Contains(name, ":") {
		return name
	}
	return alias + ":" + name
}

// prefixRequest rewrites a call's body and tag filters into the stored
// (prefixed) names.
func prefixRequest(c *call, alias string) {
	if len(c.body) > 0 {
		var root map[string]any
		if json.Unmarshal(c.body, &root) == nil {
			fix := func(obj map[string]any) {
				if tags, ok := obj["tags"].(map[string]any); ok {
					out := make(map[string]any, len(tags))
					for k, v := range tags {
						out[prefixed(alias, k)] = v
					}
					obj["tags"] = out
				}
				if keys, ok := obj["discriminateByTags"].([]any); ok {
					for i, k := range keys {
						if s, ok := k.(string); ok {
							keys[i] = prefixed(alias, s)
						}
					}
				}
			}
			fix(root)
			for _, k := range []string{"user", "conversation", "message"} {
				if obj, ok := root[k].(map[string]any); ok {
					fix(obj)
				}
			}
			if b, err := json.Marshal(root); err == nil {
				c.body = b
			}
		}
	}
	q := c.URL.Query()
	changed := false
	for k, vs := range q {
		var name, open, close string
		switch {
		case strings.HasPrefix(k, "tags."):
			name, open = k[len("tags."):], "tags."
		case strings.HasPrefix(k, "tags[") && strings.HasSuffix(k, "]"):
			name, open, close = k[len("tags["):len(k)-1], "tags[", "]"
		default:
			continue
		}
		if p := prefixed(alias, name); p != name {
			delete(q, k)
			q[open+p+close] = vs
			changed = true
		}
	}
	if changed {
		u := *c.URL
		u.RawQuery = q.Encode()
		c.Request.URL = &u
	}
}

// unprefixAnswer gives an answer the integration's view of its tags.
func unprefixAnswer(out any, alias string) any {
	b, err := json.Marshal(out)
	if err != nil {
		return out
	}
	var root map[string]any
	if json.Unmarshal(b, &root) != nil {
		return out
	}
	chat.UnprefixRecords(root, alias)
	return root
}
