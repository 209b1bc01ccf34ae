package account

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"time"

	"berth/kv"
)

// Tokens is the result of a password or refresh grant (spec 5.3).
type Tokens struct {
	AccessToken  string
	RefreshToken string
	// ExpiresIn is the access token's lifetime (spec expires_in, in seconds on the wire).
	ExpiresIn time.Duration
	// MachineID is the machine the tokens were issued to (0: none); rest
	// reads its GUID for the response's guid field.
	MachineID uint64
}

// Principal is who an access token speaks for.
type Principal struct {
	PersonID  uint64
	MachineID uint64 // 0 when the tokens were issued without a machine
}

// Caller is what a request needs to know about who makes it, read in one
// transaction: the principal, the person, and their organization (for its
// policy). Front ends take it once per request, instead of a read each
// for the token, the person and the organization.
type Caller struct {
	Principal
	Person Person
	// Organization is the person's, with the policy they act under in
	// Policy: the organization's own, tightened by every ancestor's
	// (effectivePolicy). The stored policy is Service.Organization's.
	Organization Organization
	// Chain is the ids of the person's organization and its ancestors,
	// the organization first (see Chain): those the caller is within,
	// and, for an administrator, the root of what they manage.
	Chain []uint64
	// ChainQuotas are the space_quota in bytes of each organization of
	// Chain, in its order (see Quotas).
	ChainQuotas []int64
	// sessionsFrom is the latest SessionsFrom of Chain's organizations:
	// a session begun at or before it was ended by an enabling.
	sessionsFrom time.Time
}

// Token records. Tokens themselves are never stored, only their SHA-256:
// a copy of the database does not yield usable tokens. SHA-256 without
// salt is enough because tokens are 256-bit random values, not passwords.
//
// A family is one login session: the refresh token chain started by
// IssueTokens and every access token issued along it. An access token is
// valid only while its family exists, so revoking a refresh token (which
// deletes the family) also kills the access tokens issued with it.
type accessRecord struct {
	PersonID  uint64    `cbor:"1,keyasint"`
	MachineID uint64    `cbor:"2,keyasint"`
	Family    []byte    `cbor:"3,keyasint"`
	Expires   time.Time `cbor:"4,keyasint"`
}

type refreshRecord struct {
	PersonID  uint64    `cbor:"1,keyasint"`
	MachineID uint64    `cbor:"2,keyasint"`
	Family    []byte    `cbor:"3,keyasint"`
	Expires   time.Time `cbor:"4,keyasint"`
	// Used marks a refresh token that was already rotated. Presenting it
	// again means it was copied: the whole family is revoked (OAuth 2.0
	// Security BCP, refresh token rotation with reuse detection), unless
	// it comes back within Options.RefreshReuseGrace of UsedAt and the
	// token that replaced it was never used: then the answer to the
	// rotation was most likely lost on its way.
	Used bool `cbor:"5,keyasint"`
	// UsedAt is when the token was first rotated.
	UsedAt time.Time `cbor:"6,keyasint,omitempty"`
	// NextAccess and NextRefresh are the hashes of the tokens the
	// rotation issued, which a retry within the grace replaces.
	NextAccess  []byte `cbor:"7,keyasint,omitempty"`
	NextRefresh []byte `cbor:"8,keyasint,omitempty"`
}

type familyRecord struct {
	PersonID  uint64    `cbor:"1,keyasint"`
	MachineID uint64    `cbor:"2,keyasint"`
	Created   time.Time `cbor:"3,keyasint"`
	// Password is passwordStamp of the password the session began under.
	// Its tokens work only while that is the person's password: a change
	// ends the session even where SetPassword's sweep of the person's
	// families missed it (a login committing during the sweep, which a
	// prefix scan does not see). Empty in families stored before berth
	// recorded it.
	Password []byte `cbor:"4,keyasint,omitempty"`
	// SignedIn is when the session began (Created moves with each
	// refresh), for the policy's deactivate_token_frequency. Zero in
	// families stored before berth recorded it: their first refresh
	// takes Created, the best known bound, as it.
	SignedIn time.Time `cbor:"5,keyasint,omitempty"`
}

