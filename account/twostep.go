package account

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/kv"
)

// Two-step verification modes (spec 5.4 two_step_mode).
const (
	TwoStepAuthenticator = "authenticator"
	TwoStepEmail         = "email"
	TwoStepSMS           = "sms"
)

// CodeSender delivers the one-time codes of the e-mail and SMS modes. The
// daemon implements it (e-mail through the SMTP server, SMS through the
// configured command); account only makes and checks the codes.
//
// SendCode returns once the code is handed over: its error is answered
// as ErrCodeNotSent, and the code is then not kept.
type CodeSender interface {
	SendCode(ctx context.Context, m CodeMessage) error
}

// CodeMessage is one code to deliver.
type CodeMessage struct {
	// Mode is TwoStepEmail or TwoStepSMS.
	Mode string
	// To is the e-mail address or the phone number (E.164, "+" and digits).
	To string
	// Code is the one-time code, six digits.
	Code string
	// Purpose is CodeSignIn or CodeEnrollment, for the wording.
	Purpose string
	// Expires is when the code stops being accepted.
	Expires time.Time
	// PersonID and Username say whose code it is (for the sender's log).
	PersonID uint64
	Username string
}

// The purposes of a CodeMessage.
const (
	CodeSignIn     = "sign-in"
	CodeEnrollment = "enrollment"
)

// TwoStepOptions configure two-step verification.
type TwoStepOptions struct {
	// Sender delivers e-mail and SMS codes. Nil: only the authenticator
	// mode can be enrolled (and persons enrolled in another mode get no
	// code: their sign-ins answer ErrCodeNotSent).
	Sender CodeSender
	// SMS reports whether Sender delivers text messages; without it the
	// sms mode cannot be enrolled.
	SMS bool
	// Email reports whether Sender delivers e-mail; without it the email
	// mode cannot be enrolled.
	Email bool
	// Issuer names berth in authenticator apps (the otpauth:// issuer).
	// Default "berth".
	Issuer string
	// CodeTTL is how long an e-mail or SMS code, and an enrollment
	// waiting for its first code, stays valid. Default 10 minutes.
	CodeTTL time.Duration
	// ResendAfter is the least time between two codes sent for the same
	// person's sign-in: a repeated request without auth_code within it
	// sends nothing (the code already sent stays valid). Default 30 s.
	ResendAfter time.Duration
}

func (o TwoStepOptions) withDefaults() TwoStepOptions {
	if o.Issuer == "" {
		o.Issuer = "berth"
	}
	if o.CodeTTL <= 0 {
		o.CodeTTL = 10 * time.Minute
	}
	if o.ResendAfter <= 0 {
		o.ResendAfter = 30 * time.Second
	}
	return o
}

// twoStepRecord is a person's two-step verification, once confirmed
// (key accttwostep/<person>). Its absence means the password alone.
type twoStepRecord struct {
	Mode string `cbor:"1,keyasint"`
	// Secret is the TOTP secret, base32 (authenticator).
	Secret string `cbor:"2,keyasint"`
	// Phone is the number codes go to (sms), E.164.
	Phone string `cbor:"3,keyasint"`
	// LastStep is the latest TOTP time step accepted: a code of that
	// step or an earlier one is refused (RFC 6238 5.2, no replay).
	LastStep int64 `cbor:"4,keyasint"`
	// Recovery are the SHA-256 of the unused recovery codes.
	Recovery [][]byte  `cbor:"5,keyasint"`
	Enrolled time.Time `cbor:"6,keyasint"`
}

// twoStepPending is an enrollment waiting for its first code (key
// accttwostepnew/<person>, TTL CodeTTL).
type twoStepPending struct {
	Mode   string `cbor:"1,keyasint"`
	Secret string `cbor:"2,keyasint"`
	Phone  string `cbor:"3,keyasint"`
	// Code is the SHA-256 of the code sent (email, sms).
	Code    []byte    `cbor:"4,keyasint"`
	Expires time.Time `cbor:"5,keyasint"`
	// Tries counts wrong codes; maxConfirmTries end the enrollment.
	Tries int `cbor:"6,keyasint"`
}

// twoStepCode is the e-mail or SMS code of a sign-in (key
// accttwostepcode/<person>, TTL CodeTTL). Once used it stays, Used, until
// it expires, so that a replay is told apart from a wrong code.
type twoStepCode struct {
	Code    []byte    `cbor:"1,keyasint"`
	Expires time.Time `cbor:"2,keyasint"`
	Sent    time.Time `cbor:"3,keyasint"`
	Used    bool      `cbor:"4,keyasint"`
}

