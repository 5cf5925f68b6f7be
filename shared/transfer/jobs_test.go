package transfer_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/signin"
)

// waitJob polls a console job until it leaves "running" (the state the
// test asserts), and answers it.
func waitJob(t *testing.T, s *side, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		job := s.call("GET", "/v1/admin/transfer/jobs/"+id, "", nil, 200).Body["job"].(map[string]any)
		if job["status"] != "running" {
			if job["status"] != "done" {
				t.Fatalf("job %s: %v", id, job)
			}
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still running after 120 s: %v", id, job)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsoleJobs: the console's export and import (jobs.go,
// transfer_jobs.go): a workspace exported by a job, its archive downloaded
// by its key without a token, uploaded to another platform, a dry run
// that writes nothing, the import, and every read the same on both; then
// who may do what, and bad input.
func TestConsoleJobs(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "none")
	sc := scale{rows: 1500, messages: 60, files: 3}
	a, b := newSide(t), newSide(t)
	bot := seed(t, a, sc)
	prepareTarget(b)

	job := a.call("POST", "/v1/admin/transfer/exports", "", map[string]any{"passphrase": "correct horse"}, 201).Body["job"].(map[string]any)
	job = waitJob(t, a, job["id"].(string))
	if job["records"].(float64) < float64(sc.rows+sc.messages) || job["totalRecords"].(float64) < float64(sc.rows+sc.messages) {
		t.Fatalf("export's progress: %v", job)
	}
	res, err := http.Get(a.URL + job["downloadUrl"].(string)) // no token: the key
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || int64(len(archive)) != int64(job["bytes"].(float64)) || !strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download: %d, %d bytes of %v", res.StatusCode, len(archive), job["bytes"])
	}
	// Another key, or none, downloads nothing.
	for _, u := range []string{strings.Split(job["downloadUrl"].(string), "?")[0] + "?key=0000", strings.Split(job["downloadUrl"].(string), "?")[0]} {
		if r := a.Do(apitest.Req{Method: "GET", Path: u}); r.Status != 401 && r.Status != 404 {
			t.Fatalf("GET %s: %d", u, r.Status)
		}
	}

	up := b.Do(apitest.Req{Method: "POST", Path: "/v1/admin/transfer/uploads", Token: b.AdminToken, Body: archive,
		Headers: map[string]string{"x-workspace-id": b.ws, "Content-Type": "application/octet-stream"}})
	if up.Status != 201 || up.Str("job.status") != "uploaded" || up.Str("job.source.workspaceId") != a.ws {
		t.Fatalf("upload: %d %s", up.Status, up.Raw)
	}
	id := up.Str("job.id")
	b.call("POST", "/v1/admin/transfer/jobs/"+id+"/import", "", map[string]any{"dryRun": true, "passphrase": "correct horse"}, 200)
	dry := waitJob(t, b, id)["import"].(map[string]any)
	if dry["created"].(float64) == 0 || dry["conflicts"].(float64) != 0 {
		t.Fatalf("dry run: %v", dry)
	}
	if n := len(b.call("GET", "/v1/admin/bots", "", nil, 200).List("bots")); n != 0 {
		t.Fatalf("the dry run wrote: %d bots", n)
	}
	b.call("POST", "/v1/admin/transfer/jobs/"+id+"/import", "", map[string]any{"passphrase": "correct horse"}, 200)
	done := waitJob(t, b, id)
	if im := done["import"].(map[string]any); im["conflicts"].(float64) != 0 || im["failed"].(float64) != 0 || done["bytes"] != done["totalBytes"] {
		t.Fatalf("import: %v", done)
	}
	waitIndexed(t, b, bot, sc.files)
	r := &reader{t: t, a: a, b: b, bot: bot}
	compareAll(r, sc)
	t.Logf("%d read operations answer the same on both platforms", r.n)

	// Who may: a developer exports (its own job), may not import; another
	// account does not see the job.
	dev := b.AccountToken("dev@example.com")
	// (the import made dev@example.com a developer, as on the source)
	h := map[string]string{"x-workspace-id": b.ws}
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		want                      int
	}{
		{"a developer's upload", "POST", "/v1/admin/transfer/uploads", dev, "{}", 403},
		{"a developer's import", "POST", "/v1/admin/transfer/jobs/" + id + "/import", dev, map[string]any{}, 403},
		{"another account's job", "GET", "/v1/admin/transfer/jobs/" + id, dev, nil, 404},
		{"an unknown job", "GET", "/v1/admin/transfer/jobs/import_nope", b.AdminToken, nil, 404},
		{"not an archive", "POST", "/v1/admin/transfer/uploads", b.AdminToken, "hello", 400},
		{"an unknown field", "POST", "/v1/admin/transfer/exports", b.AdminToken, map[string]any{"bot": "x"}, 400},
		{"another workspace's bot", "POST", "/v1/admin/transfer/exports", b.AdminToken, map[string]any{"botId": "bot_01J00000000000000000000000"}, 404},
		{"no token", "POST", "/v1/admin/transfer/exports", "", map[string]any{}, 401},
	} {
		if r := b.Do(apitest.Req{Method: tc.method, Path: tc.path, Token: tc.token, Body: tc.body, Headers: h}); r.Status != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.name, r.Status, tc.want, r.Raw)
		}
	}
	if r := b.Do(apitest.Req{Method: "POST", Path: "/v1/admin/transfer/exports", Token: dev, Body: map[string]any{"botId": bot}, Headers: h}); r.Status != 201 {
		t.Fatalf("a developer's export: %d %s", r.Status, r.Raw)
	}

	// A browser's session (its cookie and CSRF token, no bearer token):
	// the job's calls carry them, and the export is done.
	link, err := os.ReadFile(filepath.Join(a.DataDir, "setup-link"))
	if err != nil {
		t.Fatal(err)
	}
	_, tok, _ := strings.Cut(strings.TrimSpace(string(link)), "#/setup/")
	sr := a.Do(apitest.Req{Method: "POST", Path: "/auth/links/" + tok, Body: map[string]any{"password": "a long enough password 1"}})
	var cookie string
	for _, ck := range (&http.Response{Header: sr.Header}).Cookies() {
		if ck.Name == signin.CookieName {
			cookie = ck.Value
		}
	}
	if sr.Status != 200 || cookie == "" {
		t.Fatalf("sign-in: %d %s", sr.Status, sr.Raw)
	}
	sess := map[string]string{"Cookie": signin.CookieName + "=" + cookie, signin.CSRFHeader: sr.Str("csrfToken"), "x-workspace-id": a.ws}
	ex := a.Do(apitest.Req{Method: "POST", Path: "/v1/admin/transfer/exports", Body: map[string]any{"botId": bot}, Headers: sess})
	if ex.Status != 201 {
		t.Fatalf("a session's export: %d %s", ex.Status, ex.Raw)
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		g := a.Do(apitest.Req{Method: "GET", Path: "/v1/admin/transfer/jobs/" + ex.Str("job.id"), Headers: sess})
		if st := g.Str("job.status"); st != "running" {
			if st != "done" || g.Body["job"].(map[string]any)["records"].(float64) < float64(sc.rows) {
				t.Fatalf("a session's export: %s", g.Raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a session's export still running after 120 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
