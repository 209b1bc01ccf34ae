package account

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"image/png"
	"time"

	"github.com/pquerna/otp/totp"

	"berth/kv"
)

// TwoStepEnrollment is an enrollment begun, to be confirmed with its
// first code (ConfirmTwoStep) before Expires.
type TwoStepEnrollment struct {
	Mode string
	// URI is the otpauth:// URI of the new secret, and QRCode the same
	// as a PNG image, for an authenticator app to scan; Secret is the
	// base32 secret, for typing in (authenticator only).
	URI    string
	QRCode []byte
	Secret string
	// To is where the confirmation code went: the e-mail address or the
	// phone number (email, sms).
	To      string
	Expires time.Time
}

// TwoStepStatus is what a person's two-step verification is.
type TwoStepStatus struct {
	// Mode is "" when the person signs in with a password alone.
	Mode string
	// Phone is the number of the sms mode.
	Phone string
	// Enrolled is when the mode was confirmed (zero without one).
	Enrolled time.Time
	// RecoveryCodesLeft counts the unused recovery codes.
	RecoveryCodesLeft int
	// Pending is the mode of an enrollment waiting for its first code.
	Pending string
	// Required is the effective policy's require_two_step_auth.
	Required bool
}

// qrSize is the side, in pixels, of an enrollment's QR code: large enough
// for a phone camera at arm's length from a screen.
const qrSize = 256

// EnrollTwoStep begins person id's enrollment in mode
// (TwoStepAuthenticator, TwoStepEmail, TwoStepSMS; phone is the number of
// TwoStepSMS). Nothing changes at sign-in until ConfirmTwoStep accepts a
// first code: for the authenticator, a code of the new secret; for e-mail
// and SMS, the code sent now. A new enrollment replaces one still waiting;
// a mode already enrolled stays in force until the new one is confirmed.
//
// Errors: ErrNotFound; ErrInvalid (field mode: unknown, or a mode this
// server cannot send codes for, or email for a person without an e-mail
// address; field phone: not an E.164 number); ErrCodeNotSent; a
// *ResendError (ErrCodeSentRecently) for an e-mail or SMS code asked for
// too soon after the last, or past enrollmentCodes within the hour.
func (s *Service) EnrollTwoStep(ctx context.Context, id uint64, mode, phone string) (TwoStepEnrollment, error) {
	p, err := s.Person(ctx, id)
	if err != nil {
		return TwoStepEnrollment{}, err
	}
	o := s.opts.TwoStep
	en := TwoStepEnrollment{Mode: mode, Expires: s.now().Add(o.CodeTTL)}
	pend := twoStepPending{Mode: mode, Expires: en.Expires}
	switch mode {
	case TwoStepAuthenticator:
		account := p.Email
		if account == "" {
			account = p.Username
		}
		k, err := totp.Generate(totp.GenerateOpts{Issuer: o.Issuer, AccountName: account})
		if err != nil {
			return TwoStepEnrollment{}, err
		}
		img, err := k.Image(qrSize, qrSize)
		if err != nil {
			return TwoStepEnrollment{}, err
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			return TwoStepEnrollment{}, err
		}
		en.URI, en.QRCode, en.Secret = k.URL(), buf.Bytes(), k.Secret()
		pend.Secret = k.Secret()
	case TwoStepEmail:
		if o.Sender == nil || !o.Email {
			return TwoStepEnrollment{}, invalid("mode", "this server sends no e-mail (no SMTP server configured); use authenticator")
		}
		if p.Email == "" {
			return TwoStepEnrollment{}, invalid("mode", "the account has no e-mail address")
		}
		en.To = p.Email
	case TwoStepSMS:
		if o.Sender == nil || !o.SMS {
			return TwoStepEnrollment{}, invalid("mode", "this server sends no text messages (no two_step.sms_command configured); use authenticator")
		}
		if en.To, err = normalizePhone(phone); err != nil {
			return TwoStepEnrollment{}, err
		}
		pend.Phone = en.To
	default:
		return TwoStepEnrollment{}, invalid("mode", "must be authenticator, email or sms")
	}
	if en.To != "" {
		code, err := newCode()
		if err != nil {
			return TwoStepEnrollment{}, err
		}
		prev, counted, err := s.countEnrollmentCode(ctx, id)
		if err != nil {
			return TwoStepEnrollment{}, err
		}
		if err := s.sendCode(ctx, p, CodeMessage{Mode: mode, To: en.To, Code: code, Purpose: CodeEnrollment, Expires: en.Expires}); err != nil {
			// Not sent: it does not count.
			return TwoStepEnrollment{}, errors.Join(err, s.uncountEnrollmentCode(context.WithoutCancel(ctx), id, prev, counted))
		}
		pend.Code = codeHash("enroll", id, code)
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if ok, err := exists(tx, key(pfxPerson, id)); err != nil || !ok {
			if err == nil {
				err = notFoundf("person %d", id)
			}
			return err
		}
		return s.putTTL(tx, key(pfxTwoStepNew, id), &pend, o.CodeTTL)
	})
	return en, err
}