// end returns when the session ends under pol's deactivate_token_frequency,
// and false when the policy never ends sessions. It is checked at every
// use of the session's tokens, not fixed at issue, so a policy change
// applies at once to sessions already open, both ways.
func (f familyRecord) end(pol Policy) (time.Time, bool) {
	d := pol.DeactivateTokenAfter()
	if d <= 0 {
		return time.Time{}, false
	}
	return f.began().Add(d), true
}

// endedBy reports whether the session is over at now under pol.
func (f familyRecord) endedBy(pol Policy, now time.Time) bool {
	end, ok := f.end(pol)
	return ok && !now.Before(end)
}

// began is when the session began: SignedIn, or for families stored
// before berth recorded it Created, the best known bound.
func (f familyRecord) began() time.Time {
	if f.SignedIn.IsZero() {
		return f.Created
	}
	return f.SignedIn
}

// heldFor reports whether the session still speaks for c: begun under
// c's current password, and after the last enabling of c's
// organizations (a session cannot begin while one is disabled, so one
// begun at the very instant is taken as from before).
func (f familyRecord) heldFor(c Caller) bool {
	return f.passwordOf(c.Person) && f.under(c.Person).After(c.sessionsFrom)
}

// under is when the session came under p's organizations: when it began,
// or when p last moved to them (Person.SessionsMoved), if later.
func (f familyRecord) under(p Person) time.Time {
	if b := f.began(); b.After(p.SessionsMoved) {
		return b
	}
	return p.SessionsMoved
}

// sessionsFrom is the latest SessionsFrom of orgs: a session that came
// under them at or before it was ended by an enabling.
func sessionsFrom(orgs []Organization) time.Time {
	var t time.Time
	for _, o := range orgs {
		if o.SessionsFrom.After(t) {
			t = o.SessionsFrom
		}
	}
	return t
}

// moveSessions carries the sessions of cur, moving to p.OrganizationID
// (p), from one chain of organizations to another: those an enabling of
// the old chain ended are deleted, so the move does not give them back
// (all of them when it is disabled: an enabling would end them all),
// and p.SessionsMoved is set after every enabling of the new chain,
// which they were never under (after it even by a clock behind the one
// that enabled, as issueTokens begins sessions).
func (s *Service) moveSessions(tx kv.Txn, cur Person, p *Person) error {
	old, err := s.chain(tx, cur.OrganizationID, notFoundf("organization %d", cur.OrganizationID))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	orgs, err := s.chain(tx, p.OrganizationID, notFoundf("organization %d", p.OrganizationID))
	if err != nil {
		return err
	}
	if len(old) > 0 && live(old) != nil {
		// Moved out of a disabled organization: every session began
		// before the disabling, and ends as enabling it would end it.
		if err := s.revokeAll(tx, cur.ID); err != nil {
			return err
		}
	} else if from := sessionsFrom(old); !from.IsZero() {
		err := s.eachSession(tx, cur.ID, func(f []byte, fam familyRecord) error {
			if fam.under(cur).After(from) {
				return nil
			}
			return s.deleteFamily(tx, cur.ID, f)
		})
		if err != nil {
			return err
		}
	}
	p.SessionsMoved = s.now()
	if to := sessionsFrom(orgs); !p.SessionsMoved.After(to) {
		p.SessionsMoved = to.Add(time.Nanosecond)
	}
	return nil
}

// passwordStamp identifies p's current password (a digest of its salted
// hash) for familyRecord.Password.
func passwordStamp(p Person) []byte {
	h := sha256.Sum256([]byte(p.PasswordHash))
	return h[:16]
}

// passwordOf reports whether the session began under p's current password.
func (f familyRecord) passwordOf(p Person) bool {
	return len(f.Password) == 0 || bytes.Equal(f.Password, passwordStamp(p))
}

const tokenBytes = 32

// newToken returns 32 random bytes in unpadded base64url (43 characters)
// and the SHA-256 it is stored under.
func newToken() (string, []byte, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	h := sha256.Sum256([]byte(tok))
	return tok, h[:], nil
}

func tokenHash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// IssueTokens starts a new session for the person on the machine
// (machineID 0 for none) and returns its first access and refresh tokens.
// Errors: ErrNotFound (person or machine), ErrInactive.
func (s *Service) IssueTokens(ctx context.Context, personID, machineID uint64) (Tokens, error) {
	return s.issueTokens(ctx, personID, machineID, nil, false)
}

