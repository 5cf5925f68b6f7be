package locals3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// requestLog records the headers of requests reaching the server.
type requestLog struct {
	mu   sync.Mutex
	reqs []http.Header
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		hdr := r.Header.Clone()
		hdr.Set("X-Test-Method", r.Method)
		hdr.Set("X-Test-URL", r.URL.String())
		l.reqs = append(l.reqs, hdr)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// last returns the latest request whose URL contains op (e.g. "x-id=GetObject").
func (l *requestLog) last(op string) http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.reqs) - 1; i >= 0; i-- {
		if strings.Contains(l.reqs[i].Get("X-Test-URL"), op) {
			return l.reqs[i]
		}
	}
	return nil
}

func TestSDKObjectLifecycle(t *testing.T) {
	var log requestLog
	env := newEnv(t, envConfig{wrap: log.wrap})
	ctx := context.Background()
	c := env.client(testSecret)

	// EnsureBucket is idempotent.
	if err := env.srv.EnsureBucket(ctx, testBucket); err != nil {
		t.Fatalf("EnsureBucket again: %v", err)
	}
	if err := env.srv.EnsureBucket(ctx, "Not_A_Bucket"); err == nil {
		t.Fatal("EnsureBucket accepted an invalid name")
	}

	// Keys exercising the canonical URI encoding.
	for _, key := range []string{"plain.txt", "dir/sub dir/a+b=c&d~é€.txt", "semi;colon,comma'quote(1)!*@$.bin"} {
		t.Run(key, func(t *testing.T) {
			body := []byte("hello, " + key)
			_, err := c.PutObject(ctx, &s3.PutObjectInput{
				Bucket:      aws.String(testBucket),
				Key:         aws.String(key),
				Body:        bytes.NewReader(body),
				ContentType: aws.String("text/plain; charset=utf-8"),
				Metadata:    map[string]string{"origin": "test"},
			})
			if err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			puts := env.puts.take()
			want := PutObject{Bucket: testBucket, Key: key, ContentType: "text/plain; charset=utf-8", Size: int64(len(body))}
			if len(puts) != 1 || puts[0] != want {
				t.Fatalf("OnPut calls = %+v, want [%+v]", puts, want)
			}

			head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("HeadObject: %v", err)
			}
			if aws.ToInt64(head.ContentLength) != int64(len(body)) || aws.ToString(head.ContentType) != "text/plain; charset=utf-8" || head.Metadata["origin"] != "test" {
				t.Fatalf("HeadObject = len %d, type %q, meta %v", aws.ToInt64(head.ContentLength), aws.ToString(head.ContentType), head.Metadata)
			}

			get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			got, _ := io.ReadAll(get.Body)
			get.Body.Close()
			if !bytes.Equal(got, body) {
				t.Fatalf("GetObject body = %q, want %q", got, body)
			}
			// Signing and checksum headers must not have been stored as
			// metadata (gofakes3 echoes stored X-Amz-* headers).
			stored, err := env.srv.backend.HeadObject(testBucket, key)
			if err != nil {
				t.Fatal(err)
			}
			for name := range stored.Metadata {
				l := strings.ToLower(name)
				if l == "x-amz-content-sha256" || l == "x-amz-date" || l == "authorization" || strings.HasPrefix(l, "x-amz-checksum-") || l == "x-amz-sdk-checksum-algorithm" {
					t.Errorf("signing header %s stored as metadata", name)
				}
			}

			// Ranged GET: no stale whole-object checksum may be returned.
			rng, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), Range: aws.String("bytes=0-4")})
			if err != nil {
				t.Fatalf("ranged GetObject: %v", err)
			}
			got, err = io.ReadAll(rng.Body)
			rng.Body.Close()
			if err != nil || string(got) != "hello" {
				t.Fatalf("ranged GetObject = %q, %v", got, err)
			}

			list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), Prefix: aws.String(key)})
			if err != nil {
				t.Fatalf("ListObjectsV2: %v", err)
			}
			if len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != key {
				t.Fatalf("ListObjectsV2 = %+v", list.Contents)
			}

			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)}); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
			_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
			var nf *types.NotFound
			if !errors.As(err, &nf) {
				t.Fatalf("HeadObject after delete: %v, want NotFound", err)
			}
		})
	}

	// What SDK v2 sends for PutObject over plain HTTP: a hex SHA-256 payload
	// hash and a CRC32 checksum header, no aws-chunked encoding.
	put := log.last("x-id=PutObject")
	t.Logf("PutObject over http: x-amz-content-sha256=%s x-amz-checksum-crc32=%s x-amz-sdk-checksum-algorithm=%s content-encoding=%q authorization=%s",
		put.Get("X-Amz-Content-Sha256"), put.Get("X-Amz-Checksum-Crc32"), put.Get("X-Amz-Sdk-Checksum-Algorithm"), put.Get("Content-Encoding"), put.Get("Authorization"))
	if !isHexSHA256(put.Get("X-Amz-Content-Sha256")) || put.Get("X-Amz-Checksum-Crc32") == "" {
		t.Errorf("unexpected PutObject headers over http: %v", put)
	}
	get := log.last("x-id=GetObject")
	t.Logf("GetObject over http: x-amz-content-sha256=%s x-amz-checksum-mode=%s", get.Get("X-Amz-Content-Sha256"), get.Get("X-Amz-Checksum-Mode"))
}

