package clientip_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/botforge/platform/shared/clientip"
)

func TestAddr(t *testing.T) {
	for _, c := range []struct {
		name, trusted, peer string
		xff                 []string
		want                string
	}{
		{"no proxy: the peer, whatever the header says", "", "203.0.113.7:5000", []string{"1.2.3.4"}, "203.0.113.7"},
		{"lambda sourceIp has no port", "", "203.0.113.7", []string{"1.2.3.4, 203.0.113.7"}, "203.0.113.7"},
		{"ipv6 peer", "", "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"peer not trusted: header ignored", "10.0.0.0/8", "203.0.113.7:1", []string{"1.2.3.4"}, "203.0.113.7"},
		{"trusted peer: right-most forwarded", "10.0.0.0/8", "10.0.0.2:1", []string{"1.2.3.4"}, "1.2.3.4"},
		{"a forged left part is skipped", "10.0.0.0/8", "10.0.0.2:1", []string{"6.6.6.6, 1.2.3.4"}, "1.2.3.4"},
		{"two trusted hops", "10.0.0.0/8, 192.0.2.5", "10.0.0.2:1", []string{"6.6.6.6, 1.2.3.4, 192.0.2.5"}, "1.2.3.4"},
		{"several header lines", "10.0.0.0/8", "10.0.0.2:1", []string{"6.6.6.6", "1.2.3.4"}, "1.2.3.4"},
		{"all trusted: the left-most", "10.0.0.0/8", "10.0.0.2:1", []string{"10.1.1.1, 10.2.2.2"}, "10.1.1.1"},
		{"trusted peer, no header: the peer", "10.0.0.0/8", "10.0.0.2:1", nil, "10.0.0.2"},
		{"garbage behind a trusted hop: the trusted hop", "10.0.0.0/8", "10.0.0.2:1", []string{"1.2.3.4, nonsense"}, "10.0.0.2"},
		{"forwarded entry with a port", "10.0.0.0/8", "10.0.0.2:1", []string{"1.2.3.4:999"}, "1.2.3.4"},
		{"mapped v4 peer", "127.0.0.1", "[::ffff:127.0.0.1]:1", []string{"1.2.3.4"}, "1.2.3.4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rv, err := clientip.Parse(c.trusted)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := rv.Addr(r); got != c.want {
				t.Fatalf("Addr = %q, want %q", got, c.want)
			}
			var seen string
			rv.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = clientip.Of(r) })).ServeHTTP(httptest.NewRecorder(), r)
			if seen != c.want {
				t.Fatalf("Of below Handler = %q, want %q", seen, c.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"nonsense", "10.0.0.0/33", "1.2.3"} {
		if _, err := clientip.Parse(s); err == nil {
			t.Errorf("Parse(%q): no error", s)
		}
	}
}

func TestOfWithoutHandlerIsThePeer(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "198.51.100.1:2"
	r.Header.Set("X-Forwarded-For", "1.2.3.4")
	if got := clientip.Of(r); got != "198.51.100.1" {
		t.Fatalf("Of = %q", got)
	}
}
