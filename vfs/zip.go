package vfs

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"

	"berth/kv"
)

// ZipOptions limit what a zip holds. The zero value holds the whole
// folder.
type ZipOptions struct {
	// FileIDs and FolderIDs, when either is non-empty, limit the top-level
	// entries to those children of the folder (files by FileIDs, folders by
	// FolderIDs; a folder chosen is written whole). Ids that are not live
	// children are ignored. Both empty: every child.
	FileIDs, FolderIDs []uint64
	// Requester is who the zip is served to, opaque to vfs (the front
	// ends name a person or a share link): the zips of one requester
	// share one part of the budget (see ZipBudget), so that one who
	// holds zips open cannot keep the others' from being served.
	Requester string
	// Group is who else Requester's zips count with: the other share
	// links of the person who made the link that Requester names.
	// Empty: Requester alone. The zips of a group hold together at most
	// what one requester may, so that a person who makes share link
	// after link, each a requester, does not take the whole budget
	// through them.
	Group string
}

// ZipMaxEntries bounds the entries of one zip: its layout is held in
// memory for as long as the archive is served (about 90 bytes and the
// item's name per entry), since a Range may ask for any part of it. A
// larger folder is ErrZipTooLarge; its subfolders can be zipped one by
// one. With the default ZipBudget the bound in bytes comes first (some
// 250,000 entries of names of 25 bytes); this one holds for a larger
// Options.ZipBudget.
const ZipMaxEntries = 500_000

// ZipBudget bounds the bytes that the layouts of every zip being served
// hold together (54 MiB; Options.ZipBudget), since each stays in memory
// until its answer ends: twenty requests for a folder of 100,000 items
// held some 200 MiB, and even a HEAD or a one-byte Range lays the whole
// archive out. An entry costs ZipEntryCost and its name (zipEntBytes):
// counted in entries, the bound held 54 MiB of short names but 170 MiB of
// names of 255 bytes, which anyone who may create items can choose.
//
// The budget is shared fairly, because a layout is held for as long as
// its client takes to download the archive: the zips of one requester
// (ZipOptions.Requester) may hold together at most half of what the
// other requesters' zips leave of it. So a requester alone may hold half
// the budget (a zip of some 250,000 entries of names of 25 bytes), and
// one who holds zips open, slowly read or many at once, leaves every
// other requester at least a quarter of it; with only the global bound,
// one holder of a share link to a big folder who read its zip slowly
// kept every other zip of the server refused for as long. A group of
// requesters (ZipOptions.Group: the share links one person made) is
// held to the same half, or a person who made link after link would
// hold all but a sliver of the budget through them. A zip that
// does not fit is ErrBusy until zips end; a zip whose entries alone pass
// half the budget is ErrZipTooLarge. A layout that concurrent requests
// share (FS.Zip) counts once in the budget, and whole in the share of
// each requester holding it (zipShares says why).
const ZipBudget = 54 << 20

// ZipEntryCost is what an entry of a zip's layout costs of ZipBudget
// besides its name's bytes: the entry (72 bytes), the rounding of its
// name's allocation and the slack of the slices it passes through
// (measured: some 86 bytes).
const ZipEntryCost = 88

// zipEntBytes is what entry e costs of ZipBudget.
func zipEntBytes(e *zipEnt) int64 { return ZipEntryCost + int64(len(e.name)) }

// Zip record sizes and signatures (APPNOTE 6.3.10, 4.3).
const (
	zipLocalLen     = 30 // local file header, before name and extra
	zipCentralLen   = 46 // central directory header, before name and extra
	zipTimeExtraLen = 9  // extended timestamp (0x5455), modification time only
	zip64LocalExtra = 20 // Zip64 extra of a local header: both sizes
	zip64EndLen     = 56 // Zip64 end of central directory record
	zip64LocatorLen = 20
	zipEndLen       = 22 // end of central directory, no comment

	zipLocalSig    = 0x04034b50
	zipCentralSig  = 0x02014b50
	zip64EndSig    = 0x06064b50
	zip64LocSig    = 0x07064b50
	zipEndSig      = 0x06054b50
	zipTimeTag     = 0x5455
	zip64Tag       = 0x0001
	zipFlagUTF8    = 0x800
	zipVersion20   = 20
	zipVersion45   = 45
	zipMadeByUnix  = 3 << 8
	zipUint16Max   = math.MaxUint16
	zipUint32Max   = math.MaxUint32
	zipCentralFill = 64 << 10 // central directory bytes generated at a time
)

// Zip is the zip archive of a folder, laid out from metadata before a byte
// is sent: every entry Stored (not compressed), in a fixed order with fixed
// times, so the archive is one byte sequence that the listing determines.
// Its Size is known up front (a Content-Length), its ETag names that
// sequence, and Reader reads any part of it (Range requests, a download
// resumed): local headers and the central directory are generated on the
// fly, file contents come from the revisions the listing named.
//
// A Zip is one request's hold on a layout that the concurrent requests
// for the same archive share (see FS.Zip): the segments of one download
// fetched in parallel, or the visitors of one share link. Each Reader is
// one request's; Readers of one layout may read at once.
type Zip struct {
	*zipLayout
	who    zipHolder
	closed atomic.Bool
}

