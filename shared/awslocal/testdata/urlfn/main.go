// Command urlfn is a Lambda function behind a function URL for
// shared/awslocal's tests (functionurl_test.go): what it answers depends
// on the request's path.
//
//	/stream?release=F   201, X-Test, two cookies; "first\n", then, once
//	                    the file F exists, "second\n" (streaming)
//	/error              "partial\n", then a failure (the trailers)
//	/disconnect?marker=F  "tick\n" every 20 ms until a write fails, then
//	                    the file F holds the error
//	/hang               "first\n", then nothing until the timeout
//	/echo               (BUFFERED) the event it got, as the JSON body
//	/plain              (BUFFERED) {"hello":"world"}, not the response shape
//	other               (BUFFERED) 202, X-Test, a cookie, base64 body
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"
)

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) {
	return 0, errors.New("the function failed mid-stream")
}

func streaming(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/stream":
		w.Header().Set("X-Test", "yes")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2; Path=/")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "first\n")
		for {
			if _, err := os.Stat(r.URL.Query().Get("release")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "second\n")
	case "/disconnect":
		for {
			if _, err := io.WriteString(w, "tick\n"); err != nil {
				_ = os.WriteFile(r.URL.Query().Get("marker"), []byte(err.Error()), 0o600)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	case "/hang":
		_, _ = io.WriteString(w, "first\n")
		<-r.Context().Done()
		time.Sleep(time.Hour)
	default:
		http.NotFound(w, r)
	}
}

func main() {
	h := lambdaurl.Wrap(http.HandlerFunc(streaming))
	lambda.Start(func(ctx context.Context, req *events.LambdaFunctionURLRequest) (any, error) {
		switch req.RawPath {
		case "/error":
			return &events.LambdaFunctionURLStreamingResponse{StatusCode: 200,
				Body: io.MultiReader(strings.NewReader("partial\n"), failingReader{})}, nil
		case "/echo":
			b, _ := json.Marshal(req)
			return events.LambdaFunctionURLResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b)}, nil
		case "/plain":
			return map[string]string{"hello": "world"}, nil
		case "/stream", "/disconnect", "/hang":
			return h(ctx, req)
		}
		return events.LambdaFunctionURLResponse{StatusCode: 202, Headers: map[string]string{"X-Test": "yes"}, Cookies: []string{"c=3"},
			Body: base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("all at the end %s", req.RawQueryString))), IsBase64Encoded: true}, nil
	})
}
