package transfer_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExportMemoryFlat (PLATFORM_EXPORT_BENCH=1, make export-bench):
// the real binary exports a table of 1,000, 10,000 and 100,000 rows; its
// peak RSS (getrusage of the child) stays flat while the archive grows
// a hundredfold, and the throughput is logged in rows/s and MB/s.
func TestExportMemoryFlat(t *testing.T) {
	if os.Getenv("PLATFORM_EXPORT_BENCH") == "" {
		t.Skip("set PLATFORM_EXPORT_BENCH=1 (make export-bench): seeds 111,000 rows")
	}
	t.Setenv("PLATFORM_BUILTINS", "none")
	bin := buildBinary(t)
	s := newSide(t)
	pad := strings.Repeat("x", 200)
	var rss []int64
	for _, n := range []int{1000, 10000, 100000} {
		bot := s.call("POST", "/v1/admin/bots", "", map[string]any{"name": fmt.Sprintf("b%d", n)}, 200).Str("bot.id")
		s.call("POST", "/v1/tables", bot, map[string]any{"name": "bigTable", "schema": map[string]any{"type": "object", "properties": map[string]any{
			"name": map[string]any{"type": "string"}, "n": map[string]any{"type": "number"}, "note": map[string]any{"type": "string"}}}}, 200)
		seedStart := time.Now()
		for done := 0; done < n; {
			k := min(1000, n-done)
			rows := make([]map[string]any, k)
			for i := range rows {
				rows[i] = map[string]any{"name": fmt.Sprintf("row %d", done+i), "n": done + i, "note": pad}
			}
			s.call("POST", "/v1/tables/bigTable/rows", bot, map[string]any{"rows": rows}, 200)
			done += k
		}
		seeded := time.Since(seedStart)
		out := filepath.Join(t.TempDir(), "big.bfa")
		cmd := exec.Command(bin, "export", "--api-url", s.URL, "--workspace", s.ws, "--bot", bot, "--out", out)
		cmd.Env = append(os.Environ(), "PLATFORM_TOKEN="+s.AdminToken)
		start := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("export: %v\n%s", err, b)
		}
		el := time.Since(start)
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		st, _ := os.Stat(out)
		mb := float64(st.Size()) / (1 << 20)
		t.Logf("%6d rows: archive %.1f MB, export %s: %.0f rows/s, %.1f MB/s; peak RSS %.1f MiB (seeded in %s)",
			n, mb, el.Round(time.Millisecond), float64(n)/el.Seconds(), mb/el.Seconds(), float64(ru.Maxrss)/1024, seeded.Round(time.Second))
		rss = append(rss, ru.Maxrss)
	}
	// Flat: 100 times the rows, well under twice the memory.
	if rss[2] > 2*rss[0] {
		t.Fatalf("peak RSS grows with the rows: %v KiB", rss)
	}
}
