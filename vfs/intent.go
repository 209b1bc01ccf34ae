package vfs

import (
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
	"berth/vfs/chunk"
)

// Intents let an operation too large for one transaction stay atomic as
// users see it and lose nothing when it fails or the process dies half way.
//
// The engine bounds one transaction (kv.ErrTxnTooBig) to some tens of
// thousands of keys, and every chunk reference is a key. So an upload of
// many chunks pins its references in batches, one transaction each, and
// each batch writes an intent part I/<intent>/<part> that lists the chunks
// it holds a count on. The operation's last transaction makes its result
// visible and deletes the parts in one go: from then on the references
// belong to the revisions it committed. Until then they belong to the
// intent, and releasing the intent gives them back. A part may instead
// name a staged folder tree (Copy builds large trees out of sight, below
// a deleted node); releasing it purges that tree.
//
// A failed operation releases its intent at once; Open releases whatever
// a crash (or a failed release) left, before the recovery sweep, so the
// sweep sees the chunks those intents held as unreferenced. Every part
// names the node that owns it: on a store several nodes share, Open and
// ReleaseDead release only the intents of nodes that are gone (node.go),
// never those of a live node's operations in flight.

// defaultRefBatch is how many chunk references one transaction changes
// when an operation is split, and the largest copy (items, properties and
// references) done in one transaction. kv's memtables bound a transaction
// to some 26,000 keys and 2.4 MB; the bytes are bounded apart (txnBytes),
// as a copied small file carries its contents. 512 keeps the keys of the
// worst case under half the bound (TestCopyAtDefaultBatch); a file of 100
// GiB then pins its references in some 180 transactions, a fraction of a
// second next to its upload.
const defaultRefBatch = 512

// defaultTxnBytes bounds the bytes one transaction of a split operation
// sets when the store names no bound of its own (kv.Bounded). Keys are
// not the only bound: small files' contents live in their revision
// records (InlineMax), so 512 copied items may carry 8 MiB of them, and
// their dead properties up to MaxPropsBytes each.
const defaultTxnBytes = 4 << 20

// intentRec is one part of an intent. Field numbers are the wire format.
type intentRec struct {
	// Chunks each hold one count on their K/ key for the operation
	// (a chunk listed twice holds two).
	Chunks []chunk.ID `cbor:"1,keyasint,omitempty"`
	// Root and Node name the top of a staged tree that is purged, without
	// touching the root's usage (it was never counted), on release.
	Root uint64 `cbor:"2,keyasint,omitempty"`
	Node uint64 `cbor:"3,keyasint,omitempty"`
	// Owner is the node whose operation wrote the part; empty in parts
	// written before nodes had names, which belong to no live node.
	Owner string `cbor:"4,keyasint,omitempty"`
}

// putIntent writes an intent part owned by this node.
func (fs *FS) putIntent(tx kv.Txn, key []byte, rec intentRec) error {
	rec.Owner = fs.node
	return put(tx, key, rec)
}

// intent is an operation's handle on its I/ parts.
type intent struct {
	id    uint64
	next  uint64   // the next part number
	parts []uint64 // chunk parts written and not yet handed over
}

func (fs *FS) newIntent(ctx context.Context) (*intent, error) {
	id, err := fs.db.NextID(ctx, "intent")
	if err != nil {
		return nil, err
	}
	return &intent{id: id}, nil
}

// pin adds a count to every chunk of refs, fs.refBatch at a time, each
// batch one transaction that also records it as a part of in. check runs
// in each transaction first with the batch it pins; each holds gcMu
// shared, as checkStored needs, and once it commits the collector leaves
// its chunks alone. Between batches it
// gives the test hook its turn and stops on a cancelled ctx; the parts
// already written stay with in, for the caller to release.
func (fs *FS) pin(ctx context.Context, in *intent, op Op, refs []chunk.Ref, check func(kv.Txn, []chunk.Ref) error) error {
	for start := 0; start < len(refs); start += fs.refBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := refs[start:min(start+fs.refBatch, len(refs))]
		part := in.next
		fs.gcMu.RLock()
		err := fs.update(ctx, func(tx kv.Txn) error {
			if check != nil {
				if err := check(tx, batch); err != nil {
					return err
				}
			}
			if err := addRefs(tx, batch, 1); err != nil {
				return err
			}
			return fs.putIntent(tx, intentKey(in.id, part), intentRec{Chunks: chunkIDs(batch)})
		})
		fs.gcMu.RUnlock()
		if err != nil {
			return err
		}
		in.next++
		in.parts = append(in.parts, part)
		fs.between(op)
	}
	return nil
}