// IssueLoginTokens is IssueTokens for p as Authenticate returned it: the
// password grant. It refuses with ErrInvalidCredentials when p's password
// has changed since, so a login with the old password that races a change
// (which ends every session) cannot start a session that outlives it.
// Errors: those of IssueTokens, ErrInvalidCredentials.
func (s *Service) IssueLoginTokens(ctx context.Context, p Person, machineID uint64) (Tokens, error) {
	return s.issueTokens(ctx, p.ID, machineID, samePassword(p), false)
}

// IssuePageSession is IssueLoginTokens for a sign-in on a web page
// (share-link pages), which keeps the access token in a cookie and has
// no refresh token to carry the session on: none is made (RefreshToken
// is ""), and the session is stored only as long as its access token
// (AccessTTL), not RefreshTTL, so that sign-ins a page never signs out
// of are gone within the hour. Like any session it counts toward
// MaxSessions, the least recently used ending to make room; SignOut
// ends it. Errors: those of IssueLoginTokens.
func (s *Service) IssuePageSession(ctx context.Context, p Person) (Tokens, error) {
	return s.issueTokens(ctx, p.ID, 0, samePassword(p), true)
}

// samePassword is the check of a session started for p as Authenticate
// returned it: the password it was judged by still p's.
func samePassword(p Person) func(Person) error {
	return func(cur Person) error {
		if cur.PasswordHash != p.PasswordHash {
			return ErrInvalidCredentials
		}
		return nil
	}
}

// issueTokens is IssueTokens; check, when not nil, vets the stored person
// in the transaction that starts the session; page makes the session of
// IssuePageSession, without a refresh token.
func (s *Service) issueTokens(ctx context.Context, personID, machineID uint64, check func(Person) error, page bool) (Tokens, error) {
	family := make([]byte, 16)
	if _, err := rand.Read(family); err != nil {
		return Tokens{}, err
	}
	var toks Tokens
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		c, err := s.activeCaller(tx, personID)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(c.Person); err != nil {
				return err
			}
		}
		if machineID != 0 {
			var m Machine
			if err := s.get(tx, key(pfxMachine, machineID), &m, notFoundf("machine %d", machineID)); err != nil {
				return err
			}
			if m.PersonID != personID {
				return notFoundf("machine %d", machineID)
			}
			// The machine's deletion ends its sessions by a scan,
			// which misses this one unless the two conflict: see
			// touch.
			if err := touch(tx, key(pfxMachine, machineID)); err != nil {
				return err
			}
		}
		if err := s.evictSessions(tx, personID, s.opts.MaxSessions-1); err != nil {
			return err
		}
		now := s.now()
		life := s.opts.RefreshTTL
		if page {
			life = s.opts.AccessTTL
		}
		// A session begun after an enabling of the chain (read in this
		// transaction) is after it, even on a node whose clock is
		// behind the one that enabled it (heldFor): it would otherwise
		// be ended as it began.
		began := now
		if !began.After(c.sessionsFrom) {
			began = c.sessionsFrom.Add(time.Nanosecond)
		}
		fam := familyRecord{PersonID: personID, MachineID: machineID, Created: now, SignedIn: began, Password: passwordStamp(c.Person)}
		if err := s.putTTL(tx, keyBytes(pfxFamily, family), &fam, life); err != nil {
			return err
		}
		if err := tx.SetTTL(personFamilyKey(personID, family), nil, s.ttl(life)); err != nil {
			return err
		}
		if page {
			toks, err = s.mintAccess(tx, personID, machineID, family, now)
			return err
		}
		toks, err = s.mint(tx, personID, machineID, family, now)
		return err
	})
	if err != nil {
		return Tokens{}, err
	}
	return toks, nil
}

