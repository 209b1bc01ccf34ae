package badger

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	dgraph "github.com/dgraph-io/badger/v4"
	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"

	"berth/kv"
)

// journal makes commits durable with one fdatasync a round, of one file
// written in place, in front of Badger.
//
// Badger writes its write-ahead log and value log through memory maps of
// files it sizes sparse, and a round that made a small upload durable
// fdatasynced both: two syncs that each commit the file system's journal
// for the blocks they allocate. On this project's 2-core VM a round took
// 1.3 to 1.8 ms under load and a small PUT spent 58% of its time waiting
// for one. A kernel-only test measured what the pattern costs: pwrite
// over a file written before took 4,742 to 5,057 fdatasyncs a second at
// 93 to 109 us of CPU each, against 3,061 to 3,142 and 174 to 203 us for
// a memory map of a sparse file (docs/operations.md, "Durability").
//
// So every commit's writes are also appended, as one record, to a
// journal of berth's own; a round writes the records appended since the
// last one with one pwrite into space written before and fdatasyncs that
// one file, and Badger's own logs are left to the kernel. After a crash,
// Open replays the journal into Badger before it serves anything: the
// records from the last checkpoint on, in the order they were appended.
// Replaying a record whose writes Badger kept is harmless: each record
// sets or deletes keys to what they were after its commit, and the last
// record touching a key decides it, as its commit did. But Badger may
// also keep commits whose records the crash lost (kill -9 leaves its
// memory-mapped logs to the kernel, which may write them back before a
// power cut too), and an earlier record must not undo part of such a
// commit: so a record carries the highest version Badger had given when
// its commit returned, and the replay leaves alone a key that Badger
// holds at a higher version, written by a later commit.
//
// Open first takes back the commits above the line, which no one was
// told had happened (takeBack). The checkpoint file names a version at
// or below which every commit was durable when it was written; that or
// the last durable record's version, the higher, is the line. Kept, such
// a commit could be broken: a power cut can keep its entry in Badger's
// write-ahead log and lose its value in the value log, which Badger then
// reads as empty bytes, with no error, over the value acknowledged
// before. The rule above still decides between a record and a commit
// that a checkpoint's sync made durable after the crash lost its record,
// and for a checkpoint file of an earlier berth, without the version.
//
// A record is appended under mu together with Badger's commit of the
// same transaction, so the journal's order is the commits' order, and a
// transaction that can read a commit's writes starts after that commit's
// record is appended: a durable record never depends on one that is not.
//
// The journal is journalSlots files ("slots") used in turn, each holding
// one epoch: a header naming the epoch and its first record's number,
// then records. When a slot is full the next epoch starts in a free slot,
// and a checkpoint syncs Badger's logs through groupSync (every record of
// the earlier epochs belongs to a commit Badger has), then names the new
// epoch in the file "checkpoint", which frees the earlier slots. A slot
// is filled with zeros ahead of its records, a megabyte at a time, so
// that a round's pwrite rarely grows the file, and a slot used again is
// written over in place.
type journal struct {
	dir  string
	db   *dgraph.DB // for the version bound of each record (see commit)
	g    *groupSync // syncs Badger's logs for checkpoints
	size int64      // where a slot is full: slotSize but in tests

	// mu orders appends with Badger's commits (see commit).
	mu      sync.Mutex
	buf     []byte // records appended since the last round took them
	spare   []byte // the buffer of the round before, kept for reuse
	nextLSN uint64 // number of the next record

	// rmu guards the rounds and the checkpoints.
	rmu  sync.Mutex
	cond sync.Cond
	// commitRounds' failed is also set by a failed checkpoint.
	commitRounds
	// mark is what the checkpoint file said at Open.
	mark checkpointMark
	// takenBack is the number of keys Open took back, leftAbove those
	// it could not (see takeBack).
	takenBack int
	leftAbove [][]byte
	// cpFrom: the epochs below it are in Badger durably; their slots are
	// free. cpWanted: the epoch the next checkpoint makes cpFrom.
	cpFrom, cpWanted uint64
	cpRunning        bool
	// durable is the number of the last record a round made durable.
	durable uint64

	// Touched only by the goroutine running a round, and by Open and
	// close when none can run.
	slots [journalSlots]slot
	cur   int    // the slot of the current epoch; -1 before the first round
	epoch uint64 // the current epoch (the last one seen, before the first round)
	off   int64  // where the next record goes in the current slot
	// pin is a read transaction open at the version of the last
	// commit whose record is durable: Badger's compactions drop no
	// version above it, so that a delete, or an expired entry, of a
	// commit whose record a crash may still lose stays in Badger for
	// the replay to see (see journal). A compaction drops such an entry
	// with every version of its key, and the replay would then set the
	// key again from an earlier record, undoing half of that commit.
	pin *dgraph.Txn

	// syncFile, when set (by tests), makes a slot's data durable in place
	// of fdatasync.
	syncFile func(f *os.File) error
	// beforeCheckpoint, when set (by tests), runs as a checkpoint starts.
	beforeCheckpoint func()

	// Counters for SyncStats.
	commits, rounds, files atomic.Uint64
	roundTime, waitTime    atomic.Int64
}

