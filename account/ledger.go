package account

import (
	"context"
	"fmt"
)

// Tallies are the ledger ids under which vfs sums the usage of many roots
// (vfs.RootOptions.Tallies): a root is counted for the person who owns it,
// and for its organization and every ancestor of it, by root type and for
// all types together. metrics/usage of an organization, subtree included,
// and a person's space_usage are then a few reads, kept exact in the
// transactions that change the roots, and the space_quota of a person or
// of any organization above a root is checked against one sum.
//
// A tally id is a uint64: the top byte is the kind (1 a person, 2 an
// organization), the next byte the root type for an organization (0 all
// types, 1 sync, 2 share, 3 backup; 0 for a person), and the low 48 bits
// the person's or organization's id. Ids come from sequences and stay far
// below 2^48. The layout is stored (in every root's record): never change
// a number.
const (
	tallyPerson = 1
	tallyOrg    = 2
	tallyIDBits = 48
	tallyIDMask = 1<<tallyIDBits - 1
)

// tallyType numbers a root type in an organization's tally; 0 is all of
// them, and false an unknown type.
func tallyType(rootType string) (uint64, bool) {
	switch rootType {
	case "sync":
		return 1, true
	case "share":
		return 2, true
	case "backup":
		return 3, true
	}
	return 0, rootType == ""
}

// TallyPerson is the tally of every root person id owns, of every type.
func TallyPerson(id uint64) uint64 {
	return tallyPerson<<56 | id&tallyIDMask
}

// TallyOrg is the tally of every root of rootType ("sync", "share",
// "backup"; "" for all types) owned in organization id or any of its
// descendants. An unknown type is counted as all types: it names no
// tally of its own.
func TallyOrg(id uint64, rootType string) uint64 {
	t, _ := tallyType(rootType)
	return tallyOrg<<56 | t<<tallyIDBits | id&tallyIDMask
}

// RootTallies returns the tallies a new root of rootType owned by owner
// counts into: the person's (when owner.ID is not 0; 0 is a root of the
// organization's own) and, for owner's organization and each ancestor,
// the one of the type and the one of all types. Errors: ErrNotFound for
// a missing organization, or a deleted one (no root is made in it).
func (s *Service) RootTallies(ctx context.Context, owner Person, rootType string) ([]uint64, error) {
	if t, ok := tallyType(rootType); !ok || t == 0 {
		return nil, fmt.Errorf("account: root type %q has no tally", rootType)
	}
	place, err := s.OrgPlaceOf(ctx, owner.OrganizationID)
	if err != nil {
		return nil, err
	}
	chain := place.Chain
	out := make([]uint64, 0, 1+2*len(chain))
	if owner.ID != 0 {
		out = append(out, TallyPerson(owner.ID))
	}
	for _, id := range chain {
		out = append(out, TallyOrg(id, rootType), TallyOrg(id, ""))
	}
	return out, nil
}

// TallyQuota bounds the physical bytes of one tally (vfs.Quota's values:
// account does not import vfs). Bytes 0 is no limit.
type TallyQuota struct {
	Tally uint64
	Bytes int64
	// Shared: the tally sums the roots of more than one person (an
	// organization's), whose resumable uploads share the quota fairly
	// (vfs.Quota.Shared).
	Shared bool
}

// Quotas returns what c's writes into their own roots are held to: c's
// space_quota on their person tally, and the space_quota of their
// organization and of every ancestor on that organization's tally of all
// types, so a parent's quota bounds its whole subtree. Quotas of 0
// (unlimited) are left out.
func (c Caller) Quotas() []TallyQuota {
	var out []TallyQuota
	if c.Person.SpaceQuota > 0 {
		out = append(out, TallyQuota{Tally: TallyPerson(c.Person.ID), Bytes: c.Person.SpaceQuota})
	}
	for i, id := range c.Chain {
		if i < len(c.ChainQuotas) && c.ChainQuotas[i] > 0 {
			out = append(out, TallyQuota{Tally: TallyOrg(id, ""), Bytes: c.ChainQuotas[i], Shared: true})
		}
	}
	return out
}

// chainQuotas is the space_quota in bytes of each organization of a chain.
func chainQuotas(orgs []Organization) []int64 {
	q := make([]int64, len(orgs))
	for i, o := range orgs {
		q[i] = o.Policy.SpaceQuotaBytes()
	}
	return q
}
