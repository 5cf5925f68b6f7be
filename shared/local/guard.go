package local

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Limits bound what one client connection may hold of the local server.
// Bodies and answers are bounded by a minimum transfer rate rather than a
// fixed deadline, so a large upload to the embedded S3 finishes however
// long it takes, as long as it keeps moving.
type Limits struct {
	// ReadHeaderTimeout is the time a client has to send a request's
	// headers (default 10 s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request (default 30 s).
	IdleTimeout time.Duration
	// TransferGrace and MinTransferRate: a request body must arrive at
	// MinTransferRate bytes per second on average, after TransferGrace
	// (by start+grace+bytes/rate); each write of an answer must be taken
	// by the client within TransferGrace plus its size at that rate.
	// Defaults: 10 s and 16 KiB/s.
	TransferGrace   time.Duration
	MinTransferRate int64
}

// DefaultLimits are the limits of `go run ./functions/local`.
var DefaultLimits = Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, TransferGrace: 10 * time.Second, MinTransferRate: 16 << 10}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.ReadHeaderTimeout > 0 {
		d.ReadHeaderTimeout = l.ReadHeaderTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.TransferGrace > 0 {
		d.TransferGrace = l.TransferGrace
	}
	if l.MinTransferRate > 0 {
		d.MinTransferRate = l.MinTransferRate
	}
	return d
}

// at is how long n bytes may take at the minimum rate, after the grace.
func (l Limits) at(n int64) time.Duration {
	return l.TransferGrace + time.Duration(float64(n)/float64(l.MinTransferRate)*float64(time.Second))
}

// guard enforces the transfer limits on each request. An answer given
// before the request's body was read to its end (e.g. 401 to a call
// without a token) closes the connection at once: net/http would
// otherwise read up to 256 KiB of the rest of the body, at the client's
// pace, to reuse the connection. So no body is read for a call that was
// refused.
//
// A WebSocket handshake (a `bp dev` tunnel, shared/tunnel) has no body and,
// once accepted, leaves HTTP (hijacked) for as long as the tunnel lives:
// nothing here touches it afterwards, and the tunnel clears the deadlines
// left on its connection and drops a silent client itself
// (TestTunnelOutlivesConnectionLimits).
func guard(l Limits, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A deadline left by the previous request on this connection must
		// not cut this one.
		_ = rc.SetWriteDeadline(time.Time{})
		gw := &guardedWriter{ResponseWriter: w, rc: rc, limits: l}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			gw.body = &guardedBody{ReadCloser: r.Body, rc: rc, limits: l}
			r.Body = gw.body
		}
		h.ServeHTTP(gw, r)
		gw.beforeAnswer() // an implicit 200 is an answer too
		if gw.body != nil && !gw.body.eof {
			// After the handler, net/http reads up to 256 KiB of what is
			// left of the body, whatever the answer said: it must not wait.
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// guardedBody moves the connection's read deadline as the body arrives.
type guardedBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	limits Limits
	start  time.Time
	n      int64
	eof    bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.start.IsZero() {
		b.start = time.Now()
	}
	_ = b.rc.SetReadDeadline(b.start.Add(b.limits.at(b.n)))
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		// The server now reads the connection in the background (to see
		// the client leave): no deadline may cancel that.
		b.eof = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("the request body arrived slower than %d bytes/s (after %v): %w", b.limits.MinTransferRate, b.limits.TransferGrace, err)
	}
	return n, err
}

// guardedWriter bounds each write of the answer by the minimum rate, and
// closes the connection after an answer given before the body's end.
type guardedWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	limits   Limits
	body     *guardedBody // nil without a body
	answered bool
}

func (w *guardedWriter) beforeAnswer() {
	if w.answered {
		return
	}
	w.answered = true
	if w.body != nil && !w.body.eof {
		w.Header().Set("Connection", "close")
	}
}

func (w *guardedWriter) WriteHeader(code int) {
	if code >= 200 {
		w.beforeAnswer()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	w.beforeAnswer()
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.limits.at(int64(len(p)))))
	return w.ResponseWriter.Write(p)
}

func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