// zipLayout is the layout of one archive, shared by the Zips of the
// requests that read it. Its entries' places are fixed once laid out;
// only their CRCs are noted as readers find them (zipEnt.crcv).
type zipLayout struct {
	fs   *FS
	root uint64
	ents []zipEnt
	// z64 is the size or offset from which Zip64 fields are used:
	// 0xFFFFFFFF, lowered by tests (WithZip64Threshold).
	z64                 int64
	max                 int // ZipMaxEntries, lowered by tests
	cdOff, cdSize, size int64
	// cdMarks[k] is where the central record of entry k*zipCentralMark
	// starts, so that a read into the central directory finds its record
	// from the nearest mark, not by walking from the first entry.
	cdMarks  []int64
	zip64End bool
	etag     string
	// topNames are the names in the archive of the top-level entries
	// whose own names begin with a drive letter, by item id (nameTop,
	// entName).
	topNames map[uint64]string
	// builder is who lays it out, charged as it lists (zipShares.grow).
	builder zipHolder
	// The rest is zipShares', guarded by its mu.
	share zipShareState
}

// zipHolder is who a layout is held for: its requester and their group
// (ZipOptions).
type zipHolder struct{ requester, group string }

// zipCentralMark is how many central records lie between two of
// Zip.cdMarks: a read walks at most that many, and the marks cost 8 bytes
// per that many entries. Walking from the first entry, each part of a
// Range of 100 into the central directory of 500,000 entries passed up to
// all of them, some 0.3 s of CPU a request that anyone holding a share
// link could send again and again.
const zipCentralMark = 256

// zipEnt is one entry: a folder ("a/") or a file at one revision.
type zipEnt struct {
	off  int64 // of its local header
	size int64
	// crcv is the CRC in its low 32 bits and 1<<32 once it is known:
	// the readers of a shared layout note CRCs as they find them, at
	// once (each the same for the same revision), so it is read and set
	// atomically (crc, setCRC).
	crcv    uint64
	id, rev uint64
	mod     int64  // unix ns
	name    string // its own name; the path is its parents' and it
	parent  int32  // index of the folder entry above it; -1 at the top
	pathLen uint32 // of the full path, "/" of a folder included
	dir     bool
}

// zipCRCKnown marks zipEnt.crcv as known.
const zipCRCKnown = 1 << 32

// crc returns the entry's CRC and whether it is known.
func (e *zipEnt) crc() (uint32, bool) {
	v := atomic.LoadUint64(&e.crcv)
	return uint32(v), v&zipCRCKnown != 0
}

// setCRC notes the entry's CRC.
func (e *zipEnt) setCRC(c uint32) { atomic.StoreUint64(&e.crcv, zipCRCKnown|uint64(c)) }

// Zip lays out the zip archive of a live folder of a root: every live file
// and folder below it, depth first in name order, with names relative to
// the folder ("a/b.txt"; folders as "a/" entries, so empty folders
// survive), UTF-8 names flagged as such, each item's modification time,
// files at their current revisions. The folder is read in one snapshot of
// the metadata store. The archive switches to Zip64 by itself for files of
// 4 GiB or more, offsets past 4 GiB, or more than 65,535 entries.
//
// Concurrent requests for the same archive share one layout: the same
// folder with the same choice of entries (opts.FileIDs, opts.FolderIDs),
// laid out since the request began or while the store has had no commit
// since (kv.Store.Generation, as kv.Cache trusts it). A folder changed
// since, or anything else written, is laid out afresh, so the bytes
// always match the ETag and hold every write acknowledged before the
// request. A request that finds the same archive being laid out waits
// for it, and the requests that waited share the next. A request that
// finds the store moved since the layout held was laid out (a download
// counted, a login, any commit moves Generation) walks the folder's
// listing against it, holding nothing, and shares it if nothing in it
// changed. The layout lives while a Zip of it is open, and is forgotten
// when the last one closes.
//
// The layout holds its entries of ZipBudget on behalf of every requester
// whose Zip of it is open, each charged its whole size once, however
// many of their requests share it (see ZipBudget), until Close, which
// the caller defers.
//
// Errors: ErrNotExist (no such live folder, or another root's), ErrNotDir
// (a file), ErrZipTooLarge (more than ZipMaxEntries entries, or more
// than half of ZipBudget bytes of them), ErrBusy (the requester's zips
// hold as much of the budget as the others' let them), and ctx's.
func (fs *FS) Zip(ctx context.Context, root, folder uint64, opts ZipOptions) (*Zip, error) {
	who := zipHolder{opts.Requester, cmp.Or(opts.Group, opts.Requester)}
	key := zipKey{root: root, folder: folder, pick: pickKey(opts)}
	// Read once, before any layout is found or laid out: a layout laid
	// out at this generation or later holds every commit acknowledged
	// before the request began, one laid out earlier only if the store
	// has not moved since.
	gen := fs.db.Generation()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // a client gone before, not only while it lists
		}
		z, wait, l, err := fs.zips.find(key, gen, who)
		switch {
		case err != nil || z != nil:
			return z, err
		case wait != nil:
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return fs.layOut(ctx, l, opts)
	}
}

