package account

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"berth/kv"
)

// Person is a user account (spec 2.9). Fields the spec computes from other
// domains have no home here on purpose: roots and space_usage come from vfs
// and share, company_policy is the organization's Policy, and can_share is
// that policy's UserCreateShares (see CanShare).
type Person struct {
	ID             uint64 `cbor:"1,keyasint"`
	OrganizationID uint64 `cbor:"2,keyasint"` // spec company_id
	Username       string `cbor:"3,keyasint"` // as entered; unique case-insensitively
	Email          string `cbor:"4,keyasint"` // as entered; unique case-insensitively
	FirstName      string `cbor:"5,keyasint"`
	LastName       string `cbor:"6,keyasint"`
	// DisplayName defaults to "FirstName LastName", or Username when both are empty.
	DisplayName string `cbor:"7,keyasint"`
	// RootID is the person's sync root in vfs; 0 until the caller has
	// created it and called SetPersonRoot.
	RootID uint64 `cbor:"8,keyasint"`
	// SpaceQuota in bytes for this person's own roots; 0 means only the
	// organization's quota applies.
	SpaceQuota int64     `cbor:"9,keyasint"`
	Admin      bool      `cbor:"10,keyasint"` // administers its organization
	Active     bool      `cbor:"11,keyasint"` // false: cannot log in or use tokens (ErrInactive)
	Created    time.Time `cbor:"12,keyasint"`
	// PasswordHash is an argon2id PHC string; never sent to clients.
	PasswordHash    string    `cbor:"13,keyasint"`
	PasswordChanged time.Time `cbor:"14,keyasint"`
	// Guest marks a guest (spec 2.10): a restricted account that reaches
	// only what is shared with it. Guests and persons share one id
	// sequence and one login namespace, so converting a guest to a
	// person keeps its id, login and sessions.
	Guest bool `cbor:"15,keyasint"`
	// CreatorID is the person who created a guest (spec creator_id).
	CreatorID uint64 `cbor:"16,keyasint"`
	// AuthSourceID is the directory server the person was imported
	// from (authsource.go), which judges their password; 0 for none.
	AuthSourceID uint64 `cbor:"17,keyasint"`
	// SessionsMoved is when the person last moved to another
	// organization: the sessions they held then count as begun then
	// against the enablings of the organizations they moved under
	// (Organization.SessionsFrom), which ended the sessions of those
	// organizations' persons of the time, not theirs. Zero: never moved.
	SessionsMoved time.Time `cbor:"18,keyasint,omitempty"`
}

// Principal is the person's identity as the file system records it, for
// instance as a lock's holder. REST and WebDAV both use it, so one person's
// locks are one, whichever front end took them.
func (p Person) Principal() string { return "person:" + strconv.FormatUint(p.ID, 10) }

// QuotaUnder is the space quota in bytes that applies to the person under
// the organization's policy pol: the smaller of the two where both are set,
// 0 meaning unlimited. It is the one rule that writes enforce and clients
// are shown.
func (p Person) QuotaUnder(pol Policy) int64 {
	org := pol.SpaceQuotaBytes()
	if p.SpaceQuota > 0 && (org == 0 || p.SpaceQuota < org) {
		return p.SpaceQuota
	}
	return org
}

// CanShare reports the spec's can_share for a person under policy p.
func (p Person) CanShare(pol Policy) bool { return pol.UserCreateShares }

// PersonInput are the fields set when creating a person.
type PersonInput struct {
	OrganizationID uint64 // required, an existing organization
	Username       string // required; no whitespace, control characters or ':' (Basic auth splits on it)
	Email          string // required, a plain address
	FirstName      string
	LastName       string
	DisplayName    string // "" derives it
	Password       string // at least Options.MinPasswordLength characters, unless NoPassword
	// NoPassword creates the person without a password: nobody can log
	// in as them until SetPassword gives them one. Password must be "".
	NoPassword bool
	Admin      bool
	RootID     uint64 // 0 when the sync root is created afterwards
	SpaceQuota int64  // bytes, 0: organization quota only
}

