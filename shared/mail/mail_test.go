package mail

import (
	"strings"
	"testing"
)

// FromEnv: off without a URL; a malformed URL or sender refused, naming
// its variable.
func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		url, from, err, addr string
	}{
		{"", "", "", ""},
		{"smtp://u:p@mail.example.com", "Bots <bots@example.com>", "", "mail.example.com:587"},
		{"smtps://mail.example.com", "bots@example.com", "", "mail.example.com:465"},
		{"smtp://127.0.0.1:2525", "bots@example.com", "", "127.0.0.1:2525"},
		{"http://mail.example.com", "bots@example.com", EnvSMTPURL, ""},
		{"smtp://mail.example.com/x", "bots@example.com", EnvSMTPURL, ""},
		{"smtp://mail.example.com", "", EnvFrom, ""},
		{"smtp://mail.example.com", "not an address", EnvFrom, ""},
	} {
		s, err := FromEnv(func(k string) string { return map[string]string{EnvSMTPURL: c.url, EnvFrom: c.from}[k] })
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q %q: err %v, want one naming %s", c.url, c.from, err, c.err)
			}
		case err != nil:
			t.Errorf("%q %q: %v", c.url, c.from, err)
		case c.addr == "" && s != nil, c.addr != "" && (s == nil || s.addr != c.addr):
			t.Errorf("%q %q: sender %+v, want address %q", c.url, c.from, s, c.addr)
		}
	}
}

// compose: a subject with a line break cannot add a header.
func TestComposeNoHeaderInjection(t *testing.T) {
	s, err := FromEnv(func(k string) string {
		return map[string]string{EnvSMTPURL: "smtp://127.0.0.1:25", EnvFrom: "bots@example.com"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	to := s.from
	b := string(s.compose(to, Message{To: "x@example.com", Subject: "Hi\r\nBcc: evil@example.com", Body: "a"}))
	head, _, _ := strings.Cut(b, "\r\n\r\n")
	if strings.Contains(head, "\r\nBcc:") {
		t.Fatalf("header injected:\n%s", head)
	}
}
