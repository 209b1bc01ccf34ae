package account

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"berth/kv"
)

// Authenticate checks login (username or e-mail address, case-insensitive)
// and password. It serves the OAuth password grant and WebDAV Basic auth
// alike, so both share one failure counter and lock.
//
// Attempts with the same login and password made while one of them is
// being checked wait for that check: a right password then costs one
// argon2 hash and counts as one attempt, however many requests (a WebDAV
// client opening with a burst, several devices logging in at once) brought
// it; counted one by one, as many right ones as MaxFailures in flight would
// refuse the next. A wrong password shared that way also counts once: a
// file manager that opens with a burst of requests carrying a mistyped
// saved password would otherwise lock its user out at once, and a guesser
// gains nothing from sending the same guess several times at once, while
// different guesses are checked, and counted, each on its own (as are the
// same ones one after the other). Each caller stops waiting when its own
// ctx ends. Once all of them have, the check gives up its place in the
// queue for an argon2 slot (its attempt then counts as failed): a hash
// nobody waits for would only delay the logins behind it, and a client
// could otherwise queue hashes faster than they are computed without
// even keeping its connection.
//
// Errors:
//   - ErrInvalidCredentials: unknown login or wrong password. An unknown
//     login costs the same argon2 work as a known one.
//   - ErrAccountLocked, inside a *LockedError that says until when:
//     Options.Lockout.MaxFailures failures within
//     Lockout.Window lock the login for Lockout.Duration; the failure that
//     reaches the threshold already returns ErrAccountLocked, and while the
//     lock holds no password is checked. Unknown logins lock the same way,
//     so lockout does not reveal which accounts exist. The counter and the
//     lock are kv keys with a TTL, so they vanish without a sweeper.
//     Each attempt is reserved before its password is checked and counted
//     in memory until it is settled, so attempts made at the same time
//     cannot all pass the lock check: with MaxFailures of them still being
//     checked, a further one is refused. A failed attempt is one kv
//     transaction (attempt.go says how).
//   - ErrTooManyAttempts, inside a *ThrottledError: the client address
//     (WithClientAddr) failed Lockout.AddressMaxFailures times within
//     Lockout.AddressWindow; its attempts are refused unchecked for
//     Lockout.AddressDuration, whatever login they name, and count on no
//     account. Where the person signed in from the address's network
//     within Lockout.KnownAddressTTL, neither this nor the account's lock
//     applies: such attempts count on a counter of that pair, with the
//     account's limits. A refusal of a client with an address is answered
//     after Lockout.RefusalDelay.
//   - ErrBusy: Options.MaxHashQueue checks already wait for an argon2
//     slot; nothing was checked or counted, and RetryAfter says when to
//     try again.
//   - ErrInactive: the password is right but the person or the
//     organization is disabled (checked only after the password, so it
//     tells nothing to someone guessing).
//   - ErrPasswordExpired, with the person: the password is right but
//     older than the organization policy's change_password_frequency
//     (Policy.PasswordExpired); the person signs in with
//     SignInWithNewPassword.
//
// A successful login resets the account's failure counter (not the
// address's). Each failed check (one per distinct attempt, however many
// callers shared it) is logged at warn with the login and the client
// address, never the password, and counted in berth_login_failures_total
// by reason (a check all its callers left is not: no password was
// judged); a check that locks the login is logged too and counted in
// berth_account_lockouts_total, one that throttles the address in
// berth_address_lockouts_total. Refusals for a throttled address or a
// full queue are counted (address_locked, busy) and logged at debug.
func (s *Service) Authenticate(ctx context.Context, login, password string) (Person, error) {
	// The address is part of the key: an attempt from another address is
	// counted on that address's own counter, not carried by this one's.
	sum := sha256.Sum256([]byte(ClientAddr(ctx).String() + "\x00" + login + "\x00" + password))
	key := string(sum[:])
	s.checksMu.Lock()
	c := s.checks[key]
	if c == nil {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &loginCheck{cancel: cancel, done: make(chan struct{})}
		s.checks[key] = c
		go func() {
			defer cancel()
			c.p, c.err = s.authenticate(cctx, login, password)
			s.checksMu.Lock()
			if s.checks[key] == c {
				delete(s.checks, key)
			}
			s.checksMu.Unlock()
			close(c.done)
		}()
	}
	c.waiters++
	s.checksMu.Unlock()
	select {
	case <-c.done:
		return c.p, c.err
	case <-ctx.Done():
		s.checksMu.Lock()
		if c.waiters--; c.waiters == 0 {
			// Nobody is left for its answer: a caller arriving now
			// starts a check of its own.
			if s.checks[key] == c {
				delete(s.checks, key)
			}
			c.cancel()
		}
		s.checksMu.Unlock()
		return Person{}, ctx.Err()
	}
}

