package rest

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"

	"berth/account"
	"berth/share"
)

// twoStepRoutes registers berth's own routes of two-step verification
// (the spec has none; docs/api.md "Two-step verification"). The person
// enrolls, confirms, renews recovery codes and turns it off; an
// administrator of the person's organization or one above it reads it
// and resets it.
func (s *server) twoStepRoutes() {
	s.handle("GET /api/2/person/{id}/two_step", s.authed(s.twoStepStatus))
	s.handle("POST /api/2/person/{id}/two_step/enroll", s.authed(s.twoStepEnroll))
	s.handle("POST /api/2/person/{id}/two_step/confirm", s.authed(s.twoStepConfirm))
	s.handle("POST /api/2/person/{id}/two_step/recovery_codes", s.authed(s.twoStepRecoveryCodes))
	s.handle("POST /api/2/person/{id}/two_step/disable", s.authed(s.twoStepDisable))
	s.handle("POST /api/2/person/{id}/two_step/reset", s.authed(s.twoStepReset))
}

// twoStepOpen are the routes a person whose policy requires two-step
// verification may use before enrolling (TwoStepDue): who they are, and
// the enrollment itself.
var twoStepOpen = map[string]bool{
	"GET /api/2/person":                        true,
	"GET /api/2/person/{id}/two_step":          true,
	"POST /api/2/person/{id}/two_step/enroll":  true,
	"POST /api/2/person/{id}/two_step/confirm": true,
}

// twoStepStatusBody is what GET .../two_step answers.
type twoStepStatusBody struct {
	// TwoStepMode is null without two-step verification.
	TwoStepMode       *string `json:"two_step_mode"`
	Phone             *string `json:"phone"`
	EnrolledAt        *string `json:"enrolled_at"`
	RecoveryCodesLeft int     `json:"recovery_codes_left"`
	// PendingMode is an enrollment waiting for its first code, or null.
	PendingMode        *string `json:"pending_mode"`
	RequireTwoStepAuth bool    `json:"require_two_step_auth"`
}

// twoStepEnrollBody is what enroll answers.
type twoStepEnrollBody struct {
	TwoStepMode string `json:"two_step_mode"`
	// OTPAuthURI, QRCode (a data: URL of a PNG) and Secret: the new
	// authenticator secret (null for email and sms).
	OTPAuthURI *string `json:"otpauth_uri"`
	QRCode     *string `json:"qr_code"`
	Secret     *string `json:"secret"`
	// SentTo is where the confirmation code went (null for authenticator).
	SentTo  *string `json:"sent_to"`
	Expires string  `json:"expires"`
}

// recoveryCodesBody is what confirm and recovery_codes answer.
type recoveryCodesBody struct {
	TwoStepMode   string   `json:"two_step_mode"`
	RecoveryCodes []string `json:"recovery_codes"`
}

func twoStepNullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// twoStepPerson returns the person of the path if the caller may do act
// with them; self demands that the caller be that person (what only the
// person does: enroll with their phone, see their recovery codes).
func (s *server) twoStepPerson(r *http.Request, act share.PersonAction, self bool) (account.Person, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		return account.Person{}, ErrNotFound
	}
	c := callerOf(r)
	p, err := s.shares.Person(r.Context(), c, id, act)
	if err != nil {
		return account.Person{}, err
	}
	if self && p.ID != c.Person.ID {
		return account.Person{}, Describe(ErrForbidden, "only the person sets up and changes their own two-step verification; an administrator may reset it (POST .../two_step/reset)")
	}
	return p, nil
}

// twoStepForm reads a form that may carry a code or the current
// password: never from the URL.
func twoStepForm(r *http.Request) (map[string][]string, error) {
	return secretForm(r, "auth_code", "current_password")
}

func (s *server) twoStepStatus(r *http.Request) (any, error) {
	p, err := s.twoStepPerson(r, share.PersonRead, false)
	if err != nil {
		return nil, err
	}
	st, err := s.accounts.TwoStepStatus(r.Context(), p.ID)
	if err != nil {
		return nil, err
	}
	b := twoStepStatusBody{TwoStepMode: twoStepNullable(st.Mode), Phone: twoStepNullable(st.Phone),
		RecoveryCodesLeft: st.RecoveryCodesLeft, PendingMode: twoStepNullable(st.Pending), RequireTwoStepAuth: st.Required}
	if !st.Enrolled.IsZero() {
		b.EnrolledAt = twoStepNullable(formatDateTime(st.Enrolled))
	}
	return b, nil
}