// layOut lays out l, which find made for who with l.share.gen read
// before the snapshot begins, and hands out a Zip of it, or of the
// layout of the same bytes that l was to replace. However it ends
// (an error, a panic) the requests waiting for l go on.
func (fs *FS) layOut(ctx context.Context, l *zipLayout, opts ZipOptions) (z *Zip, err error) {
	l.fs, l.z64, l.max = fs, zipUint32Max, ZipMaxEntries
	if fs.zip64At > 0 {
		l.z64 = fs.zip64At
	}
	if fs.zipMax > 0 {
		l.max = fs.zipMax
	}
	done := false
	defer func() {
		if !done {
			fs.zips.failed(l)
		}
	}()
	if prev := l.share.prev; prev != nil {
		var same bool
		err = fs.db.View(ctx, func(tx kv.Txn) error {
			if _, _, err := liveDirIn(tx, l.root, l.share.key.folder); err != nil {
				return err
			}
			same, err = prev.matches(ctx, tx, l.share.key.folder, picker(opts))
			return err
		})
		if err != nil {
			return nil, err
		}
		if same {
			done = true
			return fs.zips.reuse(l, prev)
		}
	}
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		l.ents = l.ents[:0]
		if _, _, err := liveDirIn(tx, l.root, l.share.key.folder); err != nil {
			return err
		}
		kids, err := l.children(tx, l.share.key.folder, picker(opts))
		if err != nil {
			return err
		}
		if err := l.nameTop(kids); err != nil {
			return err
		}
		return l.add(ctx, tx, kids, -1, 0)
	})
	if err != nil {
		return nil, err
	}
	l.layout()
	done = true
	return fs.zips.laidOut(l), nil
}

// matches reports whether the listing of folder in tx, the children
// keep keeps at the top, is still z's: the same entries in the same
// order, each the same item at the same revision, size, time, name and
// place, so that z's bytes and ETag are the archive's in tx too. It
// holds no entries: it walks each folder's children against z's own,
// keeping only the places of the folders among them.
func (z *zipLayout) matches(ctx context.Context, tx kv.Txn, folder uint64, keep func(nodeRec) bool) (bool, error) {
	end, err := z.matchChildren(ctx, tx, folder, keep, -1, 0)
	return end == len(z.ents), err
}

// matchChildren matches the children of folder, entry parent (-1: the
// top), against z's entries from pos on, each followed by everything
// below it; it returns where they end in z.ents, -1 at a difference.
func (z *zipLayout) matchChildren(ctx context.Context, tx kv.Txn, folder uint64, keep func(nodeRec) bool, parent int32, pos int) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	var dirs []int
	err := eachKept(tx, folder, keep, func(rec nodeRec) error {
		if pos < 0 || pos >= len(z.ents) {
			pos = -1
			return kv.ErrStop
		}
		e, now := &z.ents[pos], zipEntOf(rec)
		if e.parent != parent || e.id != now.id || e.name != now.name || e.mod != now.mod || e.dir != now.dir || e.size != now.size || e.rev != now.rev {
			pos = -1
			return kv.ErrStop
		}
		if e.dir {
			dirs = append(dirs, pos)
		}
		pos = z.subtreeEnd(pos)
		return nil
	})
	if err != nil || pos < 0 {
		return -1, err
	}
	// Each folder's entries, matched, end where z placed its next
	// sibling: more or fewer children are a difference.
	for _, d := range dirs {
		end, err := z.matchChildren(ctx, tx, z.ents[d].id, nil, int32(d), d+1)
		if err != nil || end != z.subtreeEnd(d) {
			return -1, err
		}
	}
	return pos, nil
}

// subtreeEnd is where the entries below entry i end: in depth-first
// order, the first entry after i whose folder comes before i.
func (z *zipLayout) subtreeEnd(i int) int {
	k := i + 1
	for k < len(z.ents) && int(z.ents[k].parent) >= i {
		k++
	}
	return k
}

// Close gives back what the request held of the layout; the Zip is not
// read after it. It may be called more than once.
func (z *Zip) Close() {
	if z.closed.CompareAndSwap(false, true) {
		z.fs.zips.release(z.zipLayout, z.who)
	}
}

// reserve takes n bytes of the budget for entries listed.
func (z *zipLayout) reserve(n int64) error {
	return z.fs.zips.grow(z, n)
}

// zipReserveStep is how many bytes of entries a listing gathers before it
// reserves them: what a layout holds beyond its reservation.
const zipReserveStep = 64 << 10

