package share

import (
	"context"
	"errors"

	"berth/account"
	"berth/vfs"
)

// The permission model of organizations and the people in them (the
// spec leaves roles open, 5.6; docs/api.md "Who may do what" is the same
// rule in prose). Every route of the accounts API asks one of the
// functions below before it acts, and gets what it may act on back:
//
//   - An administrator (Person.Admin) of organization O manages O and
//     every organization below it: reads them, updates them, lists what
//     they hold, creates child organizations, persons, guests and groups
//     in them. Never O's parent or siblings: those do not exist for them
//     (ErrNotFound, as for an id that does not exist).
//   - What an organization's own administrators cannot do to it: change
//     its policy, disable, enable or delete it. Those belong to the
//     administrators above it, so a child cannot lift the limits its
//     parent set; the administrators of a top-level organization change
//     its policy themselves, and nobody disables or deletes it over the API.
//   - A person (and a guest) reads their own organization, and reads and
//     updates themselves (names, e-mail, password with the current one).
//     Quota, the administrator flag and active are the administrators'.
//   - admin_create_users false in O's policy: O's own administrators do
//     not create or delete persons and guests in O, nor in any
//     organization below O (whose policies they set themselves); those
//     above O still do.
//   - admin_browse_files true in O's policy: O's administrators and those
//     above it may read (never change) the roots of O's persons, each
//     only where their own organization's policy has it too: false there
//     binds them in O and everywhere below O, as admin_create_users does,
//     except for a top-level organization's, which its administrators
//     set themselves.
//   - An administrator of O, or of an organization above it, may end the
//     resumable uploads in progress into any root of O (a person's or a
//     share's; ManagesRoot): that frees room under O's quota and reads
//     nothing, so it is managing, not browsing, and admin_browse_files
//     does not enter into it.
//   - A guest reaches only what is shared with it.
//
// A caller who may see a thing but not do what was asked gets ErrForbidden.

// ErrForbidden: the caller sees the organization or person but may not do
// what was asked (spec 7.1 403 forbidden).
var ErrForbidden = errors.New("share: forbidden")

// Refusal is ErrForbidden with the reason, which front ends show the
// caller (its Description).
type Refusal struct{ Reason string }

func (e *Refusal) Error() string { return "share: forbidden: " + e.Reason }

// Unwrap makes a Refusal match ErrForbidden.
func (e *Refusal) Unwrap() error { return ErrForbidden }

// Description is the reason, for the error_description.
func (e *Refusal) Description() string { return e.Reason }

func refuse(reason string) error { return &Refusal{Reason: reason} }

// ErrNotFound: there is no such organization or person, or the caller
// may not see it; the two look the same so ids cannot be probed.
var ErrNotFound = errors.New("share: not found")

// OrgAction is what a caller asks to do with an organization.
type OrgAction int

// The organization actions, from least to most.
const (
	// OrgRead: read the organization object.
	OrgRead OrgAction = iota
	// OrgManage: update its fields, list what it holds (organizations,
	// roots, machines, persons, guests, groups, activity, usage), create
	// child organizations and groups in it.
	OrgManage
	// OrgCreateUsers: create persons and guests in it, delete them.
	OrgCreateUsers
	// OrgGovern: update its policy, disable, enable or delete it.
	OrgGovern
)

// Organization returns organization id if caller c may do act with it.
//
// Errors: ErrNotFound (no such organization, or out of c's sight);
// ErrForbidden; account.ErrInactive for a disabled caller.
func (s *Service) Organization(ctx context.Context, c account.Caller, id uint64, act OrgAction) (account.Organization, error) {
	if err := active(c); err != nil {
		return account.Organization{}, err
	}
	// A deleted organization, and what is below it, no longer exists
	// for the API (its roots answer root_deleted through Root).
	place, err := s.accounts.OrgPlaceOf(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return account.Organization{}, ErrNotFound
	}
	if err != nil {
		return account.Organization{}, err
	}
	own := id == c.Person.OrganizationID
	manages := c.Person.Admin && !c.Person.Guest && account.Within(place.Chain, c.Person.OrganizationID)
	if !own && !manages {
		return account.Organization{}, ErrNotFound
	}
	org := place.Organization
	if err := orgAllows(c, org, manages, act); err != nil {
		return account.Organization{}, err
	}
	return org, nil
}

// orgAllows applies the model to a caller who sees org; manages says
// whether c administers it or an organization above it.
func orgAllows(c account.Caller, org account.Organization, manages bool, act OrgAction) error {
	above := manages && org.ID != c.Person.OrganizationID
	switch act {
	case OrgRead:
		return nil
	case OrgManage:
		if manages {
			return nil
		}
		return refuse("only administrators manage an organization")
	case OrgCreateUsers:
		if !manages {
			return refuse("only administrators create and delete users")
		}
		// The policy the caller acts under (their organization's,
		// withheld where an ancestor below the top level withholds
		// it: account's effectivePolicy) binds its administrators
		// everywhere they manage: a child organization of their own
		// making (whose policy they set), or an administrator they
		// made or promoted there, is no way around it. Those above
		// still create users in it.
		if c.Organization.Policy.AdminCreateUsers {
			return nil
		}
		return refuse("your organization's policy does not let its administrators create or delete users (admin_create_users), in it or below it")
	case OrgGovern:
		if above || (manages && org.ParentID == 0) {
			return nil
		}
		if manages {
			return refuse("an organization's policy and state are changed by the administrators of the organization above it")
		}
		return refuse("only administrators manage an organization")
	}
	return refuse("unknown action")
}

// PersonAction is what a caller asks to do with a person or guest.
type PersonAction int

