// Package scheduler runs bots' recurring events: the EventBridge Scheduler
// adapter (AWS) and an in-process scheduler (local), both behind
// platform.Scheduler, and the translation of the cron expressions bots
// declare (five fields, standard cron) into EventBridge's cron(...) form.
package scheduler

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// Cron is a parsed cron expression: the set of allowed values of each field
// as a bit set, and whether the day fields were given as a star (which
// decides how they combine, as in standard cron: when both are restricted a
// day matches either, otherwise both).
type Cron struct {
	Second, Minute, Hour, Dom, Month, Dow uint64
	DomStar, DowStar                      bool
	HasSeconds                            bool
	// fields are the expression's fields after descriptor expansion
	// (seconds first when HasSeconds).
	fields []string
}

type field struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	fSecond = field{name: "seconds", min: 0, max: 59}
	fMinute = field{name: "minute", min: 0, max: 59}
	fHour   = field{name: "hour", min: 0, max: 23}
	fDom    = field{name: "day-of-month", min: 1, max: 31}
	fMonth  = field{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	// Day of week: 0 and 7 are Sunday.
	fDow = field{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
)

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// ParseCron parses a cron expression: five fields (minute hour day-of-month
// month day-of-week), six with a leading seconds field, or a descriptor
// (@hourly, @daily, @weekly, @monthly, @yearly). Fields take *, numbers,
// names (JAN-DEC, SUN-SAT), ranges a-b, lists a,b and steps */n, a-b/n, a/n.
func ParseCron(expr string) (Cron, error) {
	var c Cron
	e := strings.TrimSpace(expr)
	if d, ok := descriptors[strings.ToLower(e)]; ok {
		e = d
	} else if strings.HasPrefix(e, "@") {
		return c, platform.Invalid("cron %q: unknown descriptor (use five fields, or @hourly, @daily, @weekly, @monthly, @yearly)", expr)
	}
	fs := strings.Fields(e)
	switch len(fs) {
	case 5:
	case 6:
		c.HasSeconds = true
	default:
		return c, platform.Invalid("cron %q: want five fields (minute hour day-of-month month day-of-week), got %d", expr, len(fs))
	}
	c.fields = fs
	var err error
	if c.HasSeconds {
		if c.Second, err = parseField(fs[0], fSecond); err != nil {
			return c, cronErr(expr, err)
		}
		fs = fs[1:]
	} else {
		c.Second = 1
	}
	dst := []*uint64{&c.Minute, &c.Hour, &c.Dom, &c.Month, &c.Dow}
	for i, f := range []field{fMinute, fHour, fDom, fMonth, fDow} {
		if *dst[i], err = parseField(fs[i], f); err != nil {
			return c, cronErr(expr, err)
		}
	}
	// Sunday is 0 and 7: fold 7 into 0.
	if c.Dow&(1<<7) != 0 {
		c.Dow = c.Dow&^(1<<7) | 1
	}
	c.DomStar, c.DowStar = isStar(fs[2]), isStar(fs[4])
	return c, nil
}

// isStar reports whether a day field counts as unrestricted for combining
// the day fields: one of its items is * (or */1), as robfig/cron has it.
func isStar(s string) bool {
	for _, item := range strings.Split(s, ",") {
		if item == "*" || item == "*/1" {
			return true
		}
	}
	return false
}

func cronErr(expr string, err error) error {
	return platform.Invalid("cron %q: %v", expr, err)
}

func parseField(s string, f field) (uint64, error) {
	var set uint64
	for _, item := range strings.Split(s, ",") {
		rng, stepStr, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 || n > f.max-f.min+1 {
				return 0, fmt.Errorf("%s field: bad step %q", f.name, stepStr)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case rng == "*":
			if f.name == fDow.name {
				hi = 6 // */n over the week counts Sunday once
			}
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, f); err != nil {
				return 0, err
			}
			if hi, err = value(b, f); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("%s field: range %q runs backwards", f.name, rng)
			}
		default:
			v, err := value(rng, f)
			if err != nil {
				return 0, err
			}
			lo = v
			if !hasStep {
				hi = v
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v)
		}
	}
	return set, nil
}

func value(s string, f field) (int, error) {
	if v, ok := f.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s field: %q is not a number", f.name, s)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%s field: %d is out of range %d-%d", f.name, v, f.min, f.max)
	}
	return v, nil
}