// children reads the live children of folder that keep (nil: all) keeps,
// in name order, as entries still to be placed (parent and pathLen
// unset). It stops at the bound: the entries listed and these together
// may not pass z.max. It reserves them as it lists them, not once it has
// listed the folder: concurrent layouts of a folder of as many children
// as a zip may hold each held them all, some 170 MiB of long names,
// before the first reservation refused one.
func (z *zipLayout) children(tx kv.Txn, folder uint64, keep func(nodeRec) bool) ([]zipEnt, error) {
	var out []zipEnt
	var pending int64
	err := eachKept(tx, folder, keep, func(rec nodeRec) error {
		if len(z.ents)+len(out) >= z.max {
			return fmt.Errorf("%w: more than %d items", ErrZipTooLarge, z.max)
		}
		e := zipEntOf(rec)
		if pending += zipEntBytes(&e); pending >= zipReserveStep {
			if err := z.reserve(pending); err != nil {
				return err
			}
			pending = 0
		}
		out = append(out, e)
		return nil
	})
	if err == nil {
		err = z.reserve(pending)
	}
	return out, err
}

// eachKept calls fn with each live child of folder that keep (nil: all)
// keeps, in name order: what a layout lists and what a request that
// would share it matches against it.
func eachKept(tx kv.Txn, folder uint64, keep func(nodeRec) bool, fn func(nodeRec) error) error {
	return tx.Scan(childPrefix(folder), nil, func(_, v []byte) error {
		var rec nodeRec
		if err := cbor.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("vfs: decode child of %d: %w", folder, err)
		}
		if keep != nil && !keep(rec) {
			return nil
		}
		return fn(rec)
	})
}

// zipEntOf is the entry of child rec, still to be placed (parent and
// pathLen unset).
func zipEntOf(rec nodeRec) zipEnt {
	e := zipEnt{id: rec.ID, name: rec.Name, mod: rec.Modified, dir: rec.Dir}
	if !rec.Dir {
		e.size, e.rev = rec.Size, rec.Rev
		if rec.Size == 0 {
			e.crcv = zipCRCKnown // and 0
		}
	}
	return e
}

// add appends kids, children of the entry parent (of path length
// prefixLen), each followed by everything below it.
func (z *zipLayout) add(ctx context.Context, tx kv.Txn, kids []zipEnt, parent int32, prefixLen uint32) error {
	for _, e := range kids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(z.ents) >= z.max {
			return fmt.Errorf("%w: more than %d items", ErrZipTooLarge, z.max)
		}
		e.parent = parent
		e.pathLen = prefixLen + uint32(len(z.entName(&e)))
		if e.dir {
			e.pathLen++
		}
		if e.pathLen > zipUint16Max {
			return fmt.Errorf("%w: a path longer than %d bytes", ErrZipTooLarge, zipUint16Max)
		}
		z.ents = append(z.ents, e)
		if !e.dir {
			continue
		}
		sub, err := z.children(tx, e.id, nil)
		if err != nil {
			return err
		}
		if err := z.add(ctx, tx, sub, int32(len(z.ents)-1), e.pathLen); err != nil {
			return err
		}
	}
	return nil
}

// picker returns what keeps the top-level children opts chose; nil when
// they choose all.
func picker(opts ZipOptions) func(nodeRec) bool {
	if len(opts.FileIDs)+len(opts.FolderIDs) == 0 {
		return nil
	}
	want := make(map[uint64]bool, len(opts.FileIDs)+len(opts.FolderIDs))
	for _, id := range opts.FileIDs {
		want[id] = false
	}
	for _, id := range opts.FolderIDs {
		want[id] = true
	}
	return func(rec nodeRec) bool {
		dir, ok := want[rec.ID]
		return ok && dir == rec.Dir
	}
}