type loginRef struct {
	PersonID uint64 `cbor:"1,keyasint"`
}

// CreatePerson stores a new active person. The username and e-mail index
// entries are written in the same transaction, so of two concurrent
// creations with the same login exactly one succeeds. Errors: ErrInvalid,
// ErrExists, ErrUserLimitExceeded.
func (s *Service) CreatePerson(ctx context.Context, in PersonInput) (Person, error) {
	p, err := s.newPerson(ctx, in)
	if err != nil {
		return Person{}, err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.insertPerson(tx, &p); err != nil {
			return err
		}
		return s.record(ctx, tx, personChange(ActPersonCreated, p))
	})
	if err != nil {
		return Person{}, err
	}
	return p, nil
}

// newPerson builds and validates the person in describes, hashes the
// password and gives it an id; insertPerson stores it. The hashing (tens
// of milliseconds by design) happens here, outside any transaction.
func (s *Service) newPerson(ctx context.Context, in PersonInput) (Person, error) {
	p, password, err := s.personOf(in)
	if err != nil {
		return Person{}, err
	}
	// Cheap existence checks first, so a taken login costs no hashing.
	if err := s.db.View(ctx, func(tx kv.Txn) error { return s.checkLoginsFree(tx, 0, p.Username, p.Email) }); err != nil {
		return Person{}, err
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return Person{}, err
	}
	p.PasswordHash = hash
	id, err := s.db.NextID(ctx, seqPerson)
	if err != nil {
		return Person{}, err
	}
	p.ID = id
	return p, nil
}

// personOf builds and validates the person in describes, without an id
// or a password hash, and returns the password to hash: in's, or a
// random one nobody is told for NoPassword. CreatePerson and
// CreatePersons share it, so both accept and refuse the same inputs.
func (s *Service) personOf(in PersonInput) (Person, string, error) {
	now := s.now()
	p := Person{
		OrganizationID:  in.OrganizationID,
		Username:        in.Username,
		Email:           in.Email,
		FirstName:       strings.TrimSpace(in.FirstName),
		LastName:        strings.TrimSpace(in.LastName),
		DisplayName:     strings.TrimSpace(in.DisplayName),
		RootID:          in.RootID,
		SpaceQuota:      in.SpaceQuota,
		Admin:           in.Admin,
		Active:          true,
		Created:         now,
		PasswordChanged: now,
	}
	if p.DisplayName == "" {
		p.DisplayName = defaultDisplayName(p)
	}
	if err := p.validate(); err != nil {
		return Person{}, "", err
	}
	password := in.Password
	if in.NoPassword {
		if password != "" {
			return Person{}, "", invalid("password", "given for a person created without one")
		}
		var err error
		if password, err = unusablePassword(); err != nil {
			return Person{}, "", err
		}
	} else if err := s.checkPassword(password); err != nil {
		return Person{}, "", err
	}
	return p, password, nil
}

// insertPerson stores p, built by newPerson, in tx, once its organization
// exists and takes another person and its logins are free.
func (s *Service) insertPerson(tx kv.Txn, p *Person) error {
	if err := s.checkLoginsFree(tx, 0, p.Username, p.Email); err != nil {
		return err
	}
	if err := s.checkUserLimits(tx, p.OrganizationID); err != nil {
		return err
	}
	return s.putPerson(tx, p, nil)
}

// checkUserLimits refuses another person in organization orgID when it or
// an ancestor holds its policy's num_users_maximum already: a parent's
// maximum bounds its whole subtree. Errors: ErrInvalid (no such
// organization), ErrUserLimitExceeded.
func (s *Service) checkUserLimits(tx kv.Txn, orgID uint64) error {
	orgs, err := s.undeletedChain(tx, orgID, invalid("company_id", "no such organization"))
	if err != nil {
		return err
	}
	for _, o := range orgs {
		max := o.Policy.NumUsersMaximum
		if max <= 0 {
			continue
		}
		cr, err := s.loadCounts(tx, o.ID, false)
		if err != nil {
			return err
		}
		if cr.Subtree.Accounts >= max {
			return fmt.Errorf("%w: organization %d holds its maximum of %d users", ErrUserLimitExceeded, o.ID, max)
		}
	}
	return nil
}