func full(set uint64, lo, hi int) bool {
	for v := lo; v <= hi; v++ {
		if set&(1<<uint(v)) == 0 {
			return false
		}
	}
	return true
}

// list renders a set as a comma list, runs of three or more as ranges;
// shift is added to every value (EventBridge numbers weekdays from 1).
func list(set uint64, shift int) string {
	var parts []string
	for set != 0 {
		lo := bits.TrailingZeros64(set)
		hi := lo
		for hi+1 < 64 && set&(1<<uint(hi+1)) != 0 {
			hi++
		}
		switch {
		case hi-lo >= 2:
			parts = append(parts, fmt.Sprintf("%d-%d", lo+shift, hi+shift))
		case hi > lo:
			parts = append(parts, strconv.Itoa(lo+shift), strconv.Itoa(hi+shift))
		default:
			parts = append(parts, strconv.Itoa(lo+shift))
		}
		for v := lo; v <= hi; v++ {
			set &^= 1 << uint(v)
		}
	}
	return strings.Join(parts, ",")
}

func render(set uint64, lo, hi int) string {
	if full(set, lo, hi) {
		return "*"
	}
	return list(set, 0)
}

// EventBridge renders the expression in EventBridge Scheduler's form,
// cron(minutes hours day-of-month month day-of-week year), evaluated in
// UTC. EventBridge fires at most once a minute and needs one of the day
// fields to be "?", so a seconds field other than 0 and a restriction of
// both days at once are refused.
func (c Cron) EventBridge() (string, error) {
	if c.HasSeconds && c.Second != 1 {
		return "", platform.Invalid("cron %q: EventBridge Scheduler fires at most once a minute: the seconds field must be 0", strings.Join(c.fields, " "))
	}
	domFull, dowFull := full(c.Dom, 1, 31), full(c.Dow, 0, 6)
	// With a star in either day field a day must match both, otherwise
	// either (standard cron).
	both := c.DomStar || c.DowStar
	var dom, dow string
	switch {
	case both && dowFull:
		dom, dow = render(c.Dom, 1, 31), "?"
	case both && domFull:
		// EventBridge numbers weekdays 1 (Sunday) to 7 (Saturday).
		dom, dow = "?", list(c.Dow, 1)
	case !both && (domFull || dowFull):
		dom, dow = "*", "?"
	default:
		return "", platform.Invalid("cron %q: EventBridge Scheduler cannot restrict both day-of-month and day-of-week; restrict only one", strings.Join(c.fields, " "))
	}
	return fmt.Sprintf("cron(%s %s %s %s %s *)", render(c.Minute, 0, 59), render(c.Hour, 0, 23), dom, render(c.Month, 1, 12), dow), nil
}

// Robfig renders the expression for robfig/cron's parser with a seconds
// field. Day-of-week is rewritten as a list where it does not start with a
// star (robfig knows no 7 for Sunday); a starred field is kept, so the day
// fields combine as they did.
func (c Cron) Robfig() string {
	fs := c.fields
	sec := "0"
	if c.HasSeconds {
		sec, fs = fs[0], fs[1:]
	}
	dow := fs[4]
	if !c.DowStar {
		dow = list(c.Dow, 0)
	}
	return strings.Join([]string{sec, fs[0], fs[1], fs[2], fs[3], dow}, " ")
}

// CheckFrequency refuses an expression that may fire more than once a
// minute: a seconds field with more than one value. EventBridge Scheduler
// cannot fire more often, and the local scheduler keeps to the same rule so
// that a bot cannot make the platform write events, issue events and logs
// every second (the local scheduler's AllowSubMinute lifts it for tests).
func (c Cron) CheckFrequency() error {
	if c.HasSeconds && bits.OnesCount64(c.Second) != 1 {
		return platform.Invalid("cron %q: a recurring event fires at most once a minute: the seconds field must be one value, e.g. 0", strings.Join(c.fields, " "))
	}
	return nil
}

// ToEventBridge translates a cron expression into EventBridge's form.
func ToEventBridge(expr string) (string, error) {
	c, err := ParseCron(expr)
	if err != nil {
		return "", err
	}
	return c.EventBridge()
}
