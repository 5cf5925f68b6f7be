package s3store

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// HandlerClient returns an HTTP client whose requests are served by h in
// the same process, with the response body streamed through a pipe as h
// writes it. The local platform's SDK client reaches the embedded S3 this
// way: unlike an httptest.ResponseRecorder, a large object is never held
// whole by the transport.
func HandlerClient(h http.Handler) *http.Client {
	return &http.Client{Transport: pipeTransport{h}}
}

type pipeTransport struct{ h http.Handler }

func (t pipeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	// Make the request look as a server receives it: handlers (and the
	// embedded S3's signature check) read the host from r.Host.
	r = r.Clone(r.Context())
	if r.Host == "" {
		r.Host = r.URL.Host
	}
	r.RequestURI = r.URL.RequestURI()
	// A client request keeps its length in ContentLength; a server sees it
	// as a header too (and signatures cover it), as net/http would send it.
	if r.Header.Get("Content-Length") == "" && (r.ContentLength > 0 ||
		(r.ContentLength == 0 && (r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodPatch))) {
		r.Header.Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, req: r, ready: make(chan *http.Response, 1)}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("handler panic: %v", p))
				return
			}
			w.WriteHeader(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	resp := <-w.ready
	resp.Body = readCloser{pr, func() { pr.CloseWithError(io.ErrClosedPipe) }}
	if r.Method == http.MethodHead {
		// The handler writes no body; do not make the client wait for one
		// (and let any stray write fail rather than block).
		pr.Close()
		resp.Body = http.NoBody
	}
	return resp, nil
}

type readCloser struct {
	io.Reader
	close func()
}

func (r readCloser) Close() error { r.close(); return nil }

// pipeWriter is the handler's ResponseWriter: the header is released as the
// response once written, the body flows through the pipe.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	req    *http.Request
	once   sync.Once
	ready  chan *http.Response
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		length := int64(-1)
		if n, err := strconv.ParseInt(w.header.Get("Content-Length"), 10, 64); err == nil {
			length = n
		}
		w.ready <- &http.Response{
			Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: w.header.Clone(), ContentLength: length, Request: w.req,
		}
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

func (w *pipeWriter) Flush() {}
