package vfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// The name index that Search answers from. Every item of a root (not the
// top folder) that is not purged has
//
//	E/<root>/<node>/          its folded name (see fold)
//	X/<root>/<gram>/<node>/   its folded name, once per distinct trigram
//	                          (three runes, UTF-8) of the folded name
//
// written by saveNode, in the transaction that creates, renames or moves
// the item, and removed by purgeNode in the one that purges it. A search
// for three runes or more scans one trigram's list, the shortest, and
// keeps the entries whose folded name holds the folded query; a shorter
// query scans E/ of the root. Both are in node id order. A deleted item
// keeps its entries, as items below a deleted folder do (deleting a
// folder marks the folder alone, so that a delete of any size is one
// small transaction): Search checks each candidate's record and path, as
// it always did, and a delete or undelete writes no index key (a name of
// 11 runes is 10 of them).
//
// A root records in rootRec.Indexed that its index is whole: set when it
// is created, or by backfillNames for a root created before the index
// existed, which Open starts in the background until M/names says every
// root has one. Until then such a root is searched the old way.

// gramRunes is the length of the index's n-grams, in runes.
const gramRunes = 3

// keyNamesDone marks a store whose every root has a whole name index.
var keyNamesDone = []byte(kv.VFSMarker + "names")

func nameEntryPrefix(root uint64) []byte    { return key(pName, root) }
func nameEntryKey(root, node uint64) []byte { return key(pName, root, node) }
func gramPrefix(root uint64, gram string) []byte {
	return append(append(keyRoom(len(gram)+1, pGram, root), gram...), '/')
}
func gramKey(root uint64, gram string, node uint64) []byte {
	b := append(append(keyRoom(len(gram)+10, pGram, root), gram...), '/')
	return append(binary.BigEndian.AppendUint64(b, node), '/')
}

// entryNode reads the node id back from an E/ or X/ key: both end in it.
func entryNode(k []byte) uint64 { return binary.BigEndian.Uint64(k[len(k)-9 : len(k)-1]) }

// fold is s with every rune replaced by the smallest rune of its Unicode
// simple case folding orbit (the folding strings.EqualFold uses), so two
// names that differ only in case fold to the same string: "Straße" and
// "STRASSE" do not (that is full folding), "Σ", "σ" and "ς" do.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || ('a' <= c && c <= 'z') {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