// The person actions.
const (
	// PersonRead: read the person or guest object and their activity.
	PersonRead PersonAction = iota
	// PersonUpdateSelf: change the fields a person changes about
	// themselves (names, e-mail, their password with the current one).
	PersonUpdateSelf
	// PersonAdminister: change what only administrators change (quota,
	// administrator flag, active, another's password), create their roots.
	PersonAdminister
	// PersonDelete: delete them (or convert a guest).
	PersonDelete
)

// Person returns person or guest id if caller c may do act with them.
// The caller's own record is read fresh, like any other.
//
// Errors: ErrNotFound (no such person, or out of c's sight);
// ErrForbidden; account.ErrInactive for a disabled caller.
func (s *Service) Person(ctx context.Context, c account.Caller, id uint64, act PersonAction) (account.Person, error) {
	if err := active(c); err != nil {
		return account.Person{}, err
	}
	p, err := s.accounts.Person(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return account.Person{}, ErrNotFound
	}
	if err != nil {
		return account.Person{}, err
	}
	self := p.ID == c.Person.ID
	manages := false
	if c.Person.Admin && !c.Person.Guest {
		place, err := s.accounts.OrgPlaceOf(ctx, p.OrganizationID)
		if errors.Is(err, account.ErrNotFound) {
			return account.Person{}, ErrNotFound
		}
		if err != nil {
			return account.Person{}, err
		}
		manages = account.Within(place.Chain, c.Person.OrganizationID)
	}
	if !self && !manages {
		return account.Person{}, ErrNotFound
	}
	switch act {
	case PersonRead:
		return p, nil
	case PersonUpdateSelf:
		if self || manages {
			return p, nil
		}
	case PersonAdminister:
		if manages {
			return p, nil
		}
		return account.Person{}, refuse("only administrators change that")
	case PersonDelete:
		if self {
			return account.Person{}, refuse("nobody deletes their own account; another administrator does")
		}
		org, err := s.accounts.Organization(ctx, p.OrganizationID)
		if err != nil {
			return account.Person{}, err
		}
		if err := orgAllows(c, org, manages, OrgCreateUsers); err != nil {
			return account.Person{}, err
		}
		return p, nil
	}
	return account.Person{}, refuse("only administrators change that")
}

// NewRoot creates a root of type typ named name in vfs and records its
// owner: person owner, or owner's organization alone when shared is true
// (a share root). A person's first sync root becomes their root_id.
// Permission is the caller's to check first (Person, PersonAdminister).
// The root counts, from its creation, into the tallies of owner, owner's
// organization and every ancestor (account.RootTallies): what
// space_usage, metrics/usage and the quotas read.
func (s *Service) NewRoot(ctx context.Context, owner account.Person, name string, typ vfs.RootType) (vfs.Root, error) {
	return s.newRoot(ctx, owner, name, typ, s.accounts.AddRoot)
}

// FirstSyncRoot makes person p's sync root, named after their username,
// unless p has one by the time it is recorded (account.AddFirstSyncRoot):
// then the root made is deleted again and made is false. It is the root
// an import gives the persons it made or found rootless, which another
// import running alongside may give them first; NewRoot would make them
// a second sync root.
func (s *Service) FirstSyncRoot(ctx context.Context, p account.Person) (r vfs.Root, made bool, err error) {
	r, err = s.newRoot(ctx, p, p.Username, vfs.RootSync, s.accounts.AddFirstSyncRoot)
	if errors.Is(err, account.ErrExists) {
		return vfs.Root{}, false, nil
	}
	return r, err == nil, err
}

func (s *Service) newRoot(ctx context.Context, owner account.Person, name string, typ vfs.RootType,
	add func(context.Context, account.RootOwner) (account.RootOwner, error)) (vfs.Root, error) {
	tallies, err := s.accounts.RootTallies(ctx, owner, string(typ))
	if err != nil {
		return vfs.Root{}, err
	}
	r, err := s.fs.CreateRootWith(ctx, name, typ, vfs.RootOptions{Tallies: tallies})
	if err != nil {
		return vfs.Root{}, err
	}
	o := account.RootOwner{RootID: r.ID, PersonID: owner.ID, OrganizationID: owner.OrganizationID, Type: string(typ)}
	if _, err := add(ctx, o); err != nil {
		// The owner went meanwhile (a delete racing roots/create), or
		// has the root FirstSyncRoot would have made:
		// the empty root is deleted again, so that it leaves the
		// tallies it was counted into; nobody could reach or delete
		// it otherwise.
		if derr := s.fs.DeleteRoot(context.WithoutCancel(ctx), r.ID); derr != nil {
			return vfs.Root{}, errors.Join(err, derr)
		}
		return vfs.Root{}, err
	}
	return r, nil
}

// ManagesRoot returns nil when caller c administers root id: c is an
// administrator (not a guest) of the organization the root belongs to
// (its owner's, or the organization's of a share root) or of one above
// it. Such an administrator may end the uploads in progress into it,
// whoever made them; nothing of the root is read.
//
// Errors: ErrNoRoot (no such root, or not one c administers);
// account.ErrInactive for a disabled caller.
func (s *Service) ManagesRoot(ctx context.Context, c account.Caller, id uint64) error {
	if err := active(c); err != nil {
		return err
	}
	if !c.Person.Admin || c.Person.Guest || s.accounts == nil {
		return ErrNoRoot
	}
	p, err := s.accounts.RootPlaceOf(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return ErrNoRoot
	}
	if err != nil {
		return err
	}
	if !account.Within(p.Chain, c.Person.OrganizationID) {
		return ErrNoRoot
	}
	return nil
}
