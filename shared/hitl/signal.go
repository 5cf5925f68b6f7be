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
// (PLATFORM_PAGING_KEY); the ticket is bound to workspace and member, and
// to the credential that asked for it (cred: CredSession or CredToken
// with its id), so that an open stream ends with that credential (the
// session ended, the token revoked: the stream host checks it every
// StreamCheckEvery).
func Ticket(key []byte, ws, account, cred string, exp time.Time) string {
	body := "hitl2|" + ws + "|" + account + "|" + cred + "|" + strconv.FormatInt(exp.Unix(), 10)
	return base64.RawURLEncoding.EncodeToString([]byte(body)) + "." + base64.RawURLEncoding.EncodeToString(sign(key, body))
}

// A ticket's credential: "s:<session id>" (a browser's sign-in session)
// or "p:<token id>" (a personal access token).
const (
	CredSession = "s:"
	CredToken   = "p:"
)

// StreamCheckEvery is how often an open inbox stream checks that its
// member is still one and its credential still valid (docs/hitl.md: the
// bound within which a removed member's or an ended session's stream is
// cut).
var StreamCheckEvery = 15 * time.Second

// The inbox streams' limits, counted across the platform (the store's
// shared limits, as the Chat API's streams): a member's open streams in
// one workspace (a console tab holds one per workspace it shows), and a
// workspace's. On the lambda tier each stream is an invocation of the
// streaming function.
var (
	MaxStreamsPerMember    = 10
	MaxStreamsPerWorkspace = 200
)

// Claims are what a valid ticket names.
type Claims struct {
	Account string
	Cred    string // CredSession or CredToken and the id
}

func sign(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("hitl stream ticket\x00"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// CheckTicket answers the member and credential a ticket names for
// workspace ws: an unreadable, forged or expired ticket is Unauthorized,
// another workspace's is Forbidden.
func CheckTicket(key []byte, ticket, ws string, now time.Time) (Claims, error) {
	enc, mac, ok := strings.Cut(ticket, ".")
	body, err1 := base64.RawURLEncoding.DecodeString(enc)
	sig, err2 := base64.RawURLEncoding.DecodeString(mac)
	if ticket == "" || !ok || err1 != nil || err2 != nil || !hmac.Equal(sig, sign(key, string(body))) {
		return Claims{}, platform.Errorf(platform.ErrUnauthorized, "query parameter \"ticket\": a valid stream ticket is required (POST /v1/admin/workspaces/{id}/hitl/stream-ticket)")
	}
	parts := strings.Split(string(body), "|")
	if len(parts) != 5 || parts[0] != "hitl2" {
		return Claims{}, platform.Errorf(platform.ErrUnauthorized, "query parameter \"ticket\": not a stream ticket")
	}
	exp, perr := strconv.ParseInt(parts[4], 10, 64)
	if perr != nil || now.Unix() > exp {
		return Claims{}, platform.Errorf(platform.ErrUnauthorized, "query parameter \"ticket\": the stream ticket has expired (it opens a stream within %s of its issue): ask for another", TicketTTL)
	}
	if parts[1] != ws {
		return Claims{}, platform.Forbidden("the stream ticket is for another workspace")
	}
	return Claims{Account: parts[2], Cred: parts[3]}, nil
}