// layout places every record and names the result.
func (z *zipLayout) layout() {
	h := blake3.New()
	var b [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	// The format's version, then whatever decides a byte of the archive.
	// 2: paths that begin with a drive letter changed (appendPath).
	// 3: and kept apart from the names beside them (nameTop).
	h.Write([]byte("berth zip 3"))
	num(uint64(z.z64))
	var off int64
	for i := range z.ents {
		e := &z.ents[i]
		e.off = off
		off += z.localLen(e) + e.size
		num(e.id)
		num(e.rev)
		num(uint64(e.size))
		num(uint64(e.mod))
		num(uint64(int64(e.parent)))
		num(uint64(len(e.name)))
		h.Write([]byte(e.name))
		if e.dir {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	}
	z.cdOff = off
	z.cdMarks = make([]int64, 0, len(z.ents)/zipCentralMark+1)
	for i := range z.ents {
		if i%zipCentralMark == 0 {
			z.cdMarks = append(z.cdMarks, z.cdOff+z.cdSize)
		}
		z.cdSize += z.centralLen(&z.ents[i])
	}
	z.zip64End = len(z.ents) >= zipUint16Max || z.cdOff >= z.z64 || z.cdSize >= z.z64
	z.size = z.cdOff + z.cdSize + zipEndLen
	if z.zip64End {
		z.size += zip64EndLen + zip64LocatorLen
	}
	z.etag = `"z` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

// Size is the archive's length in bytes.
func (z *Zip) Size() int64 { return z.size }

// ETag names the archive's bytes: it changes whenever an entry's item,
// revision, name, size, time or place does, so a Range resumed with
// If-Range against a folder changed since gets the whole new archive.
func (z *Zip) ETag() string { return z.etag }

// Entries is the number of entries, files and folders.
func (z *Zip) Entries() int { return len(z.ents) }

func (z *zipLayout) big(e *zipEnt) bool { return e.size >= z.z64 }

func (z *zipLayout) localLen(e *zipEnt) int64 {
	n := int64(zipLocalLen) + int64(e.pathLen) + zipTimeExtraLen
	if z.big(e) {
		n += zip64LocalExtra
	}
	return n
}

// central64 is the length of an entry's Zip64 extra in the central
// directory: the sizes when they overflow, the offset when it does.
func (z *zipLayout) central64(e *zipEnt) int64 {
	n := int64(0)
	if z.big(e) {
		n += 16
	}
	if e.off >= z.z64 {
		n += 8
	}
	if n > 0 {
		n += 4
	}
	return n
}

func (z *zipLayout) centralLen(e *zipEnt) int64 {
	return int64(zipCentralLen) + int64(e.pathLen) + zipTimeExtraLen + z.central64(e)
}

// appendPath appends the entry's path relative to the folder zipped.
func (z *zipLayout) appendPath(dst []byte, i int32) []byte {
	e := &z.ents[i]
	if e.parent >= 0 {
		dst = z.appendPath(dst, e.parent)
	}
	dst = append(dst, z.entName(e)...)
	if e.dir {
		dst = append(dst, '/')
	}
	return dst
}

// entName is e's name in the archive: its own, or the one nameTop gave
// a top-level entry.
func (z *zipLayout) entName(e *zipEnt) string {
	if e.parent < 0 && z.topNames != nil {
		if n, ok := z.topNames[e.id]; ok {
			return n
		}
	}
	return e.name
}

// driveLetter reports whether a path that begins with name begins with a
// drive letter ("C:", "c:notes").
func driveLetter(name string) bool {
	return len(name) >= 2 && name[1] == ':' && 'a' <= name[0]|0x20 && name[0]|0x20 <= 'z'
}

// nameTop names the top-level entries kids (in name order) whose names
// begin with a drive letter: the zip format forbids drive letters (APPNOTE
// 4.4.17), and an extractor on Windows may take one for a drive and write
// outside the folder it extracts into. "c:notes" is "c_notes" in the
// archive, or "c__notes" (as many "_" as it takes) when a sibling has
// that name or an earlier one of these took it: with "_" alone, "c:notes"
// and "c_notes" were two entries of one path, and an extractor wrote one
// over the other (unzip without a word, Python's zipfile with a warning).
// Names below the top cannot begin a path.
func (z *zipLayout) nameTop(kids []zipEnt) error {
	z.topNames = nil
	var taken map[string]bool
	var cost int64
	for _, e := range kids {
		if !driveLetter(e.name) {
			continue
		}
		if taken == nil {
			taken = make(map[string]bool, len(kids))
			for _, k := range kids {
				taken[k.name] = true
			}
			z.topNames = map[uint64]string{}
		}
		n := e.name[:1] + "_" + e.name[2:]
		for taken[n] {
			n = n[:1] + "_" + n[1:]
		}
		taken[n] = true
		z.topNames[e.id] = n
		cost += zipEntBytes(&e)
	}
	// Held as long as the layout, as its entries are.
	return z.reserve(cost)
}

// dosTime is t (UTC) as MS-DOS date and time, held to the years that
// format has (1980 to 2107).
func dosTime(ns int64) (date, tm uint16) {
	t := time.Unix(0, ns).UTC()
	switch {
	case t.Year() < 1980:
		return 1<<5 | 1, 0
	case t.Year() > 2107:
		return 127<<9 | 12<<5 | 31, 23<<11 | 59<<5 | 29
	}
	date = uint16(t.Year()-1980)<<9 | uint16(t.Month())<<5 | uint16(t.Day())
	tm = uint16(t.Hour())<<11 | uint16(t.Minute())<<5 | uint16(t.Second()/2)
	return date, tm
}

// unixTime is the extended timestamp's seconds, held to its 32 bits.
func unixTime(ns int64) uint32 {
	s := time.Unix(0, ns).Unix()
	return uint32(min(max(s, 0), math.MaxUint32))
}

// le appends little-endian integers.
type le []byte

func (b le) u16(v uint16) le { return binary.LittleEndian.AppendUint16(b, v) }
func (b le) u32(v uint32) le { return binary.LittleEndian.AppendUint32(b, v) }
func (b le) u64(v uint64) le { return binary.LittleEndian.AppendUint64(b, v) }

// sat is v in a 32-bit field: 0xFFFFFFFF from the Zip64 threshold on.
func (z *zipLayout) sat(v int64) uint32 {
	if v >= z.z64 {
		return zipUint32Max
	}
	return uint32(v)
}

func (z *zipLayout) version(e *zipEnt) uint16 {
	if z.big(e) || e.off >= z.z64 {
		return zipVersion45
	}
	return zipVersion20
}

// appendLocal appends entry i's local header; its CRC must be known.
func (z *zipLayout) appendLocal(dst []byte, i int32) []byte {
	e := &z.ents[i]
	date, tm := dosTime(e.mod)
	crc, _ := e.crc()
	extra := uint16(zipTimeExtraLen)
	if z.big(e) {
		extra += zip64LocalExtra
	}
	b := le(dst).u32(zipLocalSig).u16(z.version(e)).u16(zipFlagUTF8).u16(0).
		u16(tm).u16(date).u32(crc).u32(z.sat(e.size)).u32(z.sat(e.size)).
		u16(uint16(e.pathLen)).u16(extra)
	b = z.appendPath(b, i)
	b = le(b).u16(zipTimeTag).u16(5)
	b = append(b, 1)
	b = le(b).u32(unixTime(e.mod))
	if z.big(e) {
		b = le(b).u16(zip64Tag).u16(16).u64(uint64(e.size)).u64(uint64(e.size))
	}
	return b
}

// appendCentral appends entry i's central directory header; its CRC must
// be known.
func (z *zipLayout) appendCentral(dst []byte, i int32) []byte {
	e := &z.ents[i]
	date, tm := dosTime(e.mod)
	crc, _ := e.crc()
	z64 := z.central64(e)
	attrs := uint32(0o100644) << 16 // a regular file, rw-r--r--
	if e.dir {
		attrs = uint32(0o40755)<<16 | 0x10 // a directory, rwxr-xr-x, and MS-DOS's flag
	}
	b := le(dst).u32(zipCentralSig).u16(zipMadeByUnix | zipVersion45).u16(z.version(e)).
		u16(zipFlagUTF8).u16(0).u16(tm).u16(date).u32(crc).
		u32(z.sat(e.size)).u32(z.sat(e.size)).u16(uint16(e.pathLen)).
		u16(uint16(zipTimeExtraLen + z64)).u16(0).u16(0).u16(0).u32(attrs).u32(z.sat(e.off))
	b = z.appendPath(b, i)
	b = le(b).u16(zipTimeTag).u16(5)
	b = append(b, 1)
	b = le(b).u32(unixTime(e.mod))
	if z64 > 0 {
		b = le(b).u16(zip64Tag).u16(uint16(z64 - 4))
		if z.big(e) {
			b = le(b).u64(uint64(e.size)).u64(uint64(e.size))
		}
		if e.off >= z.z64 {
			b = le(b).u64(uint64(e.off))
		}
	}
	return b
}

// appendEnd appends the end records.
func (z *zipLayout) appendEnd(dst []byte) []byte {
	b := le(dst)
	n := uint64(len(z.ents))
	if z.zip64End {
		end64 := z.cdOff + z.cdSize
		b = b.u32(zip64EndSig).u64(zip64EndLen - 12).u16(zipMadeByUnix | zipVersion45).u16(zipVersion45).
			u32(0).u32(0).u64(n).u64(n).u64(uint64(z.cdSize)).u64(uint64(z.cdOff))
		b = b.u32(zip64LocSig).u32(0).u64(uint64(end64)).u32(1)
		return b.u32(zipEndSig).u16(0).u16(0).u16(zipUint16Max).u16(zipUint16Max).
			u32(zipUint32Max).u32(zipUint32Max).u16(0)
	}
	return b.u32(zipEndSig).u16(0).u16(0).u16(uint16(n)).u16(uint16(n)).
		u32(uint32(z.cdSize)).u32(uint32(z.cdOff)).u16(0)
}

// ZipReader reads a Zip: an io.ReadSeeker for http.ServeContent. It reads
// only what is asked for: headers are generated, and file contents are read
// from the listed revisions by their own seeking readers, one file open at
// a time. A revision removed since the listing (a purged file), or a
// missing chunk, fails the read. Close it.
type ZipReader struct {
	// mu orders Read, Seek and Close: http.ServeContent reads the parts
	// of a multi-range answer in a goroutine that may still read when the
	// handler returns and closes the reader.
	mu     sync.Mutex
	closed bool
	z      *Zip
	ctx    context.Context
	pos    int64
	// buf holds generated bytes at [bufAt, bufAt+len(buf)).
	buf   []byte
	bufAt int64
	// f is the open contents of entry fEnt, at fAt.
	f    *File
	fEnt int32
	fAt  int64
	// cdEnt is an entry whose central record starts at cdAt.
	cdEnt int32
	cdAt  int64
	// walked counts the central records passed over to find one, for
	// the test that bounds it.
	walked int
	// crcs were computed and are not stored yet (see keepCRCs).
	crcs []crcNote
}

// Reader returns a reader of the archive from its start; ctx bounds every
// read.
func (z *Zip) Reader(ctx context.Context) *ZipReader {
	return &ZipReader{z: z, ctx: ctx, fEnt: -1, cdAt: z.cdOff}
}

// WriteZip writes the archive of Zip to w, from its start: a whole
// download that needs no Range. Errors are Zip's and the reads'; after
// bytes went out the archive in w is incomplete, so the caller must make
// the failure visible (an HTTP server aborts the connection).
func (fs *FS) WriteZip(ctx context.Context, w io.Writer, root, folder uint64, opts ZipOptions) error {
	z, err := fs.Zip(ctx, root, folder, opts)
	if err != nil {
		return err
	}
	defer z.Close()
	r := z.Reader(ctx)
	defer r.Close()
	_, err = io.CopyBuffer(w, r, make([]byte, zipCopyBuffer))
	return err
}

// zipCopyBuffer is the size of WriteZip's writes.
const zipCopyBuffer = 256 << 10

// Seek sets the offset of the next Read.
func (r *ZipReader) Seek(off int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		off += r.pos
	case io.SeekEnd:
		off += r.z.size
	}
	if off < 0 {
		return r.pos, errors.New("vfs: zip: seek before the start")
	}
	r.pos = off
	return off, nil
}

// Close closes the file being read and stores the CRCs computed; later
// reads fail.
func (r *ZipReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.closeFile()
	r.z.fs.keepCRCs(r.ctx, r.crcs)
	r.crcs = nil
	return nil
}

func (r *ZipReader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f, r.fEnt = nil, -1
	}
}

// Read reads from the current offset. ctx is checked at every call.
func (r *ZipReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errors.New("vfs: zip: read after Close")
	}
	z := r.z
	if r.pos >= z.size {
		return 0, io.EOF
	}
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.pos < r.bufAt || r.pos >= r.bufAt+int64(len(r.buf)) {
		if r.pos < z.cdOff {
			i := int32(sort.Search(len(z.ents), func(i int) bool { return z.ents[i].off > r.pos }) - 1)
			e := &z.ents[i]
			if hdr := z.localLen(e); r.pos >= e.off+hdr {
				return r.readData(i, p, r.pos-e.off-hdr)
			}
			if err := r.knowCRC(i, true); err != nil {
				return 0, err
			}
			r.buf, r.bufAt = z.appendLocal(r.buf[:0], i), e.off
		} else if err := r.fillCentral(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.pos-r.bufAt:])
	r.pos += int64(n)
	return n, nil
}

