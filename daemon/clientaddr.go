package daemon

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"berth/account"
)

// withClientAddr puts the client's network address into every request's
// context (account.WithClientAddr), where the sign-in limits of account
// count it; all three front ends are behind it, so an address is counted
// the same over the OAuth password grant, WebDAV Basic and the share-link
// sign-in page.
//
// The address is the connection's peer. Only when that peer is one of
// proxies (http.trusted_proxies) is X-Forwarded-For believed, and then
// only as far as the proxies' own entries go: the header is read from its
// end, skipping trusted proxies, and the first address that is not one is
// the client. Whatever a client writes at the header's front itself is
// never reached, so it cannot choose the address it is counted under.
//
// A connection whose peer is not a trusted proxy has that address for all
// its requests: peerContext puts it into the connection's context once,
// and such requests pass here untouched, where otherwise each would parse
// the address and copy the request for a context of its own.
func withClientAddr(h http.Handler, proxies []netip.Prefix) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(peerIsClient{}) != nil {
			h.ServeHTTP(w, r)
			return
		}
		if a := clientAddr(r, proxies); a.IsValid() {
			r = r.WithContext(account.WithClientAddr(r.Context(), a))
		}
		h.ServeHTTP(w, r)
	})
}

// peerIsClient marks a connection's context whose client address
// peerContext has set.
type peerIsClient struct{}

// peerContext is the part of an http.Server's ConnContext that gives
// withClientAddr the client's address of a whole connection, when its peer
// is not one of proxies and so is the client for every request.
func peerContext(ctx context.Context, c net.Conn, proxies []netip.Prefix) context.Context {
	var peer netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		peer = ta.AddrPort().Addr().Unmap().WithZone("")
	}
	if !peer.IsValid() || trusted(peer, proxies) {
		return ctx
	}
	return context.WithValue(account.WithClientAddr(ctx, peer), peerIsClient{}, true)
}

// clientAddr is the client's address as withClientAddr says; invalid
// when the peer's cannot be parsed.
func clientAddr(r *http.Request, proxies []netip.Prefix) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap().WithZone("")
	if !trusted(peer, proxies) {
		return peer
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		fields := strings.Split(hops[i], ",")
		for j := len(fields) - 1; j >= 0; j-- {
			a, ok := forwardedAddr(strings.TrimSpace(fields[j]))
			if !ok {
				// A malformed entry from past the trusted ones: the
				// last address known for sure is the one before it.
				return peer
			}
			a = a.Unmap().WithZone("")
			if !trusted(a, proxies) {
				return a
			}
			peer = a
		}
	}
	return peer
}

// forwardedAddr parses one X-Forwarded-For entry: an address, or an
// address with its port ("203.0.113.9:51234", "[2001:db8::9]:51234"),
// as some proxies (Azure's application gateway) write them; read as
// malformed, every client behind such a proxy would be counted as the
// proxy, and one guesser would throttle them all.
func forwardedAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	ap, err := netip.ParseAddrPort(s)
	return ap.Addr(), err == nil
}

// trusted reports whether a is in one of proxies.
func trusted(a netip.Addr, proxies []netip.Prefix) bool {
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