// loginCheck is one password check, shared by the Authenticate calls that
// bring the same login and password while it runs.
type loginCheck struct {
	cancel  context.CancelFunc // ends the check's wait for an argon2 slot
	waiters int                // calls still waiting for it; Service.checksMu guards it
	done    chan struct{}      // closed once p and err are set
	p       Person
	err     error
}

// authenticate is Authenticate's check of one attempt.
func (s *Service) authenticate(ctx context.Context, login, password string) (Person, error) {
	var (
		p         Person
		known     bool
		orgLive   bool   // the organization and every ancestor active and not deleted
		pol       Policy // the person's organization's
		knownAddr bool   // the person signed in from this address's network before
	)
	addr := ClientAddr(ctx)
	subject := s.loginSubject(login, 0)
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		p, err = s.personByLogin(tx, login)
		switch {
		case errors.Is(err, ErrNotFound):
			known = false
			return nil
		case err != nil:
			return err
		}
		known = true
		subject = s.loginSubject(login, p.ID)
		if knownAddr, err = s.knownAddress(tx, p.ID, addr); err != nil {
			return err
		}
		orgs, err := s.chain(tx, p.OrganizationID, notFoundf("organization %d", p.OrganizationID))
		if err != nil {
			return err
		}
		orgLive = live(orgs) == nil
		if len(orgs) > 0 {
			pol = effectivePolicy(orgs)
		}
		return nil
	})
	if err != nil {
		return Person{}, err
	}
	at, err := s.reserve(ctx, s.counters(subject, p.ID, addr, knownAddr), addr)
	if err != nil {
		switch {
		case errors.Is(err, ErrAccountLocked):
			s.loginFailed(login, addr, reasonLocked, err)
		case errors.Is(err, ErrTooManyAttempts):
			s.addressRefused(login, addr, err)
		}
		s.refusalDelay(ctx, addr)
		return Person{}, err
	}
	// From here the attempt counts as a failure unless it succeeds, also
	// when the check below is cut short (every caller left while it
	// waited for an argon2 slot): only that wait follows ctx, the
	// settling of the attempt does not. A check refused a place in the
	// queue (ErrBusy) judged nothing and counts as nothing.
	settle := context.WithoutCancel(ctx)
	ok := false
	if known && len(password) <= maxPasswordSize {
		ok, err = s.verifySecret(ctx, p, password)
	} else {
		err = s.dummyVerify(ctx, password)
	}
	if err != nil {
		if errors.Is(err, ErrBusy) && ctx.Err() == nil {
			s.release(at)
			s.busy(login, addr)
			return Person{}, err
		}
		if ctx.Err() != nil {
			// The failure may be the one that locks the login; a
			// store that could not count it says so beside ctx's error.
			st, ferr := s.settleFailure(settle, at, known, p, "abandoned")
			s.settledLog(login, addr, st)
			if ferr == nil {
				ferr = st.err()
			}
			err = errors.Join(err, ferr)
		} else {
			s.release(at)
		}
		return Person{}, err
	}
	if !ok {
		reason := reasonBadPassword
		if !known {
			reason = reasonUnknownLogin
		}
		st, ferr := s.settleFailure(settle, at, known, p, reason)
		if ferr == nil {
			ferr = st.err()
		}
		s.loginFailed(login, addr, reason, ferr)
		s.settledLog(login, addr, st)
		return Person{}, ferr
	}
	// The login, or the refusal of a disabled person, is recorded in
	// the transaction that settles the attempt.
	if err := s.settle(at, func() error {
		return s.db.Update(settle, func(tx kv.Txn) error {
			if err := s.settleSuccess(tx, at, p.ID); err != nil {
				return err
			}
			if !p.Active || !orgLive {
				return s.record(settle, tx, loginFailedChange(p, reasonInactive))
			}
			c := personChange(ActLogin, p)
			c.Actor = Caller{Person: p}.Actor()
			return s.record(settle, tx, c)
		})
	}); err != nil {
		return Person{}, err
	}
	if !p.Active || !orgLive {
		s.loginFailed(login, addr, reasonInactive, ErrInactive)
		return Person{}, ErrInactive
	}
	if pol.PasswordExpiredFor(p, s.now()) {
		// The person is returned with the error: the password was
		// right, and SignInWithNewPassword goes on from here.
		return p, fmt.Errorf("%w: it was set %s and the policy asks for a new one every %s",
			ErrPasswordExpired, p.PasswordChanged.UTC().Format(time.DateOnly), pol.ChangePasswordAfter())
	}
	return p, nil
}