// slot is one of the journal's files.
type slot struct {
	f     *os.File // nil until used
	epoch uint64   // the epoch its header names; 0 for none
	// filled is how much of the file is written (header, records or
	// zeros): a pwrite below it does not grow the file.
	filled int64
}

const (
	// journalDir is the journal's directory, inside the store's.
	journalDir = "journal"
	// journalSlots is the number of slot files: the current epoch, the
	// one before while its checkpoint runs, and one free, so that a
	// round seldom waits for a checkpoint.
	journalSlots = 3
	// slotSize is where a slot is full. A checkpoint runs each time one
	// fills: 16 MiB is some 3,000 small uploads, and a checkpoint syncs
	// what Badger wrote meanwhile, in the background.
	slotSize = 16 << 20
	// slotHeader is the header's block; records start after it.
	slotHeader = 4096
	// fillStep is how far ahead of its records a slot is filled.
	fillStep = 1 << 20
	// recordHeader: the payload's length (4 bytes), its CRC-32C (4,
	// seeded with the epoch and the record's number) and the record's
	// number (8).
	recordHeader = 16
	// recordVersion: a payload starts with the highest version Badger
	// had given when the record's commit returned (8 bytes), then its
	// ops.
	recordVersion = 8
	// maxSpare bounds the buffer a round keeps for the next.
	maxSpare = 1 << 20
	// maxRecord bounds a record's payload at replay; a longer length is
	// damage. Badger bounds a transaction far below it.
	maxRecord = 1 << 30
)

// zeroFill is what a round writes ahead of its records, read only: a
// megabyte allocated and cleared once, not at every fill.
var zeroFill = make([]byte, fillStep)