// memberKey is p's entry in its organization's list of persons, or of
// guests for a guest.
func memberKey(p *Person) []byte {
	if p.Guest {
		return key(pfxOrgGuest, p.OrganizationID, p.ID)
	}
	return key(pfxOrgPerson, p.OrganizationID, p.ID)
}

// personCounts is what person p adds to their organization's counts.
func personCounts(p *Person) Counts {
	if p.Guest {
		return Counts{Guests: 1}
	}
	c := Counts{Accounts: 1}
	if p.Admin {
		c.AdminAccounts = 1
	}
	return c
}

// putPerson writes p and its index entries and counts; old is the stored
// version whose index entries and counts it replaces, or nil.
func (s *Service) putPerson(tx kv.Txn, p *Person, old *Person) error {
	ref, err := s.codec.marshal(loginRef{PersonID: p.ID})
	if err != nil {
		return err
	}
	if old != nil {
		for _, l := range []string{old.Username, old.Email} {
			if err := tx.Delete(loginKey(l)); err != nil {
				return err
			}
		}
		if old.OrganizationID != p.OrganizationID || old.Guest != p.Guest {
			if err := tx.Delete(memberKey(old)); err != nil {
				return err
			}
		}
	}
	for _, l := range []string{p.Username, p.Email} {
		if err := tx.Set(loginKey(l), ref); err != nil {
			return err
		}
	}
	if err := tx.Set(memberKey(p), nil); err != nil {
		return err
	}
	if old == nil || old.OrganizationID != p.OrganizationID || personCounts(old) != personCounts(p) {
		if old != nil {
			if err := s.countIn(tx, old.OrganizationID, personCounts(old), -1); err != nil {
				return err
			}
		}
		if err := s.countIn(tx, p.OrganizationID, personCounts(p), 1); err != nil {
			return err
		}
	}
	if p.RootID != 0 && (old == nil || old.RootID != p.RootID) {
		if err := s.putRoot(tx, RootOwner{RootID: p.RootID, PersonID: p.ID, OrganizationID: p.OrganizationID, Type: "sync"}); err != nil {
			return err
		}
	}
	return s.put(tx, key(pfxPerson, p.ID), p)
}

// checkLoginsFree returns ErrExists if a login is taken by anyone but self.
func (s *Service) checkLoginsFree(tx kv.Txn, self uint64, logins ...string) error {
	for _, l := range logins {
		var ref loginRef
		err := s.get(tx, loginKey(l), &ref, ErrNotFound)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if ref.PersonID != self {
			return fmt.Errorf("%w: %s %q is taken", ErrExists, loginField(l), l)
		}
	}
	return nil
}

// unusablePassword is a random secret nobody is told: the password of a
// person created without one. Storing its hash, not an empty one, keeps
// every login path the same (a wrong password, counted as such) and
// needs no special case where hashes are checked.
func unusablePassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func loginField(l string) string {
	if strings.Contains(l, "@") {
		return "email"
	}
	return "username"
}

// Person returns the person with id, or ErrNotFound.
func (s *Service) Person(ctx context.Context, id uint64) (Person, error) {
	var p Person
	err := s.db.View(ctx, func(tx kv.Txn) error {
		return s.get(tx, key(pfxPerson, id), &p, notFoundf("person %d", id))
	})
	return p, err
}

// PrincipalText describes principal p for people as an actor is
// described (a display name and username): the person's whose Principal
// it is, "person <id>" for one no longer stored, and p itself for a
// principal that names no person (the file system takes opaque ones).
// It is how the activity log names the holder of a lock that a forced
// unlock ended.
func (s *Service) PrincipalText(ctx context.Context, p string) (string, error) {
	id, err := strconv.ParseUint(strings.TrimPrefix(p, "person:"), 10, 64)
	if !strings.HasPrefix(p, "person:") || err != nil {
		return p, nil
	}
	pe, err := s.Person(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return personText(Person{ID: id}), nil
	}
	if err != nil {
		return "", err
	}
	return personText(pe), nil
}

