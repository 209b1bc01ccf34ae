package vfs

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"

	"berth/kv"
)

// A folder's listing hash is kept, not computed by reading the listing:
// a client whose hash is current is answered without a scan, and a whole
// listing is one scan, whatever the folder's size (issue 16; computing
// it took a second pass over a 100,000-child folder).
//
// What is kept is a sum: each live child contributes a 128-bit digest of
// the fields a listing shows (listingFields, without the lock state), and
// the folder's sum is theirs modulo 2^128, with their count. A sum can be
// changed by one child without reading the others, in the transaction
// that changes the child, so the hash is exactly as durable as the child
// (after a crash too). It is spread over listShards records, as the usage
// ledger is (usage.go), so writers to one folder rarely conflict on it;
// shard 0 holds what a sum started with (ensure).
//
// Whether a child shows as locked changes without a write when its lock
// expires, so the lock state is not in the sum: the children that hold
// locks are keyed apart (L/<folder>/<child>, with until when one of their
// locks holds), and the hash is the digest of the sum, the count and the
// ids of the children locked at the time it is read. A folder holds few
// locked children, so that read is a short scan.
//
// Every write transaction of the file system passes through listTxn
// (FS.db is a listStore), which keeps the sums as the C/ keys change,
// whichever code path changes them. A folder whose sum was never kept (a
// store older than it) is read by a scan, and gets its sum from one scan
// in the first transaction that changes one of its children, or from
// the mending Open starts (listmend.go), a bounded transaction at a time.

// listShards is how many records a folder's sum is spread over.
const listShards = 64

// listSumRec is one shard of a folder's sum: Hi and Lo are the high and
// low halves of a 128-bit sum of digests, Count the number of children
// added less those removed through this shard (so one shard may be
// negative; the shards' total is not).
type listSumRec struct {
	Hi    uint64 `cbor:"1,keyasint,omitempty"`
	Lo    uint64 `cbor:"2,keyasint,omitempty"`
	Count int64  `cbor:"3,keyasint,omitempty"`
}

func (s *listSumRec) add(d listSumRec) {
	lo := s.Lo + d.Lo
	carry := uint64(0)
	if lo < s.Lo {
		carry = 1
	}
	s.Lo, s.Hi, s.Count = lo, s.Hi+d.Hi+carry, s.Count+d.Count
}

func (s *listSumRec) sub(d listSumRec) {
	s.add(listSumRec{Hi: ^d.Hi, Lo: ^d.Lo, Count: -d.Count})
	s.add(listSumRec{Lo: 1}) // two's complement: -x = ^x + 1
}

func listSumPrefix(folder uint64) []byte     { return key(pListSum, folder) }
func listSumKey(folder, shard uint64) []byte { return key(pListSum, folder, shard) }
func lockedPrefix(folder uint64) []byte      { return key(pLocked, folder) }
func lockedKey(folder, child uint64) []byte  { return key(pLocked, folder, child) }
func lockedKeyChild(k []byte) uint64         { return binary.BigEndian.Uint64(k[len(k)-9 : len(k)-1]) }
func childKeyParent(k []byte) (uint64, bool) {
	if len(k) < len(pChild)+9 || string(k[:len(pChild)]) != pChild {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(pChild):]), true
}

// childDigest is what one child adds to its folder's sum.
func childDigest(rec nodeRec) listSumRec {
	n := rec.public(0)
	n.Locks = nil
	var b [128]byte
	sum := blake3.Sum256(listingFields(b[:0], n))
	return listSumRec{Hi: binary.BigEndian.Uint64(sum[:8]), Lo: binary.BigEndian.Uint64(sum[8:16]), Count: 1}
}

// lockedUntil is until when one of rec's locks holds (unix ns), 0 when
// it has none; a lock without an expiry holds for ever.
func lockedUntil(rec nodeRec) int64 {
	var until int64
	for _, l := range rec.Locks {
		if l.Expires == 0 {
			return math.MaxInt64
		}
		until = max(until, l.Expires)
	}
	return until
}

