package account

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"berth/kv"
)

// Group is a collection of persons and of other groups (spec 2.11),
// for sharing with many people at once. A group belongs to one
// organization; its members are persons (not guests) and groups of that
// organization or of the organizations below it, so that a department's
// group can gather people from its sub-departments, while nothing of a
// parent or sibling organization, which the group's administrators do
// not see, can be put in it.
//
// Groups nest: the persons of a member group are members of the group
// through it (spec members_from_group), at any depth. A group never
// contains itself, directly or through other groups (ErrGroupCycle).
type Group struct {
	ID             uint64    `cbor:"1,keyasint"`
	OrganizationID uint64    `cbor:"2,keyasint"` // spec company_id
	Name           string    `cbor:"3,keyasint"`
	Created        time.Time `cbor:"4,keyasint"`
	// Active false keeps the group and its members but marks it
	// disabled; what that withholds is decided where groups are used
	// (group shares, the sharing issue).
	Active bool `cbor:"5,keyasint"`
	// Persons and Groups count the direct members, kept in the
	// transactions that change them, so that MaxGroupMembers is checked
	// without a scan.
	Persons int64 `cbor:"6,keyasint"`
	Groups  int64 `cbor:"7,keyasint"`
	// Deleting marks a group whose deletion (DeleteGroup) is recorded
	// and under way: its memberships are going in batches, and the group
	// goes after them.
	Deleting bool `cbor:"8,keyasint,omitempty"`
}

// MaxGroupMembers bounds a group's direct members, persons and groups
// together. GET members answers them in one unpaged array (spec 4.10),
// and deleting a group or changing its members writes them at most
// membershipBatch per transaction, so all stay bounded; larger sets are
// built by nesting groups.
const MaxGroupMembers = 10000

// GroupInput are the fields set when creating a group.
type GroupInput struct {
	OrganizationID uint64 // required, an existing organization not deleted
	Name           string // required; trimmed; at most 255 bytes, no control characters
}

// GroupUpdate are the fields UpdateGroup changes; nil leaves one as it is.
type GroupUpdate struct {
	Name   *string
	Active *bool
}

// MembersChange is one change of a group's direct members. Removals
// apply before additions; removing what is not a member and adding what
// is already one change nothing. An id may not be both added and removed.
type MembersChange struct {
	AddPersons    []uint64
	RemovePersons []uint64
	AddGroups     []uint64
	RemoveGroups  []uint64
}

// Members are a group's members (spec 4.10 GET members), each list
// sorted by id and never nil.
type Members struct {
	Persons []uint64 // spec members: the direct member persons
	// PersonsFromGroups (spec members_from_group) are the persons who are
	// members through member groups, at any depth, but not directly.
	PersonsFromGroups []uint64
	Groups            []uint64 // spec member_groups: the direct member groups
	// GroupsFromGroups (spec member_groups_from_group) are the groups
	// contained through member groups, at any depth, but not directly.
	GroupsFromGroups []uint64
}

// GroupCycleError is ErrGroupCycle with the cycle the refused change
// would have made. It unwraps to ErrGroupCycle.
type GroupCycleError struct {
	// Path is the cycle, from the group being changed back to itself:
	// Path[i] would contain Path[i+1]. [A, A] is a group added to itself.
	Path []uint64
}

// Error names the cycle, for logs.
func (e *GroupCycleError) Error() string { return "account: group membership cycle: " + e.cycle() }

// Unwrap makes errors.Is(err, ErrGroupCycle) true.
func (e *GroupCycleError) Unwrap() error { return ErrGroupCycle }

// Description names the cycle for the client who asked for it.
func (e *GroupCycleError) Description() string {
	if len(e.Path) <= 2 {
		return fmt.Sprintf("group %d cannot contain itself", e.Path[0])
	}
	return "a group cannot contain itself, directly or through other groups: " + e.cycle()
}

func (e *GroupCycleError) cycle() string {
	var b strings.Builder
	for i, id := range e.Path {
		switch {
		case i == 0:
			b.WriteString("group ")
		case i == 1:
			b.WriteString(" would contain group ")
		default:
			b.WriteString(", which contains group ")
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	return b.String()
}

// groupChange is a Change acting on group g.
func groupChange(activity string, g Group) Change {
	return Change{Activity: activity, OnType: "group", OnText: g.Name, OnCompanyID: g.OrganizationID, OnGroupID: g.ID}
}

func validGroupName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", invalid("name", "required")
	}
	if len(name) > 255 || hasControl(name) {
		return "", invalid("name", "longer than 255 bytes or has control characters")
	}
	return name, nil
}