// PersonByLogin returns the person whose username or e-mail address is
// login, case-insensitively, or ErrNotFound.
func (s *Service) PersonByLogin(ctx context.Context, login string) (Person, error) {
	var p Person
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		p, err = s.personByLogin(tx, login)
		return err
	})
	return p, err
}

func (s *Service) personByLogin(tx kv.Txn, login string) (Person, error) {
	var ref loginRef
	var p Person
	if login == "" {
		return p, notFoundf("login")
	}
	if err := s.get(tx, loginKey(login), &ref, notFoundf("login")); err != nil {
		return p, err
	}
	err := s.get(tx, key(pfxPerson, ref.PersonID), &p, notFoundf("person %d", ref.PersonID))
	return p, err
}

// SetPersonRoot records the person's sync root, created by the caller in vfs.
// Errors: ErrNotFound.
func (s *Service) SetPersonRoot(ctx context.Context, personID, rootID uint64) error {
	_, err := s.UpdatePerson(ctx, personID, func(p *Person) error {
		p.RootID = rootID
		return nil
	})
	return err
}

// HasLogin reports whether login names p: their username or e-mail
// address, compared as logins are (case-insensitively). A front end that
// remembers a login checks it again, so a renamed person's old name stops
// working at once.
func (p Person) HasLogin(login string) bool {
	l := foldLogin(login)
	return l == foldLogin(p.Username) || (p.Email != "" && l == foldLogin(p.Email))
}

// UpdatePerson applies fn to the stored person or guest and stores the
// result with its index entries in one transaction, recording
// ActPersonUpdated (ActGuestUpdated for a guest); an update that
// changes nothing stores and records nothing. fn may run more than
// once. ID, Created, the password fields, Guest and CreatorID cannot be
// changed here (use SetPassword, ConvertGuest). Errors: ErrNotFound,
// ErrInvalid, ErrExists, or fn's own error.
func (s *Service) UpdatePerson(ctx context.Context, id uint64, fn func(*Person) error) (Person, error) {
	return s.updateAccount(ctx, id, nil, fn)
}

// updateAccount is UpdatePerson; guest, when not nil, says which kind the
// account must be (the other kind is ErrNotFound).
func (s *Service) updateAccount(ctx context.Context, id uint64, guest *bool, fn func(*Person) error) (Person, error) {
	var p Person
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		var cur Person
		if err := s.get(tx, key(pfxPerson, id), &cur, notFoundf("person %d", id)); err != nil {
			return err
		}
		if guest != nil && cur.Guest != *guest {
			return notFoundf("person %d", id)
		}
		p = cur
		if err := fn(&p); err != nil {
			return err
		}
		p.ID, p.Created, p.PasswordHash, p.PasswordChanged = cur.ID, cur.Created, cur.PasswordHash, cur.PasswordChanged
		p.Guest, p.CreatorID, p.SessionsMoved = cur.Guest, cur.CreatorID, cur.SessionsMoved
		// A display name that was derived follows the names it came
		// from, unless fn set one of its own.
		if p.DisplayName == "" || (p.DisplayName == cur.DisplayName && cur.DisplayName == defaultDisplayName(cur)) {
			p.DisplayName = defaultDisplayName(p)
		}
		if err := p.validate(); err != nil {
			return err
		}
		if p == cur {
			// Nothing changed: nothing to store or record, as for an
			// organization. It recorded a person_updated naming no
			// field (a password-only update over REST made one).
			return nil
		}
		if p.OrganizationID != cur.OrganizationID {
			ok, err := exists(tx, key(pfxOrg, p.OrganizationID))
			if err != nil {
				return err
			}
			if !ok {
				return invalid("company_id", "no such organization")
			}
			if err := s.moveSessions(tx, cur, &p); err != nil {
				return err
			}
		}
		if err := s.checkLoginsFree(tx, id, p.Username, p.Email); err != nil {
			return err
		}
		if err := s.putPerson(tx, &p, &cur); err != nil {
			return err
		}
		// Enabling a person again ends the sessions they had before they
		// were disabled: kept, they came back with it, on devices an
		// administrator who disabled them had reason to distrust. They
		// are ended here rather than at the disabling so that, while
		// disabled, they are answered ErrInactive, which says why.
		if !cur.Active && p.Active {
			if err := s.revokeAll(tx, id); err != nil {
				return err
			}
		}
		act := ActPersonUpdated
		if p.Guest {
			act = ActGuestUpdated
		}
		c := personChange(act, p)
		c.Data = personChangedFields(cur, p)
		return s.record(ctx, tx, c)
	})
	if err != nil {
		return Person{}, err
	}
	return p, nil
}

