package account

import "context"

// verifySecret reports whether password is p's. It is the one place a
// sign-in's secret is judged, so that where it is judged can depend on
// the person: berth's own argon2id hash by default, the person's
// directory server for persons imported from one (identity issue).
func (s *Service) verifySecret(ctx context.Context, p Person, password string) (bool, error) {
	return s.verifyPassword(ctx, p.PasswordHash, password)
}