// readData reads entry i's contents from rel.
func (r *ZipReader) readData(i int32, p []byte, rel int64) (int, error) {
	e := &r.z.ents[i]
	if err := r.open(i); err != nil {
		return 0, err
	}
	if r.fAt != rel {
		if _, err := r.f.Seek(rel, io.SeekStart); err != nil {
			return 0, err
		}
		r.fAt = rel
	}
	if left := e.size - rel; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.f.Read(p)
	r.fAt += int64(n)
	r.pos += int64(n)
	if err == io.EOF {
		err = nil
		if n == 0 {
			err = fmt.Errorf("vfs: zip: %s: %w", e.name, io.ErrUnexpectedEOF)
		}
	}
	if r.fAt == e.size {
		r.closeFile() // stop its read-ahead
	}
	return n, err
}

// open makes entry i's revision the open file.
func (r *ZipReader) open(i int32) error {
	if r.fEnt == i {
		return nil
	}
	r.closeFile()
	e := &r.z.ents[i]
	f, err := r.z.fs.openListed(r.ctx, e.id, e.rev)
	if err != nil {
		return fmt.Errorf("vfs: zip: %s: %w", e.name, err)
	}
	if f.Size() != e.size {
		f.Close()
		return fmt.Errorf("vfs: zip: %s: revision %d has %d bytes, listed with %d", e.name, e.rev, f.Size(), e.size)
	}
	r.f, r.fEnt, r.fAt = f, i, 0
	if c, ok := f.Revision.CRC(); ok {
		e.setCRC(c)
	}
	return nil
}

