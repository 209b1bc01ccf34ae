package webdav

import (
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
// or Bearer token, with their organization. Basic logins go through
// account.Authenticate, so they count toward the same lockout as the OAuth
// password grant; a success is remembered briefly by a hash of login and
// password, because a WebDAV client sends them with every request and
// argon2 costs a fraction of a second each time. A remembered login still
// goes through account.LoginCaller on every request, which applies the
// lock, a disabled account and a new password at once. Failures are never
// remembered. Requests that bring the same credentials while they are
// being checked share that check (account.Authenticate does it, for the
// OAuth password grant too): a client that opens with many requests at
// once with the right password costs one argon2 hash and one login
// attempt toward the lockout, not one per request (which would lock it
// out by itself); with a wrong one, each request counts as a failure.
func (h *Handler) authenticate(r *http.Request) (account.Caller, error) {
	ctx := r.Context()
	if login, password, ok := r.BasicAuth(); ok {
		key := sha256.Sum256([]byte(login + "\x00" + password))
		if e, ok := h.creds.get(key); ok {
			c, err := h.opts.Accounts.LoginCaller(ctx, e.person, login, e.hash)
			switch {
			case err == nil:
				return c, nil
			case errors.Is(err, account.ErrAccountLocked), errors.Is(err, account.ErrInactive),
				errors.Is(err, account.ErrPasswordExpired):
				// Right credentials, refused all the same: no
				// need to hash them again to say so.
				h.creds.drop(key)
				return account.Caller{}, err
			}
			h.creds.drop(key)
		}
		p, err := h.opts.Accounts.Authenticate(ctx, login, password)
		if err != nil {
			return account.Caller{}, err
		}
		h.creds.put(key, credEntry{person: p.ID, hash: p.PasswordHash})
		return h.opts.Accounts.Caller(ctx, p.ID)
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return account.Caller{}, errNoCredentials
	}
	return h.opts.Accounts.AccessCaller(ctx, strings.TrimSpace(token))
}

// credCache remembers recently verified Basic credentials by hash.
type credCache struct {
	ttl time.Duration
	max int
	mu  sync.Mutex
	m   map[[32]byte]credEntry
}

// credEntry is a verified login. hash is the password hash it was verified
// against: a new password (which also ends the person's sessions) changes
// it, so the old password stops working at once, not when the entry expires.
type credEntry struct {
	person  uint64
	hash    string
	expires time.Time
}

func newCredCache(ttl time.Duration, max int) *credCache {
	return &credCache{ttl: ttl, max: max, m: map[[32]byte]credEntry{}}
}

func (c *credCache) get(k [32]byte) (credEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || time.Now().After(e.expires) {
		delete(c.m, k)
		return credEntry{}, false
	}
	return e, true
}

func (c *credCache) put(k [32]byte, e credEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
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
	e.expires = now.Add(c.ttl)
	c.m[k] = e
}

func (c *credCache) drop(k [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
