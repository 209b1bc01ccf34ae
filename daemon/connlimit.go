package daemon

import (
	"net"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
)

// limitPerAddress wraps the HTTPS listener so that one client address
// holds at most max connections at once; a connection past that is
// closed as it is accepted, before its TLS handshake costs anything.
// Slow clients are bounded in time (http.body_idle_timeout,
// ReadHeaderTimeout), but without a bound in number one address could
// hold every file descriptor the process has (LimitNOFILE) with idle
// connections and keep everyone else out.
//
// IPv6 addresses count by their /64: a single host is usually given a
// whole /64 and can take any address in it, so counting each address
// alone would bound nothing. Connections from trusted proxies
// (http.trusted_proxies) are not counted: they carry many clients.
// max 0 turns the limit off.
func limitPerAddress(ln net.Listener, max int, proxies []netip.Prefix, refused prometheus.Counter) net.Listener {
	if max <= 0 {
		return ln
	}
	return &addrLimiter{Listener: ln, max: max, proxies: proxies, refused: refused, open: map[netip.Addr]int{}}
}

type addrLimiter struct {
	net.Listener
	max     int
	proxies []netip.Prefix
	refused prometheus.Counter

	mu   sync.Mutex
	open map[netip.Addr]int // connections held, by counted address
}

// Accept returns the next connection whose address is under its limit;
// those over it are closed here and never reach the server.
func (l *addrLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, ok := l.key(c)
		if !ok {
			return c, nil
		}
		l.mu.Lock()
		n := l.open[key]
		if n >= l.max {
			l.mu.Unlock()
			c.Close()
			l.refused.Inc()
			continue
		}
		l.open[key] = n + 1
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, key: key}, nil
	}
}

// key is what a connection counts against: its peer's network, as the
// sign-in limits count an address (account.AddrNet: an IPv6 /64 whole);
// ok is false for a connection not counted.
func (l *addrLimiter) key(c net.Conn) (netip.Addr, bool) {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	a := ta.AddrPort().Addr().Unmap().WithZone("")
	if !a.IsValid() || trusted(a, l.proxies) {
		return netip.Addr{}, false
	}
	return account.AddrNet(a), true
}

func (l *addrLimiter) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.open[key]; n > 1 {
		l.open[key] = n - 1
	} else {
		delete(l.open, key)
	}
}

// limitedConn gives its place back once, at its first Close: net/http
// and the TLS layer may both close a connection.
type limitedConn struct {
	net.Conn
	l    *addrLimiter
	key  netip.Addr
	once sync.Once
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}
