package main_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// runCLI runs a command of the real binary and answers its exit code and
// output.
func runCLI(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// TestBackupWhileWritingRestores runs the real binary: while clients write
// table rows and upload files (each write counted once acknowledged),
// `local backup --api-url` takes a backup of the running platform. The
// backup, restored with `local restore` into another directory and served
// by the binary (the store opens as after a clean stop: no repair step
// exists or runs), holds every row and file acknowledged before the backup
// began, each client's writes without a gap, and every file's contents. The
// restore refuses the running platform's own directory; staged through the
// API, it happens at the next start, after a kill -9.
func TestBackupWhileWritingRestores(t *testing.T) {
	bin := buildBinary(t)
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	backups := filepath.Join(root, "data-backups") // the default: <data-dir>-backups
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	bot := newBot(t, s, tok)
	if st, r := try(s.url, "POST", "/v1/tables", tok, bot, map[string]any{"name": "writesTable",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"w": map[string]any{"type": "number"}, "n": map[string]any{"type": "number"}}}}); st != 200 {
		t.Fatalf("createTable: %d %v", st, r)
	}

	const rowWriters, fileWriters = 6, 2
	var acked [rowWriters + fileWriters]atomic.Int64
	fileIDs := make([][]string, fileWriters) // by writer, in order
	var idsMu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	failed := make(chan string, rowWriters+fileWriters)
	for w := range rowWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := int64(1); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				st, r := try(s.url, "POST", "/v1/tables/writesTable/rows", tok, bot, map[string]any{"rows": []any{map[string]any{"w": w, "n": n}}})
				if st != 200 {
					failed <- fmt.Sprintf("createTableRows: %d %v", st, r)
					return
				}
				acked[w].Store(n)
			}
		}()
	}
	for f := range fileWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := int64(1); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fileBody(f, n)
				st, r := try(s.url, "PUT", "/v1/files", tok, bot, map[string]any{"key": fmt.Sprintf("w%d/%d.txt", f, n), "size": len(body)})
				if st != 200 {
					failed <- fmt.Sprintf("upsertFile: %d %v", st, r)
					return
				}
				file := r["file"].(map[string]any)
				req, _ := http.NewRequest("PUT", file["uploadUrl"].(string), bytes.NewReader(body))
				req.Header.Set("Content-Type", file["contentType"].(string))
				res, err := http.DefaultClient.Do(req)
				if err != nil || res.StatusCode != 200 {
					failed <- fmt.Sprintf("upload: %v %v", err, res)
					return
				}
				res.Body.Close()
				idsMu.Lock()
				fileIDs[f] = append(fileIDs[f], file["id"].(string))
				idsMu.Unlock()
				acked[rowWriters+f].Store(n)
			}
		}()
	}
	waitAll := func(min int64) {
		t.Helper()
		for i := range acked {
			for acked[i].Load() < min {
				select {
				case m := <-failed:
					t.Fatal(m)
				case <-time.After(time.Millisecond):
				}
			}
		}
	}
	waitAll(10) // every client is writing

	var before, after [rowWriters + fileWriters]int64
	for i := range acked {
		before[i] = acked[i].Load()
	}
	env := []string{"PLATFORM_API_URL=" + s.url, "PLATFORM_TOKEN=" + tok}
	t0 := time.Now()
	code, out, errs := runCLI(t, bin, env, "backup")
	took := time.Since(t0)
	for i := range acked {
		after[i] = acked[i].Load()
	}
	if code != 0 {
		t.Fatalf("local backup --api-url: exit %d: %s %s", code, out, errs)
	}
	name := strings.Fields(out)[0]
	waitAll(after[0] + 5) // writes go on after the backup
	manifest, _ := os.ReadFile(filepath.Join(backups, name, "backup.json"))
	t.Logf("backup taken by the command in %v while writing (%s); %s", took.Round(time.Millisecond), strings.TrimSpace(out), bytes.Join(bytes.Fields(manifest), []byte(" ")))

	// The running platform's directory is not restored over, nor backed
	// up behind its back.
	if code, _, errs := runCLI(t, bin, nil, "restore", "--data-dir", dir, name); code != 1 || !strings.Contains(errs, "running") {
		t.Fatalf("restore over the running platform: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, bin, nil, "backup", "--data-dir", dir); code != 1 || !strings.Contains(errs, "--api-url") {
		t.Fatalf("backup of the running platform's directory: exit %d: %s", code, errs)
	}
	code, list, errs := runCLI(t, bin, nil, "backup", "--list", "--data-dir", dir)
	if code != 0 || !strings.HasPrefix(list, name+"\t") || !strings.Contains(list, "KiB") && !strings.Contains(list, "MiB") {
		t.Fatalf("backup --list: exit %d: %q %s", code, list, errs)
	}

	// Stage a restore on the running platform, then kill it.
	if code, out, errs := runCLI(t, bin, env, "restore", name); code != 0 || !strings.Contains(out, "staged") {
		t.Fatalf("restore --api-url: exit %d: %s %s", code, out, errs)
	}
	s.stop(syscall.SIGKILL)
	close(stop)
	wg.Wait()

	// Restore into another directory with the command, and serve it.
	other := filepath.Join(root, "other")
	if code, out, errs := runCLI(t, bin, nil, "restore", "--data-dir", other, "--backup-dir", backups, name); code != 0 {
		t.Fatalf("restore: exit %d: %s %s", code, out, errs)
	}
	check := func(dataDir string) {
		t.Helper()
		s := start(t, bin, dataDir)
		defer s.stop(syscall.SIGINT)
		seen := map[int64][]int64{}
		for offset := 0; ; offset += 1000 {
			st, r := try(s.url, "POST", "/v1/tables/writesTable/rows/find", tok, bot, map[string]any{"limit": 1000, "offset": offset})
			if st != 200 {
				t.Fatalf("findTableRows: %d %v", st, r)
			}
			for _, row := range r["rows"].([]any) {
				m := row.(map[string]any)
				w, n := int64(m["w"].(float64)), int64(m["n"].(float64))
				seen[w] = append(seen[w], n)
			}
			if r["hasMore"] != true {
				break
			}
		}
		total := 0
		for w := range int64(rowWriters) {
			ns := seen[w]
			got := map[int64]bool{}
			for _, n := range ns {
				if got[n] {
					t.Fatalf("%s: writer %d's row %d twice", dataDir, w, n)
				}
				got[n] = true
			}
			for n := int64(1); n <= int64(len(ns)); n++ {
				if !got[n] {
					t.Fatalf("%s: writer %d: row %d missing among %d: a gap", dataDir, w, n, len(ns))
				}
			}
			if int64(len(ns)) < before[w] || int64(len(ns)) > after[w]+1 {
				t.Fatalf("%s: writer %d: %d rows; acknowledged before the backup %d, when it ended %d", dataDir, w, len(ns), before[w], after[w])
			}
			total += len(ns)
		}
		files := 0
		for f := range fileWriters {
			for i := int64(1); i <= before[rowWriters+f]; i++ {
				id := fileIDs[f][i-1]
				st, r := try(s.url, "GET", "/v1/files/"+id, tok, bot, nil)
				if st != 200 {
					t.Fatalf("%s: file %d of writer %d, acknowledged before the backup: %d %v", dataDir, i, f, st, r)
				}
				file := r["file"].(map[string]any)
				if file["status"] != "upload_completed" {
					t.Fatalf("%s: file %s restored as %v", dataDir, id, file["status"])
				}
				res, err := http.Get(file["url"].(string))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if !bytes.Equal(body, fileBody(f, i)) {
					t.Fatalf("%s: file %s restored with %d bytes, want its %d", dataDir, id, len(body), len(fileBody(f, i)))
				}
				files++
			}
		}
		t.Logf("%s: %d rows and %d files restored, all present", filepath.Base(dataDir), total, files)
	}
	check(other)
	// The staged restore happens at the restart after the kill, and the
	// replaced state is kept aside.
	check(dir)
	aside, _ := filepath.Glob(filepath.Join(dir, ".before-restore-*"))
	if len(aside) != 1 {
		t.Fatalf("the state replaced by the staged restore is not kept aside: %v", aside)
	}
	if _, err := os.Stat(filepath.Join(dir, "restore-pending")); !os.IsNotExist(err) {
		t.Fatalf("the staged restore is still pending after it ran: %v", err)
	}
}