// CreateGroup stores a new active group without members. Names need not
// be unique: the id tells groups apart. Errors: ErrInvalid (a
// *FieldError: the name, or a company_id that names no organization or a
// deleted one).
func (s *Service) CreateGroup(ctx context.Context, in GroupInput) (Group, error) {
	name, err := validGroupName(in.Name)
	if err != nil {
		return Group{}, err
	}
	if in.OrganizationID == 0 {
		return Group{}, invalid("company_id", "required")
	}
	id, err := s.db.NextID(ctx, seqGroup)
	if err != nil {
		return Group{}, err
	}
	g := Group{ID: id, OrganizationID: in.OrganizationID, Name: name, Created: s.now(), Active: true}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		orgs, err := s.chain(tx, g.OrganizationID, invalid("company_id", "no such organization"))
		if err != nil {
			return err
		}
		for _, o := range orgs {
			if o.Deleted {
				return invalid("company_id", "the organization or one above it is deleted")
			}
		}
		if err := tx.Set(key(pfxOrgGroup, g.OrganizationID, g.ID), nil); err != nil {
			return err
		}
		if err := s.count(tx, chainIDs(orgs), Counts{Groups: 1}, 1); err != nil {
			return err
		}
		if err := s.put(tx, key(pfxGroup, g.ID), &g); err != nil {
			return err
		}
		return s.record(ctx, tx, groupChange(ActGroupCreated, g))
	})
	if err != nil {
		return Group{}, err
	}
	return g, nil
}

// Group returns the group with id, or ErrNotFound.
func (s *Service) Group(ctx context.Context, id uint64) (Group, error) {
	var g Group
	err := s.db.View(ctx, func(tx kv.Txn) error {
		return s.get(tx, key(pfxGroup, id), &g, notFoundf("group %d", id))
	})
	return g, err
}

// UpdateGroup changes the group's name or active flag. A change that
// changes nothing is not stored nor recorded. Errors: ErrNotFound,
// ErrInvalid.
func (s *Service) UpdateGroup(ctx context.Context, id uint64, u GroupUpdate) (Group, error) {
	var name string
	if u.Name != nil {
		var err error
		if name, err = validGroupName(*u.Name); err != nil {
			return Group{}, err
		}
	}
	var g Group
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxGroup, id), &g, notFoundf("group %d", id)); err != nil {
			return err
		}
		var changed []string
		if u.Name != nil && name != g.Name {
			g.Name = name
			changed = append(changed, "name")
		}
		if u.Active != nil && *u.Active != g.Active {
			g.Active = *u.Active
			changed = append(changed, "active")
		}
		if len(changed) == 0 {
			return nil
		}
		if err := s.put(tx, key(pfxGroup, id), &g); err != nil {
			return err
		}
		c := groupChange(ActGroupUpdated, g)
		c.Data = strings.Join(changed, ", ")
		return s.record(ctx, tx, c)
	})
	if err != nil {
		return Group{}, err
	}
	return g, nil
}

// membershipBatch is the most memberships one transaction writes when
// UpdateMembers or DeleteGroup has more to write. Each is two keys (an
// addition also writes its member's record back, link); the
// metadata store bounds a transaction's keys by its memtable (8 MiB,
// the default: some 13,000; 3 MiB still takes a batch, 1 MiB, the least
// memory.kv_memtable takes, does not: there a batch the store refuses
// with kv.ErrTxnTooBig is halved until it fits), while a request may add
// MaxGroupMembers at once and a full group holds as many.
const membershipBatch = 2000

// batchHint is the batch of memberships a large change starts at: the
// size of the last batch the store took after refusing a larger one, so
// that each large change does not find it again, one refused
// transaction per halving (on a 1 MiB memtable, 2,000 and 1,000 before
// 500 fits). A change whose first batch, of the hint's size, fit without
// halving doubles it, up to membershipBatch, so that it follows a store
// that takes more again (a larger memtable after a restart, shorter
// records). Concurrent changes share it; a stale hint costs a halving
// or a smaller batch, never a change. The zero value is membershipBatch.
type batchHint struct{ n atomic.Int64 }

// batches is one change's walk over its batch sizes from its hint.
type batches struct {
	hint         *batchHint
	start, n     int  // the hint at the start; the size to try now
	halved, full bool // the store refused a batch; it took one of start
	lowered      int  // the size last remembered as what fits
}

func (h *batchHint) begin() batches {
	n := int(h.n.Load())
	if n <= 0 {
		n = membershipBatch
	}
	return batches{hint: h, start: n, n: n}
}

