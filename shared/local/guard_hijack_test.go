package local

import (
	"bufio"
	"bytes"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is the server's error log, written from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGuardLeavesHijackedConnectionsAlone: a handler that takes its
// connection (a WebSocket upgrade, the `bp dev` tunnel) answers on it
// itself; once it returns, the guard must write no answer of its own, which
// net/http refuses and logs ("WriteHeader on hijacked connection"). Both
// ways a handler hijacks are covered: http.ResponseController (through
// Unwrap) and the http.Hijacker assertion.
func TestGuardLeavesHijackedConnectionsAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hijack func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error)
	}{
		{"ResponseController", func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
			return http.NewResponseController(w).Hijack()
		}},
		{"Hijacker", func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
			h, ok := w.(http.Hijacker)
			if !ok {
				t.Fatal("the guarded writer is no http.Hijacker")
			}
			return h.Hijack()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			returned := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, brw, err := tc.hijack(w)
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				_ = brw.Flush()
				_ = conn.Close()
			})
			logs := &syncBuffer{}
			guarded := guard(Limits{}.withDefaults(), h)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(returned) // the guard's own code after the handler has run too
				guarded.ServeHTTP(w, r)
			}))
			srv.Config.ErrorLog = log.New(logs, "", 0)
			srv.Start()
			defer srv.Close()

			req, _ := http.NewRequest("GET", srv.URL+"/tunnel", nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %d, want 101", res.StatusCode)
			}
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Fatal("the guarded handler did not return")
			}
			if l := logs.String(); strings.Contains(l, "hijacked") {
				t.Fatalf("the server logged: %s", l)
			}
		})
	}
}