// evictSessions ends the person's least recently used sessions (by the
// time they began or were last refreshed) until at most keep are left.
// Each session holds its records for RefreshTTL (30 days by default), so
// a script that logs in every minute would otherwise pile up tens of
// thousands; a device in use refreshes its session and keeps it.
func (s *Service) evictSessions(tx kv.Txn, personID uint64, keep int) error {
	fams, err := families(tx, personID)
	if err != nil || len(fams) <= keep {
		return err
	}
	type session struct {
		family []byte
		used   time.Time
	}
	sessions := make([]session, 0, len(fams))
	for _, f := range fams {
		var fam familyRecord
		switch err := s.get(tx, keyBytes(pfxFamily, f), &fam, ErrNotFound); {
		case errors.Is(err, ErrNotFound):
			// Expired a moment before its index: nothing to keep.
			if err := tx.Delete(personFamilyKey(personID, f)); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			sessions = append(sessions, session{f, fam.Created})
		}
	}
	slices.SortFunc(sessions, func(a, b session) int { return a.used.Compare(b.used) })
	for len(sessions) > keep {
		if err := s.deleteFamily(tx, personID, sessions[0].family); err != nil {
			return err
		}
		sessions = sessions[1:]
	}
	return nil
}

// eachSession calls fn with each of the person's sessions that has not
// expired: its id and its record. An index entry whose session expired a
// moment before it is passed over; it goes with its own TTL.
func (s *Service) eachSession(tx kv.Txn, personID uint64, fn func(family []byte, fam familyRecord) error) error {
	fams, err := families(tx, personID)
	if err != nil {
		return err
	}
	for _, f := range fams {
		var fam familyRecord
		switch err := s.get(tx, keyBytes(pfxFamily, f), &fam, ErrNotFound); {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return err
		}
		if err := fn(f, fam); err != nil {
			return err
		}
	}
	return nil
}

// families lists the ids of the person's sessions from their index.
func families(tx kv.Txn, personID uint64) ([][]byte, error) {
	prefix := key(pfxPersonFamily, personID)
	var fams [][]byte
	err := tx.Scan(prefix, nil, func(k, _ []byte) error {
		fams = append(fams, append([]byte(nil), k[len(prefix):]...))
		return nil
	})
	return fams, err
}

// personFamilyKey indexes a person's families, for RevokeAll. It expires
// with its family, so the index does not grow with every login.
func personFamilyKey(personID uint64, family []byte) []byte {
	return append(key(pfxPersonFamily, personID), family...)
}

// mint writes a new access and refresh token of the family.
func (s *Service) mint(tx kv.Txn, personID, machineID uint64, family []byte, now time.Time) (Tokens, error) {
	toks, err := s.mintAccess(tx, personID, machineID, family, now)
	if err != nil {
		return Tokens{}, err
	}
	refresh, rh, err := newToken()
	if err != nil {
		return Tokens{}, err
	}
	rr := refreshRecord{PersonID: personID, MachineID: machineID, Family: family, Expires: now.Add(s.opts.RefreshTTL)}
	if err := s.putTTL(tx, keyBytes(pfxRefresh, rh), &rr, s.opts.RefreshTTL); err != nil {
		return Tokens{}, err
	}
	toks.RefreshToken = refresh
	return toks, nil
}

// mintAccess writes a new access token of the family.
func (s *Service) mintAccess(tx kv.Txn, personID, machineID uint64, family []byte, now time.Time) (Tokens, error) {
	access, ah, err := newToken()
	if err != nil {
		return Tokens{}, err
	}
	ar := accessRecord{PersonID: personID, MachineID: machineID, Family: family, Expires: now.Add(s.opts.AccessTTL)}
	if err := s.putTTL(tx, keyBytes(pfxAccess, ah), &ar, s.opts.AccessTTL); err != nil {
		return Tokens{}, err
	}
	return Tokens{AccessToken: access, ExpiresIn: s.opts.AccessTTL, MachineID: machineID}, nil
}

// activeCaller reads person personID and their organization's chain, all
// of which must be active: ErrNotFound for a missing person, ErrInactive
// for a disabled person, or a disabled or deleted organization or
// ancestor of it (disabling an organization disables its subtree).
func (s *Service) activeCaller(tx kv.Txn, personID uint64) (Caller, error) {
	c := Caller{Principal: Principal{PersonID: personID}}
	if err := s.get(tx, key(pfxPerson, personID), &c.Person, notFoundf("person %d", personID)); err != nil {
		return Caller{}, err
	}
	orgs, err := s.chain(tx, c.Person.OrganizationID, notFoundf("organization %d", c.Person.OrganizationID))
	if err != nil {
		return Caller{}, err
	}
	c.Organization, c.Chain, c.ChainQuotas = orgs[0], chainIDs(orgs), chainQuotas(orgs)
	c.sessionsFrom = sessionsFrom(orgs)
	// What the person acts under: the organization's policy tightened
	// by every ancestor's (effectivePolicy).
	c.Organization.Policy = effectivePolicy(orgs)
	if !c.Person.Active {
		return Caller{}, ErrInactive
	}
	if err := live(orgs); err != nil {
		return Caller{}, err
	}
	return c, nil
}