// Bounds of the e-mail and SMS codes one person's enrollments send: one
// per TwoStepOptions.ResendAfter, and enrollmentCodes within
// enrollmentWindow of the first. An enrollment asks only for the
// person's own password, and the number (or, through a change of the
// e-mail address, the address) is theirs to choose, so without a bound
// anyone with an account had berth text any number, or mail any
// address, as fast as it hashes passwords: SMS pumping, or a flood
// aimed at someone else.
const (
	enrollmentCodes  = 5
	enrollmentWindow = time.Hour
)

// enrollmentCodesSent counts the codes a person's enrollments sent
// (key accttwostepsent/<person>, TTL enrollmentWindow from First). It
// is its own key, not part of the enrollment waiting: an enrollment in
// the authenticator mode, a confirmation's tries running out, or the
// person's own disabling would otherwise clear it between two codes.
type enrollmentCodesSent struct {
	First time.Time `cbor:"1,keyasint"` // the first code of the window
	Last  time.Time `cbor:"2,keyasint"`
	Count int       `cbor:"3,keyasint"`
}

// countEnrollmentCode counts a code about to be sent for person id's
// enrollment, or refuses it with a *ResendError (ErrCodeSentRecently)
// beyond the bounds above. It is counted before it is sent, so that
// enrollments made at once cannot all pass; prev is the count before
// and counted the count it stored, for uncountEnrollmentCode to take
// back when the code does not go.
func (s *Service) countEnrollmentCode(ctx context.Context, id uint64) (prev, counted enrollmentCodesSent, err error) {
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		now := s.now()
		var c enrollmentCodesSent
		switch err := s.get(tx, key(pfxTwoStepSent, id), &c, ErrNotFound); {
		case errors.Is(err, ErrNotFound) || err == nil && !now.Before(c.First.Add(enrollmentWindow)):
			c = enrollmentCodesSent{First: now}
		case err != nil:
			return err
		}
		prev = c
		var wait time.Duration
		if next := c.Last.Add(s.opts.TwoStep.ResendAfter); c.Count > 0 && now.Before(next) {
			wait = next.Sub(now)
		}
		if c.Count >= enrollmentCodes {
			wait = max(wait, c.First.Add(enrollmentWindow).Sub(now))
		}
		if wait > 0 {
			return &ResendError{Left: wait}
		}
		c.Last = now
		c.Count++
		counted = c
		return s.putTTL(tx, key(pfxTwoStepSent, id), &c, c.First.Add(enrollmentWindow).Sub(now))
	})
	return prev, counted, err
}

