package local_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/local"
)

// The connection limits, tested on loopback with raw sockets and short
// limits so that every test is bounded (a few seconds at most).

// quick are limits short enough for tests: 300 ms of grace, 64 KiB/s.
var quick = local.Limits{ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond,
	TransferGrace: 300 * time.Millisecond, MinTransferRate: 64 << 10}

// bound is how long a connection the server should drop may stay open.
const bound = 3 * time.Second

// running starts the local platform (local.Run, the server of
// `go run ./functions/local`) on a loopback port.
func running(t *testing.T, limits local.Limits) (addr, token string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- local.Run(ctx, local.Options{Addr: "127.0.0.1:0", DataDir: dir, Limits: limits,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: func(a string) { ready <- a }})
	}()
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("platform: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("platform did not start")
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return addr, string(tok)
}

// drip writes one byte every interval until stop is closed or a write fails.
func drip(conn net.Conn, interval time.Duration, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(interval):
		}
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte(" ")); err != nil {
			return
		}
	}
}

// answerThenClose reads one answer on conn and then expects the server to
// close the connection within bound; it returns the answer's status.
func answerThenClose(t *testing.T, conn net.Conn, br *bufio.Reader) int {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(bound))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", bound, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	closedWithin(t, conn, br)
	return res.StatusCode
}

// closedWithin expects the server to close conn within bound.
func closedWithin(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(bound))
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after %v", bound)
	}
	if err == nil {
		t.Fatal("the server sent more than its answer")
	}
}

// TestSlowAnonymousBodiesAreNotRead: 20 calls without a token, each
// announcing a 100 kB body sent at 1 byte per 50 ms: each is answered 401
// at once and its connection closed; no byte of the body is waited for.
func TestSlowAnonymousBodiesAreNotRead(t *testing.T) {
	addr, _ := running(t, local.Limits{}) // the default limits: this holds without a timeout
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			stop := make(chan struct{})
			defer close(stop)
			fmt.Fprintf(conn, "POST /v1/admin/workspaces HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr)
			go drip(conn, 50*time.Millisecond, stop)
			t.Run(fmt.Sprint("conn", i), func(t *testing.T) {
				if st := answerThenClose(t, conn, bufio.NewReader(conn)); st != 401 {
					t.Errorf("status %d, want 401", st)
				}
			})
		}()
	}
	wg.Wait()
	// A legitimate call is still served.
	if res, err := http.Get("http://" + addr + "/v1/admin/account/me"); err != nil || res.StatusCode != 401 {
		t.Fatalf("a call after the slow ones: %v %v", res, err)
	}
}

// TestSlowBodyIsCut: an authenticated call whose body arrives at 20 bytes/s
// (below the minimum rate) is answered 400 and its connection closed soon
// after the grace.
func TestSlowBodyIsCut(t *testing.T) {
	addr, tok := running(t, quick)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/admin/workspaces HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr, tok)
	go drip(conn, 50*time.Millisecond, stop)
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(bound))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", bound, err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 400 || !strings.Contains(string(body), "slower than") {
		t.Fatalf("status %d %s; want 400 naming the transfer rate", res.StatusCode, body)
	}
	closedWithin(t, conn, br)
	t.Logf("slow body cut after %v", time.Since(start).Round(time.Millisecond))
}

// TestSlowHeadersAndIdleConnectionsAreClosed: a client sending its headers
// a byte at a time, and a keep-alive connection left idle after a call,
// are closed by the server.
func TestSlowHeadersAndIdleConnectionsAreClosed(t *testing.T) {
	addr, tok := running(t, quick)
	t.Run("slow headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		stop := make(chan struct{})
		defer close(stop)
		fmt.Fprintf(conn, "GET /v1/admin/account/me HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
		go drip(conn, 50*time.Millisecond, stop)
		br := bufio.NewReader(conn)
		conn.SetReadDeadline(time.Now().Add(bound))
		// net/http may answer 408 before it closes; what matters is the close.
		for {
			if _, err := br.ReadByte(); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the connection is still open after %v", bound)
				}
				break
			}
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		for i := 0; i < 10; i++ {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /v1/admin/account/me HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, tok)
			if st := answerThenClose(t, conn, bufio.NewReader(conn)); st != 200 {
				t.Fatalf("status %d", st)
			}
		}
	})
}

// api calls the platform at base with token.
type api struct {
	t           *testing.T
	base, token string
}

func (a api) call(method, path string, headers map[string]string, body any) map[string]any {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != 200 {
		a.t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, out)
	}
	return out
}

