package vfs

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"berth/kv"

	"github.com/fxamacker/cbor/v2"
)

// fairShare is what one of several holders of a budget, who holds held
// of the total all of them hold, may hold: half of what the others leave
// of it. So a holder alone may take half the budget, and one who holds
// their share leaves every other at least as much as it holds; nobody's
// hold can keep the others from the rest. The layouts of the zips being
// served (zipShares) and the reservations of staged uploads under a quota
// that several people write under (limits.firm) are shared so.
func fairShare(budget, total, held int64) int64 {
	return (budget - (total - held)) / 2
}

// A staged upload's declared length must fit, whole, in what a quota
// leaves when it is staged (stored bytes and reservations counted), so a
// person alone under their organization's quota may upload a file of all
// the room left. But a reservation is room only its owner can use, kept
// for as long as a PATCH a day keeps the upload alive: one person who
// announced an upload of all that room, and sent nothing, had every other
// write under the quota refused. So under a quota that others write
// under too (Quota.Shared: an organization's, not a person's own), an
// owner's staged uploads reserve together at most their fair share of
// it, half of what its stored bytes and the other owners' reservations
// leave free (fairShare), taken when each upload is staged; the rest of
// an upload's length is announced but not reserved (stagedRec.Unreserved):
// nobody else's write is refused for it, and Finish checks it against the
// quotas, as a write of that many bytes, when the upload ends. But the
// bytes of an upload in progress are stored as they come, reserved or
// not: so what an owner's uploads announce past their reservations counts
// against the room their next upload must fit in (an owner's lengths
// together fit in the quota), where one person staged upload after
// upload of the room left, reserving nothing, and stored their bytes
// past the quota, as many times over as they liked. Others' unreserved
// lengths are not counted: they refuse nobody's write but their owner's.

// firm returns how much of the n bytes that an upload of owner declares
// may be reserved: what passes owner's fair share of a Shared quota of l
// is not. A quota no longer bounds (its sum wrapped) leaves none. It
// refuses (ErrQuotaExceeded) n that does not fit in what a Shared quota
// leaves beside what owner's uploads announce past their reservations.
func (l limits) firm(tx kv.Txn, owner string, n int64) (int64, error) {
	firm := n
	var owned []owned
	read := false
	for _, q := range l.quotas {
		if q.Bytes <= 0 || !q.Shared || n <= 0 {
			continue
		}
		if !read {
			var err error
			if owned, err = loadOwned(tx, owner); err != nil {
				return 0, err
			}
			read = true
		}
		var held, announced int64
		for _, o := range owned {
			if slices.Contains(o.tallies, q.Tally) {
				held += o.bytes
				announced += o.announced
			}
		}
		u, err := loadTally(tx, q.Tally)
		if err != nil {
			return 0, err
		}
		// announced below 0 wrapped: over, as a used that wrapped is.
		if announced < 0 || announced > q.Bytes || over(u.held(), n, q.Bytes-announced) {
			return 0, l.refuse("%d of %d bytes used or reserved, %d more announced by the uploader", u.held(), q.Bytes, announced)
		}
		share := int64(0)
		if u.held() >= 0 && held >= 0 {
			share = max(fairShare(q.Bytes-u.physical(), u.Reserved, held)-held, 0)
		}
		firm = min(firm, share)
	}
	return firm, nil
}

// owned is what an owner's staged uploads into one counted root (live, or
// deleted and not purged: rootRec.counted) reserve, what they announce
// past that, and the tallies the root counts into.
type owned struct {
	bytes, announced int64
	tallies          []uint64
}