// uncountEnrollmentCode takes back the code countEnrollmentCode counted
// for person id (counted, from prev) when it was not sent: one off the
// count, and, when nothing was counted since, the last code's time as
// it was. Putting prev back whole, as it did, undid the codes that
// enrollments made at once counted, and sent, between the two steps, so
// one whose sends failed on purpose (a number the gateway refuses) let
// the others send past the bounds.
func (s *Service) uncountEnrollmentCode(ctx context.Context, id uint64, prev, counted enrollmentCodesSent) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var c enrollmentCodesSent
		switch err := s.get(tx, key(pfxTwoStepSent, id), &c, ErrNotFound); {
		case errors.Is(err, ErrNotFound):
			return nil // its window is over: nothing to take back
		case err != nil:
			return err
		case !c.First.Equal(counted.First) || c.Count <= 0:
			return nil // another window: the code is not in it
		}
		if c.Count == counted.Count && c.Last.Equal(counted.Last) {
			c.Last = prev.Last
		}
		c.Count--
		left := c.First.Add(enrollmentWindow).Sub(s.now())
		if c.Count == 0 || left <= 0 {
			return tx.Delete(key(pfxTwoStepSent, id))
		}
		return s.putTTL(tx, key(pfxTwoStepSent, id), &c, left)
	})
}

// ConfirmTwoStep completes person id's enrollment with its first code and
// returns the recovery codes, shown this once (numRecoveryCodes, each
// good for one sign-in in place of a code). From now on the person's
// sign-ins need a code of the new mode; the mode enrolled before, if
// any, and its recovery codes are replaced.
//
// Errors: ErrNotFound; ErrInvalid (field code) when no enrollment waits
// or the code is wrong (maxConfirmTries wrong codes end the enrollment).
func (s *Service) ConfirmTwoStep(ctx context.Context, id uint64, code string) ([]string, error) {
	codes, hashes, err := newRecoveryCodes(id, numRecoveryCodes)
	if err != nil {
		return nil, err
	}
	var refused error
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		refused = nil
		var p Person
		if err := s.get(tx, key(pfxPerson, id), &p, notFoundf("person %d", id)); err != nil {
			return err
		}
		var pend twoStepPending
		err := s.get(tx, key(pfxTwoStepNew, id), &pend, ErrNotFound)
		now := s.now()
		switch {
		case errors.Is(err, ErrNotFound) || err == nil && !now.Before(pend.Expires):
			refused = invalid("code", "no enrollment is waiting for a code (or it expired); begin again with two_step/enroll")
			return nil
		case err != nil:
			return err
		}
		rec := twoStepRecord{Mode: pend.Mode, Secret: pend.Secret, Phone: pend.Phone, Recovery: hashes, Enrolled: now}
		ok := false
		if pend.Mode == TwoStepAuthenticator {
			step, stale, found := totpStep(pend.Secret, code, now)
			ok, rec.LastStep = found && !stale, step
		} else {
			ok = subtle.ConstantTimeCompare(pend.Code, codeHash("enroll", id, code)) == 1
		}
		if !ok {
			refused = invalid("code", "wrong code")
			if pend.Tries++; pend.Tries >= maxConfirmTries {
				refused = invalid("code", "wrong code, too many times: begin again with two_step/enroll")
				return tx.Delete(key(pfxTwoStepNew, id))
			}
			return s.putTTL(tx, key(pfxTwoStepNew, id), &pend, pend.Expires.Sub(now))
		}
		for _, k := range [][]byte{key(pfxTwoStepNew, id), key(pfxTwoStepCode, id)} {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		if err := s.put(tx, key(pfxTwoStep, id), &rec); err != nil {
			return err
		}
		c := personChange(ActPersonUpdated, p)
		c.Action, c.Data = "two_step_enabled", rec.Mode
		return s.record(ctx, tx, c)
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// NewRecoveryCodes replaces person id's recovery codes with new ones,
// returned this once; the old ones stop working.
//
// Errors: ErrNotFound; ErrInvalid (field mode) without two-step verification.
func (s *Service) NewRecoveryCodes(ctx context.Context, id uint64) ([]string, error) {
	codes, hashes, err := newRecoveryCodes(id, numRecoveryCodes)
	if err != nil {
		return nil, err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		var p Person
		if err := s.get(tx, key(pfxPerson, id), &p, notFoundf("person %d", id)); err != nil {
			return err
		}
		rec, ok, err := s.readTwoStep(tx, id)
		if err != nil {
			return err
		}
		if !ok {
			return invalid("mode", "two-step verification is not enabled")
		}
		rec.Recovery = hashes
		if err := s.put(tx, key(pfxTwoStep, id), &rec); err != nil {
			return err
		}
		c := personChange(ActPersonUpdated, p)
		c.Action = "two_step_recovery_codes"
		return s.record(ctx, tx, c)
	})
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// DisableTwoStep turns off person id's two-step verification, at their
// own request: they sign in with their password alone again.
//
// Errors: ErrNotFound; ErrTwoStepRequired when the effective policy of
// the person's organization requires it (an administrator's
// ResetTwoStep is the way then).
func (s *Service) DisableTwoStep(ctx context.Context, id uint64) error {
	return s.removeTwoStep(ctx, id, false)
}

// ResetTwoStep removes person id's two-step verification, enrolled or
// waiting, and the count and lock of their wrong codes: an administrator's answer
// to a lost phone. Under require_two_step_auth the person enrolls again
// at their next sign-in. The password lock, if any, stays (Unlock ends it).
//
// Errors: ErrNotFound.
func (s *Service) ResetTwoStep(ctx context.Context, id uint64) error {
	return s.removeTwoStep(ctx, id, true)
}

func (s *Service) removeTwoStep(ctx context.Context, id uint64, reset bool) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var p Person
		if err := s.get(tx, key(pfxPerson, id), &p, notFoundf("person %d", id)); err != nil {
			return err
		}
		if !reset {
			orgs, err := s.chain(tx, p.OrganizationID, notFoundf("organization %d", p.OrganizationID))
			if err != nil {
				return err
			}
			if len(orgs) > 0 && effectivePolicy(orgs).RequireTwoStepAuth {
				return ErrTwoStepRequired
			}
		}
		_, had, err := s.readTwoStep(tx, id)
		if err != nil {
			return err
		}
		for _, k := range [][]byte{key(pfxTwoStep, id), key(pfxTwoStepNew, id), key(pfxTwoStepCode, id),
			keyBytes(pfxFail, twoStepSubject(id)), keyBytes(pfxLock, twoStepSubject(id))} {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		if !had {
			return nil
		}
		c := personChange(ActPersonUpdated, p)
		c.Action = "two_step_disabled"
		if reset {
			c.Action = "two_step_reset"
		}
		return s.record(ctx, tx, c)
	})
}