// Caller returns active person personID with their organization, as for
// a request authenticated by other means than a token (WebDAV Basic).
// Errors: ErrNotFound, ErrInactive.
func (s *Service) Caller(ctx context.Context, personID uint64) (Caller, error) {
	gen := s.db.Generation()
	if c, ok := s.callers.persons.Get(gen, personID); ok {
		return c, nil
	}
	var c Caller
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		c, err = s.activeCaller(tx, personID)
		return err
	})
	if err != nil {
		return Caller{}, err
	}
	s.callers.persons.Put(gen, personID, c)
	return c, nil
}

// Refresh exchanges a refresh token for new tokens of the same session
// (spec 5.2). The old refresh token stops working; access tokens issued
// before stay valid until they expire. Presenting an already rotated
// refresh token again revokes the whole session. A session older than the
// policy's deactivate_token_frequency is refused. A person imported from
// a directory server is asked of it first (recheckDirectory). Errors:
// ErrInvalidToken, ErrInactive, and a *LockedError (ErrAccountLocked) while the person is
// locked by failed logins (the refresh token is not used up then).
func (s *Service) Refresh(ctx context.Context, refreshToken string) (Tokens, Person, error) {
	var (
		toks  Tokens
		p     Person
		reuse bool
	)
	h := tokenHash(refreshToken)
	if err := s.recheckDirectory(ctx, h); err != nil {
		return Tokens{}, Person{}, err
	}
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		reuse = false
		now := s.now()
		var rr refreshRecord
		if err := s.get(tx, keyBytes(pfxRefresh, h), &rr, ErrInvalidToken); err != nil {
			return err
		}
		if rr.Used {
			retry, err := s.retriedRotation(tx, rr, now)
			if err != nil {
				return err
			}
			if !retry {
				reuse = true
				if err := tx.Delete(keyBytes(pfxRefresh, h)); err != nil {
					return err
				}
				return s.deleteFamily(tx, rr.PersonID, rr.Family)
			}
		}
		if !now.Before(rr.Expires) {
			return ErrInvalidToken
		}
		var fam familyRecord
		if err := s.get(tx, keyBytes(pfxFamily, rr.Family), &fam, ErrInvalidToken); err != nil {
			return err
		}
		c, err := s.activeCaller(tx, rr.PersonID)
		if errors.Is(err, ErrNotFound) {
			return ErrInvalidToken
		}
		if err != nil {
			return err
		}
		if !fam.heldFor(c) {
			return ErrInvalidToken
		}
		// Refused, not deleted: a policy that allows longer again
		// gives the session back.
		if fam.endedBy(c.Organization.Policy, now) {
			return ErrInvalidToken
		}
		if _, err := s.accountLock(ctx, tx, rr.PersonID); err != nil {
			return err
		}
		p = c.Person
		if fam.SignedIn.IsZero() {
			fam.SignedIn = fam.Created
		}
		fam.Created = now
		if err := s.putTTL(tx, keyBytes(pfxFamily, rr.Family), &fam, s.opts.RefreshTTL); err != nil {
			return err
		}
		if err := tx.SetTTL(personFamilyKey(rr.PersonID, rr.Family), nil, s.ttl(s.opts.RefreshTTL)); err != nil {
			return err
		}
		if toks, err = s.mint(tx, rr.PersonID, rr.MachineID, rr.Family, now); err != nil {
			return err
		}
		// Keep a tombstone until the old token would have expired, for
		// reuse detection. A retry keeps the first rotation's time, so
		// retries cannot stretch the grace.
		used := rr
		used.Used = true
		if used.UsedAt.IsZero() {
			used.UsedAt = now
		}
		used.NextAccess, used.NextRefresh = tokenHash(toks.AccessToken), tokenHash(toks.RefreshToken)
		return s.putTTL(tx, keyBytes(pfxRefresh, h), &used, rr.Expires.Sub(now))
	})
	if err != nil {
		return Tokens{}, Person{}, err
	}
	if reuse {
		return Tokens{}, Person{}, ErrInvalidToken
	}
	return toks, p, nil
}

