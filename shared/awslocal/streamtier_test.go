package awslocal

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/iampolicy"
)

// TestStreamTierTemplate: StreamTier selects the tier: with lambda,
// ChatStreamUrl is the streaming function's URL; with container, the load
// balancer's address, and the streaming function (with its URL and role)
// does not exist: its Condition, StreamOnLambda, is false; the task's
// environment and role resolve (the role reads and writes the table,
// nothing of the bucket).
func TestStreamTierTemplate(t *testing.T) {
	for _, tier := range []string{"lambda", "container"} {
		tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00", "StreamTier": tier}, "http://api.local")
		if err != nil {
			t.Fatal(err)
		}
		on, err := tpl.Condition("StreamOnContainer")
		if err != nil || on != (tier == "container") {
			t.Fatalf("%s: StreamOnContainer %v %v", tier, on, err)
		}
		fn := tpl.FunctionByName("ChatStreamFunction")
		if (fn != nil) != (tier == "lambda") {
			t.Fatalf("%s: ChatStreamFunction %+v", tier, fn)
		}
		for _, id := range []string{"ChatStreamFunctionRole", "ChatStreamFunctionUrlInvokePermission", "ChatStreamLogGroup"} {
			if got := tpl.typeOf(id); (got != "") != (tier == "lambda") {
				t.Errorf("%s: %s is %q", tier, id, got)
			}
		}
		if fn != nil {
			tpl.SetFunctionURL(fn, "http://127.0.0.1:1/")
		}
		tpl.SetAttribute("StreamLoadBalancer", "DNSName", "127.0.0.1:2")
		want := map[string]string{"lambda": "http://127.0.0.1:1/", "container": "http://127.0.0.1:2/"}[tier]
		if got := tpl.Outputs()["ChatStreamUrl"]; got != want {
			t.Errorf("%s: ChatStreamUrl %q, want %q", tier, got, want)
		}
		// The chat and admin functions' PLATFORM_CHAT_STREAM_URL (the
		// hosted webchat page's host) is the same, once served.
		for _, id := range []string{"ChatFunction", "AdminFunction"} {
			fn := tpl.FunctionByName(id)
			if _, ok := fn.Env["PLATFORM_CHAT_STREAM_URL"]; ok {
				t.Fatalf("%s: %s's PLATFORM_CHAT_STREAM_URL resolved before the stream URL is served", tier, id)
			}
			if err := tpl.resolveLateEnv(fn); err != nil || fn.Env["PLATFORM_CHAT_STREAM_URL"] != want {
				t.Errorf("%s: %s's PLATFORM_CHAT_STREAM_URL %q (%v), want %q", tier, id, fn.Env["PLATFORM_CHAT_STREAM_URL"], err, want)
			}
		}
	}
	tpl, _ := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00", "StreamTier": "container"}, "")
	env, err := tpl.taskEnvironment("StreamTaskDefinition")
	if err != nil || env["PLATFORM_TABLE"] != tpl.TableName || env["PLATFORM_PAGING_KEY"] != "00" || env["PORT"] != "8080" {
		t.Fatalf("task environment %v %v", env, err)
	}
	if fn := tpl.FunctionByName("ChatFunction"); fn.Env["PLATFORM_BUCKET"] != tpl.BucketName {
		t.Errorf("ChatFunction's PLATFORM_BUCKET %q, want %q (the Webchat API's POST /files on the webhook URL)", fn.Env["PLATFORM_BUCKET"], tpl.BucketName)
	}
	// The Webchat API's files (files/ keys) are signed and read by every
	// host of the chat area: the tasks, the streaming function (lambda
	// tier) and the chat function behind API Gateway; nothing else of the
	// bucket.
	lambdaTier, _ := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "")
	for _, r := range []struct {
		tpl  *Template
		role string
	}{{tpl, "StreamTaskRole"}, {tpl, "ChatFunctionRole"}, {lambdaTier, "ChatStreamFunctionRole"}} {
		policy, err := r.tpl.rolePolicy(r.role)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := iampolicy.Evaluate(policy, iampolicy.Request{Action: "dynamodb:Query", Resource: r.tpl.TableARN}); d != iampolicy.Allow {
			t.Errorf("%s's Query on the table: %v", r.role, d)
		}
		for _, c := range []struct {
			action, key string
			allow       bool
		}{
			{"s3:GetObject", "files/x", true}, {"s3:PutObject", "files/x", true}, {"s3:PutObjectTagging", "files/x", true},
			{"s3:DeleteObject", "files/x", false}, {"s3:GetObject", "code/x", false}, {"s3:PutObject", "code/x", false},
		} {
			if d, _ := iampolicy.Evaluate(policy, iampolicy.Request{Action: c.action, Resource: "arn:aws:s3:::" + r.tpl.BucketName + "/" + c.key}); (d == iampolicy.Allow) != c.allow {
				t.Errorf("%s's %s on %s: %v, want allowed %v", r.role, c.action, c.key, d, c.allow)
			}
		}
	}
}

// TestRoundRobinStreams: the load balancer's stand-in takes turns over the
// tasks and streams each answer as it is written (an SSE stream's first
// frame arrives while the stream is open).
func TestRoundRobinStreams(t *testing.T) {
	var backends []*url.URL
	release := make(chan struct{})
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: task %d\n\n", i)
			w.(http.Flusher).Flush()
			<-release // the stream stays open
		}))
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		backends = append(backends, u)
	}
	lb := httptest.NewServer(roundRobin(backends))
	defer lb.Close()
	defer close(release) // before the servers close: their streams end
	seen := map[string]bool{}
	for range 4 {
		res, err := http.Get(lb.URL)
		if err != nil {
			t.Fatal(err)
		}
		line := make(chan string, 1)
		go func() {
			l, _ := bufio.NewReader(res.Body).ReadString('\n')
			line <- strings.TrimSpace(l)
		}()
		select {
		case l := <-line:
			seen[l] = true
		case <-time.After(5 * time.Second):
			t.Fatal("the first frame did not arrive while the stream is open")
		}
		defer res.Body.Close()
	}
	if !seen["data: task 0"] || !seen["data: task 1"] {
		t.Fatalf("frames %v: want both tasks", seen)
	}
}
