package locals3

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var testCreds = aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecret}

// signRequest signs req with header authentication the way the SDK does for
// S3 (no double path escaping).
func signRequest(t *testing.T, req *http.Request, payloadHash string, at time.Time) string {
	t.Helper()
	err := v4.NewSigner().SignHTTP(context.Background(), testCreds, req, payloadHash, "s3", testRegion, at,
		func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
	_, sig, ok := strings.Cut(req.Header.Get("Authorization"), "Signature=")
	if !ok {
		t.Fatal("no signature")
	}
	return sig
}

// chunkedUpload builds a STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] PUT of
// data in chunks of chunkSize, signed with the SDK's signer and stream signer.
// tamper, if set, alters the encoded body after signing; lengthDelta is the
// length change it makes, so that the signed Content-Length matches the body.
func chunkedUpload(t *testing.T, rawURL string, data []byte, chunkSize int, trailer bool, tamper func([]byte) []byte, lengthDelta int) *http.Request {
	t.Helper()
	at := time.Now().UTC()
	var chunks [][]byte
	for rest := data; len(rest) > 0; {
		n := min(chunkSize, len(rest))
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	chunks = append(chunks, nil)

	mode := payloadStreamingSigned
	var crc string
	var trailerBlock string
	if trailer {
		mode = payloadStreamingSignedTrailer
		crc = base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data)))
		trailerBlock = "x-amz-checksum-crc32:" + crc + "\r\n" + "x-amz-trailer-signature:" + strings.Repeat("0", 64) + "\r\n"
	}
	sigLine := len(";chunk-signature=") + 64
	encodedLen := 0
	for _, c := range chunks {
		encodedLen += len(strconv.FormatInt(int64(len(c)), 16)) + sigLine + 2 + len(c) + 2
	}
	encodedLen += len(trailerBlock)

	req, err := http.NewRequest(http.MethodPut, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(encodedLen + lengthDelta)
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
	req.Header.Set("X-Amz-Content-Sha256", mode)
	if trailer {
		req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
	}
	seedHex := signRequest(t, req, mode, at)
	seed, _ := hex.DecodeString(seedHex)

	ss := v4.NewStreamSigner(testCreds, "s3", testRegion, seed)
	var body bytes.Buffer
	var prev []byte
	for _, c := range chunks {
		sig, err := ss.GetSignature(context.Background(), nil, c, at)
		if err != nil {
			t.Fatal(err)
		}
		prev = sig
		fmt.Fprintf(&body, "%x;chunk-signature=%x\r\n", len(c), sig)
		body.Write(c)
		body.WriteString("\r\n")
	}
	if trailer {
		// The trailer's chunk replaces the CRLF that ended the final chunk.
		body.Truncate(body.Len() - 2)
		canon := "x-amz-checksum-crc32:" + crc + "\n"
		sum := sha256.Sum256([]byte(canon))
		scope := at.Format(scopeDateFormat) + "/" + testRegion + "/s3/aws4_request"
		sts := "AWS4-HMAC-SHA256-TRAILER\n" + at.Format(amzDateFormat) + "\n" + scope + "\n" + hex.EncodeToString(prev) + "\n" + hex.EncodeToString(sum[:])
		key := []byte("AWS4" + testSecret)
		for _, p := range strings.Split(scope, "/") {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(p))
			key = m.Sum(nil)
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(sts))
		body.WriteString("x-amz-checksum-crc32:" + crc + "\r\n")
		body.WriteString("x-amz-trailer-signature:" + hex.EncodeToString(m.Sum(nil)) + "\r\n")
		body.WriteString("\r\n")
	}
	b := body.Bytes()
	if len(b) != encodedLen {
		t.Fatalf("encoded length %d, computed %d", len(b), encodedLen)
	}
	if tamper != nil {
		b = tamper(b)
	}
	if int64(len(b)) != req.ContentLength {
		t.Fatalf("body length %d, signed Content-Length %d", len(b), req.ContentLength)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	return req
}