// refused halves the batch after the store refused one of size ids,
// and reports false when size is already one, the floor.
func (b *batches) refused(size int) bool {
	if size <= 1 {
		return false
	}
	b.n, b.halved = size/2, true
	return true
}

// took notes that the store took a batch of size ids; after a halving,
// the batch size now tried is what the hint remembers.
func (b *batches) took(size int) {
	switch {
	case b.halved && b.n != b.lowered:
		b.hint.n.Store(int64(b.n))
		b.lowered = b.n
	case !b.halved && size == b.start:
		b.full = true
	}
}

// done ends a change that succeeded: one whose batch of the hint's size
// fit without halving doubles the hint, unless another change has
// moved it meanwhile.
func (b *batches) done() {
	if b.halved || !b.full || b.start >= membershipBatch {
		return
	}
	b.hint.n.CompareAndSwap(int64(b.start), int64(min(2*b.start, membershipBatch)))
}

// DeleteGroup removes the group and every membership it is part of: its
// members' entries, both ways, and its own entries in the groups that
// contain it. Its id is never given again. It leaves one ActGroupDeleted
// record, however many members the group had. Errors: ErrNotFound.
//
// A group whose memberships fit one transaction goes in one. A larger
// one's memberships go first, in batches of at most membershipBatch
// (halved while the store refuses one with kv.ErrTxnTooBig, and starting
// from the size the last deletion found to fit, batchHint), each batch
// with its counts: its persons, its member groups, then the groups it is
// in (a group may hold MaxGroupMembers of either kind, more than one
// transaction takes). The first batch marks the group Deleting and
// writes the deletion's record, so that no membership is removed
// unrecorded. Then one transaction removes what a concurrent change
// added meanwhile, and the group. A failure between leaves the group,
// marked Deleting, with fewer memberships, never a membership without its
// group; DeleteGroup called again completes it, without a second record,
// as FinishGroupDeletions does at the daemon's start.
func (s *Service) DeleteGroup(ctx context.Context, id uint64) error {
	err := s.db.Update(ctx, func(tx kv.Txn) error { return s.deleteGroup(ctx, tx, id) })
	if !errors.Is(err, kv.ErrTxnTooBig) {
		return err
	}
	if err := s.dropGroupMemberships(ctx, id); err != nil {
		return err
	}
	return s.db.Update(ctx, func(tx kv.Txn) error { return s.deleteGroup(ctx, tx, id) })
}

