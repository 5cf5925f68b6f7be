package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
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

// startLogged is start, with the server's log lines sent to lines.
func startLogged(t *testing.T, bin, dataDir string, lines chan<- string) *server {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--addr", addr, "--data-dir", dataDir)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, url: "http://" + addr, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "platform listening") {
				once = true
				close(ready)
			}
			select {
			case lines <- sc.Text():
			default:
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-s.done:
		t.Fatalf("server exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("server did not start")
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return s
}

// TestConversationDeleteFinishesAfterKill: deleteConversation of 300
// messages is cut by kill -9 of the real binary a few milliseconds in.
// After the restart the conversation and every one of its messages answer
// 404 at once (get and lists), the sweeper finishes the deletion without
// any call, and no stored item holds the conversation's or its messages'
// ids.
func TestConversationDeleteFinishesAfterKill(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	lines := make(chan string, 1000)
	s := startLogged(t, bin, dir, lines)
	tok := adminToken(t, dir)
	bot := newBot(t, s, tok)
	_, u := try(s.url, "POST", "/v1/chat/users", tok, bot, map[string]any{"tags": map[string]string{}})
	user := u["user"].(map[string]any)["id"].(string)

	for _, delay := range []time.Duration{5, 10, 20, 40, 80} {
		st, c := try(s.url, "POST", "/v1/chat/conversations", tok, bot, map[string]any{"channel": "web", "tags": map[string]string{}})
		if st != 201 {
			t.Fatalf("createConversation: %d %v", st, c)
		}
		conv := c["conversation"].(map[string]any)["id"].(string)
		ids := []string{conv}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					st, m := try(s.url, "POST", "/v1/chat/messages", tok, bot, map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{"k": "v"}})
					if st != 201 {
						t.Errorf("createMessage: %d %v", st, m)
						return
					}
					mu.Lock()
					ids = append(ids, m["message"].(map[string]any)["id"].(string))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}

		go try(s.url, "DELETE", "/v1/chat/conversations/"+conv, tok, bot, nil)
		time.Sleep(delay * time.Millisecond)
		s.stop(syscall.SIGKILL)
		for len(lines) > 0 {
			<-lines
		}
		s = startLogged(t, bin, dir, lines)

		if st, _ := try(s.url, "GET", "/v1/chat/conversations/"+conv, tok, bot, nil); st == 200 {
			t.Logf("kill after %v: the deletion had not started; again, later", delay*time.Millisecond)
			continue
		}
		// Unreadable at once, whatever the sweeper has done yet.
		readable := 0
		for _, id := range ids[1:] {
			if st, _ := try(s.url, "GET", "/v1/chat/messages/"+id, tok, bot, nil); st != 404 {
				readable++
			}
		}
		st, l := try(s.url, "GET", "/v1/chat/messages", tok, bot, nil)
		if st != 200 {
			t.Fatalf("listMessages: %d %v", st, l)
		}
		// (Earlier rounds whose deletion had not started left live messages.)
		listed := 0
		for _, m := range l["messages"].([]any) {
			if m.(map[string]any)["conversationId"] == conv {
				listed++
			}
		}
		if st, _ := try(s.url, "GET", "/v1/chat/messages?conversationId="+conv, tok, bot, nil); st != 404 {
			t.Errorf("listMessages of the deleted conversation: %d", st)
		}
		if readable > 0 || listed > 0 {
			t.Fatalf("kill after %v: %d of %d messages of the deleted conversation readable, %d listed", delay*time.Millisecond, readable, len(ids)-1, listed)
		}
		// The sweeper finishes it, with no call.
		deadline := time.After(30 * time.Second)
		sweep := ""
		for swept := false; !swept; {
			select {
			case line := <-lines:
				swept = strings.Contains(line, "deletion sweep") && strings.Contains(line, "pending=0")
				sweep = line
			case <-deadline:
				t.Fatal("no finished deletion sweep logged after the restart")
			}
		}
		s.stop(syscall.SIGINT)
		p := apitest.Open(t, dir)
		left := apitest.ItemsHolding(t, p.Platform, ids...)
		p.Close()
		if len(left) > 0 {
			t.Fatalf("kill after %v: %d items of the deleted conversation remain after the sweep, e.g. %v", delay*time.Millisecond, len(left), left[:min(3, len(left))])
		}
		// finished=1: the kill had cut the deletion short.
		t.Logf("kill after %v: conversation and %d messages unreadable at once; none stored after the restart's sweep (%s)", delay*time.Millisecond, len(ids)-1, sweep)
		return
	}
	t.Fatal("no kill landed during the deletion")
}

// TestBotDeleteFinishesAfterKill: deleteBot answers, then its data is
// deleted in the background; the real binary is killed (-9) right after the
// answer, and after the restart the sweeper finishes the deletion: no stored
// item holds the bot's id.
func TestBotDeleteFinishesAfterKill(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	lines := make(chan string, 1000)
	s := startLogged(t, bin, dir, lines)
	tok := adminToken(t, dir)
	st, w := s.call("POST", "/v1/admin/workspaces", tok, "", map[string]any{"name": "crash"})
	if st != 200 {
		t.Fatalf("createWorkspace: %d %v", st, w)
	}
	ws := w["id"].(string)
	st, b := s.call("POST", "/v1/admin/bots", tok, ws, map[string]any{"name": "doomed"})
	if st != 200 {
		t.Fatalf("createBot: %d %v", st, b)
	}
	botID := b["bot"].(map[string]any)["id"].(string)
	bot := map[string]string{"x-bot-id": botID}
	_, u := try(s.url, "POST", "/v1/chat/users", tok, bot, map[string]any{"tags": map[string]string{}})
	user := u["user"].(map[string]any)["id"].(string)
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, cv := try(s.url, "POST", "/v1/chat/conversations", tok, bot, map[string]any{"channel": "web", "tags": map[string]string{}})
			conv := cv["conversation"].(map[string]any)["id"].(string)
			for i := 0; i < 60; i++ {
				if st, m := try(s.url, "POST", "/v1/chat/messages", tok, bot, map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}); st != 201 {
					t.Errorf("createMessage: %d %v", st, m)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if st, r := s.call("DELETE", "/v1/admin/bots/"+botID, tok, ws, nil); st != 200 {
		t.Fatalf("deleteBot: %d %v", st, r)
	}
	s.stop(syscall.SIGKILL)
	for len(lines) > 0 {
		<-lines
	}
	s = startLogged(t, bin, dir, lines)
	deadline := time.After(30 * time.Second)
	for swept := false; !swept; {
		select {
		case line := <-lines:
			swept = strings.Contains(line, "deletion sweep") && strings.Contains(line, "pending=0")
			if swept {
				// finished=1: the kill had cut the bot's deletion short.
				t.Logf("after the restart: %s", line)
			}
		case <-deadline:
			t.Fatal("no finished deletion sweep logged after the restart")
		}
	}
	s.stop(syscall.SIGINT)
	p := apitest.Open(t, dir)
	left := apitest.ItemsHolding(t, p.Platform, botID)
	p.Close()
	if len(left) > 0 {
		t.Fatalf("%d items of the deleted bot remain after the restart's sweep, e.g. %v", len(left), left[:min(3, len(left))])
	}
}
