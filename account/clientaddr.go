package account

import (
	"context"
	"net/netip"
)

// clientAddrKey is the context key of the client's network address.
type clientAddrKey struct{}

// WithClientAddr returns ctx carrying addr, the network address a sign-in
// comes from, for Authenticate's per-address counting. The front end (or
// the daemon in front of them all) sets it from the connection's peer,
// and from a forwarding header only where it trusts the proxy that set it:
// an address a client may choose is no basis for throttling.
func WithClientAddr(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr.Unmap())
}

// ClientAddr returns the address WithClientAddr put in ctx; the zero Addr
// (invalid) when none was, and then nothing is counted per address.
func ClientAddr(ctx context.Context) netip.Addr {
	a, _ := ctx.Value(clientAddrKey{}).(netip.Addr)
	return a
}

// AddrNet is the network a client address is counted as, by its first
// address: the address itself for IPv4, its /64 for IPv6, since one IPv6
// host commonly holds a whole /64 and could otherwise try from a new
// address each time. The zero Addr for no address. What depends on the
// lockout's answer for an address (LoginCallerRef's cache) is keyed by
// it too. An Addr, not a Prefix: a key without padding hashes as one
// block of memory.
func AddrNet(a netip.Addr) netip.Addr {
	bits := 64
	if a.Is4() {
		bits = 32
	}
	p, _ := a.Prefix(bits)
	return p.Addr()
}

// addrSubject names the lockout counter of a client address's network
// (AddrNet). Nil for no address.
func addrSubject(a netip.Addr) []byte {
	n := AddrNet(a)
	if !n.IsValid() {
		return nil
	}
	if n.Is4() {
		b := n.As4()
		return append([]byte("a4"), b[:]...)
	}
	b := n.As16()
	return append([]byte("a6"), b[:8]...)
}

// knownSubject names the record that person personID has signed in from
// the network of a (addrSubject): a known pair is judged on a counter of
// its own (knownCounter), so neither a lock of the account by guesses from
// elsewhere nor a throttle of the address by other accounts' guesses
// keeps the person out where they usually sign in.
func knownSubject(personID uint64, a netip.Addr) []byte {
	as := addrSubject(a)
	if personID == 0 || as == nil {
		return nil
	}
	return append(key("k", personID), as...)
}
