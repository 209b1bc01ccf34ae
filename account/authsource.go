package account

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-ldap/ldap/v3"

	"berth/kv"
)

// AuthSource is a directory server (spec 2.17 auth_source) from which an
// organization imports its persons, who then sign in by binding to it as
// themselves: berth never stores their passwords.
type AuthSource struct {
	ID             uint64 `cbor:"1,keyasint"`
	OrganizationID uint64 `cbor:"2,keyasint"`
	// Host is the server's host name or IP address, without scheme or port.
	Host string `cbor:"3,keyasint"`
	// Domain is the directory's DNS domain; the search base is derived
	// from it (example.com: dc=example,dc=com) unless BaseDN is set.
	Domain string `cbor:"4,keyasint"`
	// Login is the DN berth binds as to search the directory.
	Login string `cbor:"5,keyasint"`
	// Password is Login's. It is kept because every import binds with
	// it, and is never sent to clients.
	Password string `cbor:"6,keyasint"`
	// Port is 0 for the scheme's default (389, 636 with SSL).
	Port int `cbor:"7,keyasint"`
	// SSL selects LDAPS: TLS from the first byte, the server's
	// certificate verified against DirectoryOptions.RootCAs (the system
	// pool by default) and Host.
	SSL bool `cbor:"8,keyasint"`
	// BaseDN overrides the search base derived from Domain.
	BaseDN string `cbor:"9,keyasint"`
	// Filter overrides DefaultDirectoryFilter.
	Filter  string    `cbor:"10,keyasint"`
	Created time.Time `cbor:"11,keyasint"`
	// LastImport is when the last import ended, LastError its error ("" for none).
	LastImport time.Time `cbor:"12,keyasint"`
	LastError  string    `cbor:"13,keyasint"`
}

// DefaultDirectoryFilter selects the entries an import makes persons of,
// when a source sets no filter of its own: people with a user id.
const DefaultDirectoryFilter = "(&(objectClass=inetOrgPerson)(uid=*))"

// SearchBase is the DN an import searches under: BaseDN, or the one
// derived from Domain.
func (a AuthSource) SearchBase() string {
	if a.BaseDN != "" {
		return a.BaseDN
	}
	return domainDN(a.Domain)
}

// SearchFilter is the filter an import searches with.
func (a AuthSource) SearchFilter() string {
	if a.Filter != "" {
		return a.Filter
	}
	return DefaultDirectoryFilter
}

// EffectivePort is Port, or the scheme's default.
func (a AuthSource) EffectivePort() int {
	switch {
	case a.Port != 0:
		return a.Port
	case a.SSL:
		return 636
	}
	return 389
}

// URL is the server's ldap:// or ldaps:// URL.
func (a AuthSource) URL() string {
	scheme := "ldap"
	if a.SSL {
		scheme = "ldaps"
	}
	return fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(a.Host, fmt.Sprint(a.EffectivePort())))
}

// domainDN is example.com as dc=example,dc=com.
func domainDN(domain string) string {
	labels := strings.Split(domain, ".")
	for i, l := range labels {
		labels[i] = "dc=" + ldap.EscapeDN(l)
	}
	return strings.Join(labels, ",")
}

// AuthSourceInput are the fields of a new directory server; Port 0 is
// the default port, BaseDN and Filter "" the derived base and
// DefaultDirectoryFilter.
type AuthSourceInput struct {
	OrganizationID uint64
	Host           string
	Domain         string
	Login          string
	Password       string
	Port           int
	SSL            bool
	BaseDN         string
	Filter         string
}

// DirectoryOptions configure how berth talks to directory servers.
type DirectoryOptions struct {
	// RootCAs verify the certificates of LDAPS servers. Nil: the
	// system's pool.
	RootCAs *x509.CertPool
	// Timeout bounds connecting and each request to a server. Default 10 seconds.
	Timeout time.Duration
	// MaxBinds bounds the sign-ins checked against directories at once,
	// and the refreshes that ask one whether it still holds their person
	// (recheckDirectory), so a flood of them cannot open connections
	// without bound. Default 16.
	MaxBinds int
	// MaxEntries bounds what one import reads. Default 100000.
	MaxEntries int
	// AllowedNetworks, when not empty, are the only networks a directory
	// server may be reached at, checked on the address dialled (after
	// the name is resolved, so a name that resolves elsewhere later
	// gains nothing): any organization's administrators configure
	// directory servers, and without it they could have berth connect
	// to any host and port its network reaches, and learn from the
	// answers which are open. Empty: any.
	AllowedNetworks []netip.Prefix
}

