package logstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

func openLocal(t *testing.T, dir string, now func() time.Time) *Local {
	t.Helper()
	s, err := OpenLocal(dir, LocalOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// all pages through q and returns every line.
func all(t *testing.T, s platform.LogStore, q platform.LogQuery) []platform.LogLine {
	t.Helper()
	var out []platform.LogLine
	seen := map[string]bool{}
	for i := 0; ; i++ {
		p, err := s.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.Lines {
			if seen[l.ID] {
				t.Fatalf("line %s answered twice", l.ID)
			}
			seen[l.ID] = true
		}
		out = append(out, p.Lines...)
		if p.Next == nil {
			return out
		}
		if len(p.Lines) != q.Limit {
			t.Fatalf("a page before the last holds %d lines, not %d", len(p.Lines), q.Limit)
		}
		q.Cursor = p.Next
		if i > 10000 {
			t.Fatal("paging does not end")
		}
	}
}

func TestLocalFiltersAndPaging(t *testing.T) {
	s := openLocal(t, t.TempDir(), nil)
	now := time.Now().UTC().Truncate(time.Millisecond)
	base := now.Add(-3 * time.Hour)
	var lines []platform.LogLine
	for i := 0; i < 300; i++ {
		l := platform.LogLine{
			Source: botSrc,
			// Three lines a millisecond, spread over three hours (several hour files).
			Time:    base.Add(time.Duration(i/3)*time.Millisecond + time.Duration(i)*30*time.Second),
			Level:   platform.LogLevels[i%4],
			Message: fmt.Sprintf("line %03d %s", i, hostile[i%len(hostile)]),
			UserID:  fmt.Sprintf("user_%d", i%3), ConversationID: fmt.Sprintf("conv_%d", i%5), WorkflowID: fmt.Sprintf("wf_%d", i%7),
		}
		lines = append(lines, l)
	}
	// Written in several calls, out of order.
	for _, part := range [][]platform.LogLine{lines[200:], lines[:100], lines[100:200]} {
		if err := s.Write(context.Background(), part...); err != nil {
			t.Fatal(err)
		}
	}
	other := platform.LogSource{Kind: platform.LogIntegration, ID: testInt}
	if err := s.Write(context.Background(), platform.LogLine{Source: other, Time: base, Message: "integration line"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		q    platform.LogQuery
	}{
		{"all", platform.LogQuery{}},
		{"level", platform.LogQuery{Level: "error"}},
		{"user", platform.LogQuery{UserID: "user_1"}},
		{"conversation and workflow", platform.LogQuery{ConversationID: "conv_2", WorkflowID: "wf_3"}},
		{"contains quote", platform.LogQuery{MessageContains: `"`}},
		{"contains regex chars", platform.LogQuery{MessageContains: `.*`}},
		{"contains pipe", platform.LogQuery{MessageContains: `| limit 1`}},
		{"contains backslash", platform.LogQuery{MessageContains: `\`}},
		{"window", platform.LogQuery{Start: base.Add(time.Hour), End: base.Add(2 * time.Hour)}},
		{"empty window", platform.LogQuery{Start: base.Add(-2 * time.Hour), End: base.Add(-time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Source, q.Limit = botSrc, 17
			if q.Start.IsZero() {
				q.Start, q.End = base, now
			}
			var want []platform.LogLine
			for _, l := range lines {
				l.Normalize()
				if q.Matches(l) {
					want = append(want, l)
				}
			}
			sortNewestFirst(want)
			got := all(t, s, q)
			if len(got) != len(want) {
				t.Fatalf("%d lines, want %d", len(got), len(want))
			}
			for i := range got {
				if !got[i].Time.Equal(want[i].Time) || got[i].Message != want[i].Message || got[i].UserID != want[i].UserID {
					t.Fatalf("line %d: %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
	// The integration's log holds only its line.
	got := all(t, s, platform.LogQuery{Source: other, Start: base, End: now, Limit: 10})
	if len(got) != 1 || got[0].Message != "integration line" {
		t.Fatalf("integration log: %v", got)
	}
}

// TestLocalPageCost shows a page's cost does not depend on the history
// outside its window: the same one-hour window reads the same lines with
// 2,000 or 20,000 older lines in the store.
func TestLocalPageCost(t *testing.T) {
	now := time.Now().UTC()
	cost := func(history int) (int, int) {
		s := openLocal(t, t.TempDir(), nil)
		var lines []platform.LogLine
		// The history: spread over the 20 days before the window.
		step := 20 * 24 * time.Hour / time.Duration(history)
		for i := 0; i < history; i++ {
			lines = append(lines, platform.LogLine{Source: botSrc, Time: now.Add(-2*time.Hour - time.Duration(i)*step), Message: "old"})
		}
		// The window's lines: 600 in the last hour.
		for i := 0; i < 600; i++ {
			lines = append(lines, platform.LogLine{Source: botSrc, Time: now.Add(-time.Duration(i) * 6 * time.Second), Message: "recent"})
		}
		if err := s.Write(context.Background(), lines...); err != nil {
			t.Fatal(err)
		}
		p, err := s.Query(context.Background(), platform.LogQuery{Source: botSrc, Start: now.Add(-time.Hour), End: now, Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		p2, err := s.Query(context.Background(), platform.LogQuery{Source: botSrc, Start: now.Add(-time.Hour), End: now, Limit: 20, Cursor: p.Next})
		if err != nil {
			t.Fatal(err)
		}
		return p.Scanned, p2.Scanned
	}
	small1, small2 := cost(2000)
	big1, big2 := cost(20000)
	t.Logf("lines read per page: %d, %d with 2,000 lines of history; %d, %d with 20,000", small1, small2, big1, big2)
	if small1 != big1 || small2 != big2 || big1 > 600 {
		t.Fatalf("page cost grows with history: %d/%d vs %d/%d", small1, small2, big1, big2)
	}
}

func TestLocalRetentionAndBounds(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	clock := now
	var mu sync.Mutex
	s := openLocal(t, dir, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	err := s.Write(context.Background(),
		platform.LogLine{Source: botSrc, Time: now.Add(-31 * 24 * time.Hour), Message: "too old"},
		platform.LogLine{Source: botSrc, Time: now.Add(3 * time.Hour), Message: "too new"},
		platform.LogLine{Source: botSrc, Time: now.Add(-29 * 24 * time.Hour), Message: "kept"},
	)
	if err != nil {
		t.Fatal(err)
	}
	// A window reaching far into the past and the future still only walks
	// the retention.
	got := all(t, s, platform.LogQuery{Source: botSrc, Start: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Limit: 10})
	if len(got) != 1 || got[0].Message != "kept" {
		t.Fatalf("got %v", got)
	}
	// Two days later the line is past the retention: the sweeper deletes it.
	mu.Lock()
	clock = now.Add(2 * 24 * time.Hour)
	mu.Unlock()
	s.prune()
	days, _ := os.ReadDir(filepath.Join(dir, "bots", testBot))
	if len(days) != 0 {
		t.Fatalf("day directories left: %v", days)
	}
}

func TestLocalConcurrentWritesAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLocal(dir, LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				// Two lines per call, one of them in the previous hour.
				err := s.Write(context.Background(),
					platform.LogLine{Source: botSrc, Time: now, Message: fmt.Sprintf("g%02d-%02d-a %s", g, i, strings.Repeat("x", 3000))},
					platform.LogLine{Source: botSrc, Time: now.Add(-time.Hour), Message: fmt.Sprintf("g%02d-%02d-b", g, i)},
				)
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	q := platform.LogQuery{Source: botSrc, Start: now.Add(-2 * time.Hour), End: now, Limit: 100}
	if got := all(t, s, q); len(got) != 1000 {
		t.Fatalf("%d lines after concurrent writes, want 1000", len(got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openLocal(t, dir, nil)
	if got := all(t, s2, q); len(got) != 1000 {
		t.Fatalf("%d lines after reopening, want 1000", len(got))
	}
}

// TestLocalTornTail: a line cut short by a crash is not read, and the next
// write cuts it off instead of gluing its own line to it.
func TestLocalTornTail(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	s := openLocal(t, dir, nil)
	if err := s.Write(context.Background(), platform.LogLine{Source: botSrc, Time: now, Message: "whole"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := s.hourFile(botSrc, now)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"log_torn","t":1,"l":"info","m":"half a li`)
	f.Close()
	s2 := openLocal(t, dir, nil)
	q := platform.LogQuery{Source: botSrc, Start: now.Add(-time.Minute), End: now.Add(time.Minute), Limit: 10}
	if got := all(t, s2, q); len(got) != 1 || got[0].Message != "whole" {
		t.Fatalf("with a torn tail: %v", got)
	}
	if err := s2.Write(context.Background(), platform.LogLine{Source: botSrc, Time: now, Message: "after"}); err != nil {
		t.Fatal(err)
	}
	got := all(t, s2, q)
	if len(got) != 2 {
		t.Fatalf("after the repair: %v", got)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "half a li") {
		t.Fatalf("the torn line is still in the file: %s", b)
	}
}

const crashChildEnv = "LOGSTORE_CRASH_CHILD_DIR"

// TestKill9Child is the process TestKill9 kills: it writes lines from
// several goroutines until killed, printing "ack <message>" after each
// acknowledged write.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("helper process of TestKill9")
	}
	s, err := OpenLocal(dir, LocalOptions{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	var out sync.Mutex
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; ; i++ {
				msg := fmt.Sprintf("g%d-%06d %s", g, i, strings.Repeat("y", 200))
				if err := s.Write(context.Background(), platform.LogLine{Source: botSrc, Message: msg}); err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				out.Lock()
				fmt.Println("ack", msg[:9])
				out.Unlock()
			}
		}()
	}
	select {}
}

// TestKill9 kills a writing process with SIGKILL and checks that every
// line it acknowledged is read back, whole, after a restart.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && len(acked) < 400 {
		line := sc.Text()
		if m, ok := strings.CutPrefix(line, "ack "); ok {
			acked[m] = true
		} else if strings.HasPrefix(line, "error") {
			t.Fatal(line)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	// Acknowledgements printed after the kill was sent are read too.
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			acked[m] = true
		}
	}
	s := openLocal(t, dir, nil)
	now := time.Now()
	got := all(t, s, platform.LogQuery{Source: botSrc, Start: now.Add(-time.Hour), End: now.Add(time.Minute), Limit: 100})
	have := map[string]bool{}
	for _, l := range got {
		if len(l.Message) != 9+1+200 {
			t.Fatalf("a damaged line was read: %q", l.Message)
		}
		have[l.Message[:9]] = true
	}
	for m := range acked {
		if !have[m] {
			t.Fatalf("acknowledged line %s lost (%d acknowledged, %d read)", m, len(acked), len(got))
		}
	}
	t.Logf("%d lines acknowledged before the kill, %d read after the restart", len(acked), len(got))
	// The store keeps working after the crash.
	if err := s.Write(context.Background(), platform.LogLine{Source: botSrc, Message: "after the crash"}); err != nil {
		t.Fatal(err)
	}
}

// TestLocalSizeCap: a source's files stay under its cap however much it
// logs: past it the oldest hours are deleted (their lines no longer
// answered), the newest kept; while one hour alone is over the cap its
// further lines are dropped. Other sources are not touched.
func TestLocalSizeCap(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)
	const capBytes = 32 << 10
	s, err := OpenLocal(dir, LocalOptions{Now: func() time.Time { return now }, MaxSourceBytes: capBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := platform.LogSource{Kind: platform.LogBot, ID: "bot_01JOTHERBOTOTHERBOTOTHERBO"}
	if err := s.Write(context.Background(), platform.LogLine{Source: other, Time: now.Add(-48 * time.Hour), Message: "other bot"}); err != nil {
		t.Fatal(err)
	}
	// 48 hours of lines, oldest first, 200 lines an hour: ~1 MiB in all.
	msg := strings.Repeat("x", 40)
	for h := 47; h >= 0; h-- {
		var batch []platform.LogLine
		for i := 0; i < 200; i++ {
			batch = append(batch, platform.LogLine{Source: botSrc, Time: now.Add(-time.Duration(h)*time.Hour + time.Duration(i)*time.Second), Message: fmt.Sprintf("h%02d %s", h, msg)})
		}
		if err := s.Write(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
		if n := dirSize(filepath.Join(dir, "bots", testBot)); n > capBytes {
			t.Fatalf("after hour -%d: %d bytes stored, cap %d", h, n, capBytes)
		}
	}
	q := platform.LogQuery{Source: botSrc, Start: now.Add(-72 * time.Hour), End: now.Add(time.Hour), Limit: 100}
	got := all(t, s, q)
	if len(got) == 0 || len(got) >= 48*200 {
		t.Fatalf("%d lines kept of %d", len(got), 48*200)
	}
	if !strings.HasPrefix(got[0].Message, "h00 ") {
		t.Fatalf("the newest lines were dropped: newest kept is %q", got[0].Message)
	}
	if strings.HasPrefix(got[len(got)-1].Message, "h47 ") {
		t.Fatal("the oldest lines were kept")
	}
	// One hour alone over the cap: its further lines are dropped, the
	// store stays under the cap.
	for i := 0; i < 20; i++ {
		var batch []platform.LogLine
		for j := 0; j < 200; j++ {
			batch = append(batch, platform.LogLine{Source: botSrc, Time: now.Add(time.Duration(j) * time.Millisecond), Message: msg})
		}
		if err := s.Write(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
	}
	if n := dirSize(filepath.Join(dir, "bots", testBot)); n > capBytes {
		t.Fatalf("%d bytes stored, cap %d", n, capBytes)
	}
	if o := all(t, s, platform.LogQuery{Source: other, Start: now.Add(-72 * time.Hour), End: now, Limit: 10}); len(o) != 1 {
		t.Fatalf("another bot's lines: %v", o)
	}
}

// TestWriteSyncsItsFilesAtOnce: a Write whose lines go to two files (a
// call's bot and integration, logstore.LinesOf) fsyncs them at once, not
// one after the other: the second file's fsync starts while the first's
// is held. Write still returns only once both are done.
func TestWriteSyncsItsFilesAtOnce(t *testing.T) {
	s := openLocal(t, t.TempDir(), time.Now)
	var once sync.Once
	first, release := make(chan string, 1), make(chan struct{})
	second := make(chan string, 1)
	s.beforeSync = func(path string) {
		held := false
		once.Do(func() { held = true })
		if held {
			first <- path
			<-release // this fsync held until the test releases it
			return
		}
		second <- path
	}
	now := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- s.Write(context.Background(),
			platform.LogLine{ID: "log_01HZZZZZZZZZZZZZZZZZZZZZZ1", Time: now, Level: "info", Message: "to the bot", Source: botSrc},
			platform.LogLine{ID: "log_01HZZZZZZZZZZZZZZZZZZZZZZ2", Time: now, Level: "info", Message: "to the integration", Source: platform.LogSource{Kind: platform.LogIntegration, ID: testInt}})
	}()
	held := <-first
	select {
	case p := <-second:
		if p == held {
			t.Fatalf("the same file %s was fsynced twice", p)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the second file's fsync did not start while the first's was held")
	}
	select {
	case err := <-done:
		t.Fatalf("Write returned (%v) while a file's fsync was held", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, src := range []platform.LogSource{botSrc, {Kind: platform.LogIntegration, ID: testInt}} {
		if got := all(t, s, platform.LogQuery{Source: src, Start: now.Add(-time.Minute), End: now.Add(time.Minute), Limit: 10}); len(got) != 1 {
			t.Fatalf("%v: %d lines, want 1", src, len(got))
		}
	}
}
