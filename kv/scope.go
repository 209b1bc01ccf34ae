package kv

// Content reports whether key is one of the keys that every file write
// changes and that no cache of who is calling or what they reach reads:
// vfs's folder tree, revisions, chunk counts and space accounting, and
// the activity journal. The root records (R/), the roots' top folders
// (F/, whose locks a root shows) and vfs's markers are not content; nor
// is anything of account, share or any other package.
//
// It splits the store for MetaGeneration: a commit that writes content
// keys only leaves that generation where it was.
func Content(key []byte) bool {
	if len(key) >= 2 && key[1] == '/' {
		switch string(key[:2]) {
		case VFSRoot, VFSTop, VFSMarker:
			return false
		}
		return key[0] >= 'A' && key[0] <= 'Z'
	}
	// vfs's later prefixes take the stem "vfs" (every capital letter is
	// taken): a staged upload's count per owner is changed by uploads,
	// as the letters' records are, and an item's counted property bytes
	// by PROPPATCH, as its P/ records are; a folder's listing sum being
	// mended by a child's write, as its H/ records are.
	for _, p := range []string{VFSOwnerStaged, VFSPropSize, VFSListMend, ActivityRecord, ActivityOrg, ActivityPerson} {
		if len(key) >= len(p) && string(key[:len(p)]) == p {
			return true
		}
	}
	return false
}

// MetaGenerationer is a Store that keeps, beside Generation, a generation
// that commits writing Content keys only do not move.
type MetaGenerationer interface {
	// MetaGeneration is Generation for the keys that are not Content:
	// it moves with every commit that writes, or deletes, at least one
	// of them (and may move without one), never goes back, and keeps
	// Generation's promise for what a transaction read of them.
	MetaGeneration() uint64
}

// MetaGeneration returns s's MetaGeneration, or its Generation where s
// keeps no other (which serves the same promise, with more misses).
//
// Caches of callers and sessions key on it: every request would read
// them again after every file write otherwise, and a file service under
// writes commits many times a second. A cache may key on it only if all
// it reads is outside Content: a person, an organization, a policy, a
// lock of the login, a root's record. (Reading a root also reads where
// its top folder lives, an N/ key, which vfs writes only in the commits
// that write the top folder's record, F/; share's
// TestCachedReadsOutsideContent holds the caches to this.)
func MetaGeneration(s Store) uint64 {
	if m, ok := s.(MetaGenerationer); ok {
		return m.MetaGeneration()
	}
	return s.Generation()
}