// SignInWithNewPassword is Authenticate that also replaces the person's
// password with newPassword, as one sign-in: the way a person whose
// password change_password_frequency has expired gets back in (the OAuth
// password grant's new_password), and open to anyone at any sign-in. It
// checks login and password exactly as Authenticate does (the lockout
// counts them), accepts an expired password, then sets newPassword as
// SetPassword does, which ends the person's other sessions. It returns the
// person with the new password.
//
// Errors: those of Authenticate but ErrPasswordExpired; ErrInvalid (field
// new_password) when newPassword is too short or too long, or the same
// as the current one.
func (s *Service) SignInWithNewPassword(ctx context.Context, login, password, newPassword string) (Person, error) {
	p, err := s.Authenticate(ctx, login, password)
	if err != nil && !errors.Is(err, ErrPasswordExpired) {
		return Person{}, err
	}
	if newPassword == password {
		return Person{}, invalid("new_password", "the same as the current password")
	}
	if err := s.checkPassword(newPassword); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return Person{}, invalid("new_password", fe.Reason)
		}
		return Person{}, err
	}
	// The person changes their own password, proving the current one:
	// a change, not a reset (which SetPassword takes a change without
	// the person as actor for, and which ends their device passwords).
	// The token route that calls this has no actor yet.
	if err := s.SetPassword(WithActor(ctx, Caller{Person: p}.Actor()), p.ID, newPassword); err != nil {
		return Person{}, err
	}
	return s.Person(ctx, p.ID)
}

