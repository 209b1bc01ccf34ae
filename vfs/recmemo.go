package vfs

import "slices"

// recMemo keeps the records a write transaction (listTxn) has decoded,
// by key, for the rest of that transaction. A write checks the same few
// records many times: a small PUT reads its folder and the folder's
// ancestors five times over (the folder must be live, within MaxDepth,
// free of others' locks, and the file's path is resolved for the event),
// and the root three times. kv/badger already answers the repeated reads
// from its own memo of the transaction, but each answer was copied and
// decoded again: some twenty decodes of a PUT's thirty reads
// (BenchmarkSmallWrites/ops).
//
// It is as safe as the engine's memo under it, for the same reasons: the
// first read of a key goes through the transaction (so the engine sees
// it for conflict detection, as every read that decides a write must),
// a later read of it in the same snapshot could only find the same value
// or what this transaction wrote since, and every write of a kept key
// through the listTxn drops it (forget), so the next read goes to the
// transaction again. The memo lives as long as one try of one
// transaction: listStore.Update makes a new listTxn for each.
//
// Records hold slices (a node's locks, a root's tallies) that callers
// change in place (lock.go refreshes a lock's expiry in rec.Locks):
// both what is kept and what is handed out are copies of them.
type recMemo struct {
	nodes map[string]nodeRec
	locs  map[string]locRec
	roots map[string]rootRec
}

// maxMemoRecs bounds each kind of record kept: a large move or delete
// may read thousands once each, which are not worth keeping. It holds a
// whole walk from MaxDepth up to the top folder, and a few dozen records
// more: each check of a write walks the item's folders (liveness, depth,
// locks, the path), and with 64 kept every walk after the first read
// each level past 64 again (a move 999 deep read 13 records a level
// where it needs 2; TestTree/DeepReads). Some thousand records of a few
// hundred bytes, for one transaction, are worth that.
const maxMemoRecs = MaxDepth + 64

// recall sets v to the record kept for key, and reports whether there
// was one. Only nodes, locations and roots are kept.
func (m *recMemo) recall(key []byte, v any) bool {
	switch v := v.(type) {
	case *nodeRec:
		r, ok := m.nodes[string(key)]
		if ok {
			*v = r
			v.Locks = slices.Clone(r.Locks)
		}
		return ok
	case *locRec:
		r, ok := m.locs[string(key)]
		if ok {
			*v = r
		}
		return ok
	case *rootRec:
		r, ok := m.roots[string(key)]
		if ok {
			*v = r
			v.Tallies = slices.Clone(r.Tallies)
		}
		return ok
	}
	return false
}

// clearRec zeroes v where it is a kind of record the memo keeps.
func clearRec(v any) {
	switch v := v.(type) {
	case *nodeRec:
		*v = nodeRec{}
	case *locRec:
		*v = locRec{}
	case *rootRec:
		*v = rootRec{}
	}
}

// keep keeps v, just decoded from key's value in the transaction.
func (m *recMemo) keep(key []byte, v any) {
	switch v := v.(type) {
	case *nodeRec:
		r := *v
		r.Locks = slices.Clone(v.Locks)
		m.nodes = keepIn(m.nodes, key, r)
	case *locRec:
		m.locs = keepIn(m.locs, key, *v)
	case *rootRec:
		r := *v
		r.Tallies = slices.Clone(v.Tallies)
		m.roots = keepIn(m.roots, key, r)
	}
}

func keepIn[T any](m map[string]T, key []byte, v T) map[string]T {
	if m == nil {
		m = make(map[string]T, 4)
	}
	if len(m) < maxMemoRecs {
		m[string(key)] = v
	}
	return m
}

// place keeps loc as the location of the node id, unless one is kept.
func (m *recMemo) place(id uint64, loc locRec) {
	k := locKey(id)
	if _, ok := m.locs[string(k)]; !ok {
		m.locs = keepIn(m.locs, k, loc)
	}
}

// forget drops what is kept for key, which the transaction is about to
// write or delete. Only the kinds of key recall answers can be kept: a
// root (R/), a location (N/), a node's record (F/, C/, D/).
func (m *recMemo) forget(key []byte) {
	if len(key) < 2 || key[1] != '/' {
		return
	}
	switch string(key[:2]) {
	case pRoot:
		delete(m.roots, string(key))
	case pLoc:
		delete(m.locs, string(key))
	case pTop, pChild, pDeleted:
		delete(m.nodes, string(key))
	}
}
