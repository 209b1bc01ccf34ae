package account

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/netip"
	"time"

	"berth/kv"
)

// twoStepSubject is the lockout subject that counts person id's wrong
// two-step codes (keys.go).
func twoStepSubject(id uint64) []byte {
	return key("t", id)
}

// VerifyTwoStep is the second step of a sign-in whose password
// Authenticate (or SignInWithNewPassword) has just accepted for p: it
// returns nil when p has no two-step verification or code is right, and
// consumes the code. code is the current code of p's mode, or one of p's
// recovery codes (each good once).
//
// Errors:
//   - ErrMissingTOTP, in a *TwoStepError with p's mode, for an empty
//     code. For e-mail and SMS a code is sent first, at most once per
//     TwoStep.ResendAfter (the one sent before stays valid meanwhile).
//   - ErrInvalidTOTP, in a *TwoStepError: a wrong code; a TOTP code of
//     a time step not after the last one accepted (a replay), or older
//     than the clock skew allows; an e-mail or SMS code already used or
//     past TwoStep.CodeTTL.
//   - ErrAccountLocked, in a *LockedError: Lockout.MaxFailures wrong
//     codes within Lockout.Window lock the account for Lockout.Duration,
//     as wrong passwords do: every sign-in is then refused before its
//     password is checked, and Unlock ends it.
//   - ErrCodeNotSent: the e-mail or SMS code could not be sent.
//
// Each refused code is logged at warn (never the code) and counted in
// berth_two_step_failures_total{mode,reason}; the failure, and the lock,
// go to the activity log as failed logins do.
func (s *Service) VerifyTwoStep(ctx context.Context, p Person, code string) error {
	var rec twoStepRecord
	var ok bool
	if err := s.db.View(ctx, func(tx kv.Txn) (err error) {
		rec, ok, err = s.readTwoStep(tx, p.ID)
		return err
	}); err != nil || !ok {
		return err
	}
	if code == "" {
		if rec.Mode == TwoStepEmail || rec.Mode == TwoStepSMS {
			if err := s.sendSignInCode(ctx, p, rec); err != nil {
				return err
			}
		}
		return &TwoStepError{Mode: rec.Mode, Err: ErrMissingTOTP}
	}
	// Codes are counted on the person's two-step counter alone: whoever
	// sends one already gave the right password, so the address's
	// throttle, which guards passwords, has nothing to add.
	lo := s.opts.Lockout
	cs := []counter{{kind: accountCounter, subject: twoStepSubject(p.ID), max: lo.MaxFailures, window: lo.Window, lockFor: lo.Duration}}
	at, err := s.reserve(ctx, cs, netip.Addr{})
	if err != nil {
		if errors.Is(err, ErrAccountLocked) {
			s.twoStepFailed(p, rec.Mode, tsLocked, err)
			err = errors.Join(err, s.moveTwoStepLock(context.WithoutCancel(ctx), p.ID))
		}
		return err
	}
	// As in authenticate: once counted, the attempt is settled whatever
	// becomes of the request.
	settle := context.WithoutCancel(ctx)
	reason, err := s.checkTwoStepCode(settle, p.ID, code)
	if err != nil || reason == "" {
		// A right code cleared the count itself (checkTwoStepCode).
		s.release(at)
		return err
	}
	st, ferr := s.settleFailure(settle, at, true, p, "two_step_"+reason)
	if ferr != nil {
		return ferr
	}
	if st.accountLock == nil {
		s.twoStepFailed(p, rec.Mode, reason, nil)
		return &TwoStepError{Mode: rec.Mode, Err: ErrInvalidTOTP}
	}
	s.twoStepFailed(p, rec.Mode, reason, st.accountLock)
	if st.locking {
		s.lockedOut(p.Username, st.accountLock)
	}
	return errors.Join(st.accountLock, s.moveTwoStepLock(settle, p.ID))
}