func fileBody(f int, n int64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("file %d/%d\n", f, n)), 1+int(n%50)*20)
}

// TestScheduledBackups: serve with PLATFORM_BACKUP_EVERY=1s and
// PLATFORM_BACKUP_KEEP=2 (the variables of --backup-every and
// --backup-keep) takes a backup every second and keeps the newest two
// (three for the instant between a new one and the pruning); a bad
// interval is a usage error that starts nothing.
func TestScheduledBackups(t *testing.T) {
	bin := buildBinary(t)
	root := t.TempDir()
	backups := filepath.Join(root, "bk")
	if code, _, errs := runCLI(t, bin, nil, "serve", "--data-dir", filepath.Join(root, "x"), "--backup-every", "10ms"); code != 2 || !strings.Contains(errs, "1s or more") {
		t.Fatalf("--backup-every 10ms: exit %d: %s", code, errs)
	}
	t.Setenv("PLATFORM_BACKUP_EVERY", "1s")
	t.Setenv("PLATFORM_BACKUP_KEEP", "2")
	t.Setenv("PLATFORM_BACKUP_DIR", backups)
	s := start(t, bin, filepath.Join(root, "data"))
	defer s.stop(syscall.SIGINT)
	seen := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d scheduled backups in 60 s", len(seen))
		}
		entries, _ := os.ReadDir(backups)
		listed := 0
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(backups, e.Name(), "backup.json")); err == nil {
				listed++
				seen[e.Name()] = true
			}
		}
		if listed > 3 {
			t.Fatalf("%d backups kept, want 2 (3 while pruning)", listed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, list, errs := runCLI(t, bin, nil, "backup", "--list", "--backup-dir", backups)
	if n := strings.Count(list, "\tscheduled\n"); code != 0 || n < 2 || n > 3 {
		t.Fatalf("backup --list: exit %d, %d scheduled: %s %s", code, n, list, errs)
	}
	t.Logf("%d scheduled backups seen; listed now:\n%s", len(seen), list)
}
