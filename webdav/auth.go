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
// or Bearer token, with their organization. Basic logins go through
// account.Authenticate, so they count toward the same lockout as the OAuth
// password grant; a success is remembered briefly by a hash of login and
// password, because a WebDAV client sends them with every request and
// argon2 costs a fraction of a second each time. Failures are never
// remembered. Requests that bring the same credentials while they are
// being checked wait for that check and share its answer: a client that
// opens with many requests at once costs one argon2 hash, and counts as
// one login attempt toward the lockout, not one per request (which would
// lock it out by itself).
func (h *Handler) authenticate(r *http.Request) (account.Caller, error) {
	ctx := r.Context()
	if login, password, ok := r.BasicAuth(); ok {
		key := sha256.Sum256([]byte(login + "\x00" + password))
		if e, ok := h.creds.get(key); ok {
			c, err := h.opts.Accounts.Caller(ctx, e.person)
			if err == nil && c.Person.PasswordHash == e.hash && c.Person.HasLogin(login) {
				return c, nil
			}
			h.creds.drop(key)
		}
		p, err := h.creds.once(ctx, key, func() (account.Person, error) {
			p, err := h.opts.Accounts.Authenticate(ctx, login, password)
			if err == nil {
				h.creds.put(key, credEntry{person: p.ID, hash: p.PasswordHash})
			}
			return p, err
		})
		if err != nil {
			return account.Caller{}, err
		}
		return h.opts.Accounts.Caller(ctx, p.ID)
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return account.Caller{}, errNoCredentials
	}
	return h.opts.Accounts.AccessCaller(ctx, strings.TrimSpace(token))
}

// authFailed answers a failed authentication: 401 with a Basic challenge
// where new credentials can help, 403 where they cannot (a locked or
// disabled account), so clients stop re-prompting.
func (h *Handler) authFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, account.ErrAccountLocked):
		plain(w, http.StatusForbidden, "Too many failed logins: the account is locked for a while.")
	case errors.Is(err, account.ErrInactive):
		plain(w, http.StatusForbidden, "The account or its organization is disabled.")
	case errors.Is(err, errNoCredentials), errors.Is(err, account.ErrInvalidCredentials),
		errors.Is(err, account.ErrInvalidToken), errors.Is(err, account.ErrNotFound):
		w.Header().Set("WWW-Authenticate", `Basic realm="berth", charset="UTF-8"`)
		plain(w, http.StatusUnauthorized, "Log in with your berth username (or e-mail address) and password.")
	default:
		h.serverError(w, r, err)
	}
}

// credCache remembers recently verified Basic credentials by hash, and
// the checks of credentials under way.
type credCache struct {
	ttl     time.Duration
	max     int
	mu      sync.Mutex
	m       map[[32]byte]credEntry
	flights map[[32]byte]*flight
}

// flight is one check of credentials that concurrent requests bringing
// the same credentials share.
type flight struct {
	done chan struct{} // closed when p and err are set
	p    account.Person
	err  error
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
	return &credCache{ttl: ttl, max: max, m: map[[32]byte]credEntry{}, flights: map[[32]byte]*flight{}}
}

// once runs check for the credentials hashed as k, or, when a check of
// the same credentials is under way, waits for it and returns its answer.
// A check that ended because its own request went away is run again for
// the waiting request.
func (c *credCache) once(ctx context.Context, k [32]byte, check func() (account.Person, error)) (account.Person, error) {
	for {
		c.mu.Lock()
		f, running := c.flights[k]
		if !running {
			f = &flight{done: make(chan struct{})}
			c.flights[k] = f
		}
		c.mu.Unlock()
		if !running {
			defer func() {
				c.mu.Lock()
				delete(c.flights, k)
				c.mu.Unlock()
				close(f.done)
			}()
			f.p, f.err = check()
			return f.p, f.err
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return account.Person{}, ctx.Err()
		}
		if !errors.Is(f.err, context.Canceled) && !errors.Is(f.err, context.DeadlineExceeded) {
			return f.p, f.err
		}
	}
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