// checkTwoStepCode checks code against person id's two-step record and
// consumes it when right (the TOTP step, the e-mail or SMS code, the
// recovery code), clearing the count of wrong codes. It returns "" for a
// right code, else why it was refused (tsWrong, tsReplayed, tsExpired).
func (s *Service) checkTwoStepCode(ctx context.Context, id uint64, code string) (reason string, err error) {
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		reason = tsWrong
		rec, ok, err := s.readTwoStep(tx, id)
		if err != nil || !ok {
			return err // reset meanwhile: the code is wrong
		}
		now := s.now()
		if rc, isRecovery := recoveryForm(code); isRecovery {
			h := codeHash("recovery", id, rc)
			for i, r := range rec.Recovery {
				if subtle.ConstantTimeCompare(r, h) == 1 {
					rec.Recovery = append(rec.Recovery[:i:i], rec.Recovery[i+1:]...)
					reason = ""
					s.log.Info("two-step recovery code used", "person_id", id, "left", len(rec.Recovery))
					if err := s.put(tx, key(pfxTwoStep, id), &rec); err != nil {
						return err
					}
					return tx.Delete(keyBytes(pfxFail, twoStepSubject(id)))
				}
			}
			return nil
		}
		switch rec.Mode {
		case TwoStepAuthenticator:
			step, stale, found := totpStep(rec.Secret, code, now)
			switch {
			case !found:
				return nil
			case step <= rec.LastStep:
				reason = tsReplayed
				return nil
			case stale:
				reason = tsExpired
				return nil
			}
			rec.LastStep = step
			if err := s.put(tx, key(pfxTwoStep, id), &rec); err != nil {
				return err
			}
		default:
			var c twoStepCode
			switch err := s.get(tx, key(pfxTwoStepCode, id), &c, ErrNotFound); {
			case errors.Is(err, ErrNotFound):
				return nil
			case err != nil:
				return err
			}
			if subtle.ConstantTimeCompare(c.Code, codeHash("signin", id, code)) != 1 {
				return nil
			}
			switch {
			case c.Used:
				reason = tsReplayed
				return nil
			case !now.Before(c.Expires):
				reason = tsExpired
				return nil
			}
			c.Used = true
			if err := s.putTTL(tx, key(pfxTwoStepCode, id), &c, c.Expires.Sub(now)); err != nil {
				return err
			}
		}
		reason = ""
		return tx.Delete(keyBytes(pfxFail, twoStepSubject(id)))
	})
	return reason, err
}

// sendSignInCode sends p a new e-mail or SMS sign-in code, unless one was
// sent less than ResendAfter ago and is still unused.
func (s *Service) sendSignInCode(ctx context.Context, p Person, rec twoStepRecord) error {
	o := s.opts.TwoStep
	now := s.now()
	var fresh bool
	if err := s.db.View(ctx, func(tx kv.Txn) error {
		var c twoStepCode
		err := s.get(tx, key(pfxTwoStepCode, p.ID), &c, ErrNotFound)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		fresh = err == nil && !c.Used && now.Before(c.Expires) && now.Sub(c.Sent) < o.ResendAfter
		return nil
	}); err != nil || fresh {
		return err
	}
	code, err := newCode()
	if err != nil {
		return err
	}
	to := p.Email
	if rec.Mode == TwoStepSMS {
		to = rec.Phone
	}
	c := twoStepCode{Code: codeHash("signin", p.ID, code), Expires: now.Add(o.CodeTTL), Sent: now}
	if err := s.sendCode(ctx, p, CodeMessage{Mode: rec.Mode, To: to, Code: code, Purpose: CodeSignIn, Expires: c.Expires}); err != nil {
		return err
	}
	return s.db.Update(context.WithoutCancel(ctx), func(tx kv.Txn) error {
		return s.putTTL(tx, key(pfxTwoStepCode, p.ID), &c, o.CodeTTL)
	})
}

// moveTwoStepLock copies the lock that wrong codes brought on person id's
// two-step subject onto the person's login subject: the whole account is
// then locked, so that no password is checked while it holds (and
// LoginCallerRef, over WebDAV, refuses too), and Unlock ends it. The
// two-step subject keeps its lock: where the person is known
// (Authenticate), the account's lock does not apply and the password is
// let in, and a guesser who has the password and signed in there once
// would otherwise get MaxFailures more codes after every right password,
// without waiting.
func (s *Service) moveTwoStepLock(ctx context.Context, id uint64) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var lr lockRecord
		ts := keyBytes(pfxLock, twoStepSubject(id))
		switch err := s.get(tx, ts, &lr, ErrNotFound); {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		left := lr.Until.Sub(s.now())
		if left <= 0 {
			return nil
		}
		return s.putTTL(tx, keyBytes(pfxLock, s.loginSubject("", id)), &lr, max(left, time.Second))
	})
}