// directoryState is what the Service keeps for directory servers.
type directoryState struct {
	opts  DirectoryOptions
	binds chan struct{} // slots of MaxBinds
	// importing serializes imports: a scheduled one and one asked for
	// would otherwise race on the same persons.
	importing chan struct{}

	// mu guards silent, which is kept by the real clock, as Timeout
	// is, not Options.Now.
	mu sync.Mutex
	// silent holds, by source id, until when the refreshes of its
	// persons do not ask it again (recheckDirectory): it failed to
	// answer one within Timeout, and each refresh that waited on it
	// while it is down would hold its request (and a slot of binds)
	// for as long again, to refuse nothing in the end.
	silent map[uint64]time.Time
}

func newDirectoryState(o DirectoryOptions) *directoryState {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxBinds <= 0 {
		o.MaxBinds = 16
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 100000
	}
	return &directoryState{opts: o, binds: make(chan struct{}, o.MaxBinds), importing: make(chan struct{}, 1),
		silent: map[uint64]time.Time{}}
}

// quiet reports whether source id failed to answer a refresh's question
// less than Timeout before now.
func (d *directoryState) quiet(id uint64, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	until, ok := d.silent[id]
	if ok && !now.Before(until) {
		delete(d.silent, id)
		return false
	}
	return ok
}

// failed records that source id did not answer a refresh's question at
// now: the refreshes of the next Timeout do not ask it.
func (d *directoryState) failed(id uint64, now time.Time) {
	d.mu.Lock()
	d.silent[id] = now.Add(d.opts.Timeout)
	d.mu.Unlock()
}

// detachedHash is the password hash of a person whose directory server
// was deleted: no password is theirs until one is set (verifySecret).
const detachedHash = "!detached-from-directory"

// directoryMember is an imported person's link to their directory entry
// (acctsrcperson/<source><person>).
type directoryMember struct {
	// UID is the entry's uid, the person's username; DN the entry, which
	// sign-ins bind as.
	UID string `cbor:"1,keyasint"`
	DN  string `cbor:"2,keyasint"`
	// DisabledByImport: the import disabled the person because their
	// entry was gone. Only such a person is enabled again when the
	// entry returns; one an administrator disabled stays disabled.
	DisabledByImport bool `cbor:"3,keyasint"`
}

// ADEnabled reports whether the policies of organization orgID let it use
// directory servers: ad_enabled in its own policy and in every policy
// above it, as every switch that grants something (effectivePolicy).
// Errors: ErrNotFound.
func (s *Service) ADEnabled(ctx context.Context, orgID uint64) (bool, error) {
	var ok bool
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		ok, err = s.adEnabled(tx, orgID)
		return err
	})
	return ok, err
}

func (s *Service) adEnabled(tx kv.Txn, orgID uint64) (bool, error) {
	orgs, err := s.undeletedChain(tx, orgID, notFoundf("organization %d", orgID))
	if err != nil {
		return false, err
	}
	for _, o := range orgs {
		if !o.Policy.ADEnabled {
			return false, nil
		}
	}
	return true, nil
}

// directoryRefused is the error of a directory change in an organization
// whose policy leaves directories off.
func directoryRefused(orgID uint64) error {
	return fmt.Errorf("%w: organization %d", ErrDirectoryDisabled, orgID)
}

// CreateAuthSource stores a new directory server of in.OrganizationID,
// recording ActAuthSourceCreated. It checks the settings' form, not the
// server: an import says whether it answers.
// Errors: ErrInvalid, ErrNotFound (organization), ErrDirectoryDisabled.
func (s *Service) CreateAuthSource(ctx context.Context, in AuthSourceInput) (AuthSource, error) {
	a := AuthSource{OrganizationID: in.OrganizationID, Host: strings.TrimSpace(in.Host), Domain: strings.ToLower(strings.TrimSpace(in.Domain)),
		Login: strings.TrimSpace(in.Login), Password: in.Password, Port: in.Port, SSL: in.SSL,
		BaseDN: strings.TrimSpace(in.BaseDN), Filter: strings.TrimSpace(in.Filter), Created: s.now()}
	if err := a.validate(); err != nil {
		return AuthSource{}, err
	}
	id, err := s.db.NextID(ctx, seqAuthSource)
	if err != nil {
		return AuthSource{}, err
	}
	a.ID = id
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		ok, err := s.adEnabled(tx, a.OrganizationID)
		if err != nil {
			return err
		}
		if !ok {
			return directoryRefused(a.OrganizationID)
		}
		if err := tx.Set(key(pfxOrgAuthSource, a.OrganizationID, a.ID), nil); err != nil {
			return err
		}
		if err := s.put(tx, key(pfxAuthSource, a.ID), &a); err != nil {
			return err
		}
		return s.record(ctx, tx, authSourceChange(ActAuthSourceCreated, a))
	})
	if err != nil {
		return AuthSource{}, err
	}
	return a, nil
}

