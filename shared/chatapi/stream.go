package chatapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/listen"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

// The listen stream: server-sent events, as the client's EventSource reads
// them. Each signal is one message event
//
//	event: message
//	data: {"type": "message_created", "data": {...}}
//
// a ping is the message "data: ping" every PingEvery (it resets the
// client's 60 s watchdog), and a comment line ": ka" every KeepAlive keeps
// the socket busy in between.

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// frame is a signal as one SSE event.
func frame(typ string, data any) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	out := make([]byte, 0, len(b)+24)
	out = append(out, "event: message\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// removesListener tells whether signal frame f is the removal of user fid
// from the conversation (participant_removed naming it). The removed
// user's stream ends there, unsent: removeParticipant also closes its
// member topic, but on AWS that close and this signal reach the holder
// through the table's stream on two keys, in either order, and whatever
// the conversation hears after the removal comes after this signal on
// its own key (TestRelayRemovedParticipant).
func removesListener(f []byte, fid string) bool {
	if !bytes.Contains(f, []byte(`"participant_removed"`)) {
		return false
	}
	var sig struct {
		Type string `json:"type"`
		Data struct {
			ParticipantID string `json:"participantId"`
		} `json:"data"`
	}
	return json.Unmarshal(frameJSON(f), &sig) == nil && sig.Type == "participant_removed" && sig.Data.ParticipantID == fid
}

// publish hands a signal to the listeners of platform conversation cid.
func (ci *Integration) publish(cid, typ string, data any) int {
	return ci.Hub.Publish(convTopic(cid), frame(typ, data))
}

// SendMessage delivers the bot's message to the conversation's listeners
// (message_created, isBot). With nobody listening it is still delivered:
// the client reads it with listMessages.
func (ci *Integration) SendMessage(_ context.Context, in builtin.Install, m builtin.Outgoing) error {
	fid := m.Conversation.Tags["fid"]
	if fid == "" {
		return platform.Invalid("conversation %q is not a Chat API conversation (no fid tag)", m.Conversation.ID)
	}
	ci.publish(m.Conversation.ID, "message_created", withBot(chatMessage(m.Message, fid, m.Message.UserID), true))
	return nil
}

// streamConversation reads conversation fid, which must be the user's, on
// a goroutine of its own (builtin.OnFreshStack), so that the deep calls do
// not leave a large stack to the stream's long-lived goroutine.
func (q *req) streamConversation(fid string) (platform.Conversation, error) {
	var c platform.Conversation
	err := builtin.OnFreshStack(func() (err error) {
		c, err = q.myConversation(fid)
		return err
	})
	return c, err
}

// subscribe takes one of the user's MaxListeners stream slots and
// subscribes to conversation convID's and the installation's events, and
// to the user's membership of the conversation (closed when it is
// removed), for an SSE stream or a WebSocket alike; release gives both
// back.
func (q *req) subscribe(convID string) (sub *listen.Sub, release func(), err error) {
	free, err := q.holdStream()
	if err != nil {
		return nil, nil, err
	}
	sub = q.ci.Hub.Subscribe(convTopic(convID), installTopic(q.in.Instance.WebhookID), memberTopic(convID, q.user.ID))
	release = func() {
		sub.Close()
		free()
	}
	// A removal between the check of the caller's membership and the
	// subscription closed a topic nobody held yet: look again now that a
	// removal would close this stream.
	var in bool
	err = builtin.OnFreshStack(func() (err error) {
		in, err = q.isParticipant(convID, q.user.ID)
		return err
	})
	if err == nil && !in {
		err = platform.Forbidden("user %q is not a participant of this conversation", q.fid)
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return sub, release, nil
}

// holdStream takes the stream's slots: one of the user key's MaxListeners,
// of its address's MaxStreamsPerAddress and of the installation's
// MaxStreams, across the platform (Limits); the refusal says which.
func (q *req) holdStream() (release func(), err error) {
	wh := q.in.Instance.WebhookID
	if q.ci.Limits == nil {
		streamKey := wh + "\x00" + q.fid
		if !q.ci.openStream(streamKey) {
			return nil, platform.Errorf(platform.ErrRateLimited, "user %q already holds %d streams on this Chat API (the limit per user key): close one first", q.fid, MaxListeners)
		}
		return func() { q.ci.closeStream(streamKey) }, nil
	}
	addr := clientip.Of(q.r)
	perAddr, all := or(q.cfg.Limits.StreamsPerAddress, MaxStreamsPerAddress), or(q.cfg.Limits.Streams, MaxStreams)
	var free func()
	err = builtin.OnFreshStack(func() (err error) {
		free, err = q.ci.Limits.Hold(q.ctx,
			platform.Scope{Key: "streams/key/" + wh + "/" + q.fid, Max: MaxListeners,
				Refusal: fmt.Sprintf("user %q already holds %d streams on this Chat API (the limit per user key): close one first", q.fid, MaxListeners)},
			platform.Scope{Key: "streams/addr/" + wh + "/" + addr, Max: perAddr,
				Refusal: fmt.Sprintf("your address (%s) already holds %d streams on this Chat API (the limit per address): close one first", addr, perAddr)},
			platform.Scope{Key: "streams/install/" + wh, Max: all,
				Refusal: fmt.Sprintf("this Chat API already holds %d streams (the limit per installation): try again later", all)})
		return err
	})
	return free, err
}

// listen holds the stream of conversation fid until the client leaves,
// the user is removed from the conversation, the conversation is deleted,
// or the installation is disabled or removed.
func (q *req) listen(fid string) error {
	c, err := q.streamConversation(fid)
	if err != nil {
		return err
	}
	sub, release, err := q.subscribe(c.ID)
	if err != nil {
		return err
	}
	defer release()
	metrics.OpenStreams.Inc("sse")
	defer metrics.OpenStreams.Dec("sse")

	rc := http.NewResponseController(q.w)
	// The server's write timeout is for answers, not for a stream.
	_ = rc.SetWriteDeadline(time.Time{})
	h := q.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	q.w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		if _, err := q.w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": connected\n\n")) {
		return nil
	}
	keep := time.NewTicker(KeepAlive)
	defer keep.Stop()
	ping := time.NewTicker(PingEvery)
	defer ping.Stop()
	check := time.NewTicker(CheckEvery)
	defer check.Stop()
	for {
		select {
		case <-q.ctx.Done():
			return nil
		case f, ok := <-sub.C:
			if !ok || removesListener(f, q.fid) {
				return nil // dropped: deleted, removed, or too slow
			}
			if !write(f) {
				return nil
			}
		case <-keep.C:
			if !write([]byte(": ka\n\n")) {
				return nil
			}
		case <-ping.C:
			if !write([]byte("data: ping\n\n")) {
				return nil
			}
		case <-check.C:
			if !q.ci.stillEnabled(q.ctx, q.in) {
				return nil
			}
		}
	}
}
