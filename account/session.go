package account

import (
	"context"
	"errors"

	"berth/kv"
)

// Session names the session (token family) an access token was issued
// in, for a front end that holds one request open far longer than an
// access token lives: the agent's channel, opened with a token that
// expires within the hour while the agent refreshes its own and keeps
// the channel. SessionCaller asks of the session what a refresh would.
type Session struct {
	personID uint64
	family   []byte
}

// SessionOf returns the caller behind accessToken, as AccessCaller
// does, and the session it was issued in. Errors as for AccessCaller.
func (s *Service) SessionOf(ctx context.Context, accessToken string) (Caller, Session, error) {
	c, err := s.AccessCaller(ctx, accessToken)
	if err != nil {
		return Caller{}, Session{}, err
	}
	var ar accessRecord
	err = s.db.View(ctx, func(tx kv.Txn) error {
		return s.get(tx, keyBytes(pfxAccess, tokenHash(accessToken)), &ar, ErrInvalidToken)
	})
	if err != nil {
		return Caller{}, Session{}, err
	}
	return c, Session{personID: ar.PersonID, family: ar.Family}, nil
}

// SessionCaller returns the caller of session ses while the session
// holds, whether or not the access token it was named by has expired:
// ErrInvalidToken once it was signed out or revoked, its refresh token
// expired, its person's password changed, its organization (or one
// above) enabled again after a disabling, its machine deleted, or the
// policy's deactivate_token_frequency ran out; ErrInactive for a
// disabled person or organization; a *LockedError while the person is
// locked by failed sign-ins. It reads the store each time.
func (s *Service) SessionCaller(ctx context.Context, ses Session) (Caller, error) {
	if ses.family == nil {
		return Caller{}, ErrInvalidToken
	}
	var c Caller
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var (
			fam familyRecord
			err error
		)
		if c, fam, _, err = s.sessionCaller(ctx, tx, ses.personID, ses.family); err != nil {
			return err
		}
		// The family's key expires RefreshTTL after its last refresh,
		// which an engine may carry out late.
		if fam.PersonID != ses.personID || !s.now().Before(fam.Created.Add(s.opts.RefreshTTL)) {
			return ErrInvalidToken
		}
		c.MachineID = fam.MachineID
		return nil
	})
	if err != nil {
		return Caller{}, err
	}
	return c, nil
}

// sessionCaller reads session family of person personID and the caller
// it speaks for, with what every use of a session's tokens checks: the
// session not revoked, the person and their organizations active, the
// password it began under still theirs, none of the organizations
// enabled again since it began, the policy's
// deactivate_token_frequency not run out, and the person not locked by
// failed sign-ins (a lock refuses the tokens while it lasts and ends
// none of them). exempt is accountLock's: the lock spared this address.
func (s *Service) sessionCaller(ctx context.Context, tx kv.Txn, personID uint64, family []byte) (c Caller, fam familyRecord, exempt bool, err error) {
	if err = s.get(tx, keyBytes(pfxFamily, family), &fam, ErrInvalidToken); err != nil {
		return Caller{}, fam, false, err
	}
	c, err = s.activeCaller(tx, personID)
	if errors.Is(err, ErrNotFound) {
		err = ErrInvalidToken
	}
	if err != nil {
		return Caller{}, fam, false, err
	}
	if !fam.heldFor(c) || fam.endedBy(c.Organization.Policy, s.now()) {
		return Caller{}, fam, false, ErrInvalidToken
	}
	if exempt, err = s.accountLock(ctx, tx, personID); err != nil {
		return Caller{}, fam, false, err
	}
	return c, fam, exempt, nil
}