// journalMagic starts a slot's header and the checkpoint file.
var journalMagic = [8]byte{'b', 'e', 'r', 't', 'h', 'j', 'l', '1'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// opKind says what an op of a record does.
type opKind byte

const (
	opSet opKind = 1 + iota
	opSetTTL
	opDelete
)

// op is one write of a transaction, as its record keeps it.
type op struct {
	kind       opKind
	key, value []byte
	expiresAt  uint64 // Unix seconds; opSetTTL only
}

// errJournal wraps every sign of a damaged journal that Open cannot
// read past without losing what may be acknowledged commits.
var errJournal = errors.New("kv: damaged journal")

// openJournal opens the journal in dir (creating it), replays into db
// what the last checkpoint does not cover, and makes what Badger holds
// durable through g. It returns the journal and the number of records it
// replayed. size overrides slotSize when positive; beforeVersions, when
// set (by tests), runs before the replay reads db.
func openJournal(dir string, db *dgraph.DB, g *groupSync, size int64, beforeVersions func(*dgraph.DB)) (_ *journal, _ int, err error) {
	if size <= 0 {
		size = slotSize
	}
	j := &journal{dir: filepath.Join(dir, journalDir), db: db, g: g, size: size, cur: -1, nextLSN: 1}
	j.cond.L = &j.rmu
	defer func() {
		if err != nil {
			if j.pin != nil {
				j.pin.Discard()
			}
			j.closeFiles()
		}
	}()
	if err := os.Mkdir(j.dir, 0o700); err == nil {
		if err := syncDir(dir); err != nil {
			return nil, 0, err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, 0, err
	}
	from, maxEpoch, chain, err := j.scan()
	if err != nil {
		return nil, 0, err
	}
	if beforeVersions != nil && len(chain) > 0 {
		beforeVersions(db)
	}
	// What Badger held before the replay, to tell a key that a commit
	// after a record wrote (see journal), up to base.
	pre := db.NewTransaction(false)
	defer pre.Discard()
	base := pre.ReadTs()
	if _, ok := chain[from]; ok {
		if base, err = j.replayBase(from, base); err != nil {
			return nil, 0, err
		}
	}
	// The keys the records write, and the highest version a record
	// names.
	vers := make(map[string]uint64)
	bound := uint64(0)
	collect := func(payload []byte) error {
		v, err := recordKeys(payload, vers)
		bound = max(bound, v)
		return err
	}
	if _, _, err := j.replay(from, chain, collect); err != nil {
		return nil, 0, err
	}
	// After a crash, the line: every commit at or below it is durable,
	// in Badger's logs or in the records, and none above it matters
	// (see takeBack). The replay reads the keys' versions at the line.
	line := uint64(math.MaxUint64)
	if j.mark.takesBack() {
		line = max(j.mark.version, bound)
	}
	// Each op's key at its version in Badger before the replay, all
	// read before it writes anything: its writes fill memtables, whose
	// flushes start compactions, and a compaction drops a delete or an
	// expired entry with every version of its key, after which a later
	// record's op would find nothing newer than its own.
	for k := range vers {
		vers[k] = keyVersion(pre, []byte(k), line)
	}
	if j.mark.takesBack() {
		if j.takenBack, j.leftAbove, err = takeBack(db, line, vers); err != nil {
			return nil, 0, err
		}
	}
	apply := func(payload []byte) error { return applyRecord(db, vers, base, payload) }
	replayed, last, err := j.replay(from, chain, apply)
	if err != nil {
		return nil, 0, err
	}
	// The replayed commits are in Badger's logs, unsynced, and so may
	// be commits no record holds, which kill -9 left to the kernel:
	// the store serves them from now on, and a commit acknowledged next
	// may build on one of them.
	version := j.readTs()
	if err := g.wait(); err != nil {
		return nil, 0, err
	}
	j.nextLSN = last + 1
	j.durable = last
	j.pin = db.NewTransaction(false)
	// The epoch after maxEpoch may hold records without its header: a
	// crash during the round that started it can keep those and lose
	// that. Records sealed for it, in a slot this run writes over,
	// would read as this run's: skip it.
	j.epoch = maxEpoch + 1
	j.cpFrom = j.epoch + 1
	j.cpWanted = j.cpFrom
	// Every earlier epoch is in Badger now: free their slots before the
	// first round writes over one.
	if err := j.writeCheckpoint(j.cpFrom, version, false); err != nil {
		return nil, 0, err
	}
	return j, replayed, nil
}

// journalPending reports whether the journal in dir holds epochs that
// openJournal would replay, or commits it would take back: the same scan
// decides both.
func journalPending(dir string) (bool, error) {
	j := &journal{dir: filepath.Join(dir, journalDir)}
	defer j.closeFiles()
	_, _, chain, err := j.scan()
	return len(chain) > 0 || j.mark.takesBack(), err
}

// readTs is the version of Badger's last commit.
func (j *journal) readTs() uint64 {
	t := j.db.NewTransaction(false)
	defer t.Discard()
	return t.ReadTs()
}

// scan opens the journal's slots and reads the checkpoint and their
// headers. It returns the first epoch to replay (the checkpoint's, or
// without a checkpoint file the oldest there is), the newest epoch seen,
// and the slots of the epochs to replay.
func (j *journal) scan() (from, maxEpoch uint64, chain map[uint64]chainSlot, err error) {
	from, j.mark, err = j.readCheckpoint()
	if err != nil {
		return 0, 0, nil, err
	}
	chain = make(map[uint64]chainSlot) // by epoch, from on
	maxEpoch = from
	for i := range j.slots {
		f, err := os.OpenFile(j.slotName(i), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, 0, nil, err
		}
		j.slots[i].f = f
		info, err := f.Stat()
		if err != nil {
			return 0, 0, nil, err
		}
		j.slots[i].filled = info.Size()
		epoch, first, ok := readSlotHeader(f)
		if !ok {
			continue
		}
		j.slots[i].epoch = epoch
		maxEpoch = max(maxEpoch, epoch)
		if epoch >= from {
			if _, dup := chain[epoch]; dup {
				return 0, 0, nil, fmt.Errorf("%w: two slots of epoch %d", errJournal, epoch)
			}
			chain[epoch] = chainSlot{i, first}
		}
	}
	if from == 0 {
		// No checkpoint file beside slots: it was lost, or the first
		// Open was cut before writing it. Replay all there is.
		for e := range chain {
			if from == 0 || e < from {
				from = e
			}
		}
	}
	return from, maxEpoch, chain, nil
}

// chainSlot is a slot holding an epoch Open replays, and that epoch's
// first record's number.
type chainSlot struct {
	slot  int
	first uint64
}

// replay passes the payload of each record from epoch from on to apply,
// in order, and returns how many it passed and the number of the last
// (or of the record before the first epoch's first, for none).
func (j *journal) replay(from uint64, chain map[uint64]chainSlot, apply func([]byte) error) (int, uint64, error) {
	replayed := 0
	last, chained := uint64(0), false // the last record's number, once an epoch was read
	for e := from; ; e++ {
		c, ok := chain[e]
		if !ok {
			// A later epoch started after this one's header was
			// durable: one that does not read is damage.
			for later := range chain {
				if later > e {
					return 0, 0, fmt.Errorf("%w: epoch %d after epoch %d, which does not read", errJournal, later, e)
				}
			}
			return replayed, last, nil
		}
		if chained && c.first != last+1 {
			return 0, 0, fmt.Errorf("%w: epoch %d starts at record %d after record %d", errJournal, e, c.first, last)
		}
		n, end, err := replaySlot(j.slots[c.slot].f, e, c.first, apply)
		if err != nil {
			return 0, 0, err
		}
		replayed += n
		if n > 0 {
			last = end
		} else if !chained {
			last = c.first - 1
		}
		chained = true
	}
}

func (j *journal) slotName(i int) string {
	return filepath.Join(j.dir, strconv.Itoa(i)+".slot")
}

// readCheckpoint returns the epoch the checkpoint file names, or 0 when
// there is none yet (a new store, or one from before the journal).
func (j *journal) readCheckpoint() (uint64, checkpointMark, error) {
	b, err := os.ReadFile(filepath.Join(j.dir, "checkpoint"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, checkpointMark{}, nil
	}
	if err != nil {
		return 0, checkpointMark{}, err
	}
	// replaceFile replaces it whole: anything else is damage.
	f, ok := unstamp(b, 1)
	if !ok {
		return 0, checkpointMark{}, fmt.Errorf("%w: the checkpoint file does not read", errJournal)
	}
	if len(b) == checkpointStamp {
		// As berth wrote it before the mark.
		return f[0], checkpointMark{}, nil
	}
	m, ok := unstamp(b[checkpointStamp:], 2)
	if !ok {
		return 0, checkpointMark{}, fmt.Errorf("%w: the checkpoint file's mark does not read", errJournal)
	}
	return f[0], checkpointMark{version: m[0], clean: m[1] == 1, known: true}, nil
}

// checkpointStamp is the length of the checkpoint file's first stamp,
// its epoch's, which is all that a berth from before the mark reads of
// it: the mark follows in a stamp of its own, so that a store can go
// back to such a berth.
const checkpointStamp = 8 + 8 + 4

// checkpointMark is what the checkpoint file says besides its epoch.
type checkpointMark struct {
	// version: every commit that Badger gave a version at or below it
	// was durable when the file was written, in Badger's logs or in the
	// records from the file's epoch on.
	version uint64
	// clean: the store closed after the file was written, with no
	// commit after it.
	clean bool
	// known: the file has the two above; a file of an earlier berth
	// has only the epoch.
	known bool
}

// takesBack reports whether Badger may hold commits above the mark's
// version that no durable record holds (see takeBack).
func (m checkpointMark) takesBack() bool { return m.known && !m.clean }

// stamp is journalMagic, fields, then a CRC-32C of both: the slot
// header, the checkpoint file and "replaying".
func stamp(fields ...uint64) []byte {
	b := append([]byte(nil), journalMagic[:]...)
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint64(b, f)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// unstamp returns the n fields stamp put at the start of b, or false
// when b does not start with them.
func unstamp(b []byte, n int) ([]uint64, bool) {
	end := 8 + 8*n
	if len(b) < end+4 || [8]byte(b[:8]) != journalMagic || crc32.Checksum(b[:end], castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return nil, false
	}
	f := make([]uint64, n)
	for i := range f {
		f[i] = binary.LittleEndian.Uint64(b[8+8*i:])
	}
	return f, true
}

// replayBase returns the highest version of a commit Badger kept, for
// a replay from epoch from: readTs, the highest version Badger holds
// now, unless a replay from the same epoch ran before and a crash cut
// it, whose writes are above the version it saw. The file "replaying"
// keeps that version from before the first replay's first write; a
// later checkpoint makes it stale, and so does a power cut that took
// Badger back below it (kill -9 left that replay a view the disk did
// not hold): Badger then holds none of that replay's writes, and this
// replay's own land below the version kept.
func (j *journal) replayBase(from, readTs uint64) (uint64, error) {
	name := filepath.Join(j.dir, "replaying")
	b, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if f, ok := unstamp(b, 2); ok && f[0] == from && f[1] <= readTs {
		return f[1], nil
	}
	if err := replaceFile(name, stamp(from, readTs)); err != nil {
		return 0, err
	}
	return readTs, nil
}

// writeCheckpoint names epoch as the first one Open must replay.
// version and clean are the mark's (see checkpointMark).
func (j *journal) writeCheckpoint(epoch, version uint64, clean bool) error {
	c := uint64(0)
	if clean {
		c = 1
	}
	return replaceFile(filepath.Join(j.dir, "checkpoint"), append(stamp(epoch), stamp(version, c)...))
}

// replaceFile replaces name with b whole (a temporary file, synced,
// renamed over it) and syncs the rename, so a crash leaves the old
// content or the new, and the new survives once it returns.
func replaceFile(name string, b []byte) error {
	t, err := renameio.NewPendingFile(name, renameio.WithTempDir(filepath.Dir(name)), renameio.WithStaticPermissions(0o600))
	if err != nil {
		return err
	}
	defer t.Cleanup()
	if _, err := t.Write(b); err != nil {
		return err
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

// slotHeaderBytes is the header block of a slot holding epoch, whose
// first record is number first.
func slotHeaderBytes(epoch, first uint64) []byte {
	b := make([]byte, slotHeader)
	copy(b, stamp(epoch, first))
	return b
}

// readSlotHeader reads a slot's header; ok is false for a slot whose
// header never became durable (or that holds none yet).
func readSlotHeader(f *os.File) (epoch, first uint64, ok bool) {
	var b [28]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, 0, false
	}
	h, ok := unstamp(b[:], 2)
	if !ok {
		return 0, 0, false
	}
	return h[0], h[1], true
}

// replaySlot passes the payloads of the records of epoch in f, numbered
// from first on, to apply, up to the first that does not read: the end of what a round
// made durable, after which lie zeros, a record cut by the crash, or one
// of an earlier epoch. It returns how many it applied and the number of
// the last (0 for none).
func replaySlot(f *os.File, epoch, first uint64, apply func([]byte) error) (int, uint64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, slotHeader, 1<<62), 256<<10)
	var hdr [recordHeader]byte
	n, want := 0, first
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break // the slot's end
		}
		size := binary.LittleEndian.Uint32(hdr[0:])
		if binary.LittleEndian.Uint64(hdr[8:]) != want || size > maxRecord {
			break
		}
		// A new buffer each: Badger may hold what a transaction set
		// until its commit.
		payload := make([]byte, size)
		if _, err := io.ReadFull(r, payload); err != nil {
			break
		}
		if recordCRC(epoch, hdr[8:16], payload) != binary.LittleEndian.Uint32(hdr[4:]) {
			break
		}
		if err := apply(payload); err != nil {
			return n, want - 1, fmt.Errorf("kv: replaying record %d of epoch %d: %w", want, epoch, err)
		}
		n++
		want++
	}
	if n == 0 {
		return 0, 0, nil
	}
	return n, want - 1, nil
}

// recordCRC is a record's checksum: over its epoch, its number and its
// payload, so that a record of an earlier epoch left in a slot used
// again never reads as one of this epoch.
func recordCRC(epoch uint64, lsn, payload []byte) uint32 {
	var e [8]byte
	binary.LittleEndian.PutUint64(e[:], epoch)
	c := crc32.Update(0, castagnoli, e[:])
	c = crc32.Update(c, castagnoli, lsn)
	return crc32.Update(c, castagnoli, payload)
}

// applyRecord commits a record's writes to db, in as many transactions
// as Badger takes them: one, unless the store was opened with smaller
// memtables than when it was written. Atomicity does not matter here:
// nothing reads the store before the replay ends, and a crash during
// it replays again from the same checkpoint. A key that Badger held
// before the replay (vers, see keyVersions) at a version above the
// record's was written by a later commit, whose value stands (see
// journal); above base, by a replay a crash cut, which decides nothing.
func applyRecord(db *dgraph.DB, vers map[string]uint64, base uint64, payload []byte) error {
	version, payload, err := recordOps(payload)
	if err != nil {
		return err
	}
	w := opWriter{db: db}
	defer w.discard()
	for len(payload) > 0 {
		o, rest, err := decodeOp(payload)
		if err != nil {
			return err
		}
		payload = rest
		if v := vers[string(o.key)]; v > version && v <= base {
			continue
		}
		if err := w.write(o); err != nil {
			return err
		}
	}
	return w.commit()
}

// opWriter writes ops in as few transactions as Badger takes them.
type opWriter struct {
	db   *dgraph.DB
	t    *dgraph.Txn
	held int // ops in t
}

func (w *opWriter) write(o op) error {
	if w.t == nil {
		w.t = w.db.NewTransaction(true)
	}
	e := dgraph.NewEntry(o.key, o.value)
	e.ExpiresAt = o.expiresAt
	for {
		var err error
		if o.kind == opDelete {
			err = w.t.Delete(o.key)
		} else {
			err = w.t.SetEntry(e)
		}
		if !errors.Is(err, dgraph.ErrTxnTooBig) {
			if err != nil {
				return err
			}
			w.held++
			return nil
		}
		if w.held == 0 {
			// Alone in a transaction it still does not fit: the
			// store was opened with memtables too small for what
			// it once took. Another try would loop for ever.
			return fmt.Errorf("%w: an op of a %d-byte key does not fit one transaction of this store; open it with a larger MemTableSize", errJournal, len(o.key))
		}
		if err := w.t.Commit(); err != nil {
			return err
		}
		w.t = w.db.NewTransaction(true)
		w.held = 0
	}
}

// commit commits the ops written since the last commit.
func (w *opWriter) commit() error {
	if w.t == nil {
		return nil
	}
	err := w.t.Commit()
	w.t, w.held = nil, 0
	return err
}

func (w *opWriter) discard() {
	if w.t != nil {
		w.t.Discard()
	}
}

// takeBack sets every key that Badger holds at a version above line
// back to what it was at line (deleting it where it was nothing), in new
// commits, and returns how many keys it set back. Above the line are
// commits that were never acknowledged, whose records a crash lost, and
// what a replay a crash cut wrote: the replay decides those keys from
// the records. After a power cut such a commit's value may never have
// reached the value log while its entry reached Badger's write-ahead
// log, and Badger reads such a value as empty bytes, with no error. keys
// holds the keys the replay's records write: a value at the line that
// does not read either is one of theirs, but for a power cut during a
// value-log GC, which writes the values it moves at their own versions.
// Such a key is left as the later commit wrote it, the only value there
// is, and returned in left, for Open to log; a refusal to open would
// leave the whole store unserved for it.
func takeBack(db *dgraph.DB, line uint64, keys map[string]uint64) (n int, left [][]byte, err error) {
	t := db.NewTransaction(false)
	defer t.Discard()
	var above [][]byte
	it := t.NewIterator(dgraph.IteratorOptions{AllVersions: true, SinceTs: line})
	for it.Rewind(); it.Valid(); it.Next() {
		if k := it.Item().Key(); len(above) == 0 || !bytes.Equal(above[len(above)-1], k) {
			above = append(above, it.Item().KeyCopy(nil))
		}
	}
	it.Close()
	if len(above) == 0 {
		return 0, nil, nil
	}
	w := opWriter{db: db}
	defer w.discard()
	it = t.NewIterator(dgraph.IteratorOptions{AllVersions: true})
	defer it.Close()
	for _, key := range above {
		o, lost := op{kind: opDelete, key: key}, false
		for it.Seek(key); it.Valid() && bytes.Equal(it.Item().Key(), key); it.Next() {
			item := it.Item()
			if item.Version() > line {
				continue
			}
			if item.IsDeletedOrExpired() {
				break
			}
			var v []byte
			err := value(item, func(b []byte) error {
				v = bytes.Clone(b)
				return nil
			})
			if errors.Is(err, kv.ErrDamaged) {
				if _, ok := keys[string(key)]; ok {
					break // a record sets it
				}
				// Lost below the line too (a power cut during a
				// value-log GC, whose rewrite keeps the version):
				// the later value is all there is.
				lost = true
				break
			}
			if err != nil {
				return 0, nil, err
			}
			o = op{kind: opSet, key: key, value: v, expiresAt: item.ExpiresAt()}
			break
		}
		if lost {
			left = append(left, key)
			continue
		}
		if err := w.write(o); err != nil {
			return 0, nil, err
		}
		n++
	}
	return n, left, w.commit()
}

// recordKeys adds the keys the record's payload writes to keys (at 0,
// their versions for the caller to fill in) and returns the record's
// version bound.
func recordKeys(payload []byte, keys map[string]uint64) (version uint64, err error) {
	version, payload, err = recordOps(payload)
	if err != nil {
		return 0, err
	}
	for len(payload) > 0 {
		o, rest, err := decodeOp(payload)
		if err != nil {
			return 0, err
		}
		payload = rest
		keys[string(o.key)] = 0
	}
	return version, nil
}

// recordOps splits a record's payload into its version bound and its
// ops.
func recordOps(payload []byte) (version uint64, ops []byte, err error) {
	if len(payload) < recordVersion {
		return 0, nil, fmt.Errorf("%w: a record without its version", errJournal)
	}
	return binary.LittleEndian.Uint64(payload), payload[recordVersion:], nil
}

// keyVersion is the version of key's newest entry in t at or below
// atMost, a set, a delete or an expired one; 0 for none.
func keyVersion(t *dgraph.Txn, key []byte, atMost uint64) uint64 {
	if item, err := t.Get(key); err == nil && item.Version() <= atMost {
		return item.Version()
	}
	// Get hides deletes and expired entries; an iterator over all
	// versions shows them, newest first.
	it := t.NewIterator(dgraph.IteratorOptions{AllVersions: true, Prefix: key})
	defer it.Close()
	for it.Seek(key); it.Valid() && bytes.Equal(it.Item().Key(), key); it.Next() {
		if v := it.Item().Version(); v <= atMost {
			return v
		}
	}
	return 0
}

// appendRecord appends the record numbered lsn of ops to b; its CRC is
// left for seal, which knows the epoch, and its version for commit,
// which learns it from the commit.
func appendRecord(b []byte, lsn uint64, ops []op) []byte {
	start := len(b)
	b = append(b, make([]byte, recordHeader+recordVersion)...)
	for _, o := range ops {
		b = append(b, byte(o.kind))
		b = binary.AppendUvarint(b, uint64(len(o.key)))
		b = append(b, o.key...)
		if o.kind == opDelete {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(o.value)))
		b = append(b, o.value...)
		if o.kind == opSetTTL {
			b = binary.LittleEndian.AppendUint64(b, o.expiresAt)
		}
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start-recordHeader))
	binary.LittleEndian.PutUint64(b[start+8:], lsn)
	return b
}

