package awslocal

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A function's process as the Runtime API sees it: a shell script with
// curl (answer echoes the event, hang never answers, die exits mid-event).
const fakeRuntime = `#!/bin/sh
api="http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime/invocation"
while true; do
  curl -s -D $TMPDIR/h.$$ -o $TMPDIR/b.$$ "$api/next" || exit 1
  id=$(grep -i '^Lambda-Runtime-Aws-Request-Id' $TMPDIR/h.$$ | tr -d '\r' | cut -d' ' -f2)
  case "$MODE" in
    answer) curl -s -X POST --data-binary @$TMPDIR/b.$$ "$api/$id/response" >/dev/null ;;
    hang) sleep 60 ;;
    die) exit 3 ;;
  esac
done
`

func TestInvocationOutcomes(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "bootstrap")
	if err := os.WriteFile(script, []byte(fakeRuntime), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*lambdaFunction{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
		var n int
		for _, c := range parts[1] {
			n = n*10 + int(c-'0')
		}
		funcs[parts[0]].serveRuntime(w, r, n, "/"+parts[2])
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	for _, tc := range []struct {
		mode, want string
		fnErr      bool
	}{
		{"answer", `{"n":1}`, false},
		{"hang", "Task timed out after 1.00 seconds", true},
		{"die", "Runtime exited with error", true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			fn := &Function{LogicalID: tc.mode, Name: tc.mode, Timeout: 1}
			lf := newLambdaFunction(fn, script, []string{"PATH=" + os.Getenv("PATH"), "MODE=" + tc.mode, "TMPDIR=" + dir}, ln.Addr().String())
			var cold []ColdStart
			lf.started = func(c ColdStart) { cold = append(cold, c) }
			funcs[tc.mode] = lf
			defer lf.close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := lf.Invoke(ctx, []byte(`{"n":1}`))
			if r.Err != nil || r.FunctionError != tc.fnErr || !strings.Contains(string(r.Payload), tc.want) {
				t.Fatalf("%+v %s", r, r.Payload)
			}
			if len(cold) != 1 {
				t.Errorf("cold starts: %v", cold)
			}
			if tc.mode == "answer" { // a warm instance takes the next event
				if r := lf.Invoke(ctx, []byte(`{"n":2}`)); string(r.Payload) != `{"n":2}` || len(cold) != 1 {
					t.Errorf("second event: %s, cold starts %d", r.Payload, len(cold))
				}
			}
		})
	}
}