// bot creates a workspace and a bot.
func (a api) bot() string {
	ws := a.call("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "uploads"})["id"].(string)
	return a.call("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws}, map[string]any{"name": "b"})["bot"].(map[string]any)["id"].(string)
}

// upload uploads size bytes as file key of bot through its upload URL,
// 32 KiB every interval, and returns the file once completed.
func (a api) upload(bot, key string, size int, interval time.Duration) map[string]any {
	a.t.Helper()
	file := a.call("PUT", "/v1/files", map[string]string{"x-bot-id": bot}, map[string]any{"key": key, "size": size})["file"].(map[string]any)
	pr, pw := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			time.Sleep(interval)
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("PUT", file["uploadUrl"].(string), pr)
	req.ContentLength = int64(size)
	req.Header.Set("Content-Type", file["contentType"].(string))
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		a.t.Fatalf("upload: %d %s", res.StatusCode, msg)
	}
	got := a.call("GET", "/v1/files/"+file["id"].(string), map[string]string{"x-bot-id": bot}, nil)["file"].(map[string]any)
	if got["status"] != "upload_completed" || got["size"] != float64(size) {
		a.t.Fatalf("after the upload: %v", got)
	}
	a.t.Logf("%d bytes uploaded in %v", size, time.Since(start).Round(time.Millisecond))
	return got
}

// TestSlowButSteadyUploadFinishes: a presigned upload to the embedded S3
// that takes several times the grace, at 5 times the minimum rate, is not
// cut: the limit is a rate, not a deadline. And a fast one is not either.
func TestSlowButSteadyUploadFinishes(t *testing.T) {
	addr, tok := running(t, quick)
	a := api{t, "http://" + addr, tok}
	bot := a.bot()
	a.upload(bot, "steady.bin", 24*32<<10, 100*time.Millisecond) // 768 KiB at 320 KiB/s: 2.4 s, 8 times the grace
	a.upload(bot, "fast.bin", 32<<20, 0)
}

// TestSlowReaderIsCut: a client that asks for a 32 MiB download and does not
// read it is cut off once the answer stops moving at the minimum rate.
func TestSlowReaderIsCut(t *testing.T) {
	addr, tok := running(t, quick)
	a := api{t, "http://" + addr, tok}
	bot := a.bot()
	const size = 32 << 20
	file := a.upload(bot, "big.bin", size, 0)
	u, _ := neturl.Parse(file["url"].(string))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nx-bot-id: %s\r\n\r\n", u.RequestURI(), addr, tok, bot)
	time.Sleep(1500 * time.Millisecond) // reads nothing: the server's writes block
	conn.SetReadDeadline(time.Now().Add(bound))
	n, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after %v (%d bytes read)", bound, n)
	}
	if n >= size {
		t.Fatalf("the whole answer was delivered (%d bytes) to a client that stalled", n)
	}
	t.Logf("cut after %d bytes", n)
}

// TestRefusedBodiesAreAnswered: a call refused before its body is read
// (401 without a token, 413 over the body limit with one) gets its answer
// even while the client is still sending: the server answers, stops
// reading, half-closes and discards what still arrives (bounded) before it
// closes, so a client that sends its whole body before reading never
// sees a reset instead of the answer. Real
// sockets, 50 tries each, over the 1 MiB limit by 1 byte and by 60 MiB.
func TestRefusedBodiesAreAnswered(t *testing.T) {
	addr, tok := running(t, local.Limits{})
	const limit = 1 << 20
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for _, tc := range []struct {
		name  string
		token string
		size  int
		want  int
	}{
		{"no token, limit+1", "", limit + 1, 401},
		{"no token, limit+60MiB", "", limit + 60<<20, 401},
		{"token, limit+1", tok, limit + 1, 413},
		{"token, limit+60MiB", tok, limit + 60<<20, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failures := 0
			for try := 0; try < 50; try++ {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				auth := ""
				if tc.token != "" {
					auth = "Authorization: Bearer " + tc.token + "\r\n"
				}
				fmt.Fprintf(conn, "POST /v1/admin/workspaces HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, auth, tc.size)
				// The client sends its whole body before it reads, as a
				// simple client does: a reset while it sends (today's Node
				// clients report ECONNRESET then, never the answer) fails.
				var werr error
				for left := tc.size; left > 0; {
					n := min(left, len(chunk))
					conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
					if _, werr = conn.Write(chunk[:n]); werr != nil {
						break
					}
					left -= n
				}
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(conn)
				res, err := http.ReadResponse(br, nil)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(res.Body)
				}
				if err == nil && werr != nil {
					err = fmt.Errorf("the body could not be sent: %w", werr)
				}
				if err == nil && res.Close { // then the server closes, without a reset
					if _, rerr := br.ReadByte(); rerr != io.EOF {
						err = fmt.Errorf("after the answer: %v, want a clean close", rerr)
					}
				}
				conn.Close()
				switch {
				case err != nil:
					failures++
					t.Errorf("try %d: no answer: %v", try, err)
				case res.StatusCode != tc.want || !bytes.Contains(body, []byte(`"code"`)):
					failures++
					t.Errorf("try %d: %d %s; want %d in the error shape", try, res.StatusCode, body, tc.want)
				}
				if failures > 5 {
					t.Fatal("too many failures")
				}
			}
		})
	}
}