// knowCRC makes entry i's CRC known: from its revision record, or, for a
// revision written before berth kept CRCs, by reading the revision once
// and storing its CRC for the next archive. keepOpen leaves the file open
// (its contents follow the local header).
func (r *ZipReader) knowCRC(i int32, keepOpen bool) error {
	e := &r.z.ents[i]
	if _, ok := e.crc(); e.dir || ok {
		return nil
	}
	if keepOpen {
		if err := r.open(i); err != nil {
			return err
		}
	} else {
		c, ok, err := r.z.fs.revisionCRC(r.ctx, e.id, e.rev)
		if err != nil {
			return fmt.Errorf("vfs: zip: %s: %w", e.name, err)
		}
		if ok {
			e.setCRC(c)
			return nil
		}
		if err := r.open(i); err != nil {
			return err
		}
	}
	if _, ok := e.crc(); ok {
		return nil
	}
	h := crc32.NewIEEE()
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(h, ctxReader{r.ctx, r.f}); err != nil {
		return fmt.Errorf("vfs: zip: %s: %w", e.name, err)
	}
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r.fAt = 0
	c := h.Sum32()
	e.setCRC(c)
	r.crcs = append(r.crcs, crcNote{e.id, e.rev, c})
	if len(r.crcs) >= zipCRCBatch {
		r.z.fs.keepCRCs(r.ctx, r.crcs)
		r.crcs = r.crcs[:0]
	}
	if !keepOpen {
		r.closeFile()
	}
	return nil
}

