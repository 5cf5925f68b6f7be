// Package logstore holds the platform's two platform.LogStore
// implementations: CloudWatch (PutLogEvents to one log group for bots and
// one for integrations, queries answered by CloudWatch Logs Insights) and
// Local (an embedded, durable, time-indexed file store for the local
// platform). Both page the same way, newest first, with the same cursor
// (see docs/logs.md), and Observer turns the platform's deliveries into log
// lines and bot issues.
package logstore

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// cursor is where the next page starts: lines strictly older than the
// millisecond t, or of that millisecond but not among seen (the lines of t
// already answered). Lines of one millisecond are few, so seen stays small,
// and no line is skipped or repeated whatever order ties come back in.
type cursor struct {
	t    int64 // Unix milliseconds
	seen map[string]bool
}

var errCursor = platform.Invalid("invalid nextToken")

// parseCursor reads LogQuery.Cursor (nil: the first page).
func parseCursor(m map[string]string) (*cursor, error) {
	if len(m) == 0 {
		return nil, nil
	}
	t, err := strconv.ParseInt(m["t"], 10, 64)
	if err != nil {
		return nil, errCursor
	}
	c := &cursor{t: t, seen: map[string]bool{}}
	if s := m["s"]; s != "" {
		for _, id := range strings.Split(s, ",") {
			if !platform.IsLogToken(id) {
				return nil, errCursor
			}
			c.seen[id] = true
		}
	}
	return c, nil
}

// allows reports whether l belongs after the cursor.
func (c *cursor) allows(l platform.LogLine) bool {
	if c == nil {
		return true
	}
	ms := l.Time.UnixMilli()
	return ms < c.t || ms == c.t && !c.seen[l.ID]
}

// upper is the newest time a page after c can hold, within end.
func (c *cursor) upper(end time.Time) time.Time {
	if c == nil {
		return end
	}
	if t := time.UnixMilli(c.t).UTC(); t.Before(end) {
		return t
	}
	return end
}

// sortNewestFirst orders lines by time, then id, both descending.
func sortNewestFirst(lines []platform.LogLine) {
	sort.Slice(lines, func(i, j int) bool {
		if !lines[i].Time.Equal(lines[j].Time) {
			return lines[i].Time.After(lines[j].Time)
		}
		return lines[i].ID > lines[j].ID
	})
}

// paginate cuts a page of limit lines from candidates (every line after
// prev, sorted newest first, with more than limit when more exist) and
// returns the page and the cursor of the next one (nil at the end).
func paginate(cands []platform.LogLine, limit int, prev *cursor) ([]platform.LogLine, map[string]string) {
	if len(cands) <= limit {
		return cands, nil
	}
	page := cands[:limit]
	last := page[len(page)-1].Time.UnixMilli()
	var seen []string
	if prev != nil && prev.t == last {
		for id := range prev.seen {
			seen = append(seen, id)
		}
	}
	for _, l := range page {
		if l.Time.UnixMilli() == last {
			seen = append(seen, l.ID)
		}
	}
	sort.Strings(seen)
	return page, map[string]string{"t": strconv.FormatInt(last, 10), "s": strings.Join(seen, ",")}
}