// listHashOf is the listing hash of a folder whose children sum to sum,
// of which those in locked (ascending ids) show as locked.
func listHashOf(sum listSumRec, locked []uint64) string {
	h := blake3.New()
	var b []byte
	b = append(b, "berth listing 2\x00"...)
	b = binary.BigEndian.AppendUint64(b, sum.Hi)
	b = binary.BigEndian.AppendUint64(b, sum.Lo)
	b = binary.BigEndian.AppendUint64(b, uint64(sum.Count))
	for _, id := range locked {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// listHash reads the listing hash of folder at now in tx: from its kept
// sum, or by a scan of its children when it has none.
func listHash(tx kv.Txn, folder uint64, now int64) (string, error) {
	sum, kept, err := keptSum(tx, folder)
	if err != nil {
		return "", err
	}
	if !kept {
		return scanListHash(tx, folder, now)
	}
	var locked []uint64
	err = tx.Scan(lockedPrefix(folder), nil, func(k, v []byte) error {
		if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) > now {
			locked = append(locked, lockedKeyChild(k))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return listHashOf(sum, locked), nil
}

// listHashesIn reads the listing hashes of the folders ids at now in tx,
// keyed by id, each as listHash reads it, in ordered scans of the kept
// sums and of the locked keys from the least id to the greatest
// (scanIDs): a listing that sends every listed folder's hash (a WebDAV
// PROPFIND's getetag) read two scans a folder, iterators opened for a
// few records each (the locked keys' mostly for none): some 7 to 12 ms
// of CPU for a folder of 1,000 subfolders of 8 files, 4 to 7 this way,
// 1 to 1.5 without hashes (BenchmarkListFolderHashes): a folder's sum is
// still a record per shard its children fell in, up to listShards.
func listHashesIn(tx kv.Txn, ids []uint64, now int64) (map[uint64]string, error) {
	out := make(map[uint64]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	sums := make(map[uint64]listSumRec, len(sorted))
	err := scanIDs(tx, pListSum, sorted, func(id uint64, k, v []byte) error {
		var s listSumRec
		if err := decodeListSum(v, &s); err != nil {
			return fmt.Errorf("vfs: decode listing sum of %d: %w", id, err)
		}
		sum := sums[id]
		sum.add(s)
		sums[id] = sum
		return nil
	})
	if err != nil {
		return nil, err
	}
	locked := map[uint64][]uint64{}
	err = scanIDs(tx, pLocked, sorted, func(id uint64, k, v []byte) error {
		if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) > now {
			locked[id] = append(locked[id], lockedKeyChild(k))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range sorted {
		sum, kept := sums[id]
		if !kept {
			// A folder of an older store, read by a scan (listHash).
			h, err := scanListHash(tx, id, now)
			if err != nil {
				return nil, err
			}
			out[id] = h
			continue
		}
		out[id] = listHashOf(sum, locked[id])
	}
	return out, nil
}

// scanIDs calls fn with the keys under prefix p whose next 8 bytes are
// one of the ascending ids sorted (a folder's H/ and L/ keys), in order,
// in one scan from the least id's keys on while they lie close together,
// and a new scan from the next wanted id's where a run of other ids' keys
// lies between (scanSkip): a listing's batch is in name order, so the ids
// of its folders are spread over those of the whole listing's, and one
// scan over their range read every other batch's too, four times the
// keys wanted in a folder of 1,000 subfolders; a scan per id opened an
// iterator for a few keys.
func scanIDs(tx kv.Txn, p string, sorted []uint64, fn func(id uint64, k, v []byte) error) error {
	last := sorted[len(sorted)-1]
	for i := 0; i < len(sorted); {
		again := false
		skipped := 0
		err := tx.Scan([]byte(p), key(p, sorted[i]), func(k, v []byte) error {
			if len(k) < len(p)+9 {
				return nil
			}
			id := kv.Uint64At(k, len(p))
			if id > last {
				return kv.ErrStop
			}
			for sorted[i] < id {
				i++ // id <= last: sorted[i] never runs past it
			}
			if sorted[i] == id {
				skipped = 0
				return fn(id, k, v)
			}
			if skipped++; skipped > scanSkip {
				// Every key of the ids before sorted[i] is read, and
				// none of its: the next scan starts there.
				again = true
				return kv.ErrStop
			}
			return nil
		})
		if err != nil || !again {
			return err
		}
	}
	return nil
}

// scanSkip is how many keys of other ids in a row scanIDs steps over
// before it opens a new scan at the next wanted id: an iterator's opening
// and seek cost about as much as that many steps.
const scanSkip = 16

// decodeListSum decodes a listSumRec as cbor.Unmarshal does, by hand for
// the form put writes (a map of at most three small integer keys to
// integers), where the reflection of cbor's decoder was a third of the
// cost of reading a folder's sum; any other form goes to cbor.
func decodeListSum(b []byte, s *listSumRec) error {
	*s = listSumRec{}
	if len(b) == 0 || b[0]&0xe0 != 0xa0 || b[0]&0x1f > 3 {
		return cbor.Unmarshal(b, s)
	}
	rest := b[1:]
	for range int(b[0] & 0x1f) {
		if len(rest) == 0 || rest[0] < 1 || rest[0] > 3 {
			return cbor.Unmarshal(b, s)
		}
		field := rest[0]
		v, neg, n, ok := cborInt(rest[1:])
		if !ok || (neg && field != 3) {
			return cbor.Unmarshal(b, s)
		}
		rest = rest[1+n:]
		switch field {
		case 1:
			s.Hi = v
		case 2:
			s.Lo = v
		default:
			if v > math.MaxInt64 {
				return cbor.Unmarshal(b, s)
			}
			s.Count = int64(v)
			if neg {
				s.Count = -1 - int64(v)
			}
		}
	}
	if len(rest) != 0 {
		return cbor.Unmarshal(b, s)
	}
	return nil
}

// cborInt reads a CBOR integer (major type 0, or 1 for a negative one,
// whose value is -1-v) at the start of b, and how many bytes it took.
func cborInt(b []byte) (v uint64, neg bool, n int, ok bool) {
	if len(b) == 0 || b[0]>>5 > 1 {
		return 0, false, 0, false
	}
	neg = b[0]>>5 == 1
	switch info := b[0] & 0x1f; {
	case info < 24:
		return uint64(info), neg, 1, true
	case info == 24 && len(b) >= 2:
		return uint64(b[1]), neg, 2, true
	case info == 25 && len(b) >= 3:
		return uint64(binary.BigEndian.Uint16(b[1:])), neg, 3, true
	case info == 26 && len(b) >= 5:
		return uint64(binary.BigEndian.Uint32(b[1:])), neg, 5, true
	case info == 27 && len(b) >= 9:
		return binary.BigEndian.Uint64(b[1:]), neg, 9, true
	}
	return 0, false, 0, false
}

// childCount is the number of live children of folder from its kept
// sum, or -1 when it keeps none.
func childCount(tx kv.Txn, folder uint64) (int64, error) {
	sum, kept, err := keptSum(tx, folder)
	if err != nil || !kept {
		return -1, err
	}
	return sum.Count, nil
}

// keptSum adds up the shards of folder's kept sum; kept is false when
// it has none.
func keptSum(tx kv.Txn, folder uint64) (sum listSumRec, kept bool, err error) {
	err = tx.Scan(listSumPrefix(folder), nil, func(k, v []byte) error {
		var s listSumRec
		if err := decodeListSum(v, &s); err != nil {
			return fmt.Errorf("vfs: decode listing sum of %d: %w", folder, err)
		}
		sum.add(s)
		kept = true
		return nil
	})
	return sum, kept, err
}

// listSumCheckBatch is how many folders' kept sums checkListSums reads
// before it scans their children: a scan is not made inside another
// (a store on a database server reads one at a time on a connection).
const listSumCheckBatch = 256

// checkListSums compares the kept listing sum of every folder that keeps
// one with a scan of its children (fsck), and returns the folders whose
// sums differ: a listing hash and a count (ListOptions.Count) read from a
// wrong sum would tell clients a folder changed, or did not, wrongly.
func checkListSums(tx kv.Txn) ([]uint64, error) {
	var bad []uint64
	start := []byte(pListSum)
	for {
		type kept struct {
			folder uint64
			sum    listSumRec
		}
		var batch []kept
		var next []byte
		err := tx.Scan([]byte(pListSum), start, func(k, v []byte) error {
			f := kv.Uint64At(k, len(pListSum))
			if n := len(batch); n == 0 || batch[n-1].folder != f {
				if n == listSumCheckBatch {
					next = append([]byte(nil), k...)
					return kv.ErrStop
				}
				batch = append(batch, kept{folder: f})
			}
			var s listSumRec
			if err := cbor.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("vfs: decode listing sum of %d: %w", f, err)
			}
			batch[len(batch)-1].sum.add(s)
			return nil
		})
		if err != nil {
			return bad, err
		}
		for _, b := range batch {
			scanned, _, err := scanListSum(tx, b.folder)
			if err != nil {
				return bad, err
			}
			if scanned != b.sum {
				bad = append(bad, b.folder)
			}
		}
		if next == nil {
			return bad, nil
		}
		start = next
	}
}

// scanListHash computes the listing hash of folder from its children,
// as listHash reads it: for a folder without a kept sum, and for the
// tests that check the kept one.
func scanListHash(tx kv.Txn, folder uint64, now int64) (string, error) {
	sum, locked, err := scanListSum(tx, folder)
	if err != nil {
		return "", err
	}
	var live []uint64
	for _, l := range locked {
		if l.until > now {
			live = append(live, l.id)
		}
	}
	return listHashOf(sum, live), nil
}

// lockedChild is a child of a folder that holds locks.
type lockedChild struct {
	id    uint64
	until int64
}

// scanListSum sums the children of folder, and returns those holding
// locks in ascending ids.
func scanListSum(tx kv.Txn, folder uint64) (listSumRec, []lockedChild, error) {
	var sum listSumRec
	locked, _, err := scanListSumFrom(tx, folder, childPrefix(folder), 0, &sum)
	slices.SortFunc(locked, func(a, b lockedChild) int { return cmp.Compare(a.id, b.id) })
	return sum, locked, err
}

// scanListSumFrom adds to sum the children of folder from the child key
// from on, at most max of them (0: all), and returns those holding locks
// and the key of the first child left uncounted (nil: none left): the
// whole scan of scanListSum, and the mending's batches (listmend.go).
func scanListSumFrom(tx kv.Txn, folder uint64, from []byte, max int, sum *listSumRec) (locked []lockedChild, next []byte, err error) {
	n := 0
	var rec nodeRec
	err = tx.Scan(childPrefix(folder), from, func(k, v []byte) error {
		if max > 0 && n == max {
			next = append([]byte(nil), k...)
			return kv.ErrStop
		}
		n++
		rec = nodeRec{}
		if err := cbor.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("vfs: decode child of %d: %w", folder, err)
		}
		sum.add(childDigest(rec))
		if u := lockedUntil(rec); u != 0 {
			locked = append(locked, lockedChild{rec.ID, u})
		}
		return nil
	})
	return locked, next, err
}

// setLocked writes the locked keys (L/) of folder's children in locked,
// where a sum starts being kept: a change of one of them keeps them after.
func setLocked(tx kv.Txn, folder uint64, locked []lockedChild) error {
	for _, l := range locked {
		if err := tx.Set(lockedKey(folder, l.id), binary.BigEndian.AppendUint64(nil, uint64(l.until))); err != nil {
			return err
		}
	}
	return nil
}

// listStore is the kv store the file system writes through: every write
// transaction keeps the listing sums of the folders whose children it
// changes (listTxn).
type listStore struct{ kv.Store }

// Update runs fn in a listTxn and writes the sums it changed before the
// transaction commits, so they commit with the children or not at all.
func (s listStore) Update(ctx context.Context, fn func(kv.Txn) error) error {
	return s.Store.Update(ctx, func(tx kv.Txn) error {
		lt := &listTxn{Txn: tx}
		if err := fn(lt); err != nil {
			return err
		}
		return lt.flush()
	})
}

// View runs fn in a viewTxn: a read transaction that keeps the records it
// decodes, as a write transaction does (recMemo). A read checks an item's
// folders more than once (a write's checks before its body arrives: the
// folder is live, within MaxDepth, not locked), each a walk up to the top;
// without the memo each walk past the engine's own memo (128 keys, some
// 64 levels) read and decoded every level again.
func (s listStore) View(ctx context.Context, fn func(kv.Txn) error) error {
	return s.Store.View(ctx, func(tx kv.Txn) error {
		return fn(&viewTxn{Txn: tx})
	})
}

// viewTxn is a read transaction with a recMemo. It is as safe as the
// write transaction's memo, more simply: nothing changes what a read
// transaction's snapshot holds.
type viewTxn struct {
	kv.Txn
	recs recMemo
}

// memoOf is tx's memo of records, nil for a transaction without one.
func memoOf(tx kv.Txn) *recMemo {
	switch t := tx.(type) {
	case *listTxn:
		return &t.recs
	case *viewTxn:
		return &t.recs
	}
	return nil
}

// listTxn is a write transaction that sees every change of a live
// child's record (C/ keys) and keeps its folder's sum and locked keys.
type listTxn struct {
	kv.Txn
	shards map[shardKey]*listSumRec // shards read (and changed) so far
	ready  map[uint64]bool          // folders known to have a kept sum
	// mends holds the folders being mended (listmend.go): their sum
	// so far, which ensure read instead of starting one.
	mends  map[uint64]*listMend
	locks  map[childRef]*lockChange
	purged map[uint64]bool // folders purged in this transaction
	// item is the item whose change picks the usage shards the
	// transaction writes (usageShard): the first child it changes, or
	// one named before (shardBy). Zero: none yet.
	item uint64
	// fresh is an item given its id in this transaction (saveNewNode):
	// it holds no locks yet, so its locked key is not read.
	fresh uint64
	// recs keeps the records get decoded in this transaction.
	recs recMemo
}

// shardBy makes the item id pick the usage shards that tx, a file
// system transaction, writes, unless an item did already.
func shardBy(tx kv.Txn, id uint64) {
	if lt, ok := tx.(*listTxn); ok && lt.item == 0 {
		lt.item = id
	}
}

type shardKey struct{ folder, shard uint64 }
type childRef struct{ folder, child uint64 }

// lockChange follows one child's locked key through a transaction, so
// that the order of its changes (a rename may set the new name's record
// before or after deleting the old one's) does not matter: base is the
// key's value before the transaction (0: none), keys the child's record
// keys the transaction wrote, each with its last state. A node has one
// record, so it ends present when one of them was last set.
type lockChange struct {
	base int64
	keys []keyState
}

type keyState struct {
	key   string
	set   bool
	until int64
}

// note records the last state of one of the child's keys.
func (c *lockChange) note(k []byte, set bool, until int64) {
	for i := range c.keys {
		if c.keys[i].key == string(k) {
			c.keys[i].set, c.keys[i].until = set, until
			return
		}
	}
	c.keys = append(c.keys, keyState{string(k), set, until})
}

func (t *listTxn) Set(k, v []byte) error {
	if err := t.change(k, v, true); err != nil {
		return err
	}
	t.recs.forget(k)
	return t.Txn.Set(k, v)
}

func (t *listTxn) SetTTL(k, v []byte, ttl time.Duration) error {
	if err := t.change(k, v, true); err != nil {
		return err
	}
	t.recs.forget(k)
	return t.Txn.SetTTL(k, v, ttl)
}

func (t *listTxn) Delete(k []byte) error {
	if err := t.change(k, nil, false); err != nil {
		return err
	}
	t.recs.forget(k)
	return t.Txn.Delete(k)
}

// change keeps the sums for a write of k (set, with the value v, or
// deleted) before it is made.
func (t *listTxn) change(k, v []byte, set bool) error {
	if len(k) == len(pGen)+9 && string(k[:len(pGen)]) == pGen && !set {
		// G/<folder> goes when the folder is purged: its sum goes too.
		return t.purge(binary.BigEndian.Uint64(k[len(pGen):]))
	}
	folder, ok := childKeyParent(k)
	if !ok {
		return nil
	}
	if err := t.ensure(folder); err != nil {
		return err
	}
	if m := t.mends[folder]; m != nil && !m.counted(k) {
		// The mending counts this key when it gets there, as it is
		// then; it must see this write or conflict with it (G/, which
		// a purge of the folder in this transaction took away).
		if !m.touched && !t.purged[folder] {
			m.touched = true
			return t.Txn.Set(genKey(folder), nil)
		}
		return nil
	}
	var old, rec *nodeRec
	var was nodeRec
	switch err := get(t, k, &was, kv.ErrNotFound); {
	case err == nil:
		old = &was
	case !errors.Is(err, kv.ErrNotFound):
		return err
	}
	if set {
		rec = &nodeRec{}
		if err := cbor.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("vfs: decode child of %d: %w", folder, err)
		}
	}
	switch {
	case t.item != 0:
	case old != nil:
		t.item = old.ID
	case rec != nil:
		t.item = rec.ID
	}
	if old != nil {
		s, err := t.sumFor(folder, old.ID)
		if err != nil {
			return err
		}
		s.sub(childDigest(*old))
		if rec == nil || rec.ID != old.ID {
			c, err := t.lockChange(folder, old.ID)
			if err != nil {
				return err
			}
			c.note(k, false, 0)
		}
	}
	if rec != nil {
		s, err := t.sumFor(folder, rec.ID)
		if err != nil {
			return err
		}
		s.add(childDigest(*rec))
		c, err := t.lockChange(folder, rec.ID)
		if err != nil {
			return err
		}
		c.note(k, true, lockedUntil(*rec))
	}
	return nil
}

// lockChange is the change of the locked key of child in folder, begun
// at its first change with the key's value then.
func (t *listTxn) lockChange(folder, child uint64) (*lockChange, error) {
	r := childRef{folder, child}
	if c, ok := t.locks[r]; ok {
		return c, nil
	}
	if t.locks == nil {
		t.locks = map[childRef]*lockChange{}
	}
	c := &lockChange{}
	if child != t.fresh {
		b, err := t.Txn.Get(lockedKey(folder, child))
		switch {
		case err == nil && len(b) == 8:
			c.base = int64(binary.BigEndian.Uint64(b))
		case err != nil && !errors.Is(err, kv.ErrNotFound):
			return nil, err
		}
	}
	t.locks[r] = c
	return c, nil
}

// ensure makes sure folder has a kept sum before one of its children
// changes: one it already has, or one from a scan of its children.
// Shard 0 says which: it is written only when a sum is started (with
// the scan's total), never by a change of a child, so reading it makes
// two transactions that start one conflict (the second finds the
// first's) and no others. A folder being mended (listmend.go) starts
// none: its changes go to the mending's sum so far, or to none.
func (t *listTxn) ensure(folder uint64) error {
	if t.ready[folder] {
		return nil
	}
	if t.ready == nil {
		t.ready = map[uint64]bool{}
	}
	t.ready[folder] = true
	_, err := t.Txn.Get(listSumKey(folder, 0))
	if err == nil {
		return nil
	}
	if !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	var m listMend
	switch err := get(t.Txn, listMendKey(folder), &m.rec, kv.ErrNotFound); {
	case err == nil:
		if t.mends == nil {
			t.mends = map[uint64]*listMend{}
		}
		t.mends[folder] = &m
		return nil
	case !errors.Is(err, kv.ErrNotFound):
		return err
	}
	sum, locked, err := scanListSum(t.Txn, folder)
	if err != nil {
		return err
	}
	if t.shards == nil {
		t.shards = map[shardKey]*listSumRec{}
	}
	t.shards[shardKey{folder, 0}] = &sum
	return setLocked(t.Txn, folder, locked)
}

// startEmpty starts the kept sum of folder, made in this transaction,
// as ensure would but without its read and scan: a new folder has no
// children, and no other transaction sees it before this one commits.
// Without it, the first write into the folder (a sync client's PUT
// right after its MKCOL) read shard 0, missed it, and scanned the
// folder's children, some 16 us of a small PUT's CPU, to find nothing.
func (t *listTxn) startEmpty(folder uint64) {
	if t.ready[folder] {
		return
	}
	if t.ready == nil {
		t.ready = map[uint64]bool{}
	}
	t.ready[folder] = true
	if t.shards == nil {
		t.shards = map[shardKey]*listSumRec{}
	}
	t.shards[shardKey{folder, 0}] = &listSumRec{}
}

// startEmpty is listTxn.startEmpty for tx, a file system transaction,
// and does nothing for another (a test's plain one).
func startEmpty(tx kv.Txn, folder uint64) {
	if lt, ok := tx.(*listTxn); ok {
		lt.startEmpty(folder)
	}
}

// sumFor is what child's changes of folder's sum go to: the mending's
// sum so far, for a folder being mended, or else its shard.
func (t *listTxn) sumFor(folder, child uint64) (*listSumRec, error) {
	if m := t.mends[folder]; m != nil {
		m.dirty = true
		return &m.rec.Sum, nil
	}
	return t.shard(folder, child)
}

// shard is the shard of folder's sum that child's changes go to: one of
// 1 to listShards-1 (0 is ensure's).
func (t *listTxn) shard(folder, child uint64) (*listSumRec, error) {
	k := shardKey{folder, 1 + child%(listShards-1)}
	if s, ok := t.shards[k]; ok {
		return s, nil
	}
	s := &listSumRec{}
	if err := get(t.Txn, listSumKey(k.folder, k.shard), s, kv.ErrNotFound); err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, err
	}
	if t.shards == nil {
		t.shards = map[shardKey]*listSumRec{}
	}
	t.shards[k] = s
	return s, nil
}

// purge removes the sum and locked keys of a folder being purged.
func (t *listTxn) purge(folder uint64) error {
	if t.purged == nil {
		t.purged = map[uint64]bool{}
	}
	t.purged[folder] = true
	// A sum half mended goes too: the mending walks the nodes there
	// are, so after a restart it meets a purged folder's record no more.
	if err := t.Txn.Delete(listMendKey(folder)); err != nil {
		return err
	}
	for _, prefix := range [][]byte{listSumPrefix(folder), lockedPrefix(folder)} {
		var keys [][]byte
		err := t.Txn.Scan(prefix, nil, func(k, v []byte) error {
			keys = append(keys, slices.Clone(k))
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := t.Txn.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the shards and locked keys the transaction changed.
func (t *listTxn) flush() error {
	for k, s := range t.shards {
		if t.purged[k.folder] {
			continue
		}
		if err := put(t.Txn, listSumKey(k.folder, k.shard), *s); err != nil {
			return err
		}
	}
	for f, m := range t.mends {
		if m.dirty && !t.purged[f] {
			if err := put(t.Txn, listMendKey(f), m.rec); err != nil {
				return err
			}
		}
	}
	for r, c := range t.locks {
		if t.purged[r.folder] {
			continue
		}
		want := int64(0)
		for _, k := range c.keys {
			if k.set {
				want = k.until
			}
		}
		switch {
		case want == c.base:
		case want == 0:
			if err := t.Txn.Delete(lockedKey(r.folder, r.child)); err != nil {
				return err
			}
		default:
			if err := t.Txn.Set(lockedKey(r.folder, r.child), binary.BigEndian.AppendUint64(nil, uint64(want))); err != nil {
				return err
			}
		}
	}
	return nil
}

// Exclusive passes the engine's answer through (kv.Exclusive): whether a
// single process owns the store decides how Open recovers (node.go), and
// the wrapper must not turn a lone Badger into a shared store.
func (s listStore) Exclusive() bool { return exclusive(s.Store) }
