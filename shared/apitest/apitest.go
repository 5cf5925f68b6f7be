// Package apitest runs the local platform in-process for tests: the real
// handlers over the embedded stand-ins, reached through HTTP.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/openapi"
)

// Env is a running platform with its first account's token.
type Env struct {
	T          testing.TB
	URL        string
	DataDir    string
	AdminToken string
	Platform   *local.Platform
	srv        *httptest.Server
}

// New starts a fresh platform in a temporary data directory.
func New(t testing.TB) *Env {
	t.Helper()
	return Open(t, t.TempDir())
}

// Open starts a platform over dataDir (e.g. to test a restart).
func Open(t testing.TB, dataDir string) *Env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.Default()
	}
	p, err := local.Open(context.Background(), dataDir, "", log)
	if err != nil {
		t.Fatalf("open platform: %v", err)
	}
	// Tests count the DynamoDB calls of each operation, the token's read
	// included: every call reads its token here, as a key not used in the
	// last authcache.TTL does (TestTokenCheckIsCachedAndRevocationBounded
	// turns the cache back on).
	p.Store.TokenCache().SetTTL(-1)
	p.Store.SetAuthzCacheTTL(-1) // and every call reads its bot and membership
	srv := httptest.NewServer(p.Handler)
	p.SetBaseURL(srv.URL) // deployed code's BP_API_URL
	e := &Env{T: t, URL: srv.URL, DataDir: dataDir, Platform: p, srv: srv}
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	e.AdminToken = strings.TrimSpace(string(tok))
	t.Cleanup(e.Close)
	return e
}

// Close stops the platform (idempotent).
func (e *Env) Close() {
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
		if err := e.Platform.Close(); err != nil {
			e.T.Errorf("close platform: %v", err)
		}
	}
}

// AccountToken reads the token an invitation wrote for email.
func (e *Env) AccountToken(email string) string {
	b, err := os.ReadFile(filepath.Join(e.DataDir, "account-tokens", email))
	if err != nil {
		e.T.Fatalf("account token of %s: %v", email, err)
	}
	return string(b)
}

// Response is a decoded API response.
type Response struct {
	Status int
	Body   map[string]any
	Raw    []byte
	Header http.Header
}

// Str returns a top-level string field, or a nested one by dot path.
func (r Response) Str(path string) string {
	var v any = r.Body
	for _, p := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// List returns the array field name.
func (r Response) List(name string) []any {
	l, _ := r.Body[name].([]any)
	return l
}

// Req is one API request.
type Req struct {
	Method, Path string
	URL          string // an absolute URL instead of Path (a webhook's: a built-in integration's API)
	Token        string
	Headers      map[string]string
	Body         any // marshalled to JSON unless a string or []byte (sent raw)
}

// Do sends a request; Op, when set, validates a 2xx body against the
// reference response schema of that operation.
func (e *Env) Do(r Req) Response {
	e.T.Helper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.T.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	url := e.URL + r.Path
	if r.URL != "" {
		url = r.URL
	}
	req, err := http.NewRequest(r.Method, url, body)
	if err != nil {
		e.T.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := Response{Status: res.StatusCode, Raw: raw, Header: res.Header}
	_ = json.Unmarshal(raw, &out.Body)
	if res.StatusCode >= 400 {
		checkErrorShape(e.T, out)
	}
	return out
}

// Check fails the test unless the response has the wanted status; for 2xx
// responses of a reference operation op it also validates the body.
func (e *Env) Check(r Response, want int, op string) Response {
	e.T.Helper()
	if r.Status != want {
		e.T.Fatalf("%s: status %d, want %d: %s", op, r.Status, want, r.Raw)
	}
	if want < 300 && op != "" {
		var v any
		d := json.NewDecoder(bytes.NewReader(r.Raw))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			e.T.Fatalf("%s: body is not JSON: %v", op, err)
		}
		if err := openapi.ValidateResponse(op, v); err != nil {
			e.T.Fatalf("%s: response does not match the reference schema: %v\n%s", op, err, r.Raw)
		}
	}
	return r
}

func checkErrorShape(t testing.TB, r Response) {
	t.Helper()
	id, _ := r.Body["id"].(string)
	typ, _ := r.Body["type"].(string)
	msg, _ := r.Body["message"].(string)
	code, _ := r.Body["code"].(float64)
	if !strings.HasPrefix(id, "err_") || typ == "" || msg == "" || int(code) != r.Status {
		t.Fatalf("error response not in the {id, code, type, message} shape: %d %s", r.Status, r.Raw)
	}
}

// ItemsHolding lists the keys of the stored items in which any string
// attribute contains one of ids: what a deletion left behind. It Scans the
// whole table, which only a test may do. Audit records (AUDIT#...) are left
// out: a workspace's audit log outlives what it names, by design, until its
// retention ends (docs/security.md).
func (e *Env) ItemsHolding(ids ...string) []string {
	e.T.Helper()
	return ItemsHolding(e.T, e.Platform, ids...)
}

// ItemsHolding is Env.ItemsHolding for any local platform.
func ItemsHolding(t testing.TB, p *local.Platform, ids ...string) []string {
	t.Helper()
	var out []string
	in := &dynamodb.ScanInput{TableName: aws.String(p.Env.Table)}
	for {
		res, err := p.Store.Client().Scan(context.Background(), in)
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		for _, it := range res.Items {
			if pk, _ := it["pk"].(*types.AttributeValueMemberS); pk != nil && strings.HasPrefix(pk.Value, "AUDIT#") {
				continue
			}
			if holds(it, ids) {
				pk, _ := it["pk"].(*types.AttributeValueMemberS)
				sk, _ := it["sk"].(*types.AttributeValueMemberS)
				out = append(out, pk.Value+" / "+sk.Value)
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

func holds(it map[string]types.AttributeValue, ids []string) bool {
	for _, v := range it {
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			continue
		}
		for _, id := range ids {
			if id != "" && strings.Contains(s.Value, id) {
				return true
			}
		}
	}
	return false
}