// FinishGroupDeletions completes the deletion of every group left marked
// Deleting (a crash, or a request that failed between DeleteGroup's
// batches), as DeleteGroup called again would, without a second record,
// and returns how many it finished. The daemon runs it at start, so that
// a half-deleted group does not stay, with part of its members, until
// someone deletes it again. A group another node finishes meanwhile is
// not an error.
func (s *Service) FinishGroupDeletions(ctx context.Context) (int, error) {
	var ids []uint64
	err := s.db.View(ctx, func(tx kv.Txn) error {
		ids = ids[:0]
		prefix := []byte(pfxGroup)
		return tx.Scan(prefix, nil, func(k, v []byte) error {
			var g Group
			if err := s.codec.unmarshal(v, &g); err != nil {
				return err
			}
			if g.Deleting {
				ids = append(ids, kv.Uint64At(k, len(prefix)))
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if err := s.DeleteGroup(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
			return n, fmt.Errorf("account: finishing the deletion of group %d: %w", id, err)
		}
		n++
	}
	return n, nil
}

// dropGroupMemberships removes the memberships of group id in batches,
// as DeleteGroup describes.
func (s *Service) dropGroupMemberships(ctx context.Context, id uint64) error {
	// Each kind: the group's own entries, the other side's entry of one,
	// and the counts a batch of them changes.
	kinds := []struct {
		prefix      []byte
		own, mirror func(other uint64) []byte
		adjust      func(tx kv.Txn, others []uint64) error
	}{
		{key(pfxGroupPerson, id), func(p uint64) []byte { return key(pfxGroupPerson, id, p) },
			func(p uint64) []byte { return key(pfxPersonGroup, p, id) },
			func(tx kv.Txn, ps []uint64) error { return s.adjustGroup(tx, id, -int64(len(ps)), 0) }},
		{key(pfxGroupGroup, id), func(m uint64) []byte { return key(pfxGroupGroup, id, m) },
			func(m uint64) []byte { return key(pfxGroupParent, m, id) },
			func(tx kv.Txn, ms []uint64) error { return s.adjustGroup(tx, id, 0, -int64(len(ms))) }},
		{key(pfxGroupParent, id), func(p uint64) []byte { return key(pfxGroupParent, id, p) },
			func(p uint64) []byte { return key(pfxGroupGroup, p, id) },
			func(tx kv.Txn, ps []uint64) error {
				for _, p := range ps {
					if err := s.adjustGroup(tx, p, 0, -1); err != nil {
						return err
					}
				}
				return nil
			}},
	}
	b := s.deleteBatches.begin()
	for _, k := range kinds {
		for {
			var removed int
			n := b.n
			err := s.db.Update(ctx, func(tx kv.Txn) error {
				if ok, err := exists(tx, key(pfxGroup, id)); err != nil || !ok {
					if err == nil {
						err = notFoundf("group %d", id)
					}
					return err
				}
				others, err := scanIDsUpTo(tx, k.prefix, n)
				if err != nil {
					return err
				}
				removed = len(others)
				if removed == 0 {
					return nil
				}
				for _, o := range others {
					if err := deleteKeys(tx, k.own(o), k.mirror(o)); err != nil {
						return err
					}
				}
				if err := k.adjust(tx, others); err != nil {
					return err
				}
				return s.markDeleting(ctx, tx, id)
			})
			if errors.Is(err, kv.ErrTxnTooBig) && b.refused(n) {
				continue
			}
			if err != nil {
				return err
			}
			if removed > 0 {
				b.took(removed)
			}
			if removed < n {
				break
			}
		}
	}
	b.done()
	return nil
}

// markDeleting marks group id Deleting and records its deletion, in the
// transaction of the first batch DeleteGroup removes; later batches, and
// DeleteGroup called again after a failure, find it marked.
func (s *Service) markDeleting(ctx context.Context, tx kv.Txn, id uint64) error {
	var g Group
	if err := s.get(tx, key(pfxGroup, id), &g, notFoundf("group %d", id)); err != nil {
		return err
	}
	if g.Deleting {
		return nil
	}
	g.Deleting = true
	if err := s.put(tx, key(pfxGroup, id), &g); err != nil {
		return err
	}
	return s.record(ctx, tx, groupChange(ActGroupDeleted, g))
}

// deleteGroup removes group id with every membership left, in tx, and
// records the deletion unless markDeleting has.
func (s *Service) deleteGroup(ctx context.Context, tx kv.Txn, id uint64) error {
	var g Group
	if err := s.get(tx, key(pfxGroup, id), &g, notFoundf("group %d", id)); err != nil {
		return err
	}
	persons, err := scanIDs(tx, key(pfxGroupPerson, id))
	if err != nil {
		return err
	}
	for _, p := range persons {
		if err := deleteKeys(tx, key(pfxGroupPerson, id, p), key(pfxPersonGroup, p, id)); err != nil {
			return err
		}
	}
	members, err := scanIDs(tx, key(pfxGroupGroup, id))
	if err != nil {
		return err
	}
	for _, m := range members {
		if err := deleteKeys(tx, key(pfxGroupGroup, id, m), key(pfxGroupParent, m, id)); err != nil {
			return err
		}
	}
	parents, err := scanIDs(tx, key(pfxGroupParent, id))
	if err != nil {
		return err
	}
	for _, p := range parents {
		if err := deleteKeys(tx, key(pfxGroupParent, id, p), key(pfxGroupGroup, p, id)); err != nil {
			return err
		}
		if err := s.adjustGroup(tx, p, 0, -1); err != nil {
			return err
		}
	}
	if err := deleteKeys(tx, key(pfxGroup, id), key(pfxOrgGroup, g.OrganizationID, id)); err != nil {
		return err
	}
	if err := s.countIn(tx, g.OrganizationID, Counts{Groups: 1}, -1); err != nil {
		return err
	}
	if g.Deleting {
		return nil
	}
	return s.record(ctx, tx, groupChange(ActGroupDeleted, g))
}

// dropMemberships removes person personID from every group they are a
// direct member of, in tx. DeletePerson calls it in its transaction, so
// that a deleted person's id is left in no group.
func (s *Service) dropMemberships(tx kv.Txn, personID uint64) error {
	groups, err := scanIDs(tx, key(pfxPersonGroup, personID))
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := deleteKeys(tx, key(pfxPersonGroup, personID, g), key(pfxGroupPerson, g, personID)); err != nil {
			return err
		}
		if err := s.adjustGroup(tx, g, -1, 0); err != nil {
			return err
		}
	}
	return nil
}

// adjustGroup adds to the direct member counts of group id.
func (s *Service) adjustGroup(tx kv.Txn, id uint64, persons, groups int64) error {
	var g Group
	if err := s.get(tx, key(pfxGroup, id), &g, fmt.Errorf("account: group %d is indexed but missing", id)); err != nil {
		return err
	}
	g.Persons += persons
	g.Groups += groups
	return s.put(tx, key(pfxGroup, id), &g)
}

// Groups returns one page of the organization's groups in id order and
// how many it has. Errors: ErrNotFound (organization).
func (s *Service) Groups(ctx context.Context, orgID uint64, offset, limit int) ([]Group, int, error) {
	return listPage[Group](ctx, s, orgID, pfxOrgGroup, pfxGroup, func(c Counts) int64 { return c.Groups }, offset, limit)
}

// UpdateMembers applies ch to the group's direct members and returns the
// group. Added persons and groups must be of the group's organization or
// one below it; guests are not members. Errors: ErrNotFound (the group);
// ErrInvalid (a *FieldError naming add_members, add_groups or remove_*:
// an id in both lists, an unknown id or one outside those organizations,
// which look the same, a guest, more than MaxGroupMembers);
// ErrGroupCycle (a *GroupCycleError).
//
// A change of at most membershipBatch ids that the metadata store takes
// in one transaction is one transaction. A larger one (up to
// MaxGroupMembers added at once, more than one transaction of the store
// holds), or one the store refuses whole (kv.ErrTxnTooBig: a small
// memtable), is first checked whole in a read, so that an invalid
// request changes nothing, and then written in parts of at most
// membershipBatch ids, removals first, each checked again and journaled
// with what it changed. A part the store refuses is halved and tried
// again, down to one id, which the store refusing is an error; the
// part size that then fits is where the next change starts (batchHint),
// so that one smaller than membershipBatch may also go in parts. A
// failure between parts (a concurrent change that makes an id invalid,
// a crash) leaves part of the change applied; the same request sent
// again completes it, since adding a member and removing a non-member
// change nothing.
func (s *Service) UpdateMembers(ctx context.Context, groupID uint64, ch MembersChange) (Group, error) {
	if err := disjoint("add_members", ch.AddPersons, "remove_members", ch.RemovePersons); err != nil {
		return Group{}, err
	}
	if err := disjoint("add_groups", ch.AddGroups, "remove_groups", ch.RemoveGroups); err != nil {
		return Group{}, err
	}
	var g Group
	rest, b, checked := ch, s.memberBatches.begin(), false
	for {
		part, more := rest.cut(b.n)
		// Nothing is written before the first part commits, so rest is
		// still the whole request when a second part first shows.
		if more.size() > 0 && !checked {
			if err := s.checkMembers(ctx, groupID, rest); err != nil {
				return Group{}, err
			}
			checked = true
		}
		err := s.db.Update(ctx, func(tx kv.Txn) error {
			if err := s.get(tx, key(pfxGroup, groupID), &g, notFoundf("group %d", groupID)); err != nil {
				return err
			}
			m := membersTxn{s: s, tx: tx, g: &g, chains: map[uint64][]uint64{}}
			if err := m.apply(part); err != nil {
				return err
			}
			if m.changes.Len() == 0 {
				return nil
			}
			if err := m.bounded(); err != nil {
				return err
			}
			// Written whenever members change: with the group records the
			// cycle check reads, this makes two concurrent changes that
			// would close a cycle between them conflict (see cyclePath).
			if err := s.put(tx, key(pfxGroup, g.ID), &g); err != nil {
				return err
			}
			c := groupChange(ActGroupMembersUpdated, g)
			c.Data = m.changes.String()
			return s.record(ctx, tx, c)
		})
		if errors.Is(err, kv.ErrTxnTooBig) && b.refused(part.size()) {
			continue
		}
		if err != nil {
			return Group{}, err
		}
		b.took(part.size())
		if more.size() == 0 {
			b.done()
			return g, nil
		}
		rest = more
	}
}

// checkMembers checks change ch of the group's members whole, in a read,
// as UpdateMembers' transactions would apply it, and writes nothing.
func (s *Service) checkMembers(ctx context.Context, groupID uint64, ch MembersChange) error {
	return s.db.View(ctx, func(tx kv.Txn) error {
		var g Group
		if err := s.get(tx, key(pfxGroup, groupID), &g, notFoundf("group %d", groupID)); err != nil {
			return err
		}
		m := membersTxn{s: s, tx: tx, g: &g, chains: map[uint64][]uint64{}, dry: map[string]bool{}}
		if err := m.apply(ch); err != nil {
			return err
		}
		return m.bounded()
	})
}

// size is how many ids ch names.
func (ch MembersChange) size() int {
	return len(ch.RemovePersons) + len(ch.RemoveGroups) + len(ch.AddPersons) + len(ch.AddGroups)
}

// cut splits ch into its first n ids (n > 0) and the rest, in the order
// they apply: removals before additions, each list in its order.
func (ch MembersChange) cut(n int) (first, rest MembersChange) {
	lists := func(c *MembersChange) [4]*[]uint64 {
		return [4]*[]uint64{&c.RemovePersons, &c.RemoveGroups, &c.AddPersons, &c.AddGroups}
	}
	rest = ch
	for i, ids := range lists(&rest) {
		k := min(n, len(*ids))
		*lists(&first)[i] = (*ids)[:k:k]
		*ids = (*ids)[k:]
		n -= k
	}
	return first, rest
}

// disjoint refuses an id named in both lists.
func disjoint(addField string, add []uint64, removeField string, remove []uint64) error {
	for _, id := range add {
		if slices.Contains(remove, id) {
			return invalid(addField, fmt.Sprintf("%d is also in %s", id, removeField))
		}
	}
	return nil
}

// membersTxn is one UpdateMembers in its transaction.
type membersTxn struct {
	s       *Service
	tx      kv.Txn
	g       *Group
	chains  map[uint64][]uint64 // organization -> its chain, read once
	changes strings.Builder     // what changed, for the journal's data_text
	// dry, when not nil, checks a change without writing it (tx is a
	// read): the membership keys it would set (true) or delete (false),
	// which later ids of the same change see in place of the store.
	dry map[string]bool
}

// bounded refuses a group left with more than MaxGroupMembers.
func (m *membersTxn) bounded() error {
	if m.g.Persons+m.g.Groups > MaxGroupMembers {
		return invalid("add_members", fmt.Sprintf("a group holds at most %d direct members, persons and groups together", MaxGroupMembers))
	}
	return nil
}

// exists reports whether membership key k is set, in the store or
// earlier in a dry run.
func (m *membersTxn) exists(k []byte) (bool, error) {
	if set, ok := m.dry[string(k)]; ok {
		return set, nil
	}
	return exists(m.tx, k)
}

func (m *membersTxn) apply(ch MembersChange) error {
	g := m.g
	for _, p := range ch.RemovePersons {
		ok, err := m.unlink(key(pfxGroupPerson, g.ID, p), key(pfxPersonGroup, p, g.ID))
		if err != nil {
			return err
		}
		if ok {
			g.Persons--
			m.note("removed person", p)
		}
	}
	for _, c := range ch.RemoveGroups {
		ok, err := m.unlink(key(pfxGroupGroup, g.ID, c), key(pfxGroupParent, c, g.ID))
		if err != nil {
			return err
		}
		if ok {
			g.Groups--
			m.note("removed group", c)
		}
	}
	for _, p := range ch.AddPersons {
		if err := m.addPerson(p); err != nil {
			return err
		}
	}
	for _, c := range ch.AddGroups {
		if err := m.addGroup(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *membersTxn) addPerson(id uint64) error {
	g := m.g
	k := key(pfxGroupPerson, g.ID, id)
	if ok, err := m.exists(k); err != nil || ok {
		return err
	}
	refused := invalid("add_members", fmt.Sprintf("no person %d in the group's organization or below it", id))
	var p Person
	if err := m.s.get(m.tx, key(pfxPerson, id), &p, refused); err != nil {
		return err
	}
	if in, err := m.within(p.OrganizationID); err != nil || !in {
		if err == nil {
			err = refused
		}
		return err
	}
	if p.Guest {
		return invalid("add_members", fmt.Sprintf("%d is a guest; groups hold persons and groups", id))
	}
	if err := m.link(k, key(pfxPersonGroup, id, g.ID), key(pfxPerson, id)); err != nil {
		return err
	}
	g.Persons++
	m.note("added person", id)
	return nil
}

func (m *membersTxn) addGroup(id uint64) error {
	g := m.g
	if id == g.ID {
		return &GroupCycleError{Path: []uint64{g.ID, g.ID}}
	}
	k := key(pfxGroupGroup, g.ID, id)
	if ok, err := m.exists(k); err != nil || ok {
		return err
	}
	refused := invalid("add_groups", fmt.Sprintf("no group %d in the group's organization or below it", id))
	var c Group
	if err := m.s.get(m.tx, key(pfxGroup, id), &c, refused); err != nil {
		return err
	}
	if in, err := m.within(c.OrganizationID); err != nil || !in {
		if err == nil {
			err = refused
		}
		return err
	}
	path, err := m.s.cyclePath(m.tx, g.ID, id)
	if err != nil {
		return err
	}
	if path != nil {
		return &GroupCycleError{Path: path}
	}
	if err := m.link(k, key(pfxGroupParent, id, g.ID), key(pfxGroup, id)); err != nil {
		return err
	}
	g.Groups++
	m.note("added group", id)
	return nil
}

// within reports whether organization orgID is the group's organization
// or below it.
func (m *membersTxn) within(orgID uint64) (bool, error) {
	chain, ok := m.chains[orgID]
	if !ok {
		orgs, err := m.s.chain(m.tx, orgID, fmt.Errorf("account: organization %d is missing", orgID))
		if err != nil {
			return false, err
		}
		chain = chainIDs(orgs)
		m.chains[orgID] = chain
	}
	return Within(chain, m.g.OrganizationID), nil
}

// link writes a membership's two keys, and writes back unchanged the
// member's record, which its deletion (DeleteGroup's last transaction,
// DeletePerson) reads: the store detects a conflict on the keys a
// transaction read, not on the ranges it scanned, so a deletion that
// began before this commits would otherwise miss the membership and
// leave it, and the group's count of it, after the member is gone.
func (m *membersTxn) link(forward, back, member []byte) error {
	for _, k := range [][]byte{forward, back} {
		if m.dry != nil {
			m.dry[string(k)] = true
			continue
		}
		if err := m.tx.Set(k, nil); err != nil {
			return err
		}
	}
	if m.dry != nil {
		return nil
	}
	v, err := m.tx.Get(member)
	if err != nil {
		return err
	}
	return m.tx.Set(member, v)
}

// unlink deletes a membership's two keys and reports whether it existed.
func (m *membersTxn) unlink(forward, back []byte) (bool, error) {
	ok, err := m.exists(forward)
	if err != nil || !ok {
		return false, err
	}
	if m.dry != nil {
		m.dry[string(forward)], m.dry[string(back)] = false, false
		return true, nil
	}
	return true, deleteKeys(m.tx, forward, back)
}

func (m *membersTxn) note(what string, id uint64) {
	if m.changes.Len() > 0 {
		m.changes.WriteString(", ")
	}
	m.changes.WriteString(what + " " + strconv.FormatUint(id, 10))
}

// cyclePath returns the cycle that adding group member to group parent
// would close, [parent, member, ..., parent], or nil when parent is not
// reachable from member through the member-group index.
//
// It reads the record of every group it walks through. Every change of
// members writes the changed group's record, so of two concurrent
// changes that would close a cycle only between them (A gets B while B
// gets A, at any depth), the second to commit read a record the first
// wrote and conflicts; kv retries it, and the retry sees the cycle.
func (s *Service) cyclePath(tx kv.Txn, parent, member uint64) ([]uint64, error) {
	from := map[uint64]uint64{member: 0} // group -> the group that contains it on the walk
	stack := []uint64{member}
	found := false
	for len(stack) > 0 && !found {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, err := tx.Get(key(pfxGroup, cur)); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return nil, err
		}
		err := tx.Scan(key(pfxGroupGroup, cur), nil, func(k, _ []byte) error {
			c := kv.Uint64At(k, len(pfxGroupGroup)+8)
			if _, seen := from[c]; seen {
				return nil
			}
			from[c] = cur
			if c == parent {
				found = true
				return kv.ErrStop
			}
			stack = append(stack, c)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, nil
	}
	var back []uint64 // parent, the group containing it, ..., member
	for c := parent; ; c = from[c] {
		back = append(back, c)
		if c == member {
			break
		}
	}
	path := []uint64{parent}
	for i := len(back) - 1; i >= 0; i-- {
		path = append(path, back[i])
	}
	return path, nil
}

// Members returns the group's members. With fromGroups false,
// PersonsFromGroups and GroupsFromGroups are empty (spec
// include_from_group). Errors: ErrNotFound.
func (s *Service) Members(ctx context.Context, groupID uint64, fromGroups bool) (Members, error) {
	var m Members
	err := s.db.View(ctx, func(tx kv.Txn) error {
		m = Members{PersonsFromGroups: []uint64{}, GroupsFromGroups: []uint64{}}
		if ok, err := exists(tx, key(pfxGroup, groupID)); err != nil || !ok {
			if err == nil {
				err = notFoundf("group %d", groupID)
			}
			return err
		}
		var err error
		if m.Persons, err = scanIDs(tx, key(pfxGroupPerson, groupID)); err != nil {
			return err
		}
		if m.Groups, err = scanIDs(tx, key(pfxGroupGroup, groupID)); err != nil {
			return err
		}
		if !fromGroups {
			return nil
		}
		// The persons reached are gathered in a slice, then sorted and
		// compacted, less the direct members: a map of them cost several
		// times as much, and a group may reach every person of the
		// organization (spec include_from_group; share's from_group).
		var reached []uint64
		seen := map[uint64]bool{groupID: true}
		for _, c := range m.Groups {
			seen[c] = true
		}
		queue := slices.Clone(m.Groups)
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			err := tx.Scan(key(pfxGroupPerson, cur), nil, func(k, _ []byte) error {
				reached = append(reached, kv.Uint64At(k, len(pfxGroupPerson)+8))
				return nil
			})
			if err != nil {
				return err
			}
			err = tx.Scan(key(pfxGroupGroup, cur), nil, func(k, _ []byte) error {
				if c := kv.Uint64At(k, len(pfxGroupGroup)+8); !seen[c] {
					seen[c] = true
					m.GroupsFromGroups = append(m.GroupsFromGroups, c)
					queue = append(queue, c)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		slices.Sort(reached)
		reached = slices.DeleteFunc(slices.Compact(reached), func(p uint64) bool {
			_, direct := slices.BinarySearch(m.Persons, p)
			return direct
		})
		if len(reached) > 0 {
			m.PersonsFromGroups = reached
		}
		slices.Sort(m.GroupsFromGroups)
		return nil
	})
	return m, err
}

// PersonGroups returns the ids of every group person personID is a
// member of, directly or through groups that contain their groups, in
// id order: the groups whose shares reach them. The slice is shared and
// must not be changed.
//
// The answer is kept until the store's next commit outside file content
// (kv.MetaGeneration: memberships are account records): share asks it
// for every share root a person reaches (share.Roots, each share's
// access check), and the walk costs a scan per group reached, so a
// person in thousands of groups subscribed to hundreds of shares made
// GET /api/2/person, and each person of an organization listing, cost
// groups × shares scans (2,000 groups, 200 shares: 400,000).
func (s *Service) PersonGroups(ctx context.Context, personID uint64) ([]uint64, error) {
	gen := kv.MetaGeneration(s.db)
	if out, ok := s.callers.groups.Get(gen, personID); ok {
		return out, nil
	}
	var out []uint64
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		out, err = s.groupsAbove(tx, personID, 0)
		return err
	})
	if err == nil {
		s.callers.groups.Put(gen, personID, out)
	}
	return out, err
}

// InGroup reports whether person personID is a member of group groupID,
// directly or through member groups. A person whose groups are kept
// (PersonGroups) is answered from them, without a read: a plain person's
// GET of a group asks it on every request.
func (s *Service) InGroup(ctx context.Context, groupID, personID uint64) (bool, error) {
	if groups, ok := s.callers.groups.Get(kv.MetaGeneration(s.db), personID); ok {
		_, in := slices.BinarySearch(groups, groupID)
		return in, nil
	}
	in := false
	err := s.db.View(ctx, func(tx kv.Txn) error {
		groups, err := s.groupsAbove(tx, personID, groupID)
		in = slices.Contains(groups, groupID)
		return err
	})
	return in, err
}

// groupsAbove walks up from the person's groups through the groups that
// contain them and returns every group reached, sorted; it stops early
// once it reaches stop (0: never).
func (s *Service) groupsAbove(tx kv.Txn, personID, stop uint64) ([]uint64, error) {
	queue, err := scanIDs(tx, key(pfxPersonGroup, personID))
	if err != nil {
		return nil, err
	}
	seen := map[uint64]bool{}
	for _, g := range queue {
		seen[g] = true
	}
	out := slices.Clone(queue)
	for len(queue) > 0 && !seen[stop] {
		cur := queue[0]
		queue = queue[1:]
		err := tx.Scan(key(pfxGroupParent, cur), nil, func(k, _ []byte) error {
			if p := kv.Uint64At(k, len(pfxGroupParent)+8); !seen[p] {
				seen[p] = true
				out = append(out, p)
				queue = append(queue, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// scanIDs returns the id that follows prefix in each key under it, in
// key order; never nil.
func scanIDs(tx kv.Txn, prefix []byte) ([]uint64, error) {
	return scanIDsUpTo(tx, prefix, -1)
}

// scanIDsUpTo is scanIDs of the first max ids (all with max < 0).
func scanIDsUpTo(tx kv.Txn, prefix []byte, max int) ([]uint64, error) {
	out := []uint64{}
	err := tx.Scan(prefix, nil, func(k, _ []byte) error {
		if len(out) == max {
			return kv.ErrStop
		}
		out = append(out, kv.Uint64At(k, len(prefix)))
		return nil
	})
	return out, err
}

func deleteKeys(tx kv.Txn, keys ...[]byte) error {
	for _, k := range keys {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
