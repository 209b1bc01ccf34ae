package account

import (
	"context"

	"berth/kv"
)

// Counts are what an organization holds (spec 2.8
// organization_usage_counts): persons (Accounts, of whom AdminAccounts
// administer), groups, guests, machines, and child organizations.
type Counts struct {
	Accounts      int64 `cbor:"1,keyasint"`
	AdminAccounts int64 `cbor:"2,keyasint"`
	Groups        int64 `cbor:"3,keyasint"`
	Guests        int64 `cbor:"4,keyasint"`
	Machines      int64 `cbor:"5,keyasint"`
	Organizations int64 `cbor:"6,keyasint"`
}

func (c *Counts) add(d Counts, sign int64) {
	c.Accounts += sign * d.Accounts
	c.AdminAccounts += sign * d.AdminAccounts
	c.Groups += sign * d.Groups
	c.Guests += sign * d.Guests
	c.Machines += sign * d.Machines
	c.Organizations += sign * d.Organizations
}

// countRec is an organization's counts, kept in the transactions that
// change what they count, so that a paged list's total and
// metrics/usage's counts are reads, never recounts. Direct counts what
// the organization holds itself (Organizations: its children); Subtree
// adds everything its descendants hold (Organizations: all descendants),
// which is what a parent's num_users_maximum bounds.
type countRec struct {
	Direct  Counts `cbor:"1,keyasint"`
	Subtree Counts `cbor:"2,keyasint"`
}

// loadCounts reads organization id's counts. With mustExist, a missing
// organization is ErrNotFound; without, it reads as zero counts.
func (s *Service) loadCounts(tx kv.Txn, id uint64, mustExist bool) (countRec, error) {
	if mustExist {
		ok, err := exists(tx, key(pfxOrg, id))
		if err != nil {
			return countRec{}, err
		}
		if !ok {
			return countRec{}, notFoundf("organization %d", id)
		}
	}
	var cr countRec
	err := s.get(tx, key(pfxCount, id), &cr, nil) // missing: all zero
	return cr, err
}

// count adds d (sign +1) or takes it away (sign -1) from the Direct
// counts of chain[0] and the Subtree counts of every organization of
// chain, the organization's ids with its ancestors (as Chain returns).
func (s *Service) count(tx kv.Txn, chain []uint64, d Counts, sign int64) error {
	for i, id := range chain {
		cr, err := s.loadCounts(tx, id, false)
		if err != nil {
			return err
		}
		if i == 0 {
			cr.Direct.add(d, sign)
		}
		cr.Subtree.add(d, sign)
		if err := s.put(tx, key(pfxCount, id), &cr); err != nil {
			return err
		}
	}
	return nil
}

// countIn is count for organization orgID, whose chain it reads. The
// chain stops at a deleted organization: DeleteOrganization took its
// subtree's counts away from its ancestors, so a later change inside
// that subtree is not theirs either.
func (s *Service) countIn(tx kv.Txn, orgID uint64, d Counts, sign int64) error {
	orgs, err := s.chain(tx, orgID, notFoundf("organization %d", orgID))
	if err != nil {
		return err
	}
	for i, o := range orgs {
		if o.Deleted {
			orgs = orgs[:i+1]
			break
		}
	}
	return s.count(tx, chainIDs(orgs), d, sign)
}

// Counts returns what organization id holds itself (direct) and with all
// its descendants (subtree). Errors: ErrNotFound.
func (s *Service) Counts(ctx context.Context, id uint64) (direct, subtree Counts, err error) {
	var cr countRec
	err = s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		cr, err = s.loadCounts(tx, id, true)
		return err
	})
	return cr.Direct, cr.Subtree, err
}
