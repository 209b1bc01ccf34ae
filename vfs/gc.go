package vfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
	"berth/vfs/chunk"
)

// GCReport tells what a garbage collection did.
type GCReport struct {
	Candidates int // chunks examined
	Deleted    int // chunks removed from the chunk store
}

// String reads like a log line.
func (r GCReport) String() string {
	return fmt.Sprintf("examined %d chunks, removed %d", r.Candidates, r.Deleted)
}

// Several nodes may collect one chunk store (node.go): a collector
// removes a chunk only after a transaction that finds it unreferenced
// (no K/ count), pinned by no node's upload in flight (no J/ record) and
// claimed by no other collector, and that claims it (B/, with a TTL).
// Uploads pin in a transaction that reads B/ (pins.go), and commits that
// reference a chunk no revision counts read it too (checkStored), so
// the serializable store orders each of them before the claim, and the
// collector keeps the chunk, or after it, and they wait for the removal
// or fail cleanly. With a grace (Options.OrphanGrace), a chunk is
// removed only once that long has passed since a collector first found
// its note (it stamps the note), so a download still reading a revision
// just trimmed or purged, on any node, finishes.

// doomTTL is how long a collector's claim on a chunk it removes lives if
// the collector dies before it lets go. A collector stops removing the
// chunks of a claim once half of it has passed, so no pin passes a claim
// whose chunk is still being removed.
const doomTTL = 2 * time.Minute

// GC removes the chunks whose reference count fell to zero. It releases
// first what nodes that are gone left (ReleaseDead), so the chunks only
// they held become garbage too.
func (fs *FS) GC(ctx context.Context) (GCReport, error) {
	var rep GCReport
	if n, err := fs.ReleaseDead(ctx); err != nil {
		return rep, fmt.Errorf("vfs: releasing what dead nodes left: %w", err)
	} else if n > 0 {
		fs.log.Warn("vfs: released the intents of nodes that are gone", "intents", n)
	}
	err := fs.collectNotes(ctx, &rep, true)
	return rep, err
}

// collectNotes removes the noted chunks that may go and settles their
// notes, counting them in rep (candidates only with count).
func (fs *FS) collectNotes(ctx context.Context, rep *GCReport, count bool) error {
	var ids []chunk.ID
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		ids = ids[:0]
		return tx.Scan([]byte(pOrphan), nil, func(k, v []byte) error {
			ids = append(ids, chunkIDFromKey(k))
			return nil
		})
	})
	if err != nil {
		return err
	}
	if count {
		rep.Candidates += len(ids)
	}
	for start := 0; start < len(ids); start += 1000 {
		batch := ids[start:min(start+1000, len(ids))]
		n, err := fs.removeUnreferenced(ctx, batch, false, true)
		rep.Deleted += n
		if err != nil {
			return err
		}
	}
	return nil
}

