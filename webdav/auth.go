package webdav

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"berth/account"
)

// errNoCredentials: the request carries no usable Authorization header.
var errNoCredentials = errors.New("webdav: authentication required")

// authenticate returns the caller behind the request's Basic credentials
// or Bearer token, with their organization.
//
// Basic credentials are a login with a device password (account
// devicepw.go) or with the account's main password. A device password is
// checked first, on every request, by its SHA-256 (no argon2), so its
// revocation, like the end of its machine or its person, takes effect at
// the next request. Anything else is judged as the main password.
//
// Main passwords go through account.Authenticate, so they count toward
// the same lockout as the OAuth password grant (a wrong device password
// is such a wrong password); a success is remembered by a hash of login
// and password, because a WebDAV client sends them with every request
// and argon2 costs a fraction of a second each time. A remembered login
// still goes through account.LoginCallerRef on every request, which
// applies the lock, a disabled account, a new password and the policy at
// once, and through mainPassword (two-step verification); so it is kept
// while in use (credCache), up to a bound, except where the password
// lives in a directory server, which only a full check asks. Failures
// are never remembered. Requests that bring the same credentials
// while they are being checked share that check (account.Authenticate
// does it, for the OAuth password grant too): a client that opens with
// many requests at once with the right password costs one argon2 hash and
// one login attempt toward the lockout, not one per request (which would
// lock it out by itself); with a wrong one, each request counts as a
// failure.
//
// A person who must use device passwords (account.NeedsDevicePassword:
// two-step verification) is refused with their right main password, with
// a 401 that says how to make a device password (a wrong one is a wrong
// password like any other); the right one is remembered all the same, so
// that a client that keeps sending it is refused without another argon2
// hash, and a person who gives up two-step verification gets in with it
// at once.
//
// A person whose organization requires two-step verification and who has
// not enrolled (account.TwoStepDue) is refused whatever they bring, as
// the API refuses them everything but enrollment: 403 with what to do.
//
// The caller is shared with other requests (account's caches hand it
// out, LoginCallerRef): nothing may change it.
func (h *Handler) authenticate(r *http.Request) (*account.Caller, error) {
	c, err := h.credentials(r)
	if err != nil {
		return nil, err
	}
	if err := h.opts.Accounts.TwoStepDue(r.Context(), c); err != nil {
		return nil, err
	}
	return c, nil
}

// credentials is authenticate's reading of the Authorization header.
func (h *Handler) credentials(r *http.Request) (*account.Caller, error) {
	ctx := r.Context()
	if login, password, ok := r.BasicAuth(); ok {
		return h.basic(ctx, login, password)
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, errNoCredentials
	}
	return h.opts.Accounts.AccessCallerRef(ctx, strings.TrimSpace(token))
}

