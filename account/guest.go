package account

import (
	"context"

	"berth/kv"
)

// Guests (spec 2.10) are Persons with Guest set: one id sequence and one
// login namespace with persons, so converting a guest keeps its id,
// login and sessions. A guest's username is its e-mail address. Guests
// are listed under acctorgguest/ and counted as Counts.Guests, never as
// accounts: num_users_maximum bounds persons, and a guest meets it when
// it is converted.

// GuestInput are the fields set when creating a guest.
type GuestInput struct {
	CreatorID      uint64 // the person who creates the guest (spec creator_id)
	OrganizationID uint64 // required, an existing organization
	Email          string // required; also the guest's username
	FirstName      string
	LastName       string
	// Password is the guest's first password, at least
	// Options.MinPasswordLength characters; "" creates the guest without
	// one (it cannot log in until SetPassword gives it one).
	Password string
}

// CreateGuest stores a new active guest, recording ActGuestCreated.
// Errors: ErrInvalid (a *FieldError: e-mail, names, password, or no such
// organization), ErrExists (the e-mail address is someone's login).
func (s *Service) CreateGuest(ctx context.Context, in GuestInput) (Person, error) {
	p, err := s.newPerson(ctx, PersonInput{
		OrganizationID: in.OrganizationID,
		Username:       in.Email,
		Email:          in.Email,
		FirstName:      in.FirstName,
		LastName:       in.LastName,
		Password:       in.Password,
		NoPassword:     in.Password == "",
	})
	if err != nil {
		return Person{}, err
	}
	p.Guest, p.CreatorID = true, in.CreatorID
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.checkLoginsFree(tx, 0, p.Username, p.Email); err != nil {
			return err
		}
		// The organization must exist (and so its chain, which countIn walks).
		if _, err := s.undeletedChain(tx, p.OrganizationID, invalid("company_id", "no such organization")); err != nil {
			return err
		}
		if err := s.putPerson(tx, &p, nil); err != nil {
			return err
		}
		return s.record(ctx, tx, personChange(ActGuestCreated, p))
	})
	if err != nil {
		return Person{}, err
	}
	return p, nil
}

// Guest returns guest id; a person's id is ErrNotFound.
func (s *Service) Guest(ctx context.Context, id uint64) (Person, error) {
	p, err := s.Person(ctx, id)
	if err == nil && !p.Guest {
		return Person{}, notFoundf("guest %d", id)
	}
	return p, err
}

// Guests returns one page of the organization's guests in id order and
// how many it has. Errors: ErrNotFound (organization).
func (s *Service) Guests(ctx context.Context, orgID uint64, offset, limit int) ([]Person, int, error) {
	return listPage[Person](ctx, s, orgID, pfxOrgGuest, pfxPerson, func(c Counts) int64 { return c.Guests }, offset, limit)
}

// UpdateGuest is UpdatePerson for a guest: a person's id is ErrNotFound.
// A guest's username follows its e-mail address.
func (s *Service) UpdateGuest(ctx context.Context, id uint64, fn func(*Person) error) (Person, error) {
	guest := true
	return s.updateAccount(ctx, id, &guest, func(p *Person) error {
		if err := fn(p); err != nil {
			return err
		}
		p.Username = p.Email
		return nil
	})
}

// DeleteGuest is DeletePerson for a guest, recording ActGuestDeleted: a
// person's id is ErrNotFound.
func (s *Service) DeleteGuest(ctx context.Context, id uint64) error {
	return s.deleteAccount(ctx, id, true)
}

// ConvertGuest turns guest id into a person in one transaction, recording
// ActGuestConverted: the same id, login, password and sessions, now
// listed and counted among the organization's persons, where the
// num_users_maximum of the organization and of every organization above
// it must leave room. The person has no sync root yet; the caller creates
// it. Errors: ErrNotFound (no such guest), ErrUserLimitExceeded.
func (s *Service) ConvertGuest(ctx context.Context, id uint64) (Person, error) {
	var p Person
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxPerson, id), &p, notFoundf("guest %d", id)); err != nil {
			return err
		}
		if !p.Guest {
			return notFoundf("guest %d", id)
		}
		if err := s.checkUserLimits(tx, p.OrganizationID); err != nil {
			return err
		}
		old := p
		p.Guest = false
		if err := s.putPerson(tx, &p, &old); err != nil {
			return err
		}
		c := personChange(ActGuestConverted, old)
		return s.record(ctx, tx, c)
	})
	if err != nil {
		return Person{}, err
	}
	return p, nil
}