// loadOwned reads what owner's staged uploads reserve, by counted root:
// a deleted root's reservations stay in its tallies until its uploads
// end (their bytes are stored until then), and a purged root's left them
// with its usage.
func loadOwned(tx kv.Txn, owner string) ([]owned, error) {
	var roots []uint64
	var sizes, announced []int64
	err := tx.Scan(ownedPrefix(owner), nil, func(k, v []byte) error {
		var n int64
		if err := cbor.Unmarshal(v, &n); err != nil {
			return err
		}
		// A root's two keys are next to each other: ownedKey's '/'
		// before announcedKey's 'u'.
		id := ownedKeyRoot(k)
		if len(roots) == 0 || roots[len(roots)-1] != id {
			roots, sizes, announced = append(roots, id), append(sizes, 0), append(announced, 0)
		}
		if k[len(k)-1] == 'u' {
			announced[len(announced)-1] = n
		} else {
			sizes[len(sizes)-1] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]owned, 0, len(roots))
	for i, id := range roots {
		var r rootRec
		err := get(tx, rootKey(id), &r, kv.ErrNotFound)
		if errors.Is(err, kv.ErrNotFound) {
			continue // purged: it counts nowhere
		}
		if err != nil {
			return nil, err
		}
		if r.counted() {
			out = append(out, owned{bytes: sizes[i], announced: announced[i], tallies: r.Tallies})
		}
	}
	return out, nil
}

// addOwned adds d to what owner's staged uploads into root reserve.
func addOwned(tx kv.Txn, owner string, root uint64, d int64) error {
	return addCount(tx, ownedKey(owner, root), d)
}

// addAnnounced adds d to what owner's staged uploads into root announce
// past their reservations.
func addAnnounced(tx kv.Txn, owner string, root uint64, d int64) error {
	return addCount(tx, announcedKey(owner, root), d)
}

// addCount adds d to the count at k; one that reaches 0 is deleted.
func addCount(tx kv.Txn, k []byte, d int64) error {
	var n int64
	if err := get(tx, k, &n, nil); err != nil {
		return err
	}
	if n += d; n <= 0 {
		return tx.Delete(k)
	}
	return put(tx, k, n)
}

// BadReservation is a count of what one owner's staged uploads into one
// root reserve, or announce past that (the A/ records the fair shares
// are taken from), that differs from the sum over those uploads, as
// Fsck finds it. Too high, it shrinks the owner's share and refuses
// their uploads for room nobody holds; too low, it lets them reserve
// past their share.
type BadReservation struct {
	Owner string
	Root  uint64
	// Announced: the count of what is announced past the reservations;
	// otherwise of what is reserved.
	Announced bool
	// Stored is the count as stored (0: none), Want the uploads' sum.
	Stored, Want int64
}

// String is the line berth fsck prints for b.
func (b BadReservation) String() string {
	what := "reserved"
	if b.Announced {
		what = "announced"
	}
	return fmt.Sprintf("owner %q root %d %s: %d counted, %d by the uploads", b.Owner, b.Root, what, b.Stored, b.Want)
}

// ownedCount names one A/ count.
type ownedCount struct {
	owner     string
	root      uint64
	announced bool
}

// stagedCounts is what the staged uploads in tx should have counted, in
// one pass over them: by owner and root, what those in progress reserve
// and announce past that (Owned, not finished; expired ones too, until
// terminate takes them out), and by owner, how many say they are
// counted in the owner's number of uploads (Counted).
type stagedCounts struct {
	owned   map[ownedCount]int64
	uploads map[string]int64
}

func readStagedCounts(tx kv.Txn) (stagedCounts, error) {
	w := stagedCounts{owned: map[ownedCount]int64{}, uploads: map[string]int64{}}
	err := tx.Scan([]byte(pStaged), nil, func(_, v []byte) error {
		var rec stagedRec
		if err := cbor.Unmarshal(v, &rec); err != nil {
			return err
		}
		if rec.Done == 0 && rec.Owned {
			w.owned[ownedCount{rec.Owner, rec.Root, false}] += rec.reserved()
			w.owned[ownedCount{rec.Owner, rec.Root, true}] += rec.Unreserved
		}
		if rec.Counted {
			w.uploads[rec.Owner]++
		}
		return nil
	})
	return w, err
}

// checkOwned compares, in tx, every A/ count with want, the uploads'
// sums (readStagedCounts), and returns those that differ.
func checkOwned(tx kv.Txn, want map[ownedCount]int64) ([]BadReservation, error) {
	var bad []BadReservation
	have := map[ownedCount]bool{}
	err := tx.Scan([]byte(pOwned), nil, func(k, v []byte) error {
		owner, ok := ownedKeyOwner(k)
		var n int64
		if !ok || cbor.Unmarshal(v, &n) != nil {
			return fmt.Errorf("vfs: a reservation count that does not read, at %q", k)
		}
		c := ownedCount{owner, ownedKeyRoot(k), k[len(k)-1] == 'u'}
		have[c] = true
		// A count is deleted at 0 (addCount): a stored 0 is wrong too.
		if n != want[c] || n <= 0 {
			bad = append(bad, BadReservation{Owner: c.owner, Root: c.root, Announced: c.announced, Stored: n, Want: want[c]})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for c, n := range want {
		if !have[c] && n != 0 {
			bad = append(bad, BadReservation{Owner: c.owner, Root: c.root, Announced: c.announced, Want: n})
		}
	}
	slices.SortFunc(bad, func(a, b BadReservation) int {
		return cmp.Or(strings.Compare(a.Owner, b.Owner), cmp.Compare(a.Root, b.Root), boolCmp(a.Announced, b.Announced))
	})
	return bad, nil
}

// BadUploadCount is an owner's count of staged uploads in progress (the
// one StageOptions.MaxPerOwner, tus.max_uploads, is checked against)
// that differs from the uploads it counts, as Fsck finds it. Too high,
// the owner is refused uploads for ones they do not have; too low, they
// may stage past the bound.
type BadUploadCount struct {
	Owner        string
	Stored, Want int64 // Stored 0: none
}

// String is the line berth fsck prints for b.
func (b BadUploadCount) String() string {
	return fmt.Sprintf("owner %q: %d counted, %d uploads in progress", b.Owner, b.Stored, b.Want)
}

// checkUploadCounts compares, in tx, every owner's count of staged
// uploads (ownerStagedKey) with want, how many uploads say they are
// counted in it (readStagedCounts), and returns those that differ, by
// owner.
func checkUploadCounts(tx kv.Txn, want map[string]int64) ([]BadUploadCount, error) {
	var bad []BadUploadCount
	have := map[string]bool{}
	err := tx.Scan([]byte(pOwnerStaged), nil, func(k, v []byte) error {
		owner, ok := ownerStagedKeyOwner(k)
		var n int64
		if !ok || cbor.Unmarshal(v, &n) != nil {
			return fmt.Errorf("vfs: a count of uploads in progress that does not read, at %q", k)
		}
		have[owner] = true
		// A count is deleted at 0 (addCount): a stored 0 is wrong too.
		if n != want[owner] || n <= 0 {
			bad = append(bad, BadUploadCount{Owner: owner, Stored: n, Want: want[owner]})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for owner, n := range want {
		if !have[owner] {
			bad = append(bad, BadUploadCount{Owner: owner, Want: n})
		}
	}
	slices.SortFunc(bad, func(a, b BadUploadCount) int { return strings.Compare(a.Owner, b.Owner) })
	return bad, nil
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
