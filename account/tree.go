package account

import (
	"context"
	"fmt"
	"math"

	"berth/kv"
)

// MaxOrgDepth bounds how deep organizations nest: a top-level
// organization is at depth 1. Every request walks its caller's chain of
// organizations to the top (a disabled ancestor disables its whole
// subtree), so the bound is what keeps that walk cheap; no real company
// nests its departments 16 deep.
const MaxOrgDepth = 16

// chain returns organization id and its ancestors, itself first and the
// top-level organization last. Errors: notFound when id does not exist.
func (s *Service) chain(tx kv.Txn, id uint64, notFound error) ([]Organization, error) {
	var out []Organization
	for p := id; p != 0; {
		if len(out) > MaxOrgDepth {
			return nil, fmt.Errorf("account: organization %d nests deeper than %d", id, MaxOrgDepth)
		}
		var o Organization
		if err := s.get(tx, key(pfxOrg, p), &o, notFound); err != nil {
			return nil, err
		}
		out = append(out, o)
		p = o.ParentID
		notFound = fmt.Errorf("account: organization %d has a missing ancestor %d", id, p)
	}
	return out, nil
}

// undeletedChain is chain for an organization that must not be deleted,
// nor any above it: nothing new goes into a deleted organization's
// subtree (a create that raced the delete after its permission check
// would leave an account nobody reaches, or a root counted into the
// tallies above for ever). Errors: notFound, for a deleted one too.
func (s *Service) undeletedChain(tx kv.Txn, id uint64, notFound error) ([]Organization, error) {
	orgs, err := s.chain(tx, id, notFound)
	if err != nil {
		return nil, err
	}
	for _, o := range orgs {
		if o.Deleted {
			return nil, notFound
		}
	}
	return orgs, nil
}

// chainIDs is chain's organization ids.
func chainIDs(orgs []Organization) []uint64 {
	ids := make([]uint64, len(orgs))
	for i, o := range orgs {
		ids[i] = o.ID
	}
	return ids
}

// Chain returns the ids of organization id and its ancestors, itself
// first and the top-level organization last: the organizations whose
// administrators manage id. Errors: ErrNotFound.
func (s *Service) Chain(ctx context.Context, id uint64) ([]uint64, error) {
	var ids []uint64
	err := s.db.View(ctx, func(tx kv.Txn) error {
		orgs, err := s.chain(tx, id, notFoundf("organization %d", id))
		ids = chainIDs(orgs)
		return err
	})
	return ids, err
}

// ChainLive is Chain for an organization that must be live: it and every
// ancestor active and not deleted. Errors: ErrNotFound, ErrInactive.
func (s *Service) ChainLive(ctx context.Context, id uint64) ([]uint64, error) {
	var ids []uint64
	err := s.db.View(ctx, func(tx kv.Txn) error {
		orgs, err := s.chain(tx, id, notFoundf("organization %d", id))
		if err != nil {
			return err
		}
		if err := live(orgs); err != nil {
			return err
		}
		ids = chainIDs(orgs)
		return nil
	})
	return ids, err
}

// live refuses a chain with a disabled or deleted organization in it: a
// disabled organization disables its descendants too.
func live(orgs []Organization) error {
	for _, o := range orgs {
		if !o.Active || o.Deleted {
			return ErrInactive
		}
	}
	return nil
}

// Within reports whether chain (as Chain returns it) passes through
// organization id: whether id is the organization or one of its ancestors.
func Within(chain []uint64, id uint64) bool {
	for _, c := range chain {
		if c == id {
			return true
		}
	}
	return false
}

// ChildOrganizations returns one page of organization id's direct
// children in id order and how many it has. Errors: ErrNotFound.
func (s *Service) ChildOrganizations(ctx context.Context, id uint64, offset, limit int) ([]Organization, int, error) {
	return listPage[Organization](ctx, s, id, pfxOrgChild, pfxOrg, func(c Counts) int64 { return c.Organizations }, offset, limit)
}

// listPage returns one page of what organization orgID lists under the
// index prefix index (keys index<org><id>), each record read from
// records<id>, in id order, and the list's length, which count picks
// from the organization's direct counts: the total is a read, and the
// page a scan to its end. Errors: ErrNotFound (the organization).
func listPage[T any](ctx context.Context, s *Service, orgID uint64, index, records string, count func(Counts) int64, offset, limit int) ([]T, int, error) {
	var (
		out   []T
		total int
	)
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = nil
		cr, err := s.loadCounts(tx, orgID, true)
		if err != nil {
			return err
		}
		total = int(count(cr.Direct))
		prefix := key(index, orgID)
		return scanPage(tx, prefix, offset, limit, func(k []byte) error {
			id := kv.Uint64At(k, len(prefix))
			var v T
			if err := s.get(tx, key(records, id), &v, fmt.Errorf("account: %s%d is listed under %s%d but missing", records, id, index, orgID)); err != nil {
				return err
			}
			out = append(out, v)
			return nil
		})
	})
	return out, total, err
}

// listed returns every record owner lists under the index prefix index
// (keys index<owner><id>), each read from records<id>, in id order: the
// whole of a short list (a person's machines, a machine's mappings).
func listed[T any](s *Service, tx kv.Txn, index string, owner uint64, records string) ([]T, error) {
	var out []T
	prefix := key(index, owner)
	err := scanPage(tx, prefix, 0, math.MaxInt, func(k []byte) error {
		id := kv.Uint64At(k, len(prefix))
		var v T
		if err := s.get(tx, key(records, id), &v, fmt.Errorf("account: %s%d is listed under %s%d but missing", records, id, index, owner)); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// scanPage calls fn with the keys under prefix from the offset-th (0
// first) on, at most limit of them, in key order. It reads keys only as
// far as the page's end: a deep page costs a scan to its offset, never
// the whole list.
func scanPage(tx kv.Txn, prefix []byte, offset, limit int, fn func(key []byte) error) error {
	if limit <= 0 {
		return nil
	}
	i := 0
	return tx.Scan(prefix, nil, func(k, _ []byte) error {
		if i >= offset+limit {
			return kv.ErrStop
		}
		i++
		if i <= offset {
			return nil
		}
		return fn(k)
	})
}

// OrgPlace is an organization with the ids of its chain (itself first, as
// Chain returns them).
type OrgPlace struct {
	Organization Organization
	Chain        []uint64
}

// OrgPlaceOf returns organization id with its chain, when neither it nor
// an ancestor is deleted (a deleted organization, and everything below
// one, is gone for the API). It is read in one transaction and kept until
// the store's next commit: share asks it on every request of the
// organization routes. Errors: ErrNotFound.
func (s *Service) OrgPlaceOf(ctx context.Context, id uint64) (OrgPlace, error) {
	gen := s.db.Generation()
	if p, ok := s.callers.orgs.Get(gen, id); ok {
		return p, nil
	}
	var p OrgPlace
	err := s.db.View(ctx, func(tx kv.Txn) error {
		orgs, err := s.chain(tx, id, notFoundf("organization %d", id))
		if err != nil {
			return err
		}
		for _, o := range orgs {
			if o.Deleted {
				return notFoundf("organization %d (deleted)", o.ID)
			}
		}
		p = OrgPlace{Organization: orgs[0], Chain: chainIDs(orgs)}
		return nil
	})
	if err != nil {
		return OrgPlace{}, err
	}
	s.callers.orgs.Put(gen, id, p)
	return p, nil
}
