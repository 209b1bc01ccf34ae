package account

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"golang.org/x/sync/singleflight"

	"berth/kv"
)

// failRecord counts the login attempts of one subject within the lockout
// window that have not succeeded: failed ones and those still being checked.
type failRecord struct {
	Count int       `cbor:"1,keyasint"`
	First time.Time `cbor:"2,keyasint"` // first attempt of the series; the window starts here
}

// lockRecord marks a locked subject.
type lockRecord struct {
	Until time.Time `cbor:"1,keyasint"`
}

// Authenticate checks login (username or e-mail address, case-insensitive)
// and password. It serves the OAuth password grant and WebDAV Basic auth
// alike, so both share one failure counter and lock.
//
// Attempts with the same login and password made while one of them is
// being checked wait for that check: a right password then costs one
// argon2 hash and counts as one attempt, however many requests (a WebDAV
// client opening with a burst, several devices logging in at once) brought
// it; counted one by one, as many right ones as MaxFailures in flight would
// refuse the next. A wrong password still counts once per attempt, as if
// each had been checked, so a burst of them locks the account as a series
// of them does. Each caller stops waiting when its own ctx ends; the check
// runs to its end regardless (it counts either way).
//
// Errors:
//   - ErrInvalidCredentials: unknown login or wrong password. An unknown
//     login costs the same argon2 work as a known one.
//   - ErrAccountLocked: Options.Lockout.MaxFailures failures within
//     Lockout.Window lock the login for Lockout.Duration; the failure that
//     reaches the threshold already returns ErrAccountLocked, and while the
//     lock holds no password is checked. Unknown logins lock the same way,
//     so lockout does not reveal which accounts exist. The counter and the
//     lock are kv keys with a TTL, so they vanish without a sweeper.
//     Each attempt is counted before its password is checked, so attempts
//     made at the same time cannot all pass the lock check: with
//     MaxFailures of them still being checked, a further one is refused.
//   - ErrInactive: the password is right but the person or the
//     organization is disabled (checked only after the password, so it
//     tells nothing to someone guessing).
//
// A successful login resets the failure counter.
func (s *Service) Authenticate(ctx context.Context, login, password string) (Person, error) {
	key := sha256.Sum256([]byte(login + "\x00" + password))
	ran := false
	check := s.logins.DoChan(string(key[:]), func() (any, error) {
		ran = true
		return s.authenticate(context.WithoutCancel(ctx), login, password)
	})
	var res singleflight.Result
	select {
	case res = <-check:
	case <-ctx.Done():
		return Person{}, ctx.Err()
	}
	a := res.Val.(attempt)
	if !ran && (errors.Is(res.Err, ErrInvalidCredentials) || errors.Is(res.Err, ErrAccountLocked)) {
		// Another attempt's check found the password wrong: this one
		// counts as a failure of its own, without hashing it again.
		n, err := s.beginAttempt(ctx, a.subject)
		if err != nil {
			return Person{}, err
		}
		return Person{}, s.recordFailure(ctx, a.subject, n)
	}
	return a.person, res.Err
}

// attempt is the outcome of one password check, shared by the attempts
// that waited for it.
type attempt struct {
	person  Person
	subject []byte // the lockout counter's name (loginSubject)
}

// authenticate is Authenticate's check of one attempt.
func (s *Service) authenticate(ctx context.Context, login, password string) (attempt, error) {
	var (
		p     Person
		known bool
		org   Organization
	)
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
		return s.get(tx, key(pfxOrg, p.OrganizationID), &org, notFoundf("organization %d", p.OrganizationID))
	})
	failed := attempt{subject: subject}
	if err != nil {
		return failed, err
	}
	n, err := s.beginAttempt(ctx, subject)
	if err != nil {
		return failed, err
	}
	// From here the attempt counts as a failure unless it succeeds, also
	// when the check below is cut short (a client that leaves mid-check).
	ok := false
	if known && len(password) <= maxPasswordSize {
		ok, err = s.verifyPassword(ctx, p.PasswordHash, password)
	} else {
		err = s.dummyVerify(ctx, password)
	}
	if err != nil {
		return failed, err
	}
	if !ok {
		return failed, s.recordFailure(ctx, subject, n)
	}
	if err := s.db.Update(ctx, func(tx kv.Txn) error { return tx.Delete(keyBytes(pfxFail, subject)) }); err != nil {
		return failed, err
	}
	if !p.Active || !org.Active {
		return failed, ErrInactive
	}
	return attempt{person: p, subject: subject}, nil
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

// beginAttempt counts a login attempt of subject before its password is
// checked and returns its number in the current window. It returns
// ErrAccountLocked while the subject is locked, and when MaxFailures
// attempts of the window have not succeeded, even if some of them are
// still being checked; such a refused attempt is not counted.
func (s *Service) beginAttempt(ctx context.Context, subject []byte) (int, error) {
	lo := s.opts.Lockout
	n := 0
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		now := s.now()
		var lr lockRecord
		switch err := s.get(tx, keyBytes(pfxLock, subject), &lr, ErrNotFound); {
		case err == nil && now.Before(lr.Until):
			return ErrAccountLocked
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
		var fr failRecord
		err := s.get(tx, keyBytes(pfxFail, subject), &fr, ErrNotFound)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err != nil || now.Sub(fr.First) >= lo.Window {
			fr = failRecord{First: now}
		}
		if fr.Count >= lo.MaxFailures {
			return ErrAccountLocked
		}
		fr.Count++
		n = fr.Count
		return s.putTTL(tx, keyBytes(pfxFail, subject), &fr, lo.Window-now.Sub(fr.First))
	})
	return n, err
}

// recordFailure settles a failed attempt, already counted by beginAttempt
// as number attempt: the one that reaches the threshold locks the subject.
// It returns the error the caller should report.
func (s *Service) recordFailure(ctx context.Context, subject []byte, attempt int) error {
	lo := s.opts.Lockout
	lockNow := false
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		lockNow = false
		now := s.now()
		// A concurrent attempt may have locked the subject since ours began.
		var lr lockRecord
		switch err := s.get(tx, keyBytes(pfxLock, subject), &lr, ErrNotFound); {
		case err == nil && now.Before(lr.Until):
			lockNow = true
			return nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
		if attempt < lo.MaxFailures {
			return nil
		}
		lockNow = true
		if err := tx.Delete(keyBytes(pfxFail, subject)); err != nil {
			return err
		}
		return s.putTTL(tx, keyBytes(pfxLock, subject), lockRecord{Until: now.Add(lo.Duration)}, lo.Duration)
	})
	if err != nil {
		return err
	}
	if lockNow {
		return ErrAccountLocked
	}
	return ErrInvalidCredentials
}
