package local

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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
	// LingerTime and LingerBytes bound what the server still reads, and
	// discards, of a request body after answering before its end (a 401
	// or a 413): the client may still be sending, and closing a socket
	// with unread bytes resets it, so the client would see ECONNRESET
	// instead of the answer. Defaults: 10 s and 128 MiB.
	LingerTime  time.Duration
	LingerBytes int64
}

// DefaultLimits are the limits of `go run ./functions/local`.
var DefaultLimits = Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, TransferGrace: 10 * time.Second, MinTransferRate: 16 << 10,
	LingerTime: 10 * time.Second, LingerBytes: 128 << 20}

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
	if l.LingerTime > 0 {
		d.LingerTime = l.LingerTime
	}
	if l.LingerBytes > 0 {
		d.LingerBytes = l.LingerBytes
	}
	return d
}

// at is how long n bytes may take at the minimum rate, after the grace.
func (l Limits) at(n int64) time.Duration {
	return l.TransferGrace + time.Duration(float64(n)/float64(l.MinTransferRate)*float64(time.Second))
}

// guard enforces the transfer limits on each request. An answer given
// before the request's body was read to its end (e.g. 401 to a call
// without a token, 413 to one over the body limit) is held until the
// handler returns, then sent whole (with its Content-Length) and followed
// by a graceful close (lingerClose): the server stops reading the request,
// half-closes, discards what the client still sends (LingerBytes within
// LingerTime) and only then closes. net/http would otherwise read up to
// 256 KiB of the rest of the body at the client's pace, or close a socket
// with unread bytes, which resets it: a client still sending its body
// would then see ECONNRESET, never the answer. No byte of a refused body
// is parsed or kept.
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
		if gw.hijacked {
			return // the connection left HTTP: nothing of it is ours to answer
		}
		gw.beforeAnswer(http.StatusOK) // an implicit 200 is an answer too
		if gw.held {
			gw.sendHeld()
			lingerClose(w, l)
			return
		}
		if gw.body != nil && !gw.body.eof {
			// After the handler, net/http reads up to 256 KiB of what is
			// left of the body, whatever the answer said: it must not wait.
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// lingerClose ends a connection whose request body was not read to its
// end, after its answer was written: flush, half-close (the client sees
// the answer's end), then read and discard what the client still sends,
// at most LingerBytes within LingerTime, so that closing does not reset
// the connection under a client that is still sending.
func lingerClose(w http.ResponseWriter, l Limits) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, brw, err := rc.Hijack()
	if err != nil { // not a plain HTTP/1 connection: net/http closes it
		_ = rc.SetReadDeadline(time.Now())
		return
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(l.TransferGrace))
	if err := brw.Flush(); err != nil {
		return
	}
	if hc, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(l.LingerTime))
	_, _ = io.CopyN(io.Discard, brw, l.LingerBytes)
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

// guardedWriter bounds each write of the answer by the minimum rate. An
// answer given before the body's end is held (up to maxHeld bytes), to be
// sent whole with its length and a graceful close once the handler returns.
type guardedWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	limits   Limits
	body     *guardedBody // nil without a body
	answered bool
	held     bool // the answer is held in code and buf
	// hijacked: the handler took the connection (a WebSocket upgrade,
	// through Hijack below, which http.ResponseController finds before
	// Unwrap); the guard then writes no answer of its own, which net/http
	// would refuse ("WriteHeader on hijacked connection").
	hijacked bool
	code     int
	buf      bytes.Buffer
}

// maxHeld is the most of an early answer held back; a larger one (no
// refusal is) is sent as it comes, and its connection closed by net/http.
const maxHeld = 64 << 10

func (w *guardedWriter) beforeAnswer(code int) {
	if w.answered {
		return
	}
	w.answered = true
	if w.body != nil && !w.body.eof {
		w.Header().Set("Connection", "close")
		w.held, w.code = true, code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

// release sends what is held as it is, for an answer too large to hold or
// a handler that flushes: its length is then unknown.
func (w *guardedWriter) release() error {
	if !w.held {
		return nil
	}
	w.held = false
	w.ResponseWriter.WriteHeader(w.code)
	if w.buf.Len() == 0 {
		return nil
	}
	_, err := w.write(w.buf.Bytes())
	w.buf.Reset()
	return err
}

// sendHeld sends the held answer with its length.
func (w *guardedWriter) sendHeld() {
	w.held = false
	w.Header().Set("Content-Length", strconv.Itoa(w.buf.Len()))
	w.ResponseWriter.WriteHeader(w.code)
	if w.buf.Len() > 0 {
		_, _ = w.write(w.buf.Bytes())
	}
}

func (w *guardedWriter) WriteHeader(code int) {
	if code < 200 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.answered {
		// net/http logs the superfluous call, as without the guard.
		if !w.held {
			w.ResponseWriter.WriteHeader(code)
		}
		return
	}
	w.beforeAnswer(code)
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	w.beforeAnswer(http.StatusOK)
	if w.held {
		if w.buf.Len()+len(p) <= maxHeld {
			return w.buf.Write(p)
		}
		if err := w.release(); err != nil {
			return 0, err
		}
	}
	return w.write(p)
}

func (w *guardedWriter) write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.limits.at(int64(len(p)))))
	return w.ResponseWriter.Write(p)
}

// FlushError sends what is held first: a handler that flushes streams.
func (w *guardedWriter) FlushError() error {
	if !w.answered {
		w.beforeAnswer(http.StatusOK)
	}
	if err := w.release(); err != nil {
		return err
	}
	return w.rc.Flush()
}

// Hijack hands the connection to the handler (and notes it, see hijacked).
func (w *guardedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := w.rc.Hijack()
	if err == nil {
		w.hijacked, w.answered, w.held = true, true, false
	}
	return conn, brw, err
}

func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
