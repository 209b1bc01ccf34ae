package daemon

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"berth/account"
	"berth/config"
)

// peerConn is a connection that has only a peer's address, for
// peerContext.
type peerConn struct {
	net.Conn
	addr net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.addr }

// TestClientAddr: the peer is the client unless it is a trusted proxy;
// then X-Forwarded-For is read from its end past trusted proxies, so a
// client cannot choose its address by writing the header itself. Each
// row goes the way a request does: the connection's context
// (peerContext), then withClientAddr, whose handler reads the address
// account counts; a second request on the connection gets the same.
func TestClientAddr(t *testing.T) {
	proxies, err := config.Prefixes("10.0.0.5, 192.168.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "203.0.113.7:5000", nil, "203.0.113.7"},
		{"an untrusted peer's header is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, "203.0.113.7"},
		{"a trusted proxy's last entry", "10.0.0.5:443", []string{"198.51.100.1, 203.0.113.9"}, "203.0.113.9"},
		{"past a chain of trusted proxies", "10.0.0.5:443", []string{"1.2.3.4, 203.0.113.9", "192.168.0.7"}, "203.0.113.9"},
		{"a trusted proxy without the header", "10.0.0.5:443", nil, "10.0.0.5"},
		{"a malformed entry stops the walk", "10.0.0.5:443", []string{"203.0.113.9, junk"}, "10.0.0.5"},
		// Some proxies (Azure's application gateway) append the
		// client with its port: read as malformed, every client
		// behind them was the proxy, and one guesser throttled all.
		{"an entry with a port", "10.0.0.5:443", []string{"198.51.100.1, 203.0.113.9:51234"}, "203.0.113.9"},
		{"an IPv6 entry with a port", "10.0.0.5:443", []string{"[2001:db8::9]:51234"}, "2001:db8::9"},
		{"a trusted entry with a port", "10.0.0.5:443", []string{"203.0.113.9, 192.168.0.7:8080"}, "203.0.113.9"},
		{"IPv6 peer", "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.7]:443", nil, "203.0.113.7"},
	} {
		r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		peer, err := net.ResolveTCPAddr("tcp", c.peer)
		if err != nil {
			t.Fatal(err)
		}
		conn := peerContext(context.Background(), peerConn{addr: peer}, proxies)
		var got []netip.Addr
		h := withClientAddr(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			got = append(got, account.ClientAddr(r.Context()))
		}), proxies)
		for range 2 {
			h.ServeHTTP(nil, r.WithContext(conn))
		}
		want := netip.MustParseAddr(c.want)
		if len(got) != 2 || got[0] != want || got[1] != want {
			t.Errorf("%s: %v, want %s twice", c.name, got, want)
		}
	}
	if _, err := config.Prefixes("10.0.0.0/8, nonsense"); err == nil {
		t.Error("a bad trusted_proxies entry parsed")
	}
}