// seal fills in the CRC of every record in b for epoch.
func seal(b []byte, epoch uint64) {
	for len(b) >= recordHeader {
		size := int(binary.LittleEndian.Uint32(b))
		rec := b[:recordHeader+size]
		binary.LittleEndian.PutUint32(rec[4:], recordCRC(epoch, rec[8:16], rec[recordHeader:]))
		b = b[len(rec):]
	}
}

// decodeOp reads one op off a record's payload.
func decodeOp(b []byte) (op, []byte, error) {
	bad := fmt.Errorf("%w: a record's op does not read", errJournal)
	if len(b) == 0 {
		return op{}, nil, bad
	}
	o := op{kind: opKind(b[0])}
	b = b[1:]
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, false
		}
		f := b[w : w+int(n)]
		b = b[w+int(n):]
		return f, true
	}
	var ok bool
	if o.key, ok = field(); !ok {
		return op{}, nil, bad
	}
	switch o.kind {
	case opDelete:
		return o, b, nil
	case opSet, opSetTTL:
	default:
		return op{}, nil, bad
	}
	if o.value, ok = field(); !ok {
		return op{}, nil, bad
	}
	if o.kind == opSetTTL {
		if len(b) < 8 {
			return op{}, nil, bad
		}
		o.expiresAt = binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	return o, b, nil
}