func (s *server) twoStepEnroll(r *http.Request) (any, error) {
	p, f, mode, err := s.twoStepStep(r, "mode", " (authenticator, email or sms)")
	if err != nil {
		return nil, err
	}
	if err := s.reauthenticate(r.Context(), p, formCurrent(f), "set up two-step verification"); err != nil {
		return nil, err
	}
	en, err := s.accounts.EnrollTwoStep(r.Context(), p.ID, mode, twoStepField(f, "phone"))
	if err != nil {
		return nil, err
	}
	b := twoStepEnrollBody{TwoStepMode: en.Mode, OTPAuthURI: twoStepNullable(en.URI), Secret: twoStepNullable(en.Secret),
		SentTo: twoStepNullable(en.To), Expires: formatDateTime(en.Expires)}
	if len(en.QRCode) > 0 {
		b.QRCode = twoStepNullable("data:image/png;base64," + base64.StdEncoding.EncodeToString(en.QRCode))
	}
	return b, nil
}

func (s *server) twoStepConfirm(r *http.Request) (any, error) {
	p, _, code, err := s.twoStepStep(r, "auth_code", "")
	if err != nil {
		return nil, err
	}
	codes, err := s.accounts.ConfirmTwoStep(r.Context(), p.ID, code)
	if err != nil {
		return nil, err
	}
	return s.recoveryCodes(r, p, codes)
}

func (s *server) twoStepRecoveryCodes(r *http.Request) (any, error) {
	p, err := s.twoStepPerson(r, share.PersonUpdateSelf, true)
	if err != nil {
		return nil, err
	}
	f, err := twoStepForm(r)
	if err != nil {
		return nil, err
	}
	if err := s.reauthenticate(r.Context(), p, formCurrent(f), "make new recovery codes"); err != nil {
		return nil, err
	}
	codes, err := s.accounts.NewRecoveryCodes(r.Context(), p.ID)
	if err != nil {
		return nil, err
	}
	return s.recoveryCodes(r, p, codes)
}

// recoveryCodes answers p's new recovery codes, shown this once, with the
// mode they stand in for.
func (s *server) recoveryCodes(r *http.Request, p account.Person, codes []string) (any, error) {
	mode, err := s.accounts.TwoStepMode(r.Context(), p.ID)
	if err != nil {
		return nil, err
	}
	return recoveryCodesBody{TwoStepMode: mode, RecoveryCodes: codes}, nil
}

// twoStepStep reads what a step of one's own enrollment needs: the
// person (themselves only), the form, and its field name, which must be
// there (hint says what it takes).
func (s *server) twoStepStep(r *http.Request, name, hint string) (account.Person, map[string][]string, string, error) {
	p, err := s.twoStepPerson(r, share.PersonUpdateSelf, true)
	if err != nil {
		return account.Person{}, nil, "", err
	}
	f, err := twoStepForm(r)
	if err != nil {
		return account.Person{}, nil, "", err
	}
	v := twoStepField(f, name)
	if v == "" {
		return account.Person{}, nil, "", Describe(ErrInvalidRequest, "missing parameter %q%s", name, hint)
	}
	return p, f, v, nil
}

func (s *server) twoStepDisable(r *http.Request) (any, error) {
	p, err := s.twoStepPerson(r, share.PersonUpdateSelf, true)
	if err != nil {
		return nil, err
	}
	f, err := twoStepForm(r)
	if err != nil {
		return nil, err
	}
	if err := s.reauthenticate(r.Context(), p, formCurrent(f), "turn off two-step verification"); err != nil {
		return nil, err
	}
	err = s.accounts.DisableTwoStep(r.Context(), p.ID)
	if errors.Is(err, account.ErrTwoStepRequired) {
		return nil, Describe(err, "the organization's policy requires two-step verification, so it cannot be turned off; enroll in another mode instead, or ask an administrator to reset it")
	}
	return nil, err
}

func (s *server) twoStepReset(r *http.Request) (any, error) {
	p, err := s.twoStepPerson(r, share.PersonAdminister, false)
	if err != nil {
		return nil, err
	}
	return nil, s.accounts.ResetTwoStep(r.Context(), p.ID)
}

// formCurrent is the form's current_password, nil when it has none
// (reauthenticate says what a missing and a wrong one get).
func formCurrent(f map[string][]string) *string {
	if v, ok := f["current_password"]; ok && len(v) > 0 {
		return &v[0]
	}
	return nil
}

// twoStepField is a form field's first value.
func twoStepField(f map[string][]string, name string) string {
	if v := f[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