// AuthSource returns directory server id. Errors: ErrNotFound.
func (s *Service) AuthSource(ctx context.Context, id uint64) (AuthSource, error) {
	var a AuthSource
	err := s.db.View(ctx, func(tx kv.Txn) error {
		return s.get(tx, key(pfxAuthSource, id), &a, notFoundf("auth source %d", id))
	})
	return a, err
}

// UpdateAuthSource applies fn to directory server id and stores the
// result, recording ActAuthSourceUpdated. fn may run more than once; ID,
// OrganizationID, Created and the import's outcome stay. Persons already
// imported keep their entries' DNs until the next import.
// Errors: ErrNotFound, ErrInvalid, ErrDirectoryDisabled, or fn's own.
func (s *Service) UpdateAuthSource(ctx context.Context, id uint64, fn func(*AuthSource) error) (AuthSource, error) {
	var a AuthSource
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		var cur AuthSource
		if err := s.get(tx, key(pfxAuthSource, id), &cur, notFoundf("auth source %d", id)); err != nil {
			return err
		}
		ok, err := s.adEnabled(tx, cur.OrganizationID)
		if err != nil {
			return err
		}
		if !ok {
			return directoryRefused(cur.OrganizationID)
		}
		a = cur
		if err := fn(&a); err != nil {
			return err
		}
		a.ID, a.OrganizationID, a.Created, a.LastImport, a.LastError = cur.ID, cur.OrganizationID, cur.Created, cur.LastImport, cur.LastError
		a.Host, a.Domain, a.Login = strings.TrimSpace(a.Host), strings.ToLower(strings.TrimSpace(a.Domain)), strings.TrimSpace(a.Login)
		a.BaseDN, a.Filter = strings.TrimSpace(a.BaseDN), strings.TrimSpace(a.Filter)
		if err := a.validate(); err != nil {
			return err
		}
		if err := s.put(tx, key(pfxAuthSource, id), &a); err != nil {
			return err
		}
		return s.record(ctx, tx, authSourceChange(ActAuthSourceUpdated, a))
	})
	if err != nil {
		return AuthSource{}, err
	}
	return a, nil
}

// DeleteAuthSource removes directory server id, recording
// ActAuthSourceDeleted. Its persons stay, with their files, but lose the
// directory they signed in with: their sessions and device passwords end,
// as with a password reset (the password they were made under is no
// longer theirs), and they sign in again only once an administrator gives
// them a password. It is allowed
// whatever ad_enabled says, so that turning directories off leaves no
// source nobody may remove. Errors: ErrNotFound.
//
// The persons are let go in transactions of their own
// (authSourceDetachBatch at a time), so a large directory fits, and the
// source goes in the transaction that lets the last of them go: a crash
// or a failure between leaves the source, with fewer persons, which
// DeleteAuthSource called again finishes. Deleted first, as it was, a
// crash between left persons whose sessions and device passwords still
// worked, linked to a source no request could name again.
func (s *Service) DeleteAuthSource(ctx context.Context, id uint64) error {
	for {
		done := false
		err := s.db.Update(ctx, func(tx kv.Txn) error {
			done = false
			var a AuthSource
			if err := s.get(tx, key(pfxAuthSource, id), &a, notFoundf("auth source %d", id)); err != nil {
				return err
			}
			ids, err := scanIDsUpTo(tx, key(pfxAuthSourcePerson, id), authSourceDetachBatch)
			if err != nil {
				return err
			}
			if err := s.detachMembers(tx, id, ids); err != nil {
				return err
			}
			if len(ids) == authSourceDetachBatch {
				return nil // more: the next transaction
			}
			if err := tx.Delete(key(pfxOrgAuthSource, a.OrganizationID, id)); err != nil {
				return err
			}
			if err := tx.Delete(key(pfxAuthSource, id)); err != nil {
				return err
			}
			done = true
			return s.record(ctx, tx, authSourceChange(ActAuthSourceDeleted, a))
		})
		if err != nil || done {
			return err
		}
	}
}

// authSourceDetachBatch bounds the persons one transaction of
// DeleteAuthSource lets go; a variable for the tests.
var authSourceDetachBatch = 100