// personChangedFields names the fields an update changed, as the spec names
// them, for the activity record's data_text. Values are left out: an
// e-mail address or a name is the person's, not the log's.
func personChangedFields(a, b Person) string {
	var out []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"company_id", a.OrganizationID == b.OrganizationID},
		{"username", a.Username == b.Username},
		{"email", a.Email == b.Email},
		{"first_name", a.FirstName == b.FirstName},
		{"last_name", a.LastName == b.LastName},
		{"display_name", a.DisplayName == b.DisplayName},
		{"root_id", a.RootID == b.RootID},
		{"space_quota", a.SpaceQuota == b.SpaceQuota},
		{"admin", a.Admin == b.Admin},
		{"active", a.Active == b.Active},
	} {
		if !f.same {
			out = append(out, f.name)
		}
	}
	return strings.Join(out, ",")
}

// SetPassword replaces the person's password and revokes all their tokens,
// so that a changed password ends every session. It records
// ActPasswordChanged when the actor of ctx is the person themself and
// ActPasswordReset when it is someone else (an administrator). A reset
// also ends the person's device passwords: it is how an account someone
// else took over is taken back, and a device password made by the
// intruder would outlive it; a person changing their own password keeps
// theirs (docs/api.md, "Device passwords"). Errors: ErrNotFound,
// ErrInvalid.
func (s *Service) SetPassword(ctx context.Context, personID uint64, password string) error {
	if err := s.checkPassword(password); err != nil {
		return err
	}
	if _, err := s.Person(ctx, personID); err != nil {
		return err
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return err
	}
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var p Person
		if err := s.get(tx, key(pfxPerson, personID), &p, notFoundf("person %d", personID)); err != nil {
			return err
		}
		p.PasswordHash, p.PasswordChanged = hash, s.now()
		if err := s.put(tx, key(pfxPerson, personID), &p); err != nil {
			return err
		}
		if err := s.revokeAll(tx, personID); err != nil {
			return err
		}
		if a := ActorFrom(ctx); a.PersonID == personID && a.Type != System.Type {
			return s.record(ctx, tx, personChange(ActPasswordChanged, p))
		}
		c := personChange(ActPasswordReset, p)
		n, err := s.endDevicePasswords(tx, personID, 0)
		if err != nil {
			return err
		}
		c.Action = devicePasswordsEnded(n)
		return s.record(ctx, tx, c)
	})
}

// CheckPassword says whether password would be accepted as a new
// password (its length), so that a front end changing several things
// at once can refuse a bad one before it changes anything. Errors:
// ErrInvalid (a *FieldError naming "password").
func (s *Service) CheckPassword(password string) error { return s.checkPassword(password) }

