package vfs

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// usageCheckBatch is how many items checkUsage reads between two scans
// of the locations, so that its memory stays flat however many there are.
const usageCheckBatch = 1024

// countItem adds what item rec (not a root's top folder) holds to u, as
// the changes that made it added it to its root's usage (usage.go): gone
// is whether it or a folder above it is deleted.
func countItem(tx kv.Txn, rec nodeRec, gone bool, u *usageRec) error {
	if err := countProps(tx, rec, u); err != nil {
		return err
	}
	if rec.Dir {
		if !gone {
			u.Folders++
		}
		return nil
	}
	count, total, err := revisionTotals(tx, rec.ID)
	if err != nil {
		return err
	}
	if gone {
		u.DelFiles++
		u.DelRevisions += count
		u.DeletedSize += total
	} else {
		u.Files++
		u.HeadSize += rec.Size
		u.Revisions += count - 1
		u.RevisionSize += total - rec.Size
	}
	return nil
}

// countProps adds to u the bytes of rec's dead properties that the usage
// counts (countedProps), whether rec is live or deleted: they are stored
// until it is purged.
func countProps(tx kv.Txn, rec nodeRec, u *usageRec) error {
	n, err := countedProps(tx, rec.ID)
	u.PropSize += n
	return err
}

// itemsOnly is u without what no item recount gives: the roots of a
// tally and the reservations of uploads in flight (checked apart).
func itemsOnly(u usageRec) usageRec {
	u.Roots, u.Reserved = 0, 0
	return u
}

// checkUsage recounts every live root's usage from its items and returns
// the roots whose ledger (usage.go's shards) differs, and the tallies
// whose sum differs from the ledgers of their counted roots (live, or
// deleted and not purged yet: rootRec.counted, the deleted ones' trashed),
// their live roots alone counted in Roots. A wrong ledger lets a quota refuse what fits, or take
// what does not; both stay wrong until someone looks, since every change
// only adds to them. A deleted root's items are not recounted: its purge
// removes them in several transactions before it takes its ledger out of
// its tallies, so a recount halfway would differ from a sound ledger.
func checkUsage(tx kv.Txn) (badRoots, badTallies []uint64, err error) {
	live := map[uint64]rootRec{}
	var trash []rootRec // deleted and still counted in their tallies
	err = tx.Scan([]byte(pRoot), nil, func(_, v []byte) error {
		var r rootRec
		if err := cbor.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("vfs: decode root: %w", err)
		}
		if !r.Deleted {
			live[r.ID] = r
		} else if r.counted() {
			trash = append(trash, r)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	recount := map[uint64]*usageRec{}
	unsure := map[uint64]bool{} // roots an item's damaged record belongs to
	for id := range live {
		recount[id] = &usageRec{}
	}
	// Whether a folder is deleted or below one, as items are met:
	// siblings share their ancestors, so a folder is mostly resolved
	// once. The memo starts over past goneMemo folders, to stay small.
	const goneMemo = 1 << 16
	gone := map[uint64]bool{}
	var goneOf func(id uint64, depth int) (bool, error)
	goneOf = func(id uint64, depth int) (bool, error) {
		if g, ok := gone[id]; ok {
			return g, nil
		}
		if depth > 4096 {
			return false, fmt.Errorf("vfs: the path of item %d does not end", id)
		}
		rec, _, err := loadNode(tx, id)
		if err != nil {
			return false, err
		}
		if rec.Staged {
			return false, errStaged
		}
		g := rec.Deleted != 0
		if !g && rec.Parent != 0 {
			if g, err = goneOf(rec.Parent, depth+1); err != nil {
				return false, err
			}
		}
		if len(gone) == goneMemo {
			clear(gone)
		}
		gone[id] = g
		return g, nil
	}
	start := []byte(pLoc)
	for {
		type item struct{ id, root uint64 }
		var ids []item
		var next []byte
		err := tx.Scan([]byte(pLoc), start, func(k, v []byte) error {
			if len(ids) == usageCheckBatch {
				next = slices.Clone(k)
				return kv.ErrStop
			}
			var loc locRec
			if err := cbor.Unmarshal(v, &loc); err != nil {
				return fmt.Errorf("vfs: decode location: %w", err)
			}
			if _, ok := live[loc.Root]; ok {
				ids = append(ids, item{kv.Uint64At(k, len(pLoc)), loc.Root})
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		for _, it := range ids {
			id := it.id
			rec, _, err := loadNode(tx, id)
			if errors.Is(err, ErrNotExist) || err == nil && rec.Root != it.root {
				// A location without its record, or a record that
				// names another root: damage, which no change makes.
				// Its root's ledger cannot be checked against a
				// recount; fsck names the root rather than stop.
				unsure[it.root] = true
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("vfs: item %d: %w", id, err)
			}
			if rec.Staged {
				continue // an item of a copy not finished
			}
			if rec.Parent == 0 { // a top folder: its properties alone
				if err := countProps(tx, rec, recount[rec.Root]); err != nil {
					return nil, nil, err
				}
				continue
			}
			g, err := goneOf(rec.Parent, 0)
			g = g || rec.Deleted != 0
			if errors.Is(err, errStaged) {
				continue
			}
			if errors.Is(err, ErrNotExist) {
				unsure[it.root] = true // a folder above it lost its record
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("vfs: item %d: %w", id, err)
			}
			if err := countItem(tx, rec, g, recount[rec.Root]); err != nil {
				return nil, nil, err
			}
		}
		if next == nil {
			break
		}
		start = next
	}
	tallies := map[uint64]*usageRec{}
	for id, r := range live {
		u, err := loadUsage(tx, id)
		if err != nil {
			return nil, nil, err
		}
		if itemsOnly(u) != *recount[id] || unsure[id] {
			badRoots = append(badRoots, id)
		}
		u.Roots = 1
		sumInto(tallies, r.Tallies, u)
	}
	for _, r := range trash {
		u, err := loadUsage(tx, r.ID)
		if err != nil {
			return nil, nil, err
		}
		sumInto(tallies, r.Tallies, r.inTallies(u))
	}
	// Every tally a record is kept for, whether or not a counted root
	// names it still: one whose roots are all purged sums to zero.
	err = tx.Scan([]byte(pTally), nil, func(k, _ []byte) error {
		if t := kv.Uint64At(k, len(pTally)); tallies[t] == nil {
			tallies[t] = &usageRec{}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for t, want := range tallies {
		got, err := loadTally(tx, t)
		if err != nil {
			return nil, nil, err
		}
		if got != *want {
			badTallies = append(badTallies, t)
		}
	}
	slices.Sort(badRoots)
	slices.Sort(badTallies)
	return badRoots, badTallies, nil
}

// sumInto adds a root's ledger u to each of its tallies' sums.
func sumInto(sums map[uint64]*usageRec, tallies []uint64, u usageRec) {
	for _, t := range tallies {
		if sums[t] == nil {
			sums[t] = &usageRec{}
		}
		sums[t].add(u)
	}
}
