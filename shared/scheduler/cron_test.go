package scheduler

import (
	"strings"
	"testing"
	"time"
)

func TestToEventBridge(t *testing.T) {
	for _, tc := range []struct{ cron, want string }{
		{"* * * * *", "cron(* * * * ? *)"},
		{"*/5 * * * *", "cron(0,5,10,15,20,25,30,35,40,45,50,55 * * * ? *)"},
		{"0 9 * * 1-5", "cron(0 9 ? * 2-6 *)"},             // weekdays: EventBridge counts Sunday as 1
		{"30 2 * * 0", "cron(30 2 ? * 1 *)"},               // Sunday as 0
		{"30 2 * * 7", "cron(30 2 ? * 1 *)"},               // and as 7
		{"0 0 * * SAT,sun", "cron(0 0 ? * 1,7 *)"},         // names, any case
		{"0 0 * * 5-7", "cron(0 0 ? * 1,6,7 *)"},           // a range through Sunday
		{"15 10 1 * *", "cron(15 10 1 * ? *)"},             // day of month
		{"0 12 1,15 JAN-MAR *", "cron(0 12 1,15 1-3 ? *)"}, // months by name
		{"0 0 1-31/2 * *", "cron(0 0 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31 * ? *)"},
		{"5/20 * * * *", "cron(5,25,45 * * * ? *)"},
		{"0 0 1 * 0-6", "cron(0 0 * * ? *)"}, // both restricted: either matches, every weekday is every day
		{"@hourly", "cron(0 * * * ? *)"},
		{"@daily", "cron(0 0 * * ? *)"},
		{"@weekly", "cron(0 0 ? * 1 *)"},
		{"@monthly", "cron(0 0 1 * ? *)"},
		{"@yearly", "cron(0 0 1 1 ? *)"},
		{"0 */5 * * * *", "cron(0,5,10,15,20,25,30,35,40,45,50,55 * * * ? *)"}, // a zero seconds field
		{"  1 2 3 4 *  ", "cron(1 2 3 4 ? *)"},
	} {
		got, err := ToEventBridge(tc.cron)
		if err != nil || got != tc.want {
			t.Errorf("ToEventBridge(%q) = %q, %v; want %q", tc.cron, got, err, tc.want)
		}
	}
}

func TestCronRefused(t *testing.T) {
	for _, tc := range []struct{ cron, want string }{
		{"", "five fields"},
		{"* * * *", "five fields"},
		{"* * * * * * *", "five fields"},
		{"60 * * * *", "out of range"},
		{"* 24 * * *", "out of range"},
		{"* * 0 * *", "out of range"},
		{"* * * 13 *", "out of range"},
		{"* * * * 8", "out of range"},
		{"a * * * *", "not a number"},
		{"*/0 * * * *", "bad step"},
		{"5-1 * * * *", "backwards"},
		{"@every 5s", "unknown descriptor"},
		{"0 0 1 * 1", "cannot restrict both"}, // day 1 or Mondays: not expressible in EventBridge
		{"*/5 * * * * *", "at most once a minute"},
	} {
		_, err := ToEventBridge(tc.cron)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ToEventBridge(%q): %v, want an error mentioning %q", tc.cron, err, tc.want)
		}
	}
}

// TestRobfigForm: the local scheduler gets an expression robfig/cron
// parses with the same meaning (Sunday as 7, day fields combined alike).
func TestRobfigForm(t *testing.T) {
	for _, tc := range []struct{ cron, want string }{
		{"*/5 * * * *", "0 */5 * * * *"},
		{"0 9 * * 1-5", "0 0 9 * * 1-5"},
		{"0 0 * * 5-7", "0 0 0 * * 0,5,6"},
		{"*/2 * * * * *", "*/2 * * * * *"},
		{"@daily", "0 0 0 * * *"},
	} {
		c, err := ParseCron(tc.cron)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Robfig(); got != tc.want {
			t.Errorf("Robfig(%q) = %q, want %q", tc.cron, got, tc.want)
		}
		if _, err := parser.Parse(c.Robfig()); err != nil {
			t.Errorf("robfig refuses %q: %v", c.Robfig(), err)
		}
	}
	// Sundays at 02:30 as 0 or 7: the next run is a Sunday.
	for _, expr := range []string{"30 2 * * 0", "30 2 * * 7"} {
		c, _ := ParseCron(expr)
		spec, err := parser.Parse(c.Robfig())
		if err != nil {
			t.Fatal(err)
		}
		next := spec.Next(time.Date(2025, 3, 5, 0, 0, 0, 0, time.UTC)) // a Wednesday
		if next.Weekday() != time.Sunday || next.Hour() != 2 || next.Minute() != 30 {
			t.Errorf("%q next run %v", expr, next)
		}
	}
}