// TwoStepStatus returns what person id's two-step verification is.
//
// Errors: ErrNotFound.
func (s *Service) TwoStepStatus(ctx context.Context, id uint64) (TwoStepStatus, error) {
	var st TwoStepStatus
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var p Person
		if err := s.get(tx, key(pfxPerson, id), &p, notFoundf("person %d", id)); err != nil {
			return err
		}
		orgs, err := s.chain(tx, p.OrganizationID, notFoundf("organization %d", p.OrganizationID))
		if err != nil {
			return err
		}
		st.Required = len(orgs) > 0 && effectivePolicy(orgs).RequireTwoStepAuth
		rec, ok, err := s.readTwoStep(tx, id)
		if err != nil {
			return err
		}
		if ok {
			st.Mode, st.Phone, st.Enrolled, st.RecoveryCodesLeft = rec.Mode, rec.Phone, rec.Enrolled, len(rec.Recovery)
		}
		var pend twoStepPending
		switch err := s.get(tx, key(pfxTwoStepNew, id), &pend, ErrNotFound); {
		case err == nil && s.now().Before(pend.Expires):
			st.Pending = pend.Mode
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
		return nil
	})
	return st, err
}

// sendCode hands m to the configured sender, for person p. A failure is
// logged (never the code) and is ErrCodeNotSent.
func (s *Service) sendCode(ctx context.Context, p Person, m CodeMessage) error {
	m.PersonID, m.Username = p.ID, p.Username
	if s.opts.TwoStep.Sender == nil {
		s.log.Warn("two-step code not sent: no sender configured", "person_id", p.ID, "mode", m.Mode, "purpose", m.Purpose)
		return ErrCodeNotSent
	}
	if err := s.opts.TwoStep.Sender.SendCode(ctx, m); err != nil {
		s.log.Warn("two-step code not sent", "person_id", p.ID, "mode", m.Mode, "purpose", m.Purpose, "error", err)
		return errors.Join(ErrCodeNotSent, err)
	}
	return nil
}
