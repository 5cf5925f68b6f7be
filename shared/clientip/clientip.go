// Package clientip finds the address of the client an HTTP request came
// from, as the platform's edge saw it: what every per-address limit counts
// (docs/security.md "The client's address", docs/chat-api.md "Limits").
//
// The address is the socket's peer: locally the TCP peer, on AWS the
// source address of the API Gateway or function URL event (the Lambda
// adapters, aws-lambda-go-api-proxy's httpadapter and lambdaurl, set
// RemoteAddr to requestContext.http.sourceIp). X-Forwarded-For is written
// by whoever sends the request, so it is read only behind proxies the
// operator trusts (PLATFORM_TRUSTED_PROXIES, the local platform's
// --trusted-proxies): then the client is the right-most address of the
// chain peer <- X-Forwarded-For that is not one of them, as each trusted
// proxy appends the peer it saw and only the entries left of those can be
// forged.
package clientip

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// EnvTrustedProxies names the variable listing the trusted proxies.
const EnvTrustedProxies = "PLATFORM_TRUSTED_PROXIES"

// Resolver finds a request's client address. The zero Resolver trusts no
// proxy: the address is the socket's peer.
type Resolver struct {
	Trusted []netip.Prefix
}

// Parse reads a comma-separated list of CIDRs or single addresses (an
// address stands for itself: /32 or /128). Empty: none.
func Parse(list string) (Resolver, error) {
	var r Resolver
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return Resolver{}, fmt.Errorf("trusted proxy %q is neither an address nor a CIDR", s)
			}
			r.Trusted = append(r.Trusted, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Resolver{}, fmt.Errorf("trusted proxy %q is not a CIDR: %v", s, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		r.Trusted = append(r.Trusted, p.Masked())
	}
	return r, nil
}

func (rv Resolver) trusts(a netip.Addr) bool {
	for _, p := range rv.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Addr is the client address of r (as a string: an address, or the peer
// as given when it is none).
func (rv Resolver) Addr(r *http.Request) string {
	peer := Peer(r)
	a, err := netip.ParseAddr(peer)
	if err != nil || len(rv.Trusted) == 0 || !rv.trusts(a.Unmap()) {
		return peer
	}
	client := a.Unmap().String()
	hops := forwarded(r.Header.Values("X-Forwarded-For"))
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(hops[i])
		if err != nil {
			// Written by a trusted proxy yet no address: the last one
			// read stays the client (nothing left of it can be trusted).
			return client
		}
		client = h.Unmap().String()
		if !rv.trusts(h.Unmap()) {
			return client
		}
	}
	// Every hop is trusted: the left-most one is the client.
	return client
}

// forwarded splits X-Forwarded-For's values into entries, in order; an
// entry's port or brackets ("[::1]:80", "1.2.3.4:5") are dropped.
func forwarded(values []string) []string {
	var out []string
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			if h, _, err := net.SplitHostPort(e); err == nil {
				e = h
			}
			out = append(out, strings.Trim(e, "[]"))
		}
	}
	return out
}

// Peer is the socket's peer of r: RemoteAddr without its port (the Lambda
// adapters give the event's sourceIp, which has none).
func Peer(r *http.Request) string {
	h := r.RemoteAddr
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

type ctxKey struct{}

// Handler resolves each request's client address once, at the edge of
// the platform's handler, for Of to read below it (in-process calls made
// on the request's context keep it).
func (rv Resolver) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(WithAddr(r.Context(), rv.Addr(r))))
	})
}

// WithAddr returns ctx carrying the client address addr.
func WithAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, ctxKey{}, addr)
}

// Of is r's client address: the one Handler resolved, else the socket's
// peer (never a header).
func Of(r *http.Request) string {
	if a, ok := r.Context().Value(ctxKey{}).(string); ok && a != "" {
		return a
	}
	return Peer(r)
}