// retriedRotation reports whether the rotated refresh token rr, presented
// again at now, is a client retrying a refresh whose answer it never got:
// within Options.RefreshReuseGrace of the rotation, with the refresh token
// the rotation issued still unused (a client that got it moves on with
// it; only a copy of rr comes back after that). The tokens of that
// rotation stop working, so a session never holds two live refresh
// tokens; the refresh token is kept as a used one, with no grace of its
// own: if the retry was a thief's replay and the client did get that
// pair, the client's next refresh is a reuse and ends the session, the
// thief's new pair included, instead of an unknown token that would
// leave the thief the session.
func (s *Service) retriedRotation(tx kv.Txn, rr refreshRecord, now time.Time) (bool, error) {
	grace := s.opts.RefreshReuseGrace
	if grace <= 0 || rr.UsedAt.IsZero() || now.Sub(rr.UsedAt) >= grace || !now.Before(rr.Expires) || rr.NextRefresh == nil {
		return false, nil
	}
	var next refreshRecord
	switch err := s.get(tx, keyBytes(pfxRefresh, rr.NextRefresh), &next, kv.ErrNotFound); {
	case errors.Is(err, kv.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case next.Used:
		return false, nil
	}
	if err := tx.Delete(keyBytes(pfxAccess, rr.NextAccess)); err != nil {
		return false, err
	}
	next.Used = true
	if err := s.putTTL(tx, keyBytes(pfxRefresh, rr.NextRefresh), &next, next.Expires.Sub(now)); err != nil {
		return false, err
	}
	return true, nil
}

// ValidateAccess returns who an access token speaks for. Errors:
// ErrInvalidToken (unknown, expired or revoked, its session revoked, its
// person's password changed since the session began, or the session older
// than the policy's deactivate_token_frequency),
// ErrInactive (person or organization disabled since the token was issued),
// a *LockedError (ErrAccountLocked) while the person is locked by failed
// logins: the token is refused, not ended, and serves again after the lock.
func (s *Service) ValidateAccess(ctx context.Context, accessToken string) (Principal, error) {
	c, err := s.AccessCaller(ctx, accessToken)
	return c.Principal, err
}

// AccessCaller is ValidateAccess that also returns the person and their
// organization, read in the same transaction. Errors as for ValidateAccess.
func (s *Service) AccessCaller(ctx context.Context, accessToken string) (Caller, error) {
	c, err := s.AccessCallerRef(ctx, accessToken)
	if err != nil {
		return Caller{}, err
	}
	return *c, nil
}

// AccessCallerRef is AccessCaller handing out the cached Caller itself,
// which every request of the token shares while it is cached: the caller
// must not change it (nor what its slices hold). A request that keeps it
// in its context (WithCaller) then costs no copy of the ~750-byte Caller
// on the heap. Errors as for ValidateAccess.
func (s *Service) AccessCallerRef(ctx context.Context, accessToken string) (*Caller, error) {
	// All read here is account records (kv.MetaGeneration), as for
	// LoginCallerRef: a file write does not empty the cache.
	gen := kv.MetaGeneration(s.db)
	// The token's bytes and hash on the stack for the lookup (a token is
	// 43 bytes; []byte(accessToken) is on the stack only up to 32); a
	// miss makes the hash again for the read, where it escapes.
	var buf [128]byte
	sum := sha256.Sum256(append(buf[:0], accessToken...))
	if e, ok := s.callers.access.Get(gen, string(sum[:])); ok && s.now().Before(e.until) {
		return e.c, nil
	}
	h := tokenHash(accessToken)
	var (
		c     Caller
		until time.Time
		cache = true
	)
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var ar accessRecord
		if err := s.get(tx, keyBytes(pfxAccess, h), &ar, ErrInvalidToken); err != nil {
			return err
		}
		if !s.now().Before(ar.Expires) {
			return ErrInvalidToken
		}
		// At an address the person is known at, a lock strangers
		// brought does not apply (accountLock); such an answer is
		// not kept for other addresses.
		var (
			fam    familyRecord
			exempt bool
			err    error
		)
		c, fam, exempt, err = s.sessionCaller(ctx, tx, ar.PersonID, ar.Family)
		if err != nil {
			return err
		}
		cache = !exempt
		c.MachineID = ar.MachineID
		// The session ends when its family expires, which a kv TTL
		// does without a commit (no later than RefreshTTL after it
		// was last renewed), or when the policy's
		// deactivate_token_frequency runs out, which needs no
		// commit either. A policy change commits, which drops the
		// entry.
		until = ar.Expires
		if end := fam.Created.Add(s.opts.RefreshTTL); end.Before(until) {
			until = end
		}
		if end, ok := fam.end(c.Organization.Policy); ok && end.Before(until) {
			until = end
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cache {
		s.callers.access.Put(gen, string(h), accessEntry{c: &c, until: until})
	}
	return &c, nil
}

// callerCtx is the context of a request made by c (WithCaller): one small
// value answers both CallerFrom and ActorFrom, whose Actor is made only
// when a change asks for it, not for every read.
type callerCtx struct {
	context.Context
	c *Caller
}

type callerCtxKey struct{}

// Value answers CallerFrom's and ActorFrom's keys, and the parent's others.
func (c *callerCtx) Value(key any) any {
	switch key.(type) {
	case callerCtxKey:
		return c.c
	case actorKey:
		return c.c.Actor()
	}
	return c.Context.Value(key)
}

// WithCaller returns ctx carrying c as the request's caller (CallerFrom)
// and c's Actor as the actor of the changes made under it (WithActor). c
// is kept, not copied, so it must not change afterwards (AccessCallerRef's
// is shared and never does).
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return &callerCtx{Context: ctx, c: c}
}

// CallerFrom returns the caller WithCaller put in ctx, or nil.
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerCtxKey{}).(*Caller)
	return c
}

