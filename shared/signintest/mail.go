package signintest

import (
	"errors"
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/botforge/platform/shared/apitest"
)

// A real SMTP server on loopback (emersion/go-smtp) that keeps what it
// receives: the platform's invitation mail is read from it.

type received struct {
	from, to string
	msg      *mail.Message
	body     string
}

type smtpServer struct {
	addr string
	mu   sync.Mutex
	got  []received
	user string // AUTH PLAIN's expected user and password
	pass string
}

// startSMTP runs a server on loopback until the test ends; RCPT TO an
// address starting "bounce" is refused (550).
func startSMTP(t *testing.T, user, pass string) *smtpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{addr: l.Addr().String(), user: user, pass: pass}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{s: s}, nil }))
	srv.Domain = "127.0.0.1"
	srv.AllowInsecureAuth = true // loopback, as the platform's client allows
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *smtpServer) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

type smtpSession struct {
	s        *smtpServer
	authed   bool
	from, to string
}

func (x *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (x *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != x.s.user || pass != x.s.pass {
			return errors.New("wrong user or password")
		}
		x.authed = true
		return nil
	}), nil
}
func (x *smtpSession) Reset()        {}
func (x *smtpSession) Logout() error { return nil }
func (x *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if !x.authed {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}
func (x *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if strings.HasPrefix(to, "bounce") {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}
	x.to = to
	return nil
}
func (x *smtpSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(m.Body) // quoted-printable, decoded below
	if err != nil {
		return err
	}
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	x.s.got = append(x.s.got, received{from: x.from, to: x.to, msg: m, body: string(b)})
	return nil
}

// InvitationMailed: with PLATFORM_SMTP_URL and PLATFORM_MAIL_FROM, an
// invitation's link is mailed to the invited address (authenticated with
// the URL's user and password) as well as answered to the inviter; a renewed
// link is mailed too; a mail the server refuses leaves the invitation
// answered with its link (mailed: false), which still works.
func InvitationMailed(t *testing.T, start Start) {
	srv := startSMTP(t, "mailer", "s3cret")
	e := newEnv(t, start, Setup{Env: map[string]string{"PLATFORM_SMTP_URL": "smtp://mailer:s3cret@" + srv.addr, "PLATFORM_MAIL_FROM": "Bot platform <bots@example.com>"}})
	ws := map[string]string{"x-workspace-id": e.ws}
	inv := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-invitations", Token: e.AdminToken, Headers: ws, Body: map[string]any{"email": "newcomer@example.com", "role": "developer"}}), 200, "")
	link := inv.Str("invitation.url")
	if link == "" || inv.Body["invitation"].(map[string]any)["mailed"] != true {
		t.Fatalf("invitation: %s", inv.Raw)
	}
	// The mail was accepted before the invitation was answered.
	got := srv.messages()
	if len(got) != 1 {
		t.Fatalf("%d mails received, want 1", len(got))
	}
	m := got[0]
	body := decodeQP(t, m.body)
	if m.to != "newcomer@example.com" || m.from != "bots@example.com" || !strings.Contains(m.msg.Header.Get("Subject"), "Acme") ||
		!strings.Contains(body, link) || !strings.Contains(body, "as developer") {
		t.Fatalf("mail from %s to %s, headers %v, body %q; want the link %s", m.from, m.to, m.msg.Header, body, link)
	}
	// createWorkspaceMember (the reference's operation) mails too.
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Token: e.AdminToken, Headers: ws, Body: map[string]any{"email": "second@example.com", "role": "viewer"}}), 200, "createWorkspaceMember")
	if got := srv.messages(); len(got) != 2 || got[1].to != "second@example.com" {
		t.Fatalf("createWorkspaceMember: %d mails", len(got))
	}
	// A renewed link is mailed; the old one stops working.
	id := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspace-invitations", Token: e.AdminToken, Headers: ws}), 200, "").List("invitations")[0].(map[string]any)["id"].(string)
	ren := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-invitations/" + id + "/renew", Token: e.AdminToken, Headers: ws}), 200, "")
	if got := srv.messages(); len(got) != 3 || !strings.Contains(decodeQP(t, got[2].body), ren.Str("invitation.url")) {
		t.Fatalf("renewal: %d mails", len(got))
	}
	// A refused mail: the invitation is still made and its link answered.
	bad := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-invitations", Token: e.AdminToken, Headers: ws, Body: map[string]any{"email": "bounce@example.com", "role": "viewer"}}), 200, "")
	if bad.Str("invitation.url") == "" || bad.Body["invitation"].(map[string]any)["mailed"] != false {
		t.Fatalf("refused mail: %s", bad.Raw)
	}
	tok := linkToken(t, bad.Str("invitation.url"), "/#/invite/")
	if i := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/auth/links/" + tok}), 200, ""); i.Str("email") != "bounce@example.com" {
		t.Fatalf("link: %s", i.Raw)
	}
	if len(srv.messages()) != 3 {
		t.Fatal("a refused mail was counted as received")
	}
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/auth/links/" + tok, Body: map[string]any{"password": "correct horse battery"}}), 200, "")
}

func decodeQP(t *testing.T, s string) string {
	t.Helper()
	b, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(s)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