// Sweep walks the whole chunk store and removes every chunk no revision
// references and no upload in flight holds. It is what recovery after a
// crash runs. With a grace, a chunk whose note is younger stays.
func (fs *FS) Sweep(ctx context.Context) (GCReport, error) {
	var rep GCReport
	var batch []chunk.ID
	flush := func() error {
		n, err := fs.removeUnreferenced(ctx, batch, true, true)
		rep.Deleted += n
		batch = batch[:0]
		return err
	}
	err := fs.chunks.Walk(ctx, func(id chunk.ID) error {
		rep.Candidates++
		batch = append(batch, id)
		if len(batch) == 1000 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		// The notes of chunks no longer in the store (removed by a
		// collector that died before it settled them) go too. Only the
		// notes of chunks settled here go: clearing them all would
		// forget a chunk whose last count an operation on this or
		// another node dropped after the walk passed it, and leak it.
		err = fs.collectNotes(ctx, &rep, false)
	}
	return rep, err
}

// removeUnreferenced deletes the chunks of ids that have no reference
// count, no pin and, with a grace, a note older than it, and their
// orphan notes when clearNotes is set. sweep says ids come from the
// store, not from the notes: one without a note is garbage at once.
func (fs *FS) removeUnreferenced(ctx context.Context, ids []chunk.ID, sweep, clearNotes bool) (int, error) {
	fs.gcMu.Lock()
	defer fs.gcMu.Unlock()
	now := fs.nowNs()
	var dead []chunk.ID
	err := fs.update(ctx, func(tx kv.Txn) error {
		dead = dead[:0]
		for _, id := range ids {
			// Counted, pinned by an upload in flight (an upload may hold
			// it without a count: it found the chunk stored and skipped
			// it, or stored it and has not committed), or claimed by
			// another collector: the chunk stays, its note too.
			skip := false
			for _, k := range [][]byte{refKey(id), heldKey(id), doomKey(id)} {
				if _, err := tx.Get(k); err == nil {
					skip = true
					break
				} else if !errors.Is(err, kv.ErrNotFound) {
					return err
				}
			}
			if skip {
				continue
			}
			if fs.grace > 0 {
				v, err := tx.Get(orphanKey(id))
				switch {
				case errors.Is(err, kv.ErrNotFound):
					if !sweep {
						continue // settled meanwhile
					}
				case err != nil:
					return err
				case len(v) != 8:
					if err := tx.Set(orphanKey(id), binary.BigEndian.AppendUint64(nil, uint64(now))); err != nil {
						return err
					}
					continue
				case now-int64(binary.BigEndian.Uint64(v)) < int64(fs.grace):
					continue
				}
			}
			if err := tx.SetTTL(doomKey(id), []byte(fs.node), doomTTL); err != nil {
				return err
			}
			dead = append(dead, id)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	claimed := time.Now()
	removed := make(map[chunk.ID]bool, len(dead))
	var derr error
	for _, id := range dead {
		if time.Since(claimed) > doomTTL/2 {
			break // the rest wait for the next collection
		}
		if derr = fs.chunks.Delete(ctx, id); derr != nil {
			break
		}
		removed[id] = true
	}
	// The claims go whatever happened, or uploads wait for their TTL.
	err = fs.update(context.WithoutCancel(ctx), func(tx kv.Txn) error {
		for _, id := range dead {
			if err := tx.Delete(doomKey(id)); err != nil {
				return err
			}
		}
		if !clearNotes {
			return nil
		}
		for _, id := range ids {
			// A chunk counted when checked may have lost its last count
			// since (a purge, a released intent take no gcMu), noting it
			// again; a pinned one kept its note. The note stays unless
			// the chunk is counted now, read here so that such a drop
			// conflicts with this transaction.
			if !removed[id] {
				if _, err := tx.Get(refKey(id)); errors.Is(err, kv.ErrNotFound) {
					continue
				} else if err != nil {
					return err
				}
			}
			if err := tx.Delete(orphanKey(id)); err != nil {
				return err
			}
		}
		return nil
	})
	return len(removed), errors.Join(derr, err)
}

// FsckReport lists what a consistency check found.
type FsckReport struct {
	Revisions    int        // revisions checked
	Chunks       int        // chunks in the store
	Missing      []chunk.ID // referenced by a revision, absent from the store
	Leaked       []chunk.ID // in the store, referenced by no revision, unknown to the collector
	BadRefcounts []chunk.ID // stored count differs from the revisions'
	Corrupt      []chunk.ID // present but unreadable or wrong hash (Verify only)
	// BadReservations are the counts of what an owner's staged uploads
	// reserve by root (fair.go) that differ from the uploads' sums.
	BadReservations []BadReservation
	// BadUploadCounts are the counts of each owner's staged uploads in
	// progress (the bound on them is checked against) that differ from
	// the uploads.
	BadUploadCounts []BadUploadCount
	// BadListSums are the folders whose kept listing sum (listhash.go)
	// differs from a scan of their children.
	BadListSums []uint64
	// BadUsage are the live roots whose usage ledger (usage.go) differs
	// from a recount of their items, and BadTallies the tallies whose
	// sums differ from their roots' ledgers (live roots', and deleted
	// ones' until purged): quotas read both.
	BadUsage, BadTallies []uint64
	// Awaiting counts the chunks referenced by nothing that carry the
	// collector's note (O/): garbage it deletes once their grace
	// (Options.OrphanGrace) has passed, not leaks. On several nodes each
	// change that drops a chunk leaves one for the grace.
	Awaiting int
}

// OK reports whether nothing is wrong.
func (r FsckReport) OK() bool {
	return len(r.Missing)+len(r.Leaked)+len(r.BadRefcounts)+len(r.Corrupt)+len(r.BadReservations)+len(r.BadUploadCounts)+len(r.BadListSums)+
		len(r.BadUsage)+len(r.BadTallies) == 0
}

// String summarises the report.
func (r FsckReport) String() string {
	s := fmt.Sprintf("%d revisions, %d chunks: %d missing, %d leaked, %d bad refcounts, %d corrupt",
		r.Revisions, r.Chunks, len(r.Missing), len(r.Leaked), len(r.BadRefcounts), len(r.Corrupt))
	if len(r.BadReservations) > 0 {
		// Only when there are: scripts read the line above as it was.
		s += fmt.Sprintf(", %d bad reservation counts", len(r.BadReservations))
	}
	if len(r.BadUploadCounts) > 0 {
		s += fmt.Sprintf(", %d bad upload counts", len(r.BadUploadCounts))
	}
	if len(r.BadListSums) > 0 {
		s += fmt.Sprintf(", %d bad listing sums", len(r.BadListSums))
	}
	if len(r.BadUsage) > 0 {
		s += fmt.Sprintf(", %d bad usage ledgers", len(r.BadUsage))
	}
	if len(r.BadTallies) > 0 {
		s += fmt.Sprintf(", %d bad tallies", len(r.BadTallies))
	}
	if r.Awaiting > 0 {
		s += fmt.Sprintf(" (%d unreferenced awaiting the collector)", r.Awaiting)
	}
	return s
}

// Fsck checks that every chunk a revision or an intent references is
// stored, that every stored chunk is referenced, and that reference counts
// match, that the counts of what each owner's staged uploads reserve
// (fair.go) are the sums of those uploads and each owner's count of them
// their number, and that every folder's kept
// listing sum is its children's (listhash.go), and that each live root's
// usage ledger is a recount of its items and each tally its roots' sum
// (fsckusage.go); with verify
// it also reads every chunk and checks its hash. It changes nothing.
func (fs *FS) Fsck(ctx context.Context, verify bool) (FsckReport, error) {
	fs.gcMu.Lock()
	defer fs.gcMu.Unlock()
	var rep FsckReport
	want := map[chunk.ID]int64{}
	have := map[chunk.ID]int64{}
	noted := map[chunk.ID]bool{}
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		// The chunks the collector knows to be garbage: on a shared
		// store it leaves them for the grace (OrphanGrace).
		err := tx.Scan([]byte(pOrphan), nil, func(k, _ []byte) error {
			noted[chunkIDFromKey(k)] = true
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Scan([]byte(pRev), nil, func(k, v []byte) error {
			var r revRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return err
			}
			rep.Revisions++
			for _, c := range r.Chunks {
				want[c.ID]++
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Counts an operation holds until its last transaction (see
		// intent.go) are references too, not leaks.
		err = tx.Scan([]byte(pIntent), nil, func(k, v []byte) error {
			var in intentRec
			if err := cbor.Unmarshal(v, &in); err != nil {
				return err
			}
			for _, id := range in.Chunks {
				want[id]++
			}
			return nil
		})
		if err != nil {
			return err
		}
		// So are those of staged uploads (staged.go).
		if err := stagedRefs(tx, want); err != nil {
			return err
		}
		staged, err := readStagedCounts(tx)
		if err != nil {
			return err
		}
		if rep.BadReservations, err = checkOwned(tx, staged.owned); err != nil {
			return err
		}
		if rep.BadUploadCounts, err = checkUploadCounts(tx, staged.uploads); err != nil {
			return err
		}
		if rep.BadListSums, err = checkListSums(tx); err != nil {
			return err
		}
		if rep.BadUsage, rep.BadTallies, err = checkUsage(tx); err != nil {
			return err
		}
		return tx.Scan([]byte(pRef), nil, func(k, v []byte) error {
			var n int64
			if err := cbor.Unmarshal(v, &n); err != nil {
				return err
			}
			have[chunkIDFromKey(k)] = n
			return nil
		})
	})
	if err != nil {
		return rep, err
	}
	for id, n := range want {
		if have[id] != n {
			rep.BadRefcounts = append(rep.BadRefcounts, id)
		}
	}
	for id := range have {
		if _, ok := want[id]; !ok {
			rep.BadRefcounts = append(rep.BadRefcounts, id)
		}
	}
	stored := map[chunk.ID]bool{}
	err = fs.chunks.Walk(ctx, func(id chunk.ID) error {
		rep.Chunks++
		stored[id] = true
		if _, ok := want[id]; !ok && noted[id] {
			rep.Awaiting++
		} else if !ok {
			rep.Leaked = append(rep.Leaked, id)
		} else if verify {
			if err := fs.verifyChunk(ctx, id); err != nil {
				rep.Corrupt = append(rep.Corrupt, id)
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	for id := range want {
		if !stored[id] {
			rep.Missing = append(rep.Missing, id)
		}
	}
	return rep, nil
}

func (fs *FS) verifyChunk(ctx context.Context, id chunk.ID) error {
	blob, err := fs.chunks.Get(ctx, id)
	if err != nil {
		return err
	}
	dec := chunk.NewDecoder()
	defer dec.Close()
	return chunk.Verify(id, blob, dec)
}

// dropClaims deletes every collector claim (B/), in batches. Only for a
// store this process alone opens, at Open: the claims are then all a
// dead process's.
func (fs *FS) dropClaims(ctx context.Context) error {
	for {
		var keys [][]byte
		err := fs.db.View(ctx, func(tx kv.Txn) error {
			keys = keys[:0]
			return tx.Scan([]byte(pDoomed), nil, func(k, _ []byte) error {
				keys = append(keys, append([]byte(nil), k...))
				if len(keys) == fs.refBatch {
					return kv.ErrStop
				}
				return nil
			})
		})
		if err != nil || len(keys) == 0 {
			return err
		}
		if err := fs.update(ctx, func(tx kv.Txn) error {
			for _, k := range keys {
				if err := tx.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
}