// Revoke invalidates a token of either kind (spec 5.5). Revoking a refresh
// token ends its whole session, access tokens included; revoking an access
// token ends only that token. An unknown or expired token is not an error.
func (s *Service) Revoke(ctx context.Context, token string) error {
	h := tokenHash(token)
	return s.db.Update(ctx, func(tx kv.Txn) error {
		if err := tx.Delete(keyBytes(pfxAccess, h)); err != nil {
			return err
		}
		var rr refreshRecord
		err := s.get(tx, keyBytes(pfxRefresh, h), &rr, ErrNotFound)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := tx.Delete(keyBytes(pfxRefresh, h)); err != nil {
			return err
		}
		return s.deleteFamily(tx, rr.PersonID, rr.Family)
	})
}

// SignOut ends the whole session accessToken belongs to: the token, the
// others of its session and its refresh token stop working, and what
// stored the session is deleted. A page signs out with it (a page holds
// no refresh token to Revoke). An unknown or expired token is not an
// error.
func (s *Service) SignOut(ctx context.Context, accessToken string) error {
	h := tokenHash(accessToken)
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var ar accessRecord
		err := s.get(tx, keyBytes(pfxAccess, h), &ar, ErrNotFound)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := tx.Delete(keyBytes(pfxAccess, h)); err != nil {
			return err
		}
		return s.deleteFamily(tx, ar.PersonID, ar.Family)
	})
}

// RevokeAll ends every session of the person: all their access and refresh
// tokens stop working. SetPassword, DeletePerson and an UpdatePerson that
// enables a disabled person again, or moves one out of a disabled
// organization, do it themselves.
func (s *Service) RevokeAll(ctx context.Context, personID uint64) error {
	return s.db.Update(ctx, func(tx kv.Txn) error { return s.revokeAll(tx, personID) })
}

func (s *Service) revokeAll(tx kv.Txn, personID uint64) error {
	fams, err := families(tx, personID)
	if err != nil {
		return err
	}
	for _, f := range fams {
		if err := s.deleteFamily(tx, personID, f); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) deleteFamily(tx kv.Txn, personID uint64, family []byte) error {
	if err := tx.Delete(keyBytes(pfxFamily, family)); err != nil {
		return err
	}
	return tx.Delete(personFamilyKey(personID, family))
}
