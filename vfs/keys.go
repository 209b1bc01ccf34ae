package vfs

import (
	"encoding/binary"

	"berth/kv"
	"berth/vfs/chunk"
)

// Key layout of the vfs metadata. Every key starts with a one-letter kind
// and a slash; integers are big-endian so prefix scans return them in order.
//
//	R/<root>                  rootRec
//	U/<root>/<shard>          usageRec: one of 16 parts of the root's space
//	                          accounting; their sum is its usage
//	Q/<root>                  empty: written by every quota-checked write,
//	                          so two of them cannot both pass on one sum
//	Y/<tally>/<shard>         usageRec: one of 16 parts of a tally, the sum
//	                          of the roots created with it, live or deleted
//	                          and not purged (Roots counts the live ones);
//	                          see RootOptions.Tallies
//	Z/<tally>                 empty: written by every write checked
//	                          against a quota on the tally, as Q/ for a root
//	N/<node>                  locRec: where a node's record lives
//	F/<root>                  nodeRec of the root's top folder
//	C/<parent>/<name>         nodeRec of a live child; the name index itself,
//	                          so a listing is one prefix scan
//	D/<parent>/<node>         nodeRec of a deleted child (names may repeat)
//	T/<root>/<modified>/<node> empty: every node of a root by modification
//	                          time (unix ns), for modified_since and search
//	V/<file>/<revision>       revRec
//	K/<chunk id>              refcount (uint64) of a chunk over all revisions
//	O/<chunk id>              empty: a chunk whose refcount fell to zero,
//	                          for the garbage collector
//	P/<node>/<name>           raw value of a dead property (WebDAV PROPPATCH);
//	                          copied by Copy, removed by Purge
//	I/<intent>/<part>         intentRec: chunk counts (or a staged tree)
//	                          held for an operation split over several
//	                          transactions, until its last one; see intent.go
//	G/<folder>                empty: written by every transaction that saves
//	                          a live child of the folder, read by a delete's
//	                          count of the folder and a deep lock's check of
//	                          it, so that a child added meanwhile makes the
//	                          two conflict (a scan does not see keys added
//	                          after its snapshot)
//	S/<upload>                stagedRec: a staged upload (staged.go)
//	W/<upload>/<part>         stagedPart: a batch of a staged upload's
//	                          sealed chunks, each holding a count on K/
//	A/<len>/<owner><root>/    int64: what the staged uploads of one owner
//	                          (StageOptions.Owner, <len> bytes) into root
//	                          reserve; absent at 0 (fair.go)
//	A/<len>/<owner><root>u    int64: what they announce past that
//	M/clean                   present while no process has the store open;
//	                          absent at open means the last run crashed
//	M/names                   present once every root has a name index
//	E/<root>/<node>           the folded name of a live item (index.go)
//	X/<root>/<gram>/<node>    the same, under each trigram of the name
//	H/<folder>/<shard>        listSumRec: one of 16 parts of the sum of the
//	                          folder's live children, for its listing
//	                          hash (listhash.go)
//	vfslistmend/<folder>      listMendRec: the sum so far of a folder of
//	                          an older store whose listing sum is being
//	                          kept (listmend.go)
//	M/listsums                present once every folder keeps its sum
//	L/<folder>/<node>         a live child holding locks: until when (unix
//	                          ns, big-endian) one of them holds
//	J/<chunk id>              heldRec: the nodes whose uploads in flight
//	                          hold the chunk (pins.go); the collector
//	                          leaves it alone
//	B/<chunk id>              the node removing the chunk now, with a TTL
//	                          (gc.go); a pin waits until it is gone
//
// The prefixes are registered in kv/prefixes.go with every other
// package's, where a test keeps them apart.
const (
	pRoot    = kv.VFSRoot
	pUsage   = kv.VFSUsage
	pQuota   = kv.VFSQuota
	pLoc     = kv.VFSLoc
	pTop     = kv.VFSTop
	pChild   = kv.VFSChild
	pDeleted = kv.VFSDeleted
	pTime    = kv.VFSTime
	pRev     = kv.VFSRev
	pRef     = kv.VFSRef
	pOrphan  = kv.VFSOrphan
	pProp    = kv.VFSProp
	pIntent  = kv.VFSIntent
	pGen     = kv.VFSGen
	pTally   = kv.VFSTally
	pTallyQ  = kv.VFSTallyQ
	pStaged  = kv.VFSStaged
	pPart    = kv.VFSPart
	pName    = kv.VFSName
	pGram    = kv.VFSGram
	pListSum = kv.VFSListSum
	pLocked  = kv.VFSLocked
	pHeld    = kv.VFSHeld
	pDoomed  = kv.VFSDoomed
	pOwned   = kv.VFSOwned
	// pOwnerStaged counts the staged uploads in progress of one owner.
	pOwnerStaged = kv.VFSOwnerStaged
	// pPropSize holds the bytes of an item's dead properties that its
	// root's usage counts (props.go).
	pPropSize = kv.VFSPropSize
	// pListMend holds the sum so far of a folder whose listing sum is
	// being mended (listmend.go).
	pListMend = kv.VFSListMend
)

var keyClean = []byte(kv.VFSMarker + "clean")

func key(prefix string, ids ...uint64) []byte { return keyRoom(0, prefix, ids...) }