// ResetPassword is the way back into a lost account, for the operator of
// a stopped data directory (berth reset-password): it gives the person
// behind login (username or e-mail address) the password, clears the
// login's lockout (failed attempts and lock) and ends every session and
// device password, as SetPassword's reset does, in one transaction. It works for any person, not
// only administrators, and also for a disabled one (the flag stays).
// Errors: ErrNotFound (no person has that login), ErrInvalid (a
// *FieldError for a password that is too short or too long).
func (s *Service) ResetPassword(ctx context.Context, login, password string) (Person, error) {
	if err := s.checkPassword(password); err != nil {
		return Person{}, err
	}
	p, err := s.PersonByLogin(ctx, login)
	if err != nil {
		return Person{}, err
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return Person{}, err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxPerson, p.ID), &p, notFoundf("person %d", p.ID)); err != nil {
			return err
		}
		p.PasswordHash, p.PasswordChanged = hash, s.now()
		if err := s.put(tx, key(pfxPerson, p.ID), &p); err != nil {
			return err
		}
		if err := s.unlock(tx, p.ID); err != nil {
			return err
		}
		if err := s.revokeAll(tx, p.ID); err != nil {
			return err
		}
		n, err := s.endDevicePasswords(tx, p.ID, 0)
		if err != nil {
			return err
		}
		c := personChange(ActPasswordReset, p)
		c.Action = "the lockout was cleared too"
		if n > 0 {
			c.Action += "; " + devicePasswordsEnded(n)
		}
		return s.record(ctx, tx, c)
	})
	if err != nil {
		return Person{}, err
	}
	return p, nil
}

// Unlock clears the person's lockout: the lock and the count of failed
// attempts, so the next login gets every attempt again. The password and
// the sessions stay. Errors: ErrNotFound.
func (s *Service) Unlock(ctx context.Context, personID uint64) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var p Person
		if err := s.get(tx, key(pfxPerson, personID), &p, notFoundf("person %d", personID)); err != nil {
			return err
		}
		if err := s.unlock(tx, personID); err != nil {
			return err
		}
		return s.record(ctx, tx, personChange(ActPersonUnlocked, p))
	})
}

// unlock deletes the person's lockout keys (Authenticate counts a known
// login under the person, whichever of their logins was typed), those of
// their wrong two-step codes, and those of the addresses they are known at.
func (s *Service) unlock(tx kv.Txn, personID uint64) error {
	for _, subject := range [][]byte{s.loginSubject("", personID), twoStepSubject(personID)} {
		if err := tx.Delete(keyBytes(pfxFail, subject)); err != nil {
			return err
		}
		if err := tx.Delete(keyBytes(pfxLock, subject)); err != nil {
			return err
		}
	}
	return s.forgetAddresses(tx, personID)
}

func defaultDisplayName(p Person) string {
	if n := strings.TrimSpace(p.FirstName + " " + p.LastName); n != "" {
		return n
	}
	return p.Username
}

func (p *Person) validate() error {
	if p.OrganizationID == 0 {
		return invalid("company_id", "required")
	}
	if p.Username == "" {
		return invalid("username", "required")
	}
	if len(p.Username) > 255 || strings.ContainsFunc(p.Username, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == ':'
	}) {
		return invalid("username", "longer than 255 bytes, or has spaces, control characters or ':'")
	}
	if p.Email == "" {
		return invalid("email", "required")
	}
	if err := validateEmail(p.Email); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{
		{"first_name", p.FirstName}, {"last_name", p.LastName}, {"display_name", p.DisplayName}} {
		if len(f.v) > 255 || hasControl(f.v) {
			return invalid(f.name, "longer than 255 bytes or has control characters")
		}
	}
	if p.SpaceQuota < 0 {
		return invalid("space_quota", "negative")
	}
	return nil
}

// Persons returns one page of the organization's persons in id order and
// how many it has (spec 4.5: at most 100 per page is the caller's rule).
// Errors: ErrNotFound (organization).
func (s *Service) Persons(ctx context.Context, orgID uint64, offset, limit int) ([]Person, int, error) {
	return listPage[Person](ctx, s, orgID, pfxOrgPerson, pfxPerson, func(c Counts) int64 { return c.Accounts }, offset, limit)
}