func TestSignedChunkedUpload(t *testing.T) {
	env := newEnv(t, envConfig{})
	data := bytes.Repeat([]byte("chunky data "), 10000) // 120000 bytes: 64 KiB chunk + rest
	url := env.endpoint + "/" + testBucket + "/chunked.txt"

	for _, trailer := range []bool{false, true} {
		t.Run(fmt.Sprintf("trailer=%v", trailer), func(t *testing.T) {
			status, code, b := env.do(t, chunkedUpload(t, url, data, 64<<10, trailer, nil, 0))
			mustStatus(t, status, code, b, http.StatusOK, "")
			obj, err := env.srv.backend.GetObject(testBucket, "chunked.txt", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(obj.Contents)
			if !bytes.Equal(got, data) {
				t.Fatalf("stored %d bytes, want %d", len(got), len(data))
			}
			if enc := obj.Metadata["Content-Encoding"]; enc != "" {
				t.Fatalf("Content-Encoding %q stored", enc)
			}
			want := PutObject{Bucket: testBucket, Key: "chunked.txt", ContentType: "text/plain", Size: int64(len(data))}
			if puts := env.puts.take(); len(puts) != 1 || puts[0] != want {
				t.Fatalf("OnPut = %+v", puts)
			}
		})
	}

	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte {
			b = bytes.Clone(b)
			b[at] ^= 1
			return b
		}
	}
	for _, tc := range []struct {
		name    string
		trailer bool
		tamper  func([]byte) []byte
		delta   int
		status  int
		code    string
	}{
		{"data in first chunk", false, flip(200), 0, http.StatusForbidden, codeSignatureDoesNotMatch},
		{"data in last chunk", false, flip(70000), 0, http.StatusForbidden, codeSignatureDoesNotMatch},
		{"truncated", false, func(b []byte) []byte { return b[:len(b)-10] }, -10, http.StatusBadRequest, codeIncompleteBody},
		{"chunk signature", false, func(b []byte) []byte {
			return bytes.Replace(b, []byte("chunk-signature="), []byte("chunk-signature=0"), 1)[:len(b)]
		}, 0, http.StatusForbidden, codeSignatureDoesNotMatch},
		{"trailer checksum", true, func(b []byte) []byte {
			i := bytes.Index(b, []byte("x-amz-checksum-crc32:")) + len("x-amz-checksum-crc32:")
			return flip(i)(b)
		}, 0, http.StatusForbidden, codeSignatureDoesNotMatch},
		{"trailing garbage", false, func(b []byte) []byte { return append(bytes.Clone(b), "junk"...) }, 4, http.StatusBadRequest, codeIncompleteBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := chunkedUpload(t, env.endpoint+"/"+testBucket+"/tampered.txt", data, 64<<10, tc.trailer, tc.tamper, tc.delta)
			status, code, b := env.do(t, req)
			mustStatus(t, status, code, b, tc.status, tc.code)
			if _, err := env.srv.backend.HeadObject(testBucket, "tampered.txt"); err == nil {
				t.Fatal("tampered upload was stored")
			}
		})
	}
	if puts := env.puts.take(); len(puts) != 0 {
		t.Fatalf("OnPut for rejected uploads: %+v", puts)
	}
}