// keyRoom is key with room for extra more bytes, so that a key with a
// name after its ids is made in one allocation: keys are made for every
// read and write, some fifty for a small PUT.
func keyRoom(extra int, prefix string, ids ...uint64) []byte {
	b := make([]byte, 0, len(prefix)+9*len(ids)+extra)
	b = append(b, prefix...)
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
		b = append(b, '/')
	}
	return b
}

func rootKey(root uint64) []byte         { return key(pRoot, root) }
func usageKey(root, shard uint64) []byte { return key(pUsage, root, shard) }
func quotaKey(root uint64) []byte        { return key(pQuota, root) }
func locKey(node uint64) []byte          { return key(pLoc, node) }
func genKey(folder uint64) []byte        { return key(pGen, folder) }
func topKey(root uint64) []byte          { return key(pTop, root) }
func childPrefix(parent uint64) []byte   { return key(pChild, parent) }
func childKey(parent uint64, name string) []byte {
	return append(keyRoom(len(name), pChild, parent), name...)
}
func deletedPrefix(parent uint64) []byte { return key(pDeleted, parent) }
func deletedKey(parent, node uint64) []byte {
	return key(pDeleted, parent, node)
}
func timePrefix(root uint64) []byte { return key(pTime, root) }
func timeKey(root uint64, modified int64, node uint64) []byte {
	return key(pTime, root, uint64(modified), node)
}
func revPrefix(file uint64) []byte   { return key(pRev, file) }
func revKey(file, rev uint64) []byte { return key(pRev, file, rev) }
func refKey(id chunk.ID) []byte      { return append([]byte(pRef), id[:]...) }
func orphanKey(id chunk.ID) []byte   { return append([]byte(pOrphan), id[:]...) }
func heldKey(id chunk.ID) []byte     { return append([]byte(pHeld), id[:]...) }
func doomKey(id chunk.ID) []byte     { return append([]byte(pDoomed), id[:]...) }

// timeKeyNode reads the node id back from a T/ key.
func timeKeyNode(k []byte) uint64 {
	return binary.BigEndian.Uint64(k[len(k)-9 : len(k)-1])
}

func propPrefix(node uint64) []byte  { return key(pProp, node) }
func propSizeKey(node uint64) []byte { return key(pPropSize, node) }
func propKey(node uint64, name string) []byte {
	return append(keyRoom(len(name), pProp, node), name...)
}

func tallyKey(tally, shard uint64) []byte { return key(pTally, tally, shard) }
func tallyQuotaKey(tally uint64) []byte   { return key(pTallyQ, tally) }

func intentPrefix(id uint64) []byte    { return key(pIntent, id) }
func intentKey(id, part uint64) []byte { return key(pIntent, id, part) }

// intentKeyID reads the intent id back from an I/ key.
func intentKeyID(k []byte) uint64 {
	return binary.BigEndian.Uint64(k[len(pIntent) : len(pIntent)+8])
}

// chunkIDFromKey reads the chunk id of a K/, O/, H/ or B/ key.
func chunkIDFromKey(k []byte) chunk.ID {
	var id chunk.ID
	copy(id[:], k[2:])
	return id
}

func stagedKey(id uint64) []byte           { return key(pStaged, id) }
func stagedPartKey(id, part uint64) []byte { return key(pPart, id, part) }

// stagedKeyID reads the upload id back from an S/ key.
func stagedKeyID(k []byte) uint64 {
	return binary.BigEndian.Uint64(k[len(pStaged) : len(pStaged)+8])
}

// ownedPrefix is the A/ keys of owner's reservations. The owner's length
// comes first, so that one owner's prefix is never the start of
// another's.
func ownedPrefix(owner string) []byte {
	return append(keyRoom(len(owner)+9, pOwned, uint64(len(owner))), owner...)
}

// ownerStagedKey counts owner's staged uploads in progress (Stage's
// StageOptions.MaxPerOwner), the owner's length first as in ownedPrefix.
func ownerStagedKey(owner string) []byte {
	return append(keyRoom(len(owner), pOwnerStaged, uint64(len(owner))), owner...)
}

func ownedKey(owner string, root uint64) []byte {
	return append(binary.BigEndian.AppendUint64(ownedPrefix(owner), root), '/')
}

// announcedKey holds what owner's staged uploads into root announce past
// their reservations (stagedRec.Unreserved); it shares ownedKey's prefix.
func announcedKey(owner string, root uint64) []byte {
	return append(binary.BigEndian.AppendUint64(ownedPrefix(owner), root), 'u')
}

// ownedKeyOwner reads the owner back from an A/ key, and whether the
// key is well formed.
func ownedKeyOwner(k []byte) (string, bool) {
	head := len(pOwned) + 9
	if len(k) < head+9 {
		return "", false
	}
	n := binary.BigEndian.Uint64(k[len(pOwned):])
	if n != uint64(len(k)-head-9) {
		return "", false
	}
	return string(k[head : head+int(n)]), true
}

// ownerStagedKeyOwner reads the owner back from an ownerStagedKey.
func ownerStagedKeyOwner(k []byte) (string, bool) {
	head := len(pOwnerStaged) + 9
	if len(k) < head {
		return "", false
	}
	n := binary.BigEndian.Uint64(k[len(pOwnerStaged):])
	if n != uint64(len(k)-head) {
		return "", false
	}
	return string(k[head:]), true
}

// ownedKeyRoot reads the root back from an A/ key.
func ownedKeyRoot(k []byte) uint64 {
	return binary.BigEndian.Uint64(k[len(k)-9 : len(k)-1])
}
