package account

import (
	"context"
	"fmt"

	"berth/kv"
)

// RootOwner says whose a vfs root is. vfs knows nothing of people, so
// account keeps the link: it is what lets an administrator's request for
// a root be checked against the owner's organization, and an
// organization list its roots.
type RootOwner struct {
	RootID         uint64 `cbor:"1,keyasint"`
	PersonID       uint64 `cbor:"2,keyasint"` // 0: the organization's own (a share root)
	OrganizationID uint64 `cbor:"3,keyasint"`
	// Type is the vfs root type ("sync", "share", "backup").
	Type string `cbor:"4,keyasint"`
}

// AddRoot records that root o.RootID, created by the caller in vfs, is
// owned by o.PersonID (or by organization o.OrganizationID when PersonID
// is 0). The organization is the person's; a person's first sync root
// becomes their RootID. Errors: ErrNotFound (person or organization, or
// an organization deleted, or below a deleted one),
// ErrInvalid (no root id).
func (s *Service) AddRoot(ctx context.Context, o RootOwner) (RootOwner, error) {
	return s.addRoot(ctx, o, false)
}

// AddFirstSyncRoot records sync root o.RootID as person o.PersonID's
// first, their RootID, as AddRoot does, and refuses with ErrExists when
// the person has one already. The check is in the transaction that
// records it: two steps that each found the person rootless (an import's
// roots for the persons it made, and another import's for those it found
// without one, ImportReport.Rootless) make one root between them, where
// checking first made the person a second sync root. Errors: those of
// AddRoot, and ErrExists.
func (s *Service) AddFirstSyncRoot(ctx context.Context, o RootOwner) (RootOwner, error) {
	if o.PersonID == 0 || o.Type != "sync" {
		return RootOwner{}, invalid("person_id", "a person's sync root")
	}
	return s.addRoot(ctx, o, true)
}

func (s *Service) addRoot(ctx context.Context, o RootOwner, firstOnly bool) (RootOwner, error) {
	if o.RootID == 0 {
		return RootOwner{}, invalid("root_id", "required")
	}
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		if o.PersonID != 0 {
			var p Person
			if err := s.get(tx, key(pfxPerson, o.PersonID), &p, notFoundf("person %d", o.PersonID)); err != nil {
				return err
			}
			o.OrganizationID = p.OrganizationID
			if _, err := s.undeletedChain(tx, p.OrganizationID, notFoundf("organization %d", p.OrganizationID)); err != nil {
				return err
			}
			if firstOnly && p.RootID != 0 {
				return fmt.Errorf("%w: person %d has a sync root (%d)", ErrExists, p.ID, p.RootID)
			}
			if o.Type == "sync" && p.RootID == 0 {
				old := p
				p.RootID = o.RootID
				if err := s.putPerson(tx, &p, &old); err != nil {
					return err
				}
			}
		} else if _, err := s.undeletedChain(tx, o.OrganizationID, notFoundf("organization %d", o.OrganizationID)); err != nil {
			return err
		}
		return s.putRoot(tx, o)
	})
	return o, err
}

func (s *Service) putRoot(tx kv.Txn, o RootOwner) error {
	if err := tx.Set(key(pfxOrgRoot, o.OrganizationID, o.RootID), nil); err != nil {
		return err
	}
	return s.put(tx, key(pfxRoot, o.RootID), &o)
}

// RootOwnerOf returns who owns root id. Errors: ErrNotFound (no owner
// recorded: not a root of any person or organization).
//
// An owner is kept until the store's next commit outside file contents
// (kv.MetaGeneration), which file writes do not make: the activity
// journal asks for it in every file change, where it was a read of its
// own. A root not found (one whose owner is recorded after the change
// that creates it) is asked again next time.
func (s *Service) RootOwnerOf(ctx context.Context, id uint64) (RootOwner, error) {
	gen := kv.MetaGeneration(s.db)
	if o, ok := s.callers.owners.Get(gen, id); ok {
		return o, nil
	}
	var o RootOwner
	err := s.db.View(ctx, func(tx kv.Txn) error {
		return s.get(tx, key(pfxRoot, id), &o, notFoundf("root %d", id))
	})
	if err == nil {
		s.callers.owners.Put(gen, id, o)
	}
	return o, err
}

// OrganizationRoots returns one page of the ids of the roots owned in
// organization id (by its persons or itself), in id order, and how many
// there are in all. Errors: ErrNotFound.
func (s *Service) OrganizationRoots(ctx context.Context, id uint64, offset, limit int) ([]RootOwner, int, error) {
	var (
		out   []RootOwner
		total int
	)
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out, total = nil, 0
		if ok, err := exists(tx, key(pfxOrg, id)); err != nil || !ok {
			if err == nil {
				err = notFoundf("organization %d", id)
			}
			return err
		}
		prefix := key(pfxOrgRoot, id)
		// Roots are not counted in countRec (vfs, not account, creates
		// and deletes them), so the total is a key-only scan.
		return tx.Scan(prefix, nil, func(k, _ []byte) error {
			if total >= offset && len(out) < limit {
				var o RootOwner
				rid := kv.Uint64At(k, len(prefix))
				if err := s.get(tx, key(pfxRoot, rid), &o, notFoundf("root %d", rid)); err != nil {
					return err
				}
				out = append(out, o)
			}
			total++
			return nil
		})
	})
	return out, total, err
}

// RootPlace is where a root sits in the tree: its owner, the chain of
// its owner's organization (as Chain returns it) and that organization.
type RootPlace struct {
	Owner        RootOwner
	Chain        []uint64
	Organization Organization
	// Policy governs writes into the root: Organization's own tightened
	// by every ancestor's (effectivePolicy), as for the persons of
	// Organization. Organization.Policy alone let a child organization's
	// shares escape the limits its parent sets (a child starts with the
	// default policy). What the organization's own administrators may do
	// (admin_*) stays Organization.Policy's.
	Policy Policy
	// SpaceQuotas are the space quotas in bytes of the organizations of
	// Chain, in its order (0: none), read with them: share holds a
	// share's writes to each, and read every organization of the chain
	// again for it on each request.
	SpaceQuotas []int64
}

// RootPlaceOf returns where root id sits, read in one transaction and
// kept until the store's next commit: share asks it on every request an
// administrator makes for another's root. Errors: ErrNotFound.
func (s *Service) RootPlaceOf(ctx context.Context, id uint64) (RootPlace, error) {
	gen := s.db.Generation()
	if p, ok := s.callers.roots.Get(gen, id); ok {
		return p, nil
	}
	var p RootPlace
	err := s.db.View(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxRoot, id), &p.Owner, notFoundf("root %d", id)); err != nil {
			return err
		}
		orgs, err := s.chain(tx, p.Owner.OrganizationID, notFoundf("organization %d", p.Owner.OrganizationID))
		if err != nil {
			return err
		}
		p.Chain, p.Organization, p.Policy = chainIDs(orgs), orgs[0], effectivePolicy(orgs)
		p.SpaceQuotas = make([]int64, len(orgs))
		for i, o := range orgs {
			p.SpaceQuotas[i] = o.Policy.SpaceQuotaBytes()
		}
		return nil
	})
	if err != nil {
		return RootPlace{}, err
	}
	s.callers.roots.Put(gen, id, p)
	return p, nil
}

// Store is the key-value store the account records live in. share keeps
// its organization shares' subscribers in it, beside the roots' owners
// they belong to, so one store holds who reaches what.
func (s *Service) Store() kv.Store { return s.db }
