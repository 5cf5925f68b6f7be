// Package mail sends the platform's few mails (invitation links,
// docs/signin.md) over SMTP when the operator configures a server
// (PLATFORM_SMTP_URL, PLATFORM_MAIL_FROM); without one, nothing is sent
// and people copy links from the console.
package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"
)

// Environment variables.
const (
	// EnvSMTPURL: smtp://[user:password@]host[:port] (STARTTLS when the
	// server offers it; port 587 by default) or smtps://... (TLS from the
	// first byte; port 465 by default).
	EnvSMTPURL = "PLATFORM_SMTP_URL"
	// EnvFrom: the sender, e.g. "Bots <bots@example.com>".
	EnvFrom = "PLATFORM_MAIL_FROM"
)

// Timeout bounds one mail's sending (connect to QUIT).
const Timeout = 15 * time.Second

// Sender sends mail through one SMTP server.
type Sender struct {
	host, addr string
	implicit   bool // smtps
	user, pass string
	from       *mail.Address
	// TLS is the configuration of STARTTLS and smtps (nil: the system's
	// roots, the server's host name).
	TLS *tls.Config
}

// FromEnv reads the sender (nil without PLATFORM_SMTP_URL); a malformed
// setting is an error naming its variable.
func FromEnv(get func(string) string) (*Sender, error) {
	raw := strings.TrimSpace(get(EnvSMTPURL))
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%s: want smtp://[user:password@]host[:port] or smtps://...", EnvSMTPURL)
	}
	s := &Sender{host: u.Hostname(), implicit: u.Scheme == "smtps"}
	port := u.Port()
	if port == "" {
		port = "587"
		if s.implicit {
			port = "465"
		}
	}
	s.addr = net.JoinHostPort(s.host, port)
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
	}
	from := strings.TrimSpace(get(EnvFrom))
	if from == "" {
		return nil, fmt.Errorf("%s is set but %s (the sender, e.g. \"Bots <bots@example.com>\") is not", EnvSMTPURL, EnvFrom)
	}
	if s.from, err = mail.ParseAddress(from); err != nil {
		return nil, fmt.Errorf("%s=%q: %v", EnvFrom, from, err)
	}
	return s, nil
}

// Message is one plain-text mail.
type Message struct {
	To      string
	Subject string
	Body    string
}

// Send sends m, within Timeout (and ctx).
func (s *Sender) Send(ctx context.Context, m Message) error {
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return fmt.Errorf("recipient %q: %v", m.To, err)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	tlsCfg := s.TLS
	if tlsCfg == nil {
		tlsCfg = &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}
	}
	var conn net.Conn
	d := &net.Dialer{}
	if s.implicit {
		conn, err = (&tls.Dialer{NetDialer: d, Config: tlsCfg}).DialContext(ctx, "tcp", s.addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", s.addr)
	}
	if err != nil {
		return fmt.Errorf("SMTP server %s: %v", s.addr, err)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return fmt.Errorf("SMTP server %s: %v", s.addr, err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok && !s.implicit {
		if err := c.StartTLS(tlsCfg); err != nil {
			return fmt.Errorf("SMTP server %s: STARTTLS: %v", s.addr, err)
		}
	}
	if s.user != "" {
		// net/smtp's PLAIN refuses to send the password unencrypted except
		// to a loopback server.
		if err := c.Auth(smtp.PlainAuth("", s.user, s.pass, s.host)); err != nil {
			return fmt.Errorf("SMTP server %s: authentication: %v", s.addr, err)
		}
	}
	if err := c.Mail(s.from.Address); err != nil {
		return fmt.Errorf("SMTP server %s: MAIL FROM: %v", s.addr, err)
	}
	if err := c.Rcpt(to.Address); err != nil {
		return fmt.Errorf("SMTP server %s: RCPT TO %s: %v", s.addr, to.Address, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("SMTP server %s: DATA: %v", s.addr, err)
	}
	if _, err := w.Write(s.compose(to, m)); err != nil {
		return fmt.Errorf("SMTP server %s: DATA: %v", s.addr, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("SMTP server %s: the message was refused: %v", s.addr, err)
	}
	return c.Quit()
}

// compose is the message's bytes: headers (the subject encoded as RFC
// 2047 words, so no header can be injected) and a quoted-printable body.
func (s *Sender) compose(to *mail.Address, m Message) []byte {
	var b bytes.Buffer
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	domain := s.from.Address[strings.LastIndex(s.from.Address, "@")+1:]
	hdr := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	hdr("From", s.from.String())
	hdr("To", to.String())
	hdr("Subject", mime.QEncoding.Encode("utf-8", strings.NewReplacer("\r", " ", "\n", " ").Replace(m.Subject)))
	hdr("Date", time.Now().UTC().Format(time.RFC1123Z))
	hdr("Message-ID", "<"+hex.EncodeToString(id)+"@"+domain+">")
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", "text/plain; charset=utf-8")
	hdr("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(m.Body, "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}
