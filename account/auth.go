package account

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"berth/kv"
)

// failRecord counts failed logins of one subject within the lockout window.
type failRecord struct {
	Count int       `cbor:"1,keyasint"`
	First time.Time `cbor:"2,keyasint"` // first failure of the series; the window starts here
}

// lockRecord marks a locked subject.
type lockRecord struct {
	Until time.Time `cbor:"1,keyasint"`
}

// Authenticate checks login (username or e-mail address, case-insensitive)
// and password. It serves the OAuth password grant and WebDAV Basic auth
// alike, so both share one failure counter and lock.
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
//   - ErrInactive: the password is right but the person or the
//     organization is disabled (checked only after the password, so it
//     tells nothing to someone guessing).
//
// A successful login resets the failure counter.
func (s *Service) Authenticate(ctx context.Context, login, password string) (Person, error) {
	var (
		p       Person
		known   bool
		locked  bool
		failing bool
		org     Organization
	)
	subject := s.loginSubject(login, 0)
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		p, err = s.personByLogin(tx, login)
		switch {
		case errors.Is(err, ErrNotFound):
			known = false
		case err != nil:
			return err
		default:
			known = true
			subject = s.loginSubject(login, p.ID)
			if err := s.get(tx, key(pfxOrg, p.OrganizationID), &org, notFoundf("organization %d", p.OrganizationID)); err != nil {
				return err
			}
		}
		var lr lockRecord
		switch err := s.get(tx, keyBytes(pfxLock, subject), &lr, ErrNotFound); {
		case err == nil:
			locked = s.now().Before(lr.Until)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		failing, err = exists(tx, keyBytes(pfxFail, subject))
		return err
	})
	if err != nil {
		return Person{}, err
	}
	if locked {
		return Person{}, ErrAccountLocked
	}
	ok := false
	if known && len(password) <= maxPasswordSize {
		ok, err = s.verifyPassword(ctx, p.PasswordHash, password)
	} else {
		err = s.dummyVerify(ctx, password)
	}
	if err != nil {
		return Person{}, err
	}
	if !ok {
		return Person{}, s.recordFailure(ctx, subject)
	}
	if failing {
		if err := s.db.Update(ctx, func(tx kv.Txn) error { return tx.Delete(keyBytes(pfxFail, subject)) }); err != nil {
			return Person{}, err
		}
	}
	if !p.Active || !org.Active {
		return Person{}, ErrInactive
	}
	return p, nil
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

// recordFailure counts a failed login and locks the subject at the
// threshold. It returns the error the caller should report.
func (s *Service) recordFailure(ctx context.Context, subject []byte) error {
	lo := s.opts.Lockout
	lockNow := false
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		lockNow = false
		now := s.now()
		// A concurrent attempt may have locked the subject since our check.
		var lr lockRecord
		switch err := s.get(tx, keyBytes(pfxLock, subject), &lr, ErrNotFound); {
		case err == nil && now.Before(lr.Until):
			lockNow = true
			return nil
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
		fr.Count++
		if fr.Count >= lo.MaxFailures {
			lockNow = true
			if err := tx.Delete(keyBytes(pfxFail, subject)); err != nil {
				return err
			}
			return s.putTTL(tx, keyBytes(pfxLock, subject), lockRecord{Until: now.Add(lo.Duration)}, lo.Duration)
		}
		return s.putTTL(tx, keyBytes(pfxFail, subject), &fr, lo.Window-now.Sub(fr.First))
	})
	if err != nil {
		return err
	}
	if lockNow {
		return ErrAccountLocked
	}
	return ErrInvalidCredentials
}
