package account

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"github.com/go-ldap/ldap/v3"
)

// DirectoryError is a directory server's failure: which server, what
// berth was doing, and why. It unwraps to ErrDirectory; its Description
// is written for the administrator who configured the server.
type DirectoryError struct {
	URL string // ldap://host:port or ldaps://host:port
	Op  string // "connect", "bind", "search"; "sign-in" for a person's bind
	Err error
}

// Error is the failure, for logs.
func (e *DirectoryError) Error() string {
	return fmt.Sprintf("account: directory server %s: %s: %v", e.URL, e.Op, e.Err)
}

// Unwrap makes errors.Is(err, ErrDirectory) true.
func (e *DirectoryError) Unwrap() error { return ErrDirectory }

// Description says what failed, for the client.
func (e *DirectoryError) Description() string {
	var why string
	var le *ldap.Error
	switch {
	case errors.As(e.Err, &le) && le.ResultCode != ldap.ErrorNetwork:
		why = ldap.LDAPResultCodeMap[le.ResultCode]
		if le.ResultCode == ldap.LDAPResultInvalidCredentials {
			why = "the login or password of the directory server is wrong"
		}
	default:
		why = rootCause(e.Err)
	}
	switch e.Op {
	case "sign-in":
		// Told to whoever signs in, who need not know the server.
		return "the directory server that checks this account's password did not answer; try again later"
	case "connect":
		return fmt.Sprintf("the directory server %s could not be reached: %s", e.URL, why)
	case "bind":
		return fmt.Sprintf("the directory server %s refused the login: %s", e.URL, why)
	}
	return fmt.Sprintf("the directory server %s failed to %s: %s", e.URL, e.Op, why)
}

// rootCause is the innermost error's text: "connection refused" rather
// than the chain of dial and syscall wrappers, and for a certificate the
// reason it failed verification.
func rootCause(err error) string {
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		return "its certificate did not verify: " + ce.Err.Error()
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// dial connects to a's server, over TLS for SSL with the certificate
// verified against the configured roots and a.Host. The connection
// closes when ctx ends.
func (s *Service) dial(ctx context.Context, a AuthSource) (*ldap.Conn, func(), error) {
	o := s.dir.opts
	url := a.URL()
	d := &net.Dialer{Timeout: o.Timeout, Control: allowedDial(o.AllowedNetworks)}
	if dl, ok := ctx.Deadline(); ok {
		d.Deadline = dl // the sooner of the two (recheckDirectory's bound)
	}
	opts := []ldap.DialOpt{ldap.DialWithDialer(d)}
	if a.SSL {
		opts = append(opts, ldap.DialWithTLSConfig(&tls.Config{ServerName: a.Host, RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}))
	}
	conn, err := ldap.DialURL(url, opts...)
	if err != nil {
		return nil, nil, &DirectoryError{URL: url, Op: "connect", Err: err}
	}
	conn.SetTimeout(o.Timeout)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	return conn, func() { stop(); conn.Close() }, nil
}

// errNetworkNotAllowed is a dial refused by DirectoryOptions.AllowedNetworks.
var errNetworkNotAllowed = errors.New("berth's configuration does not allow directory servers at this address (directory.allowed_networks)")

// allowedDial is a net.Dialer's Control that refuses addresses outside
// networks before connecting; nil for none (any address).
func allowedDial(networks []netip.Prefix) func(network, address string, c syscall.RawConn) error {
	if len(networks) == 0 {
		return nil
	}
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		a := ap.Addr().Unmap()
		for _, p := range networks {
			if p.Contains(a) {
				return nil
			}
		}
		return fmt.Errorf("%w: %s", errNetworkNotAllowed, a)
	}
}

