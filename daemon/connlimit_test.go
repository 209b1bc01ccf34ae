package daemon

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"berth/config"
)

// dialFrom opens a TCP connection to addr from the loopback address ip
// (127.0.0.0/8 is all loopback on Linux).
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the server closed c unanswered: a read
// gets end of file (or a reset) rather than waiting.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestLimitPerAddress: one client address holds at most the limit of
// connections; the next is closed as it is accepted, other addresses are
// untouched, a closed connection gives its place back (once, however
// often it is closed), trusted proxies are not counted, and 0 turns the
// limit off.
func TestLimitPerAddress(t *testing.T) {
	for _, c := range []struct {
		name    string
		max     int
		proxies string
		// from: the loopback address of each connection, in order;
		// closeFirst closes the first connection before the last is
		// made.
		from       []string
		closeFirst bool
		refused    []bool // which connections are closed unaccepted
	}{
		{name: "under the limit", max: 3, from: []string{"127.0.0.2", "127.0.0.2", "127.0.0.2"}, refused: []bool{false, false, false}},
		{name: "one past the limit", max: 2, from: []string{"127.0.0.2", "127.0.0.2", "127.0.0.2"}, refused: []bool{false, false, true}},
		{name: "other addresses count apart", max: 1, from: []string{"127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.4"}, refused: []bool{false, false, true, false}},
		{name: "a closed connection gives its place back", max: 2, from: []string{"127.0.0.2", "127.0.0.2", "127.0.0.2"}, closeFirst: true, refused: []bool{false, false, false}},
		{name: "trusted proxies are not counted", max: 1, proxies: "127.0.0.5", from: []string{"127.0.0.5", "127.0.0.5", "127.0.0.5", "127.0.0.2", "127.0.0.2"}, refused: []bool{false, false, false, false, true}},
		{name: "0 is no limit", max: 0, from: []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2"}, refused: []bool{false, false, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			proxies, err := config.Prefixes(c.proxies)
			if err != nil {
				t.Fatal(err)
			}
			refusedTotal := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
			ln := limitPerAddress(raw, c.max, proxies, refusedTotal)
			defer ln.Close()
			// The server side: every accepted connection answers one
			// byte, so a client tells accepted from closed.
			accepted := make(chan net.Conn, 16)
			go func() {
				for {
					s, err := ln.Accept()
					if err != nil {
						close(accepted)
						return
					}
					s.Write([]byte{1})
					accepted <- s
				}
			}()
			var first, firstServer net.Conn
			want := 0
			for i, ip := range c.from {
				if i == len(c.from)-1 && c.closeFirst {
					// Closed twice on the server's side, as net/http
					// and the TLS layer may: one place back, not two.
					firstServer.Close()
					firstServer.Close()
					first.Close()
				}
				conn := dialFrom(t, ip, raw.Addr().String())
				if i == 0 {
					first = conn
				}
				if c.refused[i] {
					want++
					if !closedByPeer(conn) {
						t.Errorf("connection %d from %s: answered, want closed unaccepted", i, ip)
					}
					continue
				}
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil {
					t.Errorf("connection %d from %s: %v, want accepted", i, ip, err)
					continue
				}
				s := <-accepted
				if i == 0 {
					firstServer = s
				}
				defer s.Close()
			}
			if got := int(testutil.ToFloat64(refusedTotal)); got != want {
				t.Errorf("refused counter %d, want %d", got, want)
			}
			if c.closeFirst {
				// Had the double close given two places back, a fourth
				// connection would pass too.
				if conn := dialFrom(t, "127.0.0.2", raw.Addr().String()); !closedByPeer(conn) {
					t.Error("after one connection closed twice, a connection past the limit was accepted")
				}
			}
		})
	}
}

// TestLimitPerAddressKey: IPv6 clients count by their /64, IPv4-mapped
// addresses as the IPv4 address they are.
func TestLimitPerAddressKey(t *testing.T) {
	l := &addrLimiter{}
	for _, c := range []struct{ remote, want string }{
		{"127.0.0.2:5000", "127.0.0.2"},
		{"[::ffff:10.1.2.3]:5000", "10.1.2.3"},
		{"[2001:db8:1:2:aaaa::1]:5000", "2001:db8:1:2::"},
		{"[2001:db8:1:2:bbbb::7]:6000", "2001:db8:1:2::"},
		{"[2001:db8:1:3::1]:5000", "2001:db8:1:3::"},
	} {
		key, ok := l.key(remoteConn{addr: c.remote})
		if !ok || key != netip.MustParseAddr(c.want) {
			t.Errorf("%s: counted as %v (%v), want %s", c.remote, key, ok, c.want)
		}
	}
}

// remoteConn is a connection that only has a peer address, for key.
type remoteConn struct {
	net.Conn
	addr string
}

// RemoteAddr is the address the test gave, as a TCP connection has it.
func (c remoteConn) RemoteAddr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.addr))
}

// TestConnsPerAddress: each of the daemon's listeners holds one client
// address to http.max_conns_per_address, counts what it refuses in
// berth_http_connections_refused_total, and serves other addresses.
func TestConnsPerAddress(t *testing.T) {
	_, data, p, _ := runningDaemon(t, "--http-max-conns-per-address", "2", "--http-listen", "127.0.0.1:0")
	addr := p.addrs["https"]
	// Two idle connections hold 127.0.0.2's places; the third is closed
	// before any TLS.
	dialFrom(t, "127.0.0.2", addr)
	dialFrom(t, "127.0.0.2", addr)
	if c := dialFrom(t, "127.0.0.2", addr); !closedByPeer(c) {
		t.Error("a third connection from 127.0.0.2 was not closed")
	}
	if st, body := get(t, fromAddr(t, data, "127.0.0.3"), "https://"+addr+"/api/2/version"); st != http.StatusOK {
		t.Errorf("another address: %d %s", st, body)
	}
	// The plain-HTTP and metrics listeners too: each connection is a
	// descriptor of the same process, so one address held every one
	// through them (each idle connection lasting ReadHeaderTimeout,
	// opened again as fast).
	for _, l := range []string{"http", "metrics"} {
		dialFrom(t, "127.0.0.2", p.addrs[l])
		dialFrom(t, "127.0.0.2", p.addrs[l])
		if c := dialFrom(t, "127.0.0.2", p.addrs[l]); !closedByPeer(c) {
			t.Errorf("%s listener: a third connection from 127.0.0.2 was not closed", l)
		}
	}
	_, metrics := get(t, http.DefaultClient, "http://"+p.addrs["metrics"]+"/metrics")
	if !strings.Contains(metrics, fmt.Sprintf("berth_http_connections_refused_total %d", 3)) {
		t.Errorf("metrics lack berth_http_connections_refused_total 3:\n%s", grepLines(metrics, "berth_http_connections"))
	}
}