func TestSDKWrongCredentials(t *testing.T) {
	env := newEnv(t, envConfig{})
	ctx := context.Background()

	cases := []struct {
		name   string
		client *s3.Client
		status int
		code   string
	}{
		{"wrong secret", env.client("not-the-secret"), http.StatusForbidden, codeSignatureDoesNotMatch},
		{"wrong region", env.client(testSecret, func(o *s3.Options) { o.Region = "eu-west-1" }), http.StatusBadRequest, codeAuthHeaderMalformed},
		{"wrong access key", s3.New(s3.Options{
			Region:       testRegion,
			BaseEndpoint: aws.String(env.endpoint),
			UsePathStyle: true,
			Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "AKIAOTHER", SecretAccessKey: testSecret}, nil
			})),
			RetryMaxAttempts: 1,
		}), http.StatusForbidden, codeInvalidAccessKeyID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(testBucket), Key: aws.String("k"), Body: strings.NewReader("data"),
			})
			var api smithy.APIError
			if !errors.As(err, &api) || httpStatus(err) != tc.status || api.ErrorCode() != tc.code {
				t.Fatalf("PutObject error = %v (status %d), want %d %s", err, httpStatus(err), tc.status, tc.code)
			}
			_, err = tc.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("k")})
			if httpStatus(err) != tc.status {
				t.Fatalf("GetObject error = %v, want status %d", err, tc.status)
			}
		})
	}
	if puts := env.puts.take(); len(puts) != 0 {
		t.Fatalf("OnPut called for rejected uploads: %+v", puts)
	}
	// Nothing was stored.
	_, err := env.client(testSecret).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("k")})
	if httpStatus(err) != http.StatusNotFound {
		t.Fatalf("HeadObject = %v, want 404", err)
	}
}

func TestUnsignedRequestsDenied(t *testing.T) {
	env := newEnv(t, envConfig{})
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/", ""},
		{http.MethodGet, "/" + testBucket, ""},
		{http.MethodGet, "/" + testBucket + "/k", ""},
		{http.MethodPut, "/" + testBucket + "/k", "data"},
		{http.MethodDelete, "/" + testBucket + "/k", ""},
		{http.MethodPost, "/" + testBucket + "?delete", "<Delete/>"},
	} {
		req, _ := http.NewRequest(tc.method, env.endpoint+tc.path, strings.NewReader(tc.body))
		status, code, body := env.do(t, req)
		mustStatus(t, status, code, body, http.StatusForbidden, codeAccessDenied)
	}
	// A CORS preflight is answered without credentials.
	req, _ := http.NewRequest(http.MethodOptions, env.endpoint+"/"+testBucket+"/k", nil)
	req.Header.Set("Origin", "http://localhost:5173")
	req.Header.Set("Access-Control-Request-Method", "PUT")
	status, _, body := env.do(t, req)
	if status != http.StatusOK {
		t.Fatalf("preflight = %d %s", status, body)
	}
}

func TestSDKPayloadVerification(t *testing.T) {
	env := newEnv(t, envConfig{})
	ctx := context.Background()
	c := env.client(testSecret)

	// A checksum that does not match the body is rejected.
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("bad-crc"), Body: strings.NewReader("data"),
		ChecksumCRC32: aws.String("AAAAAA=="),
	})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != codeBadDigest {
		t.Fatalf("PutObject with wrong CRC32 = %v, want BadDigest", err)
	}

	// Explicit checksums of every verified algorithm are accepted.
	for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme, types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256} {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(testBucket), Key: aws.String("alg-" + string(alg)), Body: strings.NewReader("checksummed data"),
			ChecksumAlgorithm: alg,
		})
		if err != nil {
			t.Fatalf("PutObject with %s: %v", alg, err)
		}
	}

	// Object subresources gofakes3 would misroute are refused instead of
	// overwriting the object.
	_, err = c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{
		Bucket: aws.String(testBucket), Key: aws.String("alg-CRC32"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}},
	})
	if httpStatus(err) != http.StatusNotImplemented {
		t.Fatalf("PutObjectTagging = %v, want 501", err)
	}
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("alg-CRC32")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if string(got) != "checksummed data" {
		t.Fatalf("object changed to %q", got)
	}
}

