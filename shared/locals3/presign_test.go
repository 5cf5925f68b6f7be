package locals3

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// presignPut presigns a PUT of key with the given content type and length.
func (e *testEnv) presignPut(t *testing.T, key, contentType string, size int, expires time.Duration) *v4.PresignedHTTPRequest {
	t.Helper()
	req, err := s3.NewPresignClient(e.client(testSecret)).PresignPutObject(context.Background(), &s3.PutObjectInput{
		Bucket:        aws.String(testBucket),
		Key:           aws.String(key),
		ContentType:   aws.String(contentType),
		ContentLength: aws.Int64(int64(size)),
	}, s3.WithPresignExpires(expires))
	if err != nil {
		t.Fatalf("PresignPutObject: %v", err)
	}
	return req
}

// browserPut sends body to a presigned URL the way a browser's fetch or
// net/http would, with the given Content-Type.
func browserPut(t *testing.T, rawURL, contentType string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, rawURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// editQuery returns rawURL with its query changed by fn (and re-encoded).
func editQuery(t *testing.T, rawURL string, fn func(url.Values)) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	fn(q)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestPresignedPut(t *testing.T) {
	env := newEnv(t, envConfig{})
	body := []byte("\x89PNG fake image bytes")
	const key, ctype = "avatars/user 1.png", "image/png"
	ps := env.presignPut(t, key, ctype, len(body), 10*time.Minute)
	t.Logf("PresignPutObject: method=%s url=%s signed headers=%v", ps.Method, ps.URL, ps.SignedHeader)
	if q := mustParse(t, ps.URL).Query(); q.Get("X-Amz-SignedHeaders") != "content-length;content-type;host" {
		t.Errorf("X-Amz-SignedHeaders = %q", q.Get("X-Amz-SignedHeaders"))
	}
	for name := range mustParse(t, ps.URL).Query() {
		if strings.HasPrefix(strings.ToLower(name), "x-amz-checksum") || strings.EqualFold(name, "x-amz-sdk-checksum-algorithm") {
			t.Errorf("presigned URL carries checksum parameter %s", name)
		}
	}

	t.Run("tampered signature", func(t *testing.T) {
		u := editQuery(t, ps.URL, func(q url.Values) {
			sig := []byte(q.Get("X-Amz-Signature"))
			sig[0] ^= 1
			q.Set("X-Amz-Signature", string(sig))
		})
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("other key", func(t *testing.T) {
		u := strings.Replace(ps.URL, "user%201.png", "user%202.png", 1)
		if u == ps.URL {
			t.Fatal("key not found in URL")
		}
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("other bucket", func(t *testing.T) {
		if err := env.srv.EnsureBucket(context.Background(), "other"); err != nil {
			t.Fatal(err)
		}
		u := strings.Replace(ps.URL, "/"+testBucket+"/", "/other/", 1)
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("different content type", func(t *testing.T) {
		status, code, b := env.do(t, browserPut(t, ps.URL, "text/html", body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("missing content type", func(t *testing.T) {
		status, code, b := env.do(t, browserPut(t, ps.URL, "", body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("different length", func(t *testing.T) {
		status, code, b := env.do(t, browserPut(t, ps.URL, ctype, append(body, 'x')))
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("unsigned x-amz header", func(t *testing.T) {
		req := browserPut(t, ps.URL, ctype, body)
		req.Header.Set("X-Amz-Meta-Owner", "mallory")
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusForbidden, codeAccessDenied)
	})
	t.Run("other method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodDelete, ps.URL, nil)
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("wrong region in credential", func(t *testing.T) {
		u := editQuery(t, ps.URL, func(q url.Values) {
			q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), testRegion, "eu-west-1", 1))
		})
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusBadRequest, codeAuthQueryParamsError)
	})
	t.Run("wrong service in credential", func(t *testing.T) {
		u := editQuery(t, ps.URL, func(q url.Values) {
			q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), "/s3/", "/sqs/", 1))
		})
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusBadRequest, codeAuthQueryParamsError)
	})
	t.Run("wrong access key", func(t *testing.T) {
		u := editQuery(t, ps.URL, func(q url.Values) {
			q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), testAccessKey, "AKIAOTHER", 1))
		})
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeInvalidAccessKeyID)
	})
	t.Run("expires too long", func(t *testing.T) {
		u := editQuery(t, ps.URL, func(q url.Values) { q.Set("X-Amz-Expires", "604801") })
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusBadRequest, codeAuthQueryParamsError)
	})
	t.Run("extended expiry", func(t *testing.T) {
		u := editQuery(t, ps.URL, func(q url.Values) { q.Set("X-Amz-Expires", "86400") })
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	for _, param := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		t.Run("missing "+param, func(t *testing.T) {
			u := editQuery(t, ps.URL, func(q url.Values) { q.Del(param) })
			status, code, b := env.do(t, browserPut(t, u, ctype, body))
			mustStatus(t, status, code, b, http.StatusBadRequest, codeAuthQueryParamsError)
		})
	}
	t.Run("no auth parameters", func(t *testing.T) {
		u := editQuery(t, ps.URL, func(q url.Values) {
			for name := range q {
				if strings.HasPrefix(name, "X-Amz-") {
					q.Del(name)
				}
			}
		})
		status, code, b := env.do(t, browserPut(t, u, ctype, body))
		mustStatus(t, status, code, b, http.StatusForbidden, codeAccessDenied)
	})
	if puts := env.puts.take(); len(puts) != 0 {
		t.Fatalf("OnPut called for rejected uploads: %+v", puts)
	}
	if _, err := env.srv.backend.HeadObject(testBucket, key); err == nil {
		t.Fatal("a rejected upload was stored")
	}

	// The genuine upload succeeds and triggers OnPut.
	status, code, b := env.do(t, browserPut(t, ps.URL, ctype, body))
	mustStatus(t, status, code, b, http.StatusOK, "")
	want := PutObject{Bucket: testBucket, Key: key, ContentType: ctype, Size: int64(len(body))}
	if puts := env.puts.take(); len(puts) != 1 || puts[0] != want {
		t.Fatalf("OnPut = %+v, want [%+v]", puts, want)
	}
	get, err := env.client(testSecret).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if !bytes.Equal(got, body) || aws.ToString(get.ContentType) != ctype {
		t.Fatalf("stored %q (%s)", got, aws.ToString(get.ContentType))
	}

	// After the expiry the same URL is refused.
	env.clock.Advance(10*time.Minute + time.Second)
	status, code, b = env.do(t, browserPut(t, ps.URL, ctype, body))
	mustStatus(t, status, code, b, http.StatusForbidden, codeAccessDenied)
	if !strings.Contains(string(b), "expired") {
		t.Fatalf("expected an expiry message: %s", b)
	}

	// A presigned URL dated in the future (beyond the clock skew) is not
	// valid yet.
	env.clock.Advance(-time.Hour)
	status, code, b = env.do(t, browserPut(t, ps.URL, ctype, body))
	mustStatus(t, status, code, b, http.StatusForbidden, codeAccessDenied)
}

func TestPresignedPutOnPutErrorIsLogged(t *testing.T) {
	env := newEnv(t, envConfig{})
	env.puts.err = io.ErrUnexpectedEOF
	ps := env.presignPut(t, "k", "text/plain", 3, time.Minute)
	status, code, b := env.do(t, browserPut(t, ps.URL, "text/plain", []byte("abc")))
	mustStatus(t, status, code, b, http.StatusOK, "")
	if puts := env.puts.take(); len(puts) != 1 {
		t.Fatalf("OnPut calls = %+v", puts)
	}
}

// PresignPutObject with ChecksumAlgorithm bakes the checksum of the (empty)
// input body into the signed headers; the platform must not set it.
func TestPresignPutChecksumAlgorithm(t *testing.T) {
	env := newEnv(t, envConfig{})
	req, err := s3.NewPresignClient(env.client(testSecret)).PresignPutObject(context.Background(), &s3.PutObjectInput{
		Bucket:            aws.String(testBucket),
		Key:               aws.String("k"),
		ContentType:       aws.String("text/plain"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PresignPutObject with ChecksumAlgorithm=CRC32: url=%s signed headers=%v", req.URL, req.SignedHeader)
	// Sending exactly the signed headers with a real body fails the checksum.
	hr := browserPut(t, req.URL, "", []byte("abc"))
	for k, vs := range req.SignedHeader {
		if !strings.EqualFold(k, "host") {
			hr.Header[k] = vs
		}
	}
	status, code, b := env.do(t, hr)
	t.Logf("upload with the signed headers: %d %s", status, code)
	if status == http.StatusOK {
		t.Fatalf("upload unexpectedly succeeded: %s", b)
	}
}

func TestPresignedGet(t *testing.T) {
	env := newEnv(t, envConfig{})
	ctx := context.Background()
	c := env.client(testSecret)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("doc.txt"), Body: strings.NewReader("contents"), ContentType: aws.String("text/plain"),
	}); err != nil {
		t.Fatal(err)
	}
	ps, err := s3.NewPresignClient(c).PresignGetObject(ctx, &s3.GetObjectInput{
		Bucket:                     aws.String(testBucket),
		Key:                        aws.String("doc.txt"),
		ResponseContentDisposition: aws.String(`attachment; filename="doc.txt"`),
	}, s3.WithPresignExpires(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PresignGetObject: %s signed headers=%v", ps.URL, ps.SignedHeader)

	resp, err := env.http.Client().Get(ps.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "contents" || resp.Header.Get("Content-Disposition") != `attachment; filename="doc.txt"` {
		t.Fatalf("presigned GET = %d %q %v", resp.StatusCode, got, resp.Header)
	}

	// Changing the response override invalidates the signature.
	u := editQuery(t, ps.URL, func(q url.Values) { q.Set("response-content-disposition", "inline") })
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	status, code, b := env.do(t, req)
	mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)

	// HEAD with a GET URL is a different request.
	req, _ = http.NewRequest(http.MethodHead, ps.URL, nil)
	status, _, _ = env.do(t, req)
	if status != http.StatusForbidden {
		t.Fatalf("HEAD with GET URL = %d", status)
	}

	env.clock.Advance(time.Hour + time.Second)
	req, _ = http.NewRequest(http.MethodGet, ps.URL, nil)
	status, code, b = env.do(t, req)
	mustStatus(t, status, code, b, http.StatusForbidden, codeAccessDenied)
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	env := newEnv(t, envConfig{dir: dir})
	body := bytes.Repeat([]byte("persist me "), 1<<20) // > spool memory limit
	if _, err := env.client(testSecret).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("p/1"), Body: bytes.NewReader(body), ContentType: aws.String("text/plain"),
	}); err != nil {
		t.Fatal(err)
	}
	env.http.Close()
	if err := env.srv.Close(); err != nil {
		t.Fatal(err)
	}

	env2 := newEnv(t, envConfig{dir: dir})
	get, err := env2.client(testSecret).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("p/1")})
	if err != nil {
		t.Fatalf("GetObject after reopen: %v", err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if !bytes.Equal(got, body) || aws.ToString(get.ContentType) != "text/plain" {
		t.Fatalf("object after reopen: %d bytes, type %q", len(got), aws.ToString(get.ContentType))
	}
}

func TestPathPrefixMount(t *testing.T) {
	env := newEnv(t, envConfig{prefix: "/_s3"})
	ctx := context.Background()
	c := env.client(testSecret)
	t.Logf("endpoint %s", env.endpoint)

	// The other handler on the mux still works.
	resp, err := env.http.Client().Get(env.http.URL + "/api/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/x = %d", resp.StatusCode)
	}

	// SDK operations with the prefix in the endpoint.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String("a/b.txt"), Body: strings.NewReader("sdk")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	buckets, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(buckets.Buckets) != 1 || aws.ToString(buckets.Buckets[0].Name) != testBucket {
		t.Fatalf("ListBuckets = %+v, %v", buckets, err)
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket)})
	if err != nil || len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != "a/b.txt" {
		t.Fatalf("ListObjectsV2 = %+v, %v", list, err)
	}

	// Presigned PUT and GET built for http://host/_s3.
	body := []byte("through the prefix")
	ps := env.presignPut(t, "c.txt", "text/plain", len(body), time.Minute)
	if !strings.Contains(ps.URL, "/_s3/"+testBucket+"/c.txt?") {
		t.Fatalf("presigned URL %s lacks the prefix", ps.URL)
	}
	status, code, b := env.do(t, browserPut(t, ps.URL, "text/plain", body))
	mustStatus(t, status, code, b, http.StatusOK, "")
	if puts := env.puts.take(); len(puts) != 2 || puts[1] != (PutObject{Bucket: testBucket, Key: "c.txt", ContentType: "text/plain", Size: int64(len(body))}) {
		t.Fatalf("OnPut = %+v", puts)
	}
	get, err := s3.NewPresignClient(c).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("c.txt")})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, get.URL, nil)
	status, code, b = env.do(t, req)
	if status != http.StatusOK || string(b) != string(body) {
		t.Fatalf("presigned GET = %d %s %s", status, code, b)
	}

	// The prefix is part of what is signed: the same signature is not
	// valid for the unprefixed path (as if the prefix had been stripped
	// before verification).
	stripped := strings.Replace(get.URL, "/_s3/", "/", 1)
	direct := newEnv(t, envConfig{})
	req, _ = http.NewRequest(http.MethodGet, strings.Replace(stripped, env.http.URL, direct.http.URL, 1), nil)
	req.Host = strings.TrimPrefix(env.http.URL, "http://")
	status, code, b = direct.do(t, req)
	mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)

	// Paths outside the prefix never reach gofakes3.
	rec := &responseRecorder{header: http.Header{}}
	r, _ := http.NewRequest(http.MethodGet, "http://x/_s3x/"+testBucket, nil)
	env.srv.ServeHTTP(rec, r)
	if rec.status != http.StatusNotFound {
		t.Fatalf("outside prefix = %d", rec.status)
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