func TestHeaderAuthEdgeCases(t *testing.T) {
	env := newEnv(t, envConfig{})
	url := env.endpoint + "/" + testBucket + "/edge.txt"
	sum := func(b string) string { s := sha256.Sum256([]byte(b)); return hex.EncodeToString(s[:]) }

	t.Run("payload hash mismatch", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("actual body"))
		req.Header.Set("X-Amz-Content-Sha256", sum("signed body"))
		signRequest(t, req, sum("signed body"), time.Now())
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusBadRequest, codeContentSHA256Mismatch)
	})
	t.Run("missing x-amz-content-sha256", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		signRequest(t, req, emptySHA256, time.Now())
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusBadRequest, codeInvalidRequest)
	})
	t.Run("clock skew", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		signRequest(t, req, emptySHA256, time.Now().Add(-20*time.Minute))
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusForbidden, codeRequestTimeTooSkewed)
	})
	t.Run("unsigned x-amz header added", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("x"))
		req.Header.Set("X-Amz-Content-Sha256", payloadUnsigned)
		signRequest(t, req, payloadUnsigned, time.Now())
		req.Header.Set("X-Amz-Acl", "public-read")
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusForbidden, codeAccessDenied)
	})
	t.Run("signed header changed", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("x"))
		req.Header.Set("X-Amz-Content-Sha256", payloadUnsigned)
		req.Header.Set("Content-Type", "text/plain")
		signRequest(t, req, payloadUnsigned, time.Now())
		req.Header.Set("Content-Type", "text/html")
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusForbidden, codeSignatureDoesNotMatch)
	})
	t.Run("malformed authorization", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusBadRequest, codeAuthHeaderMalformed)
	})
	t.Run("unsigned payload streams", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("streamed"))
		req.Header.Set("X-Amz-Content-Sha256", payloadUnsigned)
		signRequest(t, req, payloadUnsigned, time.Now())
		status, code, b := env.do(t, req)
		mustStatus(t, status, code, b, http.StatusOK, "")
	})
	t.Run("too large", func(t *testing.T) {
		// Served directly: the declared length is rejected before any of
		// the body is read.
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("x"))
		req.ContentLength = MaxObjectSize + 1
		req.Header.Set("X-Amz-Content-Sha256", payloadUnsigned)
		signRequest(t, req, payloadUnsigned, time.Now())
		req.Header.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
		req.RequestURI = req.URL.RequestURI()
		rec := &responseRecorder{header: http.Header{}}
		env.srv.ServeHTTP(rec, req)
		if rec.status != http.StatusBadRequest || !bytes.Contains(rec.body, []byte(codeEntityTooLarge)) {
			t.Fatalf("status %d: %s", rec.status, rec.body)
		}
	})
	t.Run("part too large", func(t *testing.T) {
		// A part of a multipart upload (held in memory) is capped lower.
		req, _ := http.NewRequest(http.MethodPut, url+"?partNumber=1&uploadId=u", strings.NewReader("x"))
		req.ContentLength = MaxPartSize + 1
		req.Header.Set("X-Amz-Content-Sha256", payloadUnsigned)
		signRequest(t, req, payloadUnsigned, time.Now())
		req.Header.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
		req.RequestURI = req.URL.RequestURI()
		rec := &responseRecorder{header: http.Header{}}
		env.srv.ServeHTTP(rec, req)
		if rec.status != http.StatusBadRequest || !bytes.Contains(rec.body, []byte(codeEntityTooLarge)) {
			t.Fatalf("status %d: %s", rec.status, rec.body)
		}
	})
}

func TestUnsignedTrailerChecksum(t *testing.T) {
	env := newEnv(t, envConfig{})
	data := []byte("trailer checked data")
	good := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data)))
	for _, tc := range []struct {
		name, crc string
		status    int
		code      string
	}{
		{"wrong checksum", "AAAAAA==", http.StatusBadRequest, codeBadDigest},
		{"right checksum", good, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf("%x\r\n%s\r\n0\r\nx-amz-checksum-crc32:%s\r\n\r\n", len(data), data, tc.crc)
			req, _ := http.NewRequest(http.MethodPut, env.endpoint+"/"+testBucket+"/trailer.txt", strings.NewReader(body))
			req.Header.Set("Content-Encoding", "aws-chunked")
			req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
			req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
			req.Header.Set("X-Amz-Content-Sha256", payloadStreamingUnsignedTrailer)
			signRequest(t, req, payloadStreamingUnsignedTrailer, time.Now())
			status, code, b := env.do(t, req)
			mustStatus(t, status, code, b, tc.status, tc.code)
		})
	}
	obj, err := env.srv.backend.GetObject(testBucket, "trailer.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj.Contents)
	if !bytes.Equal(got, data) {
		t.Fatalf("stored %q", got)
	}
}