// TwoStepMode returns the two-step verification mode person id has
// enrolled in (TwoStepAuthenticator, TwoStepEmail, TwoStepSMS), or ""
// when the person signs in with a password alone. Front ends that cannot
// carry a code (WebDAV Basic) ask it to refuse the main password.
//
// Errors: ErrNotFound for an unknown person.
func (s *Service) TwoStepMode(ctx context.Context, id uint64) (string, error) {
	var mode string
	err := s.db.View(ctx, func(tx kv.Txn) error {
		if ok, err := exists(tx, key(pfxPerson, id)); err != nil || !ok {
			if err == nil {
				err = notFoundf("person %d", id)
			}
			return err
		}
		rec, ok, err := s.readTwoStep(tx, id)
		if ok {
			mode = rec.Mode
		}
		return err
	})
	return mode, err
}

// TwoStepDue returns ErrTwoStepRequired when c's effective policy has
// require_two_step_auth and c has not enrolled: such a caller signs in,
// but may use nothing but the enrollment routes until enrolled (docs/api.md
// "Two-step verification"). Every front end that takes a token asks it.
// Callers in organizations without the requirement cost no read.
func (s *Service) TwoStepDue(ctx context.Context, c *Caller) error {
	if !c.Organization.Policy.RequireTwoStepAuth {
		return nil
	}
	ok, err := s.enrolled(ctx, c.Person.ID)
	if err == nil && !ok {
		err = ErrTwoStepRequired
	}
	return err
}

// enrolled reports whether person id has enrolled in two-step
// verification. Front ends ask on every request (TwoStepDue,
// NeedsDevicePassword), so the answer is kept until the store's next
// commit outside file contents (kv.MetaGeneration), as LoginCallerRef's.
func (s *Service) enrolled(ctx context.Context, id uint64) (bool, error) {
	gen := kv.MetaGeneration(s.db)
	if v, ok := s.callers.twoStep.Get(gen, id); ok {
		return v, nil
	}
	mode, err := s.TwoStepMode(ctx, id)
	if err != nil {
		return false, err
	}
	s.callers.twoStep.Put(gen, id, mode != "")
	return mode != "", nil
}

// readTwoStep reads person id's two-step record; ok is false when there is none.
func (s *Service) readTwoStep(tx kv.Txn, id uint64) (twoStepRecord, bool, error) {
	var rec twoStepRecord
	err := s.get(tx, key(pfxTwoStep, id), &rec, ErrNotFound)
	if errors.Is(err, ErrNotFound) {
		return twoStepRecord{}, false, nil
	}
	return rec, err == nil, err
}

// The reasons of berth_two_step_failures_total.
const (
	tsWrong    = "wrong"    // no such code
	tsReplayed = "replayed" // a code already used (a TOTP step not after the last one accepted)
	tsExpired  = "expired"  // a code past its time
	tsLocked   = "locked"   // refused unchecked: the account is locked
)

// twoStepMetrics count refused two-step codes, by mode and reason: a
// fixed set of series.
type twoStepMetrics struct {
	failures *prometheus.CounterVec
}

func newTwoStepMetrics(reg prometheus.Registerer) *twoStepMetrics {
	m := &twoStepMetrics{failures: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_two_step_failures_total",
		Help: "Refused two-step verification codes at sign-in, by mode (authenticator, email, sms) and reason (wrong, replayed, expired, locked).",
	}, []string{"mode", "reason"})}
	for _, mode := range []string{TwoStepAuthenticator, TwoStepEmail, TwoStepSMS} {
		for _, r := range []string{tsWrong, tsReplayed, tsExpired, tsLocked} {
			m.failures.WithLabelValues(mode, r)
		}
	}
	if reg != nil {
		reg.MustRegister(m.failures)
	}
	return m
}

// twoStepFailed logs and counts a refused code; the code is never logged.
func (s *Service) twoStepFailed(p Person, mode, reason string, err error) {
	s.twoStep.failures.WithLabelValues(mode, reason).Inc()
	attrs := []any{"person_id", p.ID, "login", p.Username, "mode", mode, "reason", reason}
	var le *LockedError
	if errors.As(err, &le) {
		attrs = append(attrs, "locked_until", le.Until)
	}
	s.log.Warn("two-step code refused", attrs...)
}