// handOver deletes in's chunk parts within tx: once tx commits, the
// counts they held belong to what tx wrote. The caller clears in.parts
// after the commit (tx may run again on a conflict). Each part is read
// first: another node releases the intent when it takes this node for
// dead (its liveness lease expired, node.go), and a part released so
// must fail the commit (ErrBusy) rather than let it reference chunks
// whose counts are gone. The read also makes a concurrent release
// conflict with tx.
func (in *intent) handOver(tx kv.Txn) error {
	for _, p := range in.parts {
		k := intentKey(in.id, p)
		if _, err := tx.Get(k); errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("%w: intent %d part %d was released before its commit", ErrBusy, in.id, p)
		} else if err != nil {
			return err
		}
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// release gives back what an intent still holds: the counts of its chunk
// parts (a chunk left without any becomes garbage) and its staged tree.
// Each part goes in its own transactions, so release is bounded too and
// can be interrupted and run again.
func (fs *FS) release(ctx context.Context, id uint64) error {
	return fs.releaseIf(ctx, id, nil)
}

// errOwnerAlive stops the release of an intent whose owner turned out to
// be alive.
var errOwnerAlive = errors.New("vfs: the intent's node is alive")

// releaseIf is release for another node's intent: left, when set, is
// asked in each part's transaction whether the part's owner is gone, and
// a part whose owner is not stops the release (errOwnerAlive).
func (fs *FS) releaseIf(ctx context.Context, id uint64, left func(kv.Txn, string) (bool, error)) error {
	var parts [][]byte
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		parts = parts[:0]
		return tx.Scan(intentPrefix(id), nil, func(k, v []byte) error {
			parts = append(parts, append([]byte(nil), k...))
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, k := range parts {
		var staged intentRec
		err := fs.update(ctx, func(tx kv.Txn) error {
			staged = intentRec{}
			var rec intentRec
			if err := get(tx, k, &rec, kv.ErrNotFound); errors.Is(err, kv.ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			if left != nil {
				if gone, err := left(tx, rec.Owner); err != nil {
					return err
				} else if !gone {
					return errOwnerAlive
				}
			}
			if rec.Node != 0 {
				// The tree goes first; the part that names it last.
				staged = rec
				return nil
			}
			refs := make([]chunk.Ref, len(rec.Chunks))
			for i, c := range rec.Chunks {
				refs[i].ID = c
			}
			if err := addRefs(tx, refs, -1); err != nil {
				return err
			}
			return tx.Delete(k)
		})
		if err != nil {
			return err
		}
		if staged.Node == 0 {
			continue
		}
		if err := fs.purgeTree(ctx, staged.Root, staged.Node, false); err != nil && !errors.Is(err, ErrNotExist) {
			return err
		}
		if err := fs.update(ctx, func(tx kv.Txn) error { return tx.Delete(k) }); err != nil {
			return err
		}
	}
	return nil
}

// releaseFailed releases the intent of an operation that failed. The
// release must not be cut short by the cancelled context that may have
// failed the operation; what it cannot finish, Open does.
func (fs *FS) releaseFailed(ctx context.Context, in *intent) {
	if in == nil {
		return
	}
	if err := fs.release(context.WithoutCancel(ctx), in.id); err != nil {
		fs.log.Warn("vfs: could not release the references of a failed operation; the next start does", "intent", in.id, "err", err)
	}
}

// releaseIntents releases the intents whose owner left reports gone
// (see FS.leftBy): at Open on a store no other process uses, every one,
// each the leftover of an operation that crashed or failed to release.
func (fs *FS) releaseIntents(ctx context.Context, left func(kv.Txn, string) (bool, error)) (int, error) {
	var ids []uint64
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		ids = ids[:0]
		return tx.Scan([]byte(pIntent), nil, func(k, v []byte) error {
			id := intentKeyID(k)
			if len(ids) > 0 && ids[len(ids)-1] == id {
				return nil
			}
			var rec intentRec
			if err := cbor.Unmarshal(v, &rec); err != nil {
				return err
			}
			// Only a glance: the release decides in its transactions.
			if gone, err := left(tx, rec.Owner); err != nil {
				return err
			} else if gone {
				ids = append(ids, id)
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		switch err := fs.releaseIf(ctx, id, left); {
		case errors.Is(err, errOwnerAlive):
		case err != nil:
			return n, fmt.Errorf("intent %d: %w", id, err)
		default:
			n++
		}
	}
	return n, nil
}

// unref gives up chunk references inside one transaction without
// unbounding it: the first fs.refBatch counts drop at once, the rest are
// parked in parts of an intent that the caller releases after the commit
// (or Open, after a crash). used counts the keys spent, so the caller can
// stop adding work to the transaction.
type unref struct {
	fs     *FS
	tx     kv.Txn
	used   int
	intent uint64
	parts  uint64
}

func (u *unref) drop(ctx context.Context, refs []chunk.Ref) error {
	if u.used+len(refs) <= u.fs.refBatch {
		u.used += len(refs)
		return addRefs(u.tx, refs, -1)
	}
	if u.intent == 0 {
		id, err := u.fs.db.NextID(ctx, "intent")
		if err != nil {
			return err
		}
		u.intent = id
	}
	for start := 0; start < len(refs); start += u.fs.refBatch {
		batch := refs[start:min(start+u.fs.refBatch, len(refs))]
		if err := u.fs.putIntent(u.tx, intentKey(u.intent, u.parts), intentRec{Chunks: chunkIDs(batch)}); err != nil {
			return err
		}
		u.parts++
		u.used++
	}
	return nil
}

func chunkIDs(refs []chunk.Ref) []chunk.ID {
	ids := make([]chunk.ID, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	return ids
}

// between is the test hook's turn between two transactions of a split
// operation.
func (fs *FS) between(op Op) {
	if fs.batchHook != nil {
		fs.batchHook(op)
	}
}
