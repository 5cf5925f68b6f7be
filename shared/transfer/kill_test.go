package transfer_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/botforge/platform/shared/archive"
)

// buildBinary builds the platform binary (functions/local) once per test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "local")
	out, err := exec.Command("go", "build", "-o", bin, "../../functions/local").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// killAfterProgress runs the binary until its journal shows progress past
// the last kill's, then kills it with SIGKILL; it answers whether the run
// finished by itself first.
func killAfterProgress(t *testing.T, bin string, args []string, token, journal string, minSeq int64, delay time.Duration) (finished bool, seq int64) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PLATFORM_TOKEN="+token)
	out, _ := os.CreateTemp(t.TempDir(), "out")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			b, _ := os.ReadFile(out.Name())
			if err != nil {
				t.Fatalf("%v: %v\n%s", args[0], err, b)
			}
			return true, 0
		default:
		}
		j, _ := archive.LoadJournal(journal)
		if j != nil && j.Seq > minSeq {
			// Then, after delay, wherever it is (within a page, a request,
			// an upload).
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v: %v", args[0], err)
				}
				return true, 0
			case <-time.After(delay):
			}
			cmd.Process.Kill() // SIGKILL: no cleanup of any kind
			<-done
			return false, j.Seq
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func run(t *testing.T, bin string, args []string, token string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PLATFORM_TOKEN="+token)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, b)
	}
	return string(b)
}

// TestKillAndResume: the real binary's export and import, each killed
// with SIGKILL several times midway and run again, give an archive and an
// imported workspace with nothing lost and nothing doubled: every entry
// once (checksums and sequence checked by the reader), every row, message
// and file once, and every read of the API the same on both platforms.
func TestKillAndResume(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "none")
	bin := buildBinary(t)
	sc := scale{rows: 20000, messages: 400, files: 12}
	if testing.Short() {
		sc = scale{rows: 6000, messages: 150, files: 4}
	}
	a, b := newSide(t), newSide(t)
	bot := seed(t, a, sc)
	prepareTarget(b)
	file := filepath.Join(t.TempDir(), "acme.bfa")
	exportArgs := []string{"export", "--api-url", a.URL, "--workspace", a.ws, "--out", file, "--passphrase", "pw"}
	// Kills spread over the run: each after about a fifth of the entries.
	step := int64(sc.messages+sc.rows/1000+60) / 5
	var seq int64
	kills := 0
	for i := 0; i < 4; i++ {
		finished, s := killAfterProgress(t, bin, exportArgs, a.AdminToken, file+".journal", seq+step, 0)
		if finished {
			break
		}
		kills++
		seq = s
	}
	if kills == 0 {
		t.Fatal("the export finished before any kill: the test proves nothing")
	}
	t.Logf("export killed %d times (last at entry %d)", kills, seq)
	out := run(t, bin, exportArgs, a.AdminToken)
	t.Logf("%s", out)
	checkArchive(t, file, sc)

	importArgs := []string{"import", "--api-url", b.URL, "--workspace", b.ws, "--in", file, "--passphrase", "pw"}
	seq, kills = 0, 0
	for i := 0; i < 4; i++ {
		// Each a little longer after the last progress: within a chunk's
		// request (applied in part by the server when the client dies),
		// an upload, the chats' chunk.
		finished, s := killAfterProgress(t, bin, importArgs, b.AdminToken, file+".import-journal", seq+1, time.Duration(i+1)*100*time.Millisecond)
		if finished {
			break
		}
		kills++
		seq = s
	}
	if kills == 0 {
		t.Fatal("the import finished before any kill: the test proves nothing")
	}
	t.Logf("import killed %d times (last at entry %d)", kills, seq)
	t.Logf("%s", run(t, bin, importArgs, b.AdminToken))
	waitIndexed(t, b, bot, sc.files)
	r := &reader{t: t, a: a, b: b, bot: bot}
	compareAll(r, sc)
	t.Logf("%d read operations answer the same on both platforms", r.n)
}

// checkArchive reads the archive through and counts its records: each
// once.
func checkArchive(t *testing.T, path string, sc scale) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := archive.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	rows := map[int64]bool{}
	count := map[string]int{}
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		count[e.Kind]++
		switch e.Kind {
		case "rows":
			var p struct {
				Rows []struct {
					ID int64 `json:"id"`
				} `json:"rows"`
			}
			json.Unmarshal(e.Data, &p)
			for _, r := range p.Rows {
				if rows[r.ID] {
					t.Fatalf("row %d twice in the archive", r.ID)
				}
				rows[r.ID] = true
			}
		case "blob":
		default:
			k := e.Kind + " " + e.ID
			if seen[k] {
				t.Fatalf("%s twice in the archive", k)
			}
			seen[k] = true
		}
	}
	if len(rows) != sc.rows-1 || count["message"] != sc.messages || count["file"] != sc.files {
		t.Fatalf("archive holds %d rows, %d messages, %d files; want %d, %d, %d", len(rows), count["message"], count["file"], sc.rows-1, sc.messages, sc.files)
	}
	t.Logf("archive: %v", fmt.Sprint(count))
}