// commit appends the record of ops and runs commit, Badger's commit of
// the same transaction, while holding mu: see journal. A commit that
// fails takes its record back. Commits are one at a time here; Badger
// writes them one at a time anyway. It returns the number of the
// commit's record (of the last one appended, for a commit without
// writes), for wait.
func (j *journal) commit(ops []op, commit func() error) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	mark := len(j.buf)
	if len(ops) > 0 {
		j.buf = appendRecord(j.buf, j.nextLSN, ops)
	}
	if err := commit(); err != nil {
		j.buf = j.buf[:mark]
		return 0, err
	}
	if len(ops) > 0 {
		// Badger gives versions in the order of commits, and the
		// next commit waits for mu: a key at a higher version is a
		// later commit's.
		binary.LittleEndian.PutUint64(j.buf[mark+recordHeader:], j.readTs())
		j.nextLSN++
	}
	return j.nextLSN - 1, nil
}

// maxBacklog bounds the bytes of records appended that no round has taken
// before an unsynced commit waits for one (see DB.updateOnce).
const maxBacklog = 1 << 20

// backlog returns the bytes of records appended since the last round
// took them.
func (j *journal) backlog() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.buf)
}

// appended returns the number of the last record appended.
func (j *journal) appended() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.nextLSN - 1
}