func TestSDKMultipartAndCopy(t *testing.T) {
	env := newEnv(t, envConfig{})
	ctx := context.Background()
	c := env.client(testSecret)

	create, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(testBucket), Key: aws.String("big.bin"), ContentType: aws.String("application/x-test"),
	})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	parts := [][]byte{bytes.Repeat([]byte("a"), 5<<20), []byte("tail")}
	var completed []types.CompletedPart
	for i, p := range parts {
		n := int32(i + 1)
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(testBucket), Key: aws.String("big.bin"), UploadId: create.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(p),
		})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		completed = append(completed, types.CompletedPart{ETag: up.ETag, PartNumber: aws.Int32(n)})
	}
	if puts := env.puts.take(); len(puts) != 0 {
		t.Fatalf("OnPut called for parts: %+v", puts)
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(testBucket), Key: aws.String("big.bin"), UploadId: create.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
	})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	want := PutObject{Bucket: testBucket, Key: "big.bin", ContentType: "application/x-test", Size: 5<<20 + 4}
	if puts := env.puts.take(); len(puts) != 1 || puts[0] != want {
		t.Fatalf("OnPut after complete = %+v, want %+v", puts, want)
	}

	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("copy.bin"), CopySource: aws.String(testBucket + "/big.bin"),
	})
	if err != nil {
		t.Fatalf("CopyObject: %v", err)
	}
	want.Key = "copy.bin"
	if puts := env.puts.take(); len(puts) != 1 || puts[0] != want {
		t.Fatalf("OnPut after copy = %+v, want %+v", puts, want)
	}

	// DeleteObjects carries a (required) checksum of its XML body.
	del, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(testBucket),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("big.bin")}, {Key: aws.String("copy.bin")}}},
	})
	if err != nil || len(del.Deleted) != 2 {
		t.Fatalf("DeleteObjects = %+v, %v", del, err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(testBucket)}); err != nil {
		t.Fatalf("HeadBucket: %v", err)
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket)})
	if err != nil || len(list.Contents) != 0 {
		t.Fatalf("ListObjectsV2 after delete = %+v, %v", list, err)
	}
}

// Over TLS the SDK switches PutObject to an aws-chunked body with a trailing
// checksum (STREAMING-UNSIGNED-PAYLOAD-TRAILER).
func TestSDKOverTLSUsesTrailers(t *testing.T) {
	var log requestLog
	env := newEnv(t, envConfig{tls: true, wrap: log.wrap})
	ctx := context.Background()
	c := env.client(testSecret)

	body := bytes.Repeat([]byte("0123456789"), 20000)
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("tls.bin"), Body: bytes.NewReader(body), ContentType: aws.String("application/octet-stream"),
	})
	if err != nil {
		t.Fatalf("PutObject over TLS: %v", err)
	}
	put := log.last("x-id=PutObject")
	t.Logf("PutObject over https: x-amz-content-sha256=%s content-encoding=%s x-amz-trailer=%s x-amz-decoded-content-length=%s",
		put.Get("X-Amz-Content-Sha256"), put.Get("Content-Encoding"), put.Get("X-Amz-Trailer"), put.Get("X-Amz-Decoded-Content-Length"))
	if put.Get("X-Amz-Content-Sha256") != payloadStreamingUnsignedTrailer || put.Get("Content-Encoding") != "aws-chunked" {
		t.Errorf("expected an aws-chunked trailer upload, got %v", put)
	}
	if puts := env.puts.take(); len(puts) != 1 || puts[0].Size != int64(len(body)) {
		t.Fatalf("OnPut = %+v", puts)
	}
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("tls.bin")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("body mismatch after aws-chunked upload (%d bytes, want %d)", len(got), len(body))
	}
	if enc := aws.ToString(get.ContentEncoding); enc != "" {
		t.Fatalf("stored Content-Encoding = %q, want none", enc)
	}

	// An unseekable body also works over TLS (it is streamed with a trailer).
	_, err = c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("stream.bin"), Body: io.NopCloser(bytes.NewReader(body)), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		t.Fatalf("PutObject unseekable over TLS: %v", err)
	}
}

// Over plain HTTP the SDK must hash the body up front, so it refuses
// unseekable bodies unless checksums are only computed when required.
func TestSDKUnseekableBodyOverHTTP(t *testing.T) {
	env := newEnv(t, envConfig{})
	ctx := context.Background()
	body := strings.Repeat("x", 1000)
	_, err := env.client(testSecret).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("unseekable"), Body: io.NopCloser(strings.NewReader(body)), ContentLength: aws.Int64(int64(len(body))),
	})
	t.Logf("unseekable body over http, default checksums: %v", err)

	c := env.client(testSecret, func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
	_, err = c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("unseekable"), Body: io.NopCloser(strings.NewReader(body)), ContentLength: aws.Int64(int64(len(body))),
	})
	t.Logf("unseekable body over http, WhenRequired: %v", err)

	// What works over plain HTTP with an unseekable body: no default
	// checksum and an UNSIGNED-PAYLOAD signature.
	c = env.client(testSecret, func(o *s3.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
	_, err = c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("unseekable"), Body: io.NopCloser(strings.NewReader(body)), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		t.Fatalf("unseekable body over http, WhenRequired + UNSIGNED-PAYLOAD: %v", err)
	}
	if puts := env.puts.take(); len(puts) != 1 || puts[0].Size != int64(len(body)) {
		t.Fatalf("OnPut = %+v", puts)
	}
}