// DeletePerson removes person id (not a guest: DeleteGuest), their
// logins, their entry in their organization's list and counts, their
// lockout, their machines and device passwords, and every session, in one
// transaction, recording
// ActPersonDeleted: their tokens and the WebDAV credentials a front end
// remembers (LoginCallerRef) fail from the next request on. Their roots are
// vfs's: the caller deletes them first (rest does, with vfs.DeleteRoot);
// the records of who owned them stay, so an administrator who asks for
// one learns it was deleted rather than that it never existed.
// Errors: ErrNotFound.
func (s *Service) DeletePerson(ctx context.Context, id uint64) error {
	return s.deleteAccount(ctx, id, false)
}

func (s *Service) deleteAccount(ctx context.Context, id uint64, guest bool) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var p Person
		if err := s.get(tx, key(pfxPerson, id), &p, notFoundf("person %d", id)); err != nil {
			return err
		}
		if p.Guest != guest {
			return notFoundf("person %d", id)
		}
		for _, l := range []string{p.Username, p.Email} {
			if err := tx.Delete(loginKey(l)); err != nil {
				return err
			}
		}
		if err := tx.Delete(memberKey(&p)); err != nil {
			return err
		}
		if err := s.countIn(tx, p.OrganizationID, personCounts(&p), -1); err != nil {
			return err
		}
		if err := s.revokeAll(tx, id); err != nil {
			return err
		}
		if err := s.unlock(tx, id); err != nil {
			return err
		}
		if _, err := s.endDevicePasswords(tx, id, 0); err != nil {
			return err
		}
		if err := s.deleteMachines(tx, &p); err != nil {
			return err
		}
		if err := s.dropMemberships(tx, id); err != nil {
			return err
		}
		if err := tx.Delete(key(pfxPerson, id)); err != nil {
			return err
		}
		act := ActPersonDeleted
		if guest {
			act = ActGuestDeleted
		}
		return s.record(ctx, tx, personChange(act, p))
	})
}

// deleteMachines removes person p's machines, their GUIDs and their count
// in p's organization: a machine is its person's, and goes with them.
func (s *Service) deleteMachines(tx kv.Txn, p *Person) error {
	prefix := key(pfxPersonMachine, p.ID)
	var ids []uint64
	if err := tx.Scan(prefix, nil, func(k, _ []byte) error {
		ids = append(ids, kv.Uint64At(k, len(prefix)))
		return nil
	}); err != nil {
		return err
	}
	for _, mid := range ids {
		var m Machine
		err := s.get(tx, key(pfxMachine, mid), &m, ErrNotFound)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err == nil {
			if err := tx.Delete(guidKey(m.GUID)); err != nil {
				return err
			}
			if err := tx.Delete(key(pfxMachine, mid)); err != nil {
				return err
			}
		}
		if err := tx.Delete(key(pfxPersonMachine, p.ID, mid)); err != nil {
			return err
		}
		if err := tx.Delete(key(pfxOrgMachine, p.OrganizationID, mid)); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return s.countIn(tx, p.OrganizationID, Counts{Machines: int64(len(ids))}, -1)
}

// PersonRoots returns the ids of the roots person p owns: their sync root
// and any other root recorded as theirs. It reads the organization's
// root index, so it is for rare operations (deleting the person), not
// for every request.
func (s *Service) PersonRoots(ctx context.Context, p Person) ([]uint64, error) {
	var out []uint64
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = nil
		if p.RootID != 0 {
			out = append(out, p.RootID)
		}
		prefix := key(pfxOrgRoot, p.OrganizationID)
		return tx.Scan(prefix, nil, func(k, _ []byte) error {
			rid := kv.Uint64At(k, len(prefix))
			if rid == p.RootID {
				return nil
			}
			var o RootOwner
			if err := s.get(tx, key(pfxRoot, rid), &o, notFoundf("root %d", rid)); err != nil {
				return err
			}
			if o.PersonID == p.ID {
				out = append(out, rid)
			}
			return nil
		})
	})
	return out, err
}