// wait returns once the records up to number lsn are durable, with the
// error of the round that made them so (or of a later one). A commit
// whose record a running round took waits for that round alone: waiting
// for one that starts after the call, as groupSync's callers do, cost
// such a commit a second round.
func (j *journal) wait(lsn uint64) error {
	j.commits.Add(1)
	start := time.Now()
	defer func() { j.waitTime.Add(int64(time.Since(start))) }()
	j.rmu.Lock()
	defer j.rmu.Unlock()
	return j.await(&j.cond, func() bool { return j.durable >= lsn }, func() error {
		last, err := j.round()
		if err == nil {
			j.rmu.Lock()
			j.durable = last
			j.rmu.Unlock()
		}
		return err
	})
}

// broken returns the error that stopped writes, if any: the journal's,
// or that of a checkpoint's or a collection's sync of Badger's logs.
func (j *journal) broken() error {
	j.rmu.Lock()
	err := j.failed
	j.rmu.Unlock()
	if err != nil {
		return err
	}
	return j.g.broken()
}

// round writes the records appended since the last round and makes them
// durable, and returns the number of the last of them (of the last
// record appended, when there were none).
func (j *journal) round() (last uint64, err error) {
	j.mu.Lock()
	buf := j.buf
	j.buf, j.spare = j.spare[:0], nil
	last = j.nextLSN - 1
	// Taken under mu, it reads every commit whose record buf holds and
	// none after: once buf is durable it is the next pin.
	var pin *dgraph.Txn
	if len(buf) > 0 {
		pin = j.db.NewTransaction(false)
	}
	j.mu.Unlock()
	defer func() {
		if pin == nil {
			return
		}
		if err != nil {
			pin.Discard()
			return
		}
		j.pin.Discard()
		j.pin = pin
	}()
	defer func() {
		if cap(buf) <= maxSpare {
			j.mu.Lock()
			j.spare = buf[:0]
			j.mu.Unlock()
		}
	}()
	j.rounds.Add(1)
	if len(buf) == 0 {
		// Every record appended before this round started was taken
		// by one that has finished.
		return last, nil
	}
	t := time.Now()
	defer func() { j.roundTime.Add(int64(time.Since(t))) }()
	if j.cur < 0 || (j.off > slotHeader && j.off+int64(len(buf)) > j.size) {
		if err := j.startEpoch(binary.LittleEndian.Uint64(buf[8:16])); err != nil {
			return 0, err
		}
	}
	s := &j.slots[j.cur]
	seal(buf, j.epoch)
	if _, err := s.f.WriteAt(buf, j.off); err != nil {
		return 0, fmt.Errorf("kv: journal: %w", err)
	}
	j.off += int64(len(buf))
	if j.off > s.filled {
		// Zeros ahead, so that the next rounds write over written
		// space; this round's sync covers them and the new size.
		end := (j.off + fillStep - 1) / fillStep * fillStep
		if _, err := s.f.WriteAt(zeroFill[:end-j.off], j.off); err != nil {
			return 0, fmt.Errorf("kv: journal: %w", err)
		}
		s.filled = end
	}
	return last, j.sync(s.f)
}

