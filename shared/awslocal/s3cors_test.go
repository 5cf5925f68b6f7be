package awslocal

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/iampolicy"
)

// TestBucketCORSAsS3: a browser's upload to a presigned URL from a page of
// another origin (the hosted webchat page on the stream host) is preceded
// by a preflight without credentials; a function's endpoint answers it
// from the template's bucket CORS rules, as S3 does (no role involved, the
// S3 stand-in not reached), refuses what no rule allows with S3's 403, and
// an actual request from that origin gets the rule's headers.
func TestBucketCORSAsS3(t *testing.T) {
	tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "http://api.local")
	if err != nil {
		t.Fatal(err)
	}
	if len(tpl.bucketCORS[tpl.BucketName]) == 0 {
		t.Fatalf("the template's bucket %s has no CORS rule", tpl.BucketName)
	}
	reached := 0
	s3 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.Header().Set("Access-Control-Allow-Origin", "*") // as gofakes3 does
		w.Header().Set("ETag", `"e"`)
		w.WriteHeader(http.StatusOK)
	})
	rec := &Recorder{}
	fn := &Function{LogicalID: "ChatStreamFunction", Policy: []iampolicy.Statement{{Effect: "Allow", Action: []string{"s3:PutObject"}, Resource: []string{"arn:aws:s3:::" + tpl.BucketName + "/files/*"}}}}
	ep := &endpoint{fn: fn, services: map[string]http.Handler{"s3": s3}, rec: rec, cors: tpl.bucketCORS}
	presigned := "/" + tpl.BucketName + "/files/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00"
	const page = "http://127.0.0.1:41234"
	preflight := func(path, method, headers string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodOptions, path, nil)
		r.Header.Set("Origin", page)
		r.Header.Set("Access-Control-Request-Method", method)
		if headers != "" {
			r.Header.Set("Access-Control-Request-Headers", headers)
		}
		w := httptest.NewRecorder()
		ep.ServeHTTP(w, r)
		return w
	}

	// The component's upload: PUT with its content type and tagging.
	w := preflight(presigned, "PUT", "content-type,x-amz-tagging")
	h := w.Header()
	if w.Code != 200 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "PUT") ||
		h.Get("Access-Control-Allow-Headers") != "content-type, x-amz-tagging" || h.Get("Access-Control-Max-Age") != "3600" || h.Get("Access-Control-Expose-Headers") != "ETag" {
		t.Fatalf("preflight of the upload: %d %v %s", w.Code, h, w.Body)
	}
	if reached != 0 || len(rec.Calls()) != 0 {
		t.Fatalf("the preflight reached the stand-in (%d) or was authorized as a call (%v)", reached, rec.Calls())
	}
	// A method no rule allows, and a bucket without CORS: 403 without
	// CORS headers (the browser then refuses the request).
	for _, tc := range []struct{ path, method, msg string }{
		{presigned, "DELETE", "not allowed"},
		{"/another-bucket/k?X-Amz-Credential=AKIA%2F20260101%2Fus-east-1%2Fs3%2Faws4_request", "PUT", "not enabled"},
	} {
		w := preflight(tc.path, tc.method, "")
		if w.Code != 403 || w.Header().Get("Access-Control-Allow-Origin") != "" || !strings.Contains(w.Body.String(), "CORSResponse") || !strings.Contains(w.Body.String(), tc.msg) {
			t.Errorf("preflight %s %s: %d %v %s", tc.method, tc.path, w.Code, w.Header(), w.Body)
		}
	}

	// The upload itself, from the page: authorized as the function's call,
	// answered with the rule's CORS headers.
	r := httptest.NewRequest(http.MethodPut, presigned, strings.NewReader("x"))
	r.Header.Set("Origin", page)
	w = httptest.NewRecorder()
	ep.ServeHTTP(w, r)
	if w.Code != 200 || reached != 1 || w.Header().Get("Access-Control-Allow-Origin") != "*" || w.Header().Get("Access-Control-Expose-Headers") != "ETag" {
		t.Fatalf("the upload: %d reached %d %v %s", w.Code, reached, w.Header(), w.Body)
	}
	// From an origin no rule allows (a rule naming one origin), the
	// stand-in's own permissive header is not kept.
	ep.cors = map[string][]corsRule{tpl.BucketName: {{AllowedOrigins: []string{"https://*.example.com"}, AllowedMethods: []string{"PUT"}}}}
	for origin, want := range map[string]string{page: "", "https://chat.example.com": "https://chat.example.com"} {
		r = httptest.NewRequest(http.MethodPut, presigned, strings.NewReader("x"))
		r.Header.Set("Origin", origin)
		w = httptest.NewRecorder()
		ep.ServeHTTP(w, r)
		if got := w.Header().Get("Access-Control-Allow-Origin"); w.Code != 200 || got != want {
			t.Errorf("upload from %s: %d Access-Control-Allow-Origin %q, want %q", origin, w.Code, got, want)
		}
	}
}