// detachMembers lets persons ids of source id go, in tx: their link, the
// source on their record, their sessions and device passwords.
func (s *Service) detachMembers(tx kv.Txn, id uint64, ids []uint64) error {
	for _, pid := range ids {
		if err := tx.Delete(key(pfxAuthSourcePerson, id, pid)); err != nil {
			return err
		}
		var p Person
		err := s.get(tx, key(pfxPerson, pid), &p, ErrNotFound)
		if errors.Is(err, ErrNotFound) || (err == nil && p.AuthSourceID != id) {
			continue
		}
		if err != nil {
			return err
		}
		// A new mark, where the hash was "": a front end that
		// remembers the person's last sign-in by the hash
		// (LoginCallerRef) sees the change and asks again.
		p.AuthSourceID, p.PasswordHash = 0, detachedHash
		if err := s.put(tx, key(pfxPerson, pid), &p); err != nil {
			return err
		}
		if err := s.revokeAll(tx, pid); err != nil {
			return err
		}
		if _, err := s.endDevicePasswords(tx, pid, 0); err != nil {
			return err
		}
	}
	return nil
}

// AuthSources returns one page of organization orgID's directory servers
// in id order and how many it has. Errors: ErrNotFound (organization).
func (s *Service) AuthSources(ctx context.Context, orgID uint64, offset, limit int) ([]AuthSource, int, error) {
	var out []AuthSource
	total := 0
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out, total = nil, 0
		if ok, err := exists(tx, key(pfxOrg, orgID)); err != nil || !ok {
			if err == nil {
				err = notFoundf("organization %d", orgID)
			}
			return err
		}
		prefix := key(pfxOrgAuthSource, orgID)
		return tx.Scan(prefix, nil, func(k, _ []byte) error {
			total++
			if total <= offset || total > offset+limit {
				return nil
			}
			id := kv.Uint64At(k, len(prefix))
			var a AuthSource
			if err := s.get(tx, key(pfxAuthSource, id), &a, fmt.Errorf("account: auth source %d is listed under organization %d but missing", id, orgID)); err != nil {
				return err
			}
			out = append(out, a)
			return nil
		})
	})
	return out, total, err
}

// AuthSourcesAfter returns up to limit directory servers of every
// organization with ids above after, in id order: the scheduled import's walk.
func (s *Service) AuthSourcesAfter(ctx context.Context, after uint64, limit int) ([]AuthSource, error) {
	var out []AuthSource
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		return tx.Scan([]byte(pfxAuthSource), key(pfxAuthSource, after+1), func(_, v []byte) error {
			var a AuthSource
			if err := s.codec.unmarshal(v, &a); err != nil {
				return err
			}
			out = append(out, a)
			if len(out) >= limit {
				return kv.ErrStop
			}
			return nil
		})
	})
	return out, err
}

func authSourceChange(activity string, a AuthSource) Change {
	return Change{Activity: activity, OnType: "organization", OnText: a.URL(), OnCompanyID: a.OrganizationID,
		Data: fmt.Sprintf("auth source %d", a.ID)}
}

// validate checks the settings' form: a host name or address, a port, a
// domain of DNS labels, DNs and a filter that parse.
func (a *AuthSource) validate() error {
	if a.OrganizationID == 0 {
		return invalid("company_id", "required")
	}
	if a.Host == "" {
		return invalid("host", "required")
	}
	if !validHost(a.Host) {
		return invalid("host", "not a host name or IP address (no scheme, port or path: those are ssl and port)")
	}
	if a.Port < 0 || a.Port > 65535 {
		return invalid("port", "must be from 1 to 65535, or empty for the default (389, 636 with ssl)")
	}
	if a.Domain == "" && a.BaseDN == "" {
		return invalid("domain", "required (the search base is derived from it)")
	}
	if a.Domain != "" && !validDomain(a.Domain) {
		return invalid("domain", "not a DNS domain such as example.com")
	}
	if a.Login == "" {
		return invalid("login", "required: the DN berth binds as to read the directory")
	}
	if _, err := ldap.ParseDN(a.Login); err != nil || len(a.Login) > 1024 {
		return invalid("login", "not a distinguished name such as cn=reader,dc=example,dc=com")
	}
	if len(a.Password) > 1024 {
		return invalid("password", "longer than 1024 bytes")
	}
	if a.BaseDN != "" {
		if _, err := ldap.ParseDN(a.BaseDN); err != nil || len(a.BaseDN) > 1024 {
			return invalid("base_dn", "not a distinguished name such as ou=people,dc=example,dc=com")
		}
	}
	if a.Filter != "" {
		if _, err := ldap.CompileFilter(a.Filter); err != nil || len(a.Filter) > 1024 {
			return invalid("filter", "not an LDAP search filter such as (objectClass=inetOrgPerson)")
		}
	}
	return nil
}

func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	return validDomain(h)
}

// validDomain reports whether d is dot-separated DNS labels.
func validDomain(d string) bool {
	if len(d) > 253 {
		return false
	}
	for l := range strings.SplitSeq(d, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if r > unicode.MaxASCII || !(r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
				return false
			}
		}
	}
	return true
}
