package hitl

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/botforge/platform/shared/listen"
	"github.com/botforge/platform/shared/platform"
)

// Live updates of the inbox (docs/hitl.md "Live updates"): every change of
// a session (started, a message either way, a note, an assignment, a
// close) is published on its workspace's inbox topic through the same
// listener hub as the Chat API's streams (locally shared/listen, on AWS
// shared/chatrelay: a signal in the table, fanned out to the streaming
// function's invocations). The frame says only which session changed: the
// console reads it again with its own credentials, so no transcript flows
// through the stream, and a lost signal costs at most the console's slow
// poll.

// Hub is the listener hub the signals go through (chatapi.Hub).
type Hub interface {
	Subscribe(topics ...string) *listen.Sub
	Publish(topic string, frame []byte) int
}

// Topic is workspace ws's inbox topic.
func Topic(ws string) string { return "hitl:" + ws }

// Frame is the SSE event telling that session id of bot changed (what:
// started, message, reply, note, assigned, closed).
func Frame(bot, id, what string) []byte {
	b, _ := json.Marshal(map[string]string{"botId": bot, "sessionId": id, "change": what})
	return append(append([]byte("event: inbox\ndata: "), b...), "\n\n"...)
}

// changed publishes session h's change, when a hub is set.
func (i *Integration) changed(h platform.HitlSession, what string) {
	if i.Hub == nil || h.WorkspaceID == "" {
		return
	}
	i.Hub.Publish(Topic(h.WorkspaceID), Frame(h.BotID, h.ID, what))
}

// TicketTTL is how long a stream ticket may be used to open a stream (the
// stream then lasts as long as its host lets it).
var TicketTTL = 60 * time.Second

// Ticket is the signed permission to open workspace ws's inbox stream for
// member account until exp: the stream host is another origin than the
// console on AWS, where the console's session cookie is not sent, and
// EventSource sends no Authorization header. key is the platform's secret
// (PLATFORM_PAGING_KEY); the ticket is bound to workspace and member.
func Ticket(key []byte, ws, account string, exp time.Time) string {
	body := "hitl1|" + ws + "|" + account + "|" + strconv.FormatInt(exp.Unix(), 10)
	return base64.RawURLEncoding.EncodeToString([]byte(body)) + "." + base64.RawURLEncoding.EncodeToString(sign(key, body))
}

func sign(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("hitl stream ticket\x00"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// CheckTicket answers the member a ticket names for workspace ws: an
// unreadable, forged or expired ticket is Unauthorized, another
// workspace's is Forbidden.
func CheckTicket(key []byte, ticket, ws string, now time.Time) (account string, err error) {
	enc, mac, ok := strings.Cut(ticket, ".")
	body, err1 := base64.RawURLEncoding.DecodeString(enc)
	sig, err2 := base64.RawURLEncoding.DecodeString(mac)
	if ticket == "" || !ok || err1 != nil || err2 != nil || !hmac.Equal(sig, sign(key, string(body))) {
		return "", platform.Errorf(platform.ErrUnauthorized, "query parameter \"ticket\": a valid stream ticket is required (POST /v1/admin/workspaces/{id}/hitl/stream-ticket)")
	}
	parts := strings.Split(string(body), "|")
	if len(parts) != 4 || parts[0] != "hitl1" {
		return "", platform.Errorf(platform.ErrUnauthorized, "query parameter \"ticket\": not a stream ticket")
	}
	exp, perr := strconv.ParseInt(parts[3], 10, 64)
	if perr != nil || now.Unix() > exp {
		return "", platform.Errorf(platform.ErrUnauthorized, "query parameter \"ticket\": the stream ticket has expired (it opens a stream within %s of its issue): ask for another", TicketTTL)
	}
	if parts[1] != ws {
		return "", platform.Forbidden("the stream ticket is for another workspace")
	}
	return parts[2], nil
}
