package chatapi

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

// The listen stream over WebSocket: what the client opens with
// listenConversation({id, protocol: 'websocket'}), the same URL in ws(s)://
// with the key in the query string (?x-user-key=..., a WebSocket carries
// no header from a browser). Each signal is one text message holding the
// same JSON as an SSE frame's data, and "ping" every PingEvery; the
// socket's own pings keep intermediaries from dropping it. This is the
// protocol an API Gateway WebSocket API would hold on AWS
// (docs/chat-api.md).

// isWebSocket tells a WebSocket handshake.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// listenWebSocket holds the stream of conversation fid as a WebSocket.
func (q *req) listenWebSocket(fid string) error {
	c, err := q.streamConversation(fid)
	if err != nil {
		return err
	}
	// A page of another origin may open one only when the installation
	// allows it (browsers send no preflight for a WebSocket).
	if o := q.r.Header.Get("Origin"); o != "" && !sameHost(o, q.r.Host) && !allowOrigin(q.cfg, o) {
		return platform.Forbidden("origin %q is not allowed to call this Chat API (the installation's configuration allowedOrigins)", o)
	}
	sub, release, err := q.subscribe(c.ID)
	if err != nil {
		return err
	}
	defer release()

	rc := http.NewResponseController(q.w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	// The origin was checked above.
	conn, err := websocket.Accept(q.w, q.r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept answered the handshake's error itself
	}
	defer conn.CloseNow()
	metrics.OpenStreams.Inc("websocket")
	defer metrics.OpenStreams.Dec("websocket")
	ctx := conn.CloseRead(q.ctx) // the client sends nothing; done when it leaves
	send := func(b []byte) bool {
		wctx, cancel := contextWithTimeout(ctx, 10*time.Second)
		defer cancel()
		return conn.Write(wctx, websocket.MessageText, b) == nil
	}
	keep := time.NewTicker(KeepAlive * 5)
	defer keep.Stop()
	ping := time.NewTicker(PingEvery)
	defer ping.Stop()
	check := time.NewTicker(CheckEvery)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case f, ok := <-sub.C:
			if !ok || removesListener(f, q.fid) {
				_ = conn.Close(websocket.StatusNormalClosure, "the stream ended")
				return nil
			}
			if !send(frameJSON(f)) {
				return nil
			}
		case <-keep.C:
			pctx, cancel := contextWithTimeout(ctx, 10*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return nil
			}
		case <-ping.C:
			if !send([]byte("ping")) {
				return nil
			}
		case <-check.C:
			if !q.ci.stillEnabled(q.ctx, q.in) {
				_ = conn.Close(websocket.StatusGoingAway, "the installation is no longer enabled")
				return nil
			}
		}
	}
}

// frameJSON is the JSON of an SSE frame (its data line).
func frameJSON(f []byte) []byte {
	f = bytes.TrimPrefix(f, []byte("event: message\ndata: "))
	return bytes.TrimSuffix(f, []byte("\n\n"))
}

func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, host)
}