// basic is authenticate for Basic credentials.
func (h *Handler) basic(ctx context.Context, login, password string) (*account.Caller, error) {
	key := sha256.Sum256([]byte(login + "\x00" + password))
	if e, ok := h.creds.get(key); ok {
		c, err := h.opts.Accounts.LoginCallerRef(ctx, e.person, login, e.hash)
		switch {
		case err == nil:
			return h.mainPassword(ctx, c, login)
		case errors.Is(err, account.ErrInactive), errors.Is(err, account.ErrPasswordExpired):
			// Right credentials, refused all the same: no
			// need to hash them again to say so.
			h.creds.drop(key)
			return nil, err
		}
		// Anything else, a lock or the address's throttle too, is
		// asked again in full: account.Authenticate refuses those
		// unchecked (no hash) and holds the answer as it holds a
		// guess's (Lockout.RefusalDelay), where one given at once
		// from here told a guesser that the guess was right.
		h.creds.drop(key)
	}
	if c, ok, err := h.opts.Accounts.DeviceCallerRef(ctx, login, password); ok || err != nil {
		return c, err
	}
	p, err := h.opts.Accounts.Authenticate(ctx, login, password)
	if err != nil {
		return nil, err
	}
	h.creds.put(key, credEntry{person: p.ID, hash: p.PasswordHash, directory: p.AuthSourceID != 0})
	c, err := h.opts.Accounts.Caller(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return h.mainPassword(ctx, &c, login)
}

// mainPassword lets c in with their main password unless they must use a
// device password. Whether they must enroll first is authenticate's
// question, asked once per request; only a refusal here asks it first,
// since a device password would not let them in either.
func (h *Handler) mainPassword(ctx context.Context, c *account.Caller, login string) (*account.Caller, error) {
	need, err := h.opts.Accounts.NeedsDevicePassword(ctx, c)
	if err != nil {
		return nil, err
	}
	if need {
		// Enrollment comes first: a device password would not let them in.
		if err := h.opts.Accounts.TwoStepDue(ctx, c); err != nil {
			return nil, err
		}
		h.log.Warn("webdav: main password refused: the account uses two-step verification and signs in over WebDAV with a device password",
			"login", login, "person", c.Person.ID)
		return nil, account.ErrDevicePasswordRequired
	}
	return c, nil
}

// credCache remembers verified Basic credentials by hash. An entry is
// forgotten once unused for ttl, and maxAge after its full check
// (account.Authenticate) however much it is used: a client that works
// all day costs one argon2 hash, one login record and one refresh of its
// known address (account.Authenticate's bookkeeping, whose record lasts
// Lockout.KnownAddressTTL, 30 days) every maxAge, not every ttl.
//
// Keeping an entry in use is safe because it proves only that the
// password was once right against hash: every request still asks
// account.LoginCallerRef, where a new password (another hash), a
// disabled person or organization, a lock, an expired password or a
// changed policy refuses it at once, and mainPassword, where two-step
// verification does. What no request sees is a password changed, or an
// account disabled, in a directory server (LDAP): berth asks it only in
// a full check, so a directory account's entry is not kept by use, and
// such a change is seen within ttl, as before.
type credCache struct {
	ttl    time.Duration // unused this long, an entry is forgotten
	maxAge time.Duration // this long after its full check, used or not
	max    int
	now    func() time.Time
	mu     sync.Mutex
	m      map[[32]byte]credEntry
}

// credEntry is a verified login. hash is the password hash it was verified
// against: a new password (which also ends the person's sessions) changes
// it, so the old password stops working at once, not when the entry expires.
type credEntry struct {
	person uint64
	hash   string
	// directory: the person's password lives in a directory server,
	// so the entry is not kept by use (credCache).
	directory bool
	checked   time.Time // the full check
	expires   time.Time
}

func newCredCache(ttl, maxAge time.Duration, size int) *credCache {
	return &credCache{ttl: ttl, maxAge: max(maxAge, ttl), max: size, now: time.Now, m: map[[32]byte]credEntry{}}
}

// get returns the entry of k, kept for another ttl from now (up to maxAge
// after its check) unless it is a directory account's.
func (c *credCache) get(k [32]byte) (credEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	now := c.now()
	if !ok || now.After(e.expires) {
		delete(c.m, k)
		return credEntry{}, false
	}
	if !e.directory {
		until := now.Add(c.ttl)
		if bound := e.checked.Add(c.maxAge); until.After(bound) {
			until = bound
		}
		if until.After(e.expires) {
			e.expires = until
			c.m[k] = e
		}
	}
	return e, true
}

func (c *credCache) put(k [32]byte, e credEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.m) >= c.max {
		for k, e := range c.m {
			if now.After(e.expires) {
				delete(c.m, k)
			}
		}
		for k := range c.m { // still full: drop arbitrary entries
			if len(c.m) < c.max {
				break
			}
			delete(c.m, k)
		}
	}
	e.checked, e.expires = now, now.Add(c.ttl)
	c.m[k] = e
}

func (c *credCache) drop(k [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