// LoginCallerRef returns the caller behind login, whose password Authenticate
// verified earlier against passwordHash, for a front end that remembers
// verified credentials so as not to hash the password again on every
// request (WebDAV Basic). Every check of Authenticate but the hash holds
// on each call, so a change takes effect at the next request, not when
// the front end forgets the credentials:
//   - ErrAccountLocked while the login is locked by failed attempts,
//     but at an address the person is known at (Authenticate) whose own
//     counter is not locked, and at such an address while that counter
//     is locked;
//   - ErrTooManyAttempts while ctx's address is throttled, unless the
//     person is known there;
//   - ErrInactive for a disabled person or organization;
//   - ErrInvalidCredentials once the password changed, or login no longer
//     names the person;
//   - ErrNotFound for a person who no longer exists;
//   - ErrPasswordExpired once the password grows older than
//     change_password_frequency allows.
//
// Answers are kept until the store's next commit outside file contents
// (kv.MetaGeneration: all read here is account records): a lock, like any
// change that matters here, is such a commit. A lock that ends does so
// without one, and only ever lets more in. Attempts under way, which
// refuse it as they refuse Authenticate's (passwordLock), begin without
// one too: while there are some on the person's or the address's
// counters, the answer is read again.
//
// The Caller handed out is the cached one, which every request of the
// person shares while it is cached: the caller must not change it (nor
// what its slices hold). A WebDAV request, which signs in every time,
// then copies no ~750-byte Caller from the cache and from function to
// function.
func (s *Service) LoginCallerRef(ctx context.Context, personID uint64, login, passwordHash string) (*Caller, error) {
	gen := kv.MetaGeneration(s.db)
	c, ok := s.callers.logins.Get(gen, callerAt{personID, AddrNet(ClientAddr(ctx))})
	if ok && s.underWayFor(personID, ClientAddr(ctx)) {
		// Attempts under way may refuse it (passwordLock), and
		// came without a commit: ask again.
		ok = false
	}
	if !ok {
		var err error
		if c, err = s.readLoginCaller(ctx, gen, personID); err != nil {
			return nil, err
		}
	}
	if c.Person.PasswordHash != passwordHash || !c.Person.HasLogin(login) {
		return nil, ErrInvalidCredentials
	}
	if pol := c.Organization.Policy; pol.PasswordExpiredFor(c.Person, s.now()) {
		return nil, fmt.Errorf("%w: the policy asks for a new one every %s", ErrPasswordExpired, pol.ChangePasswordAfter())
	}
	return c, nil
}

// readLoginCaller reads LoginCallerRef's answer for personID and keeps it
// where it may be kept. It is a function of its own so that the Caller its
// transaction fills escapes only on a miss: captured by the closure in
// LoginCallerRef, it was allocated (some 750 bytes) on every request.
func (s *Service) readLoginCaller(ctx context.Context, gen, personID uint64) (*Caller, error) {
	c := new(Caller)
	cache := true
	err := s.db.View(ctx, func(tx kv.Txn) error {
		// A lock strangers' guesses brought does not keep the
		// person out where they sign in from (a known address,
		// Authenticate), nor does their address's throttle; that
		// answer holds while the address is known only, so it is
		// not kept. Every other answer is kept for the network the
		// lockout counts this address as (AddrNet) only: another
		// may be throttled, or known.
		exempt, err := s.passwordLock(ctx, tx, personID)
		if err != nil {
			return err
		}
		cache = !exempt
		*c, err = s.activeCaller(tx, personID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if cache {
		s.callers.logins.Put(gen, callerAt{personID, AddrNet(ClientAddr(ctx))}, c)
	}
	return c, nil
}

// locked returns a *LockedError while subject is locked.
func (s *Service) locked(tx kv.Txn, subject []byte) error {
	var lr lockRecord
	switch err := s.get(tx, keyBytes(pfxLock, subject), &lr, ErrNotFound); {
	case err == nil && s.now().Before(lr.Until):
		return lockedError(lr.Until, s.now())
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	return nil
}

// loginSubject names the lockout counter of a login: the person when
// known, else a hash of the folded login (fixed length, no raw input in keys).
func (s *Service) loginSubject(login string, personID uint64) []byte {
	if personID != 0 {
		return key("p", personID)
	}
	h := sha256.Sum256([]byte(foldLogin(login)))
	return append([]byte("l"), h[:]...)
}

// loginFailedChange is the record of a failed login of p. Who tried is
// not known, so the actor is the system; the reason (a metrics reason:
// bad_password, inactive) is the action text.
func loginFailedChange(p Person, reason string) Change {
	c := personChange(ActLoginFailed, p)
	c.Actor, c.Action = System, reason
	return c
}
