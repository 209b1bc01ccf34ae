package account

import "context"

// verifySecret reports whether password is p's. It is the one place a
// sign-in's secret is judged, so that where it is judged can depend on
// the person: a person imported from a directory server binds to it as
// their entry (berth never holds their password); the others are judged
// by berth's own argon2id hash. A person with no hash at all (imported
// from a source deleted since) has no password until one is set: the
// check costs what a wrong one does and fails.
func (s *Service) verifySecret(ctx context.Context, p Person, password string) (bool, error) {
	switch {
	case p.AuthSourceID != 0:
		return s.verifyDirectory(ctx, p, password)
	case p.PasswordHash == "" || p.PasswordHash == detachedHash:
		return false, s.dummyVerify(ctx, password)
	}
	return s.verifyPassword(ctx, p.PasswordHash, password)
}