// login connects to a's server (dial) and binds as its login, as an
// import's search and a refresh's question (holds) read the directory.
func (s *Service) login(ctx context.Context, a AuthSource) (*ldap.Conn, func(), error) {
	if a.Password == "" {
		// An empty password is an unauthenticated bind (RFC 4513
		// 5.1.2), which succeeds as nobody.
		return nil, nil, &DirectoryError{URL: a.URL(), Op: "bind", Err: errors.New("no password is set for the login")}
	}
	conn, closeConn, err := s.dial(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	if err := conn.Bind(a.Login, a.Password); err != nil {
		closeConn()
		return nil, nil, &DirectoryError{URL: a.URL(), Op: "bind", Err: err}
	}
	return conn, closeConn, nil
}

// directoryEntry is one person as the directory describes them.
type directoryEntry struct {
	DN, UID, Mail, GivenName, SN, CN string
}

// search binds as a's login and reads the entries of its search base
// that its filter selects, at most MaxEntries of them.
func (s *Service) search(ctx context.Context, a AuthSource) ([]directoryEntry, error) {
	conn, closeConn, err := s.login(ctx, a)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	req := ldap.NewSearchRequest(a.SearchBase(), ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, s.dir.opts.MaxEntries+1, 0, false,
		a.SearchFilter(), []string{"uid", "mail", "givenName", "sn", "cn"}, nil)
	res, err := conn.SearchWithPaging(req, 500)
	if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &DirectoryError{URL: a.URL(), Op: "search", Err: err}
	}
	if res == nil || len(res.Entries) > s.dir.opts.MaxEntries || err != nil {
		return nil, &DirectoryError{URL: a.URL(), Op: "search", Err: fmt.Errorf("more than %d entries match; narrow the filter or the base", s.dir.opts.MaxEntries)}
	}
	out := make([]directoryEntry, 0, len(res.Entries))
	for _, e := range res.Entries {
		out = append(out, directoryEntry{DN: e.DN, UID: e.GetAttributeValue("uid"), Mail: e.GetAttributeValue("mail"),
			GivenName: e.GetAttributeValue("givenName"), SN: e.GetAttributeValue("sn"), CN: e.GetAttributeValue("cn")})
	}
	return out, nil
}

// holds reports whether a's directory still holds the entry of uid that
// an import reads: under its search base, selected by its filter. An
// answer other than the entries (a server that cannot be reached or
// refuses berth's login, a base that is gone) is a *DirectoryError.
func (s *Service) holds(ctx context.Context, a AuthSource, uid string) (bool, error) {
	select {
	case s.dir.binds <- struct{}{}:
		defer func() { <-s.dir.binds }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	conn, closeConn, err := s.login(ctx, a)
	if err != nil {
		return false, err
	}
	defer closeConn()
	filter := "(&" + a.SearchFilter() + "(uid=" + ldap.EscapeFilter(uid) + "))"
	// "1.1" asks for no attributes: only whether an entry matches.
	req := ldap.NewSearchRequest(a.SearchBase(), ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 1, 0, false,
		filter, []string{"1.1"}, nil)
	res, err := conn.Search(req)
	switch {
	case err == nil:
		return len(res.Entries) > 0, nil
	case ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded):
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, &DirectoryError{URL: a.URL(), Op: "search", Err: err}
}

// bindAs reports whether the directory of source id accepts password for
// dn: the sign-in of an imported person. A wrong password is false; a
// server that cannot be reached is a *DirectoryError.
func (s *Service) bindAs(ctx context.Context, a AuthSource, dn, password string) (bool, error) {
	if password == "" || strings.TrimSpace(dn) == "" {
		// Never an unauthenticated bind: it succeeds for any DN.
		return false, nil
	}
	select {
	case s.dir.binds <- struct{}{}:
		defer func() { <-s.dir.binds }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	conn, closeConn, err := s.dial(ctx, a)
	if err != nil {
		var de *DirectoryError
		if errors.As(err, &de) {
			de.Op = "sign-in"
		}
		return false, err
	}
	defer closeConn()
	err = conn.Bind(dn, password)
	switch {
	case err == nil:
		return true, nil
	case ldap.IsErrorAnyOf(err, ldap.LDAPResultInvalidCredentials, ldap.LDAPResultNoSuchObject, ldap.LDAPResultInvalidDNSyntax,
		ldap.LDAPResultInappropriateAuthentication, ldap.LDAPResultUnwillingToPerform):
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, &DirectoryError{URL: a.URL(), Op: "sign-in", Err: err}
}