// fillCentral generates the central directory (or end records) from pos
// on into buf, up to zipCentralFill bytes.
func (r *ZipReader) fillCentral() error {
	z := r.z
	end := z.cdOff + z.cdSize
	if r.pos >= end {
		r.buf, r.bufAt = z.appendEnd(r.buf[:0]), end
		return nil
	}
	// The central records are found by walking from the last one
	// generated (or from the first, when seeking back).
	// From the mark at or before pos when that is past the last record
	// generated, or pos is before it: a Range's parts in any order walk
	// at most zipCentralMark records each.
	if k := sort.Search(len(z.cdMarks), func(k int) bool { return z.cdMarks[k] > r.pos }) - 1; r.pos < r.cdAt || int(r.cdEnt) < k*zipCentralMark {
		r.cdEnt, r.cdAt = int32(k*zipCentralMark), z.cdMarks[k]
	}
	for {
		l := z.centralLen(&z.ents[r.cdEnt])
		if r.cdAt+l > r.pos {
			break
		}
		r.cdAt += l
		r.cdEnt++
		r.walked++
	}
	r.buf, r.bufAt = r.buf[:0], r.cdAt
	for i := r.cdEnt; int(i) < len(z.ents) && len(r.buf) < zipCentralFill; i++ {
		if err := r.knowCRC(i, false); err != nil {
			return err
		}
		r.buf = z.appendCentral(r.buf, i)
	}
	return nil
}

// openListed opens revision rev of file, which a zip's listing of its root
// named: one read of the revision record, without OpenRevision's checks of
// the root and the item and the resolution of its path, which were most
// of the cost of a small file's entry. A revision removed since (a
// purge) is ErrNotExist.
func (fs *FS) openListed(ctx context.Context, file, rev uint64) (*File, error) {
	f := &File{Node: Node{ID: file, RevisionID: rev}, m: fs.m}
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		var rr revRec
		if err := get(tx, revKey(file, rev), &rr, fmt.Errorf("%w: revision %d", ErrNotExist, rev)); err != nil {
			return err
		}
		f.Revision = rr.public()
		return nil
	})
	fs.m.observe(OpRead, err)
	if err != nil {
		return nil, err
	}
	fs.attach(ctx, f)
	return f, nil
}

// revisionCRC reads the CRC kept in a revision record; ok is false for a
// revision written before CRCs were kept.
func (fs *FS) revisionCRC(ctx context.Context, file, rev uint64) (crc uint32, ok bool, err error) {
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		var rr revRec
		if err := get(tx, revKey(file, rev), &rr, fmt.Errorf("%w: revision %d", ErrNotExist, rev)); err != nil {
			return err
		}
		crc, ok = rr.public().CRC()
		return nil
	})
	return crc, ok, err
}

// crcNote is a CRC computed for a revision whose record has none.
type crcNote struct {
	file, rev uint64
	crc       uint32
}

// zipCRCBatch is how many computed CRCs are stored at once, in commits
// bounded by bytes (keepCRCs): one durable commit each would cost the
// first zip of a folder of old small files a sync per file.
const zipCRCBatch = 256

// keepCRCs stores CRCs computed for revisions that had none, so that the
// next archive needs no extra read of them. A failure is logged only: the
// next archive computes them again. The work is not the client's, so a
// client gone does not stop it. Each revision record is written whole, a
// small file's contents with it, so a commit stops at about fs.txnBytes.
func (fs *FS) keepCRCs(ctx context.Context, notes []crcNote) {
	for len(notes) > 0 {
		var n int
		err := fs.db.Update(context.WithoutCancel(ctx), func(tx kv.Txn) error {
			size := 0
			for n = 0; n < len(notes) && size < fs.txnBytes; n++ {
				note := notes[n]
				var rr revRec
				err := get(tx, revKey(note.file, note.rev), &rr, kv.ErrNotFound)
				if errors.Is(err, kv.ErrNotFound) {
					continue // removed meanwhile
				}
				if err != nil {
					return err
				}
				if rr.CRC != nil {
					continue
				}
				rr.CRC = &note.crc
				v := enc(rr)
				if err := tx.Set(revKey(note.file, note.rev), v); err != nil {
					return err
				}
				size += len(v) + 64
			}
			return nil
		})
		if err != nil {
			fs.log.Warn("vfs: zip: could not keep revisions' CRCs", "revisions", len(notes), "err", err)
			return
		}
		notes = notes[n:]
	}
}

// ctxReader fails reads once ctx is done, so a cancelled client stops a long
// read within one buffer.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

var _ io.ReadSeekCloser = (*ZipReader)(nil)