func (j *journal) sync(f *os.File) error {
	j.files.Add(1)
	var err error
	if j.syncFile != nil {
		err = j.syncFile(f)
	} else {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if err != nil {
		return fmt.Errorf("kv: journal: %w", err)
	}
	return nil
}

// startEpoch starts the next epoch, whose first record is number first,
// in a free slot, waiting for a checkpoint if none is, and asks for the
// checkpoint that frees the slot of the epoch before.
func (j *journal) startEpoch(first uint64) error {
	j.rmu.Lock()
	pick := -1
	for {
		pick = -1
		for i, s := range j.slots {
			if i == j.cur || s.epoch >= j.cpFrom {
				continue
			}
			// The one written furthest, whose space is all written.
			if pick < 0 || s.filled > j.slots[pick].filled {
				pick = i
			}
		}
		if pick >= 0 || j.failed != nil {
			break
		}
		j.checkpointFor(j.epoch)
		j.cond.Wait()
	}
	err := j.failed
	j.rmu.Unlock()
	if err != nil {
		return err
	}
	s := &j.slots[pick]
	if s.f == nil {
		f, err := os.OpenFile(j.slotName(pick), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("kv: journal: %w", err)
		}
		// The new file's name must survive with what the round
		// writes in it.
		if err := syncDir(j.dir); err != nil {
			f.Close()
			return fmt.Errorf("kv: journal: %w", err)
		}
		s.f = f
	}
	epoch := j.epoch + 1
	if _, err := s.f.WriteAt(slotHeaderBytes(epoch, first), 0); err != nil {
		return fmt.Errorf("kv: journal: %w", err)
	}
	s.filled = max(s.filled, slotHeader)
	s.epoch = epoch
	j.cur, j.epoch, j.off = pick, epoch, slotHeader
	if epoch > j.cpFrom {
		j.rmu.Lock()
		j.checkpointFor(epoch)
		j.rmu.Unlock()
	}
	return nil
}

// checkpointFor asks for a checkpoint that makes epoch the first one to
// replay, starting the goroutine that runs them unless it runs. Called
// with rmu held.
func (j *journal) checkpointFor(epoch uint64) {
	j.cpWanted = max(j.cpWanted, epoch)
	if !j.cpRunning && j.cpWanted > j.cpFrom {
		j.cpRunning = true
		go j.checkpoints()
	}
}

// checkpoints runs checkpoints until none is wanted.
func (j *journal) checkpoints() {
	j.rmu.Lock()
	defer j.rmu.Unlock()
	for j.cpWanted > j.cpFrom && j.failed == nil {
		e := j.cpWanted
		j.rmu.Unlock()
		err := j.checkpoint(e, false)
		j.rmu.Lock()
		if err != nil {
			j.fail(err)
			break
		}
		j.cpFrom = e
		j.cond.Broadcast()
	}
	j.cpRunning = false
	j.cond.Broadcast()
}

// checkpoint makes Badger hold durably every commit whose record is in
// an epoch before epoch, then names epoch as the first to replay. Those
// commits all finished before epoch started (a round takes records only
// of finished commits), so a sync of Badger's logs that starts now
// covers them.
func (j *journal) checkpoint(epoch uint64, clean bool) error {
	if j.beforeCheckpoint != nil {
		j.beforeCheckpoint()
	}
	// Every commit at or below it is in Badger's logs, which the sync
	// makes durable.
	version := j.readTs()
	if err := j.g.wait(); err != nil {
		return err
	}
	if err := j.writeCheckpoint(epoch, version, clean); err != nil {
		return fmt.Errorf("kv: journal checkpoint: %w", err)
	}
	return nil
}

// close waits for a running checkpoint, then, when every commit is done
// and Badger's logs hold them durably, names the next epoch as the first
// to replay, with a clean mark, so that the next Open replays nothing
// and takes nothing back, and closes the slots; without that mark it
// keeps the pin. The store calls it before Badger closes, with no commit
// in flight.
func (j *journal) close() error {
	j.rmu.Lock()
	for j.cpRunning {
		j.cond.Wait()
	}
	failed := j.failed
	j.rmu.Unlock()
	var err error
	if failed == nil {
		err = j.checkpoint(j.epoch+1, true)
	}
	if failed == nil && err == nil {
		j.pin.Discard()
	}
	// Else the next Open takes back the commits above the mark, and
	// sets their keys back to their values at it: the pin stays, so
	// that Badger's Close, whose last memtable flush can start a
	// compaction, does not drop those values for the later ones.
	return errors.Join(err, j.closeFiles())
}

func (j *journal) closeFiles() error {
	var errs []error
	for i := range j.slots {
		if f := j.slots[i].f; f != nil {
			errs = append(errs, f.Close())
			j.slots[i].f = nil
		}
	}
	return errors.Join(errs...)
}

// syncDir makes the names in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
