package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// try is one API call that may fail (the server is being killed): it
// answers the status, or -1 when the call did not complete.
func try(url, method, path, token string, hdr map[string]string, body any) (int, map[string]any) {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, _ := http.NewRequest(method, url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return -1, nil
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func adminToken(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newBot creates a workspace and a bot in it, answering the bot's header.
func newBot(t *testing.T, s *server, tok string) map[string]string {
	t.Helper()
	st, w := s.call("POST", "/v1/admin/workspaces", tok, "", map[string]any{"name": "crash"})
	if st != 200 {
		t.Fatalf("createWorkspace: %d %v", st, w)
	}
	st, b := s.call("POST", "/v1/admin/bots", tok, w["id"].(string), map[string]any{"name": "crash"})
	if st != 200 {
		t.Fatalf("createBot: %d %v", st, b)
	}
	return map[string]string{"x-bot-id": b["bot"].(map[string]any)["id"].(string)}
}

// TestTableCountsExactAfterKill: rows are written and deleted by several
// clients while the real binary is killed (-9), three times; after each
// restart the table's row count equals the rows found.
func TestTableCountsExactAfterKill(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	bot := newBot(t, s, tok)
	if st, r := try(s.url, "POST", "/v1/tables", tok, bot, map[string]any{"name": "countTable",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}); st != 200 {
		t.Fatalf("createTable: %d %v", st, r)
	}
	rows := make([]any, 300)
	for i := range rows {
		rows[i] = map[string]any{"n": i}
	}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if w == 3 { // one client deletes what the others write
						st, _ := try(s.url, "POST", "/v1/tables/countTable/rows/delete", tok, bot, map[string]any{"filter": map[string]any{"n": map[string]any{"$lt": 100}}})
						if st < 0 {
							return
						}
						continue
					}
					if st, _ := try(s.url, "POST", "/v1/tables/countTable/rows", tok, bot, map[string]any{"rows": rows}); st < 0 {
						return
					}
				}
			}(w)
		}
		time.Sleep(time.Duration(300+150*round) * time.Millisecond)
		s.stop(syscall.SIGKILL)
		close(stop)
		wg.Wait()
		s = start(t, bin, dir)

		st, tb := try(s.url, "GET", "/v1/tables/countTable", tok, bot, nil)
		if st != 200 {
			t.Fatalf("getTable after kill: %d %v", st, tb)
		}
		counted := int(tb["rows"].(float64))
		found := 0
		for offset := 0; ; offset += 1000 {
			st, r := try(s.url, "POST", "/v1/tables/countTable/rows/find", tok, bot, map[string]any{"limit": 1000, "offset": offset})
			if st != 200 {
				t.Fatalf("findTableRows: %d %v", st, r)
			}
			found += len(r["rows"].([]any))
			if r["hasMore"] != true {
				break
			}
		}
		t.Logf("kill %d: %d rows counted, %d found", round+1, counted, found)
		if counted != found {
			t.Fatalf("after kill -9 number %d the table counts %d rows but holds %d", round+1, counted, found)
		}
	}
}

var _ = fmt.Sprintf