func foldRune(r rune) rune {
	switch {
	case 'a' <= r && r <= 'z':
		return r - 'a' + 'A'
	case r < utf8.RuneSelf:
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}

// grams returns the distinct trigrams of a folded name, in order of first
// appearance; none for a name shorter than three runes.
func grams(folded string) []string {
	starts := make([]int, 0, len(folded)+1)
	for i := range folded {
		starts = append(starts, i)
	}
	if len(starts) < gramRunes {
		return nil
	}
	starts = append(starts, len(folded))
	out := make([]string, 0, len(starts)-gramRunes)
	// A name's few trigrams are told apart by a look at those kept
	// already, which costs less than a map below some dozens.
	var seen map[string]struct{}
	if len(starts) > 32 {
		seen = make(map[string]struct{}, len(starts))
	}
	for i := 0; i+gramRunes < len(starts); i++ {
		g := folded[starts[i]:starts[i+gramRunes]]
		if seen != nil {
			if _, dup := seen[g]; dup {
				continue
			}
			seen[g] = struct{}{}
		} else if slices.Contains(out, g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// reindex brings the name index of rec up to date with rec saved at loc:
// the one hook of every operation that writes a node's record (saveNode).
// It reads what the index holds for the node, so it writes nothing when
// the name did not change (a new revision, a lock, a move between
// folders, a delete). fresh says the node is new, with nothing indexed
// to read.
func reindex(tx kv.Txn, rec nodeRec, loc locRec, fresh bool) error {
	if loc.Parent == 0 {
		return nil // the top folder: never a search result
	}
	want := fold(rec.Name)
	had := ""
	if !fresh {
		var err error
		if had, err = indexedName(tx, rec.Root, rec.ID); err != nil || had == want {
			return err
		}
	}
	if _, err := dropGrams(tx, rec.Root, rec.ID, had, want); err != nil {
		return err
	}
	v := []byte(want)
	for _, g := range grams(want) {
		if err := tx.Set(gramKey(rec.Root, g, rec.ID), v); err != nil {
			return err
		}
	}
	return tx.Set(nameEntryKey(rec.Root, rec.ID), v)
}

// unindex removes the node's entries, for the purge that removes the
// node; it returns how many keys it deleted.
func unindex(tx kv.Txn, root, id uint64) (int, error) {
	had, err := indexedName(tx, root, id)
	if err != nil || had == "" {
		return 0, err
	}
	n, err := dropGrams(tx, root, id, had, "")
	if err != nil {
		return n, err
	}
	return n + 1, tx.Delete(nameEntryKey(root, id))
}

// indexedName is the folded name the index holds for the node, "" for none.
func indexedName(tx kv.Txn, root, id uint64) (string, error) {
	v, err := tx.Get(nameEntryKey(root, id))
	if errors.Is(err, kv.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

// dropGrams deletes the trigram entries of had that want has not.
func dropGrams(tx kv.Txn, root, id uint64, had, want string) (int, error) {
	keep := grams(want)
	n := 0
	for _, g := range grams(had) {
		if containsGram(keep, g) {
			continue
		}
		if err := tx.Delete(gramKey(root, g, id)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func containsGram(gs []string, g string) bool {
	for _, h := range gs {
		if h == g {
			return true
		}
	}
	return false
}

// backfillBatch is how many items one backfill transaction indexes.
const backfillBatch = 512

// startBackfill begins indexing the roots created before the name index
// existed, in the background; Close stops it. A store whose roots all
// have an index is marked (M/names) at once, so later starts read one key.
func (fs *FS) startBackfill(ctx context.Context) error {
	var roots []uint64
	done := false
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		roots = roots[:0]
		if _, err := tx.Get(keyNamesDone); err == nil {
			done = true
			return nil
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		return tx.Scan([]byte(pRoot), nil, func(k, v []byte) error {
			var r rootRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("vfs: decode %q: %w", k[:2], err)
			}
			if !r.Indexed && !r.Deleted {
				roots = append(roots, r.ID)
			}
			return nil
		})
	})
	switch {
	case err != nil || done:
		return err
	case len(roots) == 0:
		return fs.update(ctx, func(tx kv.Txn) error { return tx.Set(keyNamesDone, []byte{1}) })
	}
	fs.backfill.start(ctx, func(bg context.Context) {
		fs.log.Info("vfs: indexing the names of roots older than the index", "roots", len(roots))
		if err := fs.backfillNames(bg, roots); err != nil && bg.Err() == nil {
			fs.log.Error("vfs: indexing names; search scans the roots not done until the next start", "err", err)
		}
	})
	return nil
}

// backfillNames indexes roots, a bounded transaction at a time, then
// marks the store (M/names) so that later starts skip the work. Meanwhile
// Search answers for those roots by scanning them, as before.
func (fs *FS) backfillNames(ctx context.Context, roots []uint64) error {
	for _, root := range roots {
		if err := fs.backfillRoot(ctx, root); err != nil {
			return fmt.Errorf("vfs: indexing the names of root %d: %w", root, err)
		}
	}
	return fs.update(ctx, func(tx kv.Txn) error { return tx.Set(keyNamesDone, []byte{1}) })
}

// backfillRoot indexes every item of root, going through its time index
// (T/) in batches. An item that a write moves in T/ behind the cursor
// meanwhile was indexed by that write (saveNode): reindex needs no
// snapshot of the whole root. The last transaction marks the root.
func (fs *FS) backfillRoot(ctx context.Context, root uint64) error {
	var from []byte
	for {
		var ids []uint64
		var next []byte
		err := fs.db.View(ctx, func(tx kv.Txn) error {
			ids, next = ids[:0], nil
			return tx.Scan(timePrefix(root), from, func(k, v []byte) error {
				if len(ids) == backfillBatch {
					next = append([]byte(nil), k...)
					return kv.ErrStop
				}
				ids = append(ids, timeKeyNode(k))
				return nil
			})
		})
		if err != nil {
			return err
		}
		err = fs.update(ctx, func(tx kv.Txn) error {
			for _, id := range ids {
				rec, loc, err := loadNode(tx, id)
				if errors.Is(err, ErrNotExist) {
					continue // purged meanwhile
				} else if err != nil {
					return err
				}
				if rec.Root != root {
					continue
				}
				if err := reindex(tx, rec, loc, false); err != nil {
					return err
				}
			}
			if next != nil {
				return nil
			}
			var r rootRec
			if err := get(tx, rootKey(root), &r, ErrNotExist); err != nil {
				return err
			}
			r.Indexed = true
			return put(tx, rootKey(root), r)
		})
		if err != nil || next == nil {
			return err
		}
		from = next
	}
}
