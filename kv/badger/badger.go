// Package badger is the embedded kv engine, the default: a kv.Store over
// a Badger database (github.com/dgraph-io/badger) in one directory, for a
// single node. Open it, hand the result on as a kv.Store; daemon reaches
// the maintenance that only this engine needs (RunGC, Failed, Collector)
// through kv's optional interfaces. Only this package imports Badger.
package badger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dgraph "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"golang.org/x/sys/unix"

	"berth/kv"
)

// Defaults for Options fields left at zero.
const (
	// DefaultConflictRetries bounds how often Update re-runs a conflicting
	// transaction. Conflicts on a single node are short-lived (two requests
	// touching the same folder), so 32 tries with sub-millisecond backoff
	// resolve all realistic contention while still failing fast on a bug
	// that conflicts forever.
	DefaultConflictRetries = 32
)

// memTableSize is each memtable's size unless Options.MemTableSize says
// otherwise. The arena is allocated whole (Go heap, about 1.3 times
// this), two are alive while one flushes, and Badger bounds one
// transaction to 15% of it: 8 MiB allows some 13,000 keys and 1.2 MB,
// which vfs stays inside by splitting large operations by keys
// (vfs.defaultRefBatch) and bytes (TxnBytes), and account by writing a
// group's memberships 2,000 to a transaction. In heap profiles of
// bench's BenchmarkDaemonWebDAVRSS a 16 MiB memtable's arena took
// 20.8 MiB, two of them 41.6 at a flush, and the WebDAV benchmark
// peaked at 104.6 to 105.9 MiB resident; at 8 MiB each arena takes 10.4
// and the peak was 94.0 (docs/operations.md "Memory"). 32 MiB held 40 MiB
// more at peak in bench/webdav.sh for no measured gain.
const memTableSize = 8 << 20

// valueThreshold: values of this size or more go to Badger's value log and
// the tree keeps a pointer. Small records (nodes, counts, locks) stay in
// the tree, where a listing reads them in key order; file bodies kept in
// revision records (up to vfs.InlineMax) and long chunk lists go to the
// log. Commits are made durable by the journal, not by syncing these
// logs (see journal).
//
// 17 KiB, above every small file's record, kept small files out of the
// value log, and, when each round synced Badger's logs, made a round one
// fdatasync where it was two. It was measured against 1 KiB on a quiet machine (bench/webdav's
// BenchmarkSmallWrites, 2,000 PUTs of 4 KiB from 8 clients, twice each):
// 1,571 and 1,670 PUTs/s at 974 and 926 CPU us a PUT, against 1,842 and
// 1,861/s at 697 and 706 us with 1 KiB. The second fdatasync costs less
// than passing every small file through memtables, flushes and
// compactions: those also raised the WebDAV benchmark's peak RSS from 96
// to 131 MiB, and their garbage kept the memory limit's collector busy
// enough to take a 1 GiB PUT from 5.6 to 14.3 CPU s/GiB
// (bench BenchmarkDaemonWebDAVRSS).
const valueThreshold = 1 << 10

// valueLogFileSize is the size at which Badger starts a new value-log
// file. Value-log GC rewrites whole files and never the one being
// written, so up to this much garbage stays on disk whatever is deleted:
// Badger's default (1 GiB) kept every byte of 100 MiB of small files
// after they were deleted and purged (daemon TestSmallFilesSpaceReturns).
// 16 MiB keeps that bound small at the cost of more files (64 a GiB,
// each one descriptor and one mapping).
const valueLogFileSize = 16 << 20

// priorityAfter is the number of conflicts after which an Update stops
// competing and makes new transactions wait for it (see DB.prio).
const priorityAfter = 4

// seqBandwidth is how many ids one sequence lease reserves. Each lease is
// one write, so 100 keeps that cost under 1% of NextID calls, and a crash
// skips at most 100 ids per kind. A lease is in the log before any commit
// that uses its ids, so it is durable whenever such a commit is: an id that
// reached the store is never handed out again.
const seqBandwidth = 100

// seqPrefix starts the keys that hold sequence leases. It begins with
// kv.EnginePrefix (0x00), which the registry in kv/prefixes.go keeps
// apart from every domain prefix.
const seqPrefix = kv.EnginePrefix + "seq/"

// Options configures Open.
type Options struct {
	// Dir is the directory holding the database. Ignored when InMemory.
	Dir string
	// InMemory keeps everything in memory and writes nothing to disk; for tests.
	InMemory bool
	// Logger receives Badger's warnings and errors (its info output is
	// dropped: it narrates every compaction). Nil means slog.Default().
	Logger *slog.Logger
	// ConflictRetries is how many times Update re-runs fn after a conflict
	// before it returns kv.ErrConflict. Zero means DefaultConflictRetries;
	// negative means never retry.
	ConflictRetries int
	// BlockCacheSize in bytes; zero (the default) means none. Tables are
	// not compressed (see Open), so Badger reads their blocks
	// straight from the mapped files and the page cache keeps them; a
	// block cache would only hold a second copy.
	BlockCacheSize int64
	// IndexCacheSize in bytes bounds the memory used by table indexes and
	// bloom filters. Zero keeps them all in memory (Badger's default): they
	// are a few percent of the store's size, which is cheap on a 24 GiB
	// machine and saves a cache lookup on every read.
	IndexCacheSize int64
	// MemTableSize is each of the two memtables' size in bytes; zero means
	// 8 MiB (see memTableSize). A transaction may write at most 15% of
	// it.
	MemTableSize int64
	// NoSync commits without fsync: a crash may lose the last commits.
	// Only for tests and benchmarks that build large fixtures; a server
	// never sets it.
	NoSync bool

	// journalSlot overrides slotSize, for tests that fill slots.
	journalSlot int64
	// beforeVersions, when set (by tests), runs in the journal's replay
	// with the Badger it replays into, before the replay reads what
	// that holds.
	beforeVersions func(*dgraph.DB)
}

// DB is a kv.Store backed by an embedded Badger database. Create it with
// Open; it is safe for concurrent use. Beside kv.Store it implements
// kv.GCer (RunGC) and kv.Failer (Failed), and Collector for its metrics.
type DB struct {
	db      *dgraph.DB
	retries int
	group   *groupSync // nil: nothing to sync (NoSync, InMemory)
	// jl makes commits durable (nil where group is): see journal.
	jl *journal

	// flattened is when RunGC last flattened the tree (flushDeletes),
	// under mu.
	flattened time.Time

	// mu guards closed, active and seqs. Close waits on idle until no call is
	// in flight, so no transaction runs into a closed database.
	mu     sync.Mutex
	idle   sync.Cond
	closed bool
	active int
	seqs   map[string]*sequence

	// prio and prioWaiting keep a hot key from starving a writer. Badger's
	// conflict detection is optimistic and first-committer-wins, and the
	// goroutine whose commit just finished starts its next transaction
	// before a waiting one is even scheduled, so two loops updating one
	// counter let one side lose every try (measured: 33 conflicts in a row
	// within 200 increments). After priorityAfter conflicts a transaction
	// takes prio, and new tries of other Updates wait for it to finish;
	// tries already running can still beat it once each, then it commits.
	prio        sync.Mutex
	prioWaiting atomic.Int32

	// writes is held for reading around every write to Badger (a commit,
	// a sequence lease) and for writing while RunGC flushes the
	// memtables (flushDeletes): Badger refuses, with ErrBlockedWrites,
	// every write made while it flushes them that way.
	writes sync.RWMutex

	// gen moves with every commit (Generation). It moves after a commit
	// is visible, so a reader that saw the old number may have read the
	// new data, never the other way round.
	gen atomic.Uint64
	// committing counts commits between the start of Commit and the move
	// of gen. In that window a commit can be visible to a fresh read
	// while gen still has the number of values read before it, so
	// Generation hands out numbers of their own (see there).
	committing atomic.Int64
	// metaGen and metaCommitting are gen and committing for the commits
	// that write a key outside kv.Content (MetaGeneration).
	metaGen        atomic.Uint64
	metaCommitting atomic.Int64

	// afterCommit, when set (by tests), runs after a commit is visible
	// and before gen moves.
	afterCommit func()
	// beforeBadgerClose, when set (by tests), runs in Close after the
	// journal closed and before Badger closes, where Badger's Close may
	// compact (its last memtable flush can fill level 0).
	beforeBadgerClose func()

	// ops counts transactions and reads for TxnStats.
	ops txnCounts
}

var (
	_ kv.Store   = (*DB)(nil)
	_ kv.GCer    = (*DB)(nil)
	_ kv.Failer  = (*DB)(nil)
	_ kv.Bounded = (*DB)(nil)

	_ kv.MetaGenerationer = (*DB)(nil)
)

// Open opens (creating if needed) the database described by opts.
//
// Commits are durable before Update returns (by the journal, whose
// rounds let concurrent commits share an fdatasync), so a committed
// Update survives a power loss. Memory settings are sized for a small server that also
// serves file contents: 2 memtables of 8 MiB instead of 5 of 64 (one
// taking writes while the other flushes; see memTableSize), two compactors for
// two cores, one version per key (no history is read), and tables without
// compression or a block cache: a heap profile taken while
// bench/webdav.sh ran showed each memtable flush holding 80 MiB of Snappy
// buffers, for metadata that is a sliver of the bytes on disk. The
// memtables are Go heap that fills as metadata is written: Badger's
// defaults let a busy daemon reach 300 MiB resident.
func Open(opts Options) (*DB, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	retries := opts.ConflictRetries
	switch {
	case retries == 0:
		retries = DefaultConflictRetries
	case retries < 0:
		retries = 0
	}
	bo := dgraph.DefaultOptions(opts.Dir)
	if opts.InMemory {
		bo = dgraph.DefaultOptions("").WithInMemory(true)
	} else if opts.Dir == "" {
		return nil, errors.New("kv/badger: Options.Dir is empty and InMemory is false")
	}
	mt := opts.MemTableSize
	if mt <= 0 {
		mt = memTableSize
	}
	bo = bo.
		// Commits are made durable by the journal instead: Badger's
		// own SyncWrites fsyncs once per transaction even when it
		// writes several together, so concurrent commits never share
		// a sync.
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		WithNumMemtables(2).
		WithMemTableSize(mt).
		WithNumCompactors(2).
		WithBlockCacheSize(opts.BlockCacheSize).
		WithCompression(options.None).
		WithIndexCacheSize(opts.IndexCacheSize).
		WithLogger(slogLogger{logger}).
		WithLoggingLevel(dgraph.WARNING)

	if !opts.InMemory {
		// In memory there is no value log: every value stays in the tree.
		bo = bo.WithValueThreshold(valueThreshold).WithValueLogFileSize(valueLogFileSize)
		// Before anything is removed: an empty log in a store another
		// process has open is one its Badger has just created and is
		// about to size. (Badger takes the lock inside its Open, after
		// the repairs below; the window left is the probe's.)
		if inUse(opts.Dir) {
			return nil, openErr(opts.Dir, kv.ErrInUse)
		}
		if err := removeEmptyLogs(opts.Dir, logger); err != nil {
			return nil, openErr(opts.Dir, err)
		}
		if err := replayLogs(bo); err != nil {
			return nil, openErr(opts.Dir, err)
		}
		// With NoSync too: a store that a synced run left crashed
		// holds commits in its journal alone, and a later synced open
		// would replay them over what this run wrote.
		replayed, takenBack, left, err := replayJournal(bo, opts)
		if err != nil {
			return nil, openErr(opts.Dir, err)
		}
		if replayed > 0 || takenBack > 0 {
			logger.Warn("kv: replayed commits from the journal after a crash", "commits", replayed, "keys_taken_back", takenBack)
		}
		if len(left) > 0 {
			logger.Error("kv: keys left as a commit never acknowledged wrote them: their values before it do not read (a power cut during a value-log GC)",
				"keys", len(left), "first", string(left[0]))
		}
	}
	db, err := dgraph.Open(bo)
	if err != nil {
		return nil, openErr(opts.Dir, err)
	}
	b := &DB{
		db:      db,
		retries: retries,
		seqs:    make(map[string]*sequence),
	}
	if !opts.NoSync && !opts.InMemory {
		// replayJournal left nothing beyond the checkpoint to replay.
		b.group = newGroupSync(opts.Dir)
		jl, _, err := openJournal(opts.Dir, db, b.group, opts.journalSlot, nil)
		if err != nil {
			db.Close()
			b.group.close()
			return nil, openErr(opts.Dir, err)
		}
		b.jl = jl
	}
	b.idle.L = &b.mu
	return b, nil
}

// openErr explains why the database in dir did not open: kv.ErrInUse when
// another process holds it, so callers can tell that from every other
// failure (a permission, a damaged file). Badger formats the error of its
// directory lock into text, so the lock is probed again here.
func openErr(dir string, err error) error {
	if inUse(dir) {
		return fmt.Errorf("kv: open badger in %q: %w", dir, kv.ErrInUse)
	}
	return fmt.Errorf("kv: open badger in %q: %w", dir, err)
}

// inUse reports whether another process holds Badger's lock on dir, an
// exclusive flock of the directory itself (badger's acquireDirectoryLock).
// A shared try fails exactly when such a lock is held, and is released at
// once.
func inUse(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// legacyMemTableSize is the memtable size of releases before memTableSize.
const legacyMemTableSize = 32 << 20

// removeEmptyLogs deletes the empty write-ahead (.mem) and value log
// (.vlog) files in dir. Badger creates such a file and then sizes it; a
// crash in between leaves it empty, and Badger refuses to open over an
// empty one (badger#2207: "Create a new file"), so the start after such a
// crash failed. An empty log holds nothing, so nothing is lost with it:
// Badger writes to a log only after sizing it.
func removeEmptyLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext != ".mem" && ext != ".vlog" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Size() != 0 || !info.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
		log.Warn("kv: removed an empty log file that a crash left", "file", e.Name())
	}
	return nil
}

// replayLogs flushes the write-ahead logs a crash left in bo.Dir when
// they may not fit today's memtables: it opens the database with
// memtables large enough for them and closes it, which writes them to
// tables and deletes them. Badger replays each log into a memtable of the
// configured size at open, and a log written with larger memtables
// overflows it, which Badger answers with log.Fatalf: the first start of
// a new release after a crash of the previous one would exit.
//
// Badger creates a log at twice the memtable size, so a log of twice
// bo.MemTableSize was written with today's size. Any other size is a log of
// an earlier release (64 MiB for its 32 MiB memtables), or one that a
// replay cut to its end and that may hold what the earlier size allowed.
func replayLogs(bo dgraph.Options) error {
	entries, err := os.ReadDir(bo.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var size int64
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".mem" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Size() != 2*bo.MemTableSize {
			size = max(size, legacyMemTableSize, info.Size()/2)
		}
	}
	if size == 0 {
		return nil
	}
	// Without compactions, as replayJournal's open: the journal has yet
	// to read what these logs hold.
	db, err := dgraph.Open(withoutCompactions(bo.WithMemTableSize(size)))
	if err != nil {
		return err
	}
	return db.Close()
}

// replayJournal replays into the store in bo.Dir the commits the
// journal holds beyond its last checkpoint, if any, after taking back
// those of an unclean stop that no durable record holds (see journal),
// and returns how many records it replayed, how many keys it took back,
// and the keys it could not take back. It opens Badger for that alone,
// without compactions, and closes it: with one that compacts, a compaction due at the start (Badger
// flushes the memtables of its logs at once) could drop a delete that
// Badger kept of a commit whose record the crash lost, with every
// version of its key, before the replay read that key's version; the
// replay would then set the key again from an earlier record, undoing
// half of that commit. While the store runs, the journal's pin keeps
// such entries (see journal.pin); no pin holds before the replay.
func replayJournal(bo dgraph.Options, opts Options) (replayed, takenBack int, left [][]byte, err error) {
	pending, err := journalPending(opts.Dir)
	if err != nil || !pending {
		return 0, 0, nil, err
	}
	db, err := dgraph.Open(withoutCompactions(bo))
	if err != nil {
		return 0, 0, nil, err
	}
	g := newGroupSync(opts.Dir)
	jl, replayed, err := openJournal(opts.Dir, db, g, opts.journalSlot, opts.beforeVersions)
	if err != nil {
		return 0, 0, nil, errors.Join(err, db.Close(), g.close())
	}
	return replayed, jl.takenBack, jl.leftAbove, errors.Join(jl.close(), db.Close(), g.close())
}

// withoutCompactions is bo for an open that must not compact. Level 0
// then only grows, so it never stalls a flush either.
func withoutCompactions(bo dgraph.Options) dgraph.Options {
	return bo.WithNumCompactors(0).WithNumLevelZeroTablesStall(math.MaxInt32)
}

// enter registers a call in flight, or returns kv.ErrClosed. Every successful
// enter must be paired with leave.
func (b *DB) enter() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return kv.ErrClosed
	}
	b.active++
	return nil
}

func (b *DB) leave() {
	b.mu.Lock()
	b.active--
	if b.active == 0 {
		b.idle.Broadcast()
	}
	b.mu.Unlock()
}

// View runs fn in a read-only snapshot transaction. Writes inside fn fail
// with kv.ErrReadOnly.
func (b *DB) View(ctx context.Context, fn func(kv.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	b.ops.views.Add(1)
	bt := b.db.NewTransaction(false)
	defer bt.Discard()
	return fn(&txn{t: bt, ops: &b.ops})
}

// Update runs fn in a read-write transaction and commits it with an fsync.
// A conflicting commit is retried with a fresh transaction after a short
// random pause; ctx is checked before every try and during the pause.
// Errors returned by fn are returned unchanged and nothing is written.
//
// fn must not call Update itself (NextID and View are fine): besides being a
// side effect outside the transaction, it could wait on its own caller when
// that caller is a starved transaction holding priority (see priority).
func (b *DB) Update(ctx context.Context, fn func(kv.Txn) error) error {
	return b.update(ctx, fn, true)
}

// UpdateUnsynced is Update without waiting for the group sync
// (kv.Unsynced): the commit is durable once a later synced one is.
func (b *DB) UpdateUnsynced(ctx context.Context, fn func(kv.Txn) error) error {
	return b.update(ctx, fn, false)
}

func (b *DB) update(ctx context.Context, fn func(kv.Txn) error, sync bool) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	prioritized := false
	defer func() {
		if prioritized {
			b.prio.Unlock()
			b.prioWaiting.Add(-1)
		}
	}()
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case try == priorityAfter:
			b.prioWaiting.Add(1)
			b.prio.Lock()
			prioritized = true
		case !prioritized && b.prioWaiting.Load() > 0:
			// A starved transaction wants its turn: let it commit first.
			b.prio.Lock()
			b.prio.Unlock()
		}
		err := b.updateOnce(fn, sync)
		if !errors.Is(err, dgraph.ErrConflict) {
			return err
		}
		if try >= b.retries {
			return kv.ErrConflict
		}
		if err := backoff(ctx, try); err != nil {
			return err
		}
	}
}

// Failed returns kv.ErrNotDurable (wrapping the fsync error) once a commit
// could not be made durable, and nil before: a health check that reads
// only would not notice that the store refuses every write.
func (b *DB) Failed() error {
	if b.jl == nil {
		return nil
	}
	return b.jl.broken()
}

// updateOnce runs one try of Update. It returns dgraph.ErrConflict as is so
// the caller can retry, and maps every other engine error.
func (b *DB) updateOnce(fn func(kv.Txn) error, sync bool) error {
	b.ops.updates.Add(1)
	bt := b.db.NewTransaction(true)
	defer bt.Discard()
	tx := &txn{t: bt, ops: &b.ops, journaled: b.jl != nil}
	if err := fn(tx); err != nil {
		return err
	}
	if b.jl != nil {
		// Not even into the memtable: readers would see what can no
		// longer be made durable.
		if err := b.jl.broken(); err != nil {
			return err
		}
	}
	b.committing.Add(1)
	if tx.meta {
		b.metaCommitting.Add(1)
	}
	// writes is taken before the journal's lock: a commit that waits
	// for RunGC's flush must not hold up the round that acknowledges
	// the commits before it.
	var err error
	var lsn uint64 // the commit's record's, for the journal's wait
	b.writes.RLock()
	if b.jl != nil {
		lsn, err = b.jl.commit(tx.writes, bt.Commit)
	} else {
		err = bt.Commit()
	}
	b.writes.RUnlock()
	if !errors.Is(err, dgraph.ErrConflict) {
		if b.afterCommit != nil {
			b.afterCommit()
		}
		if tx.meta {
			b.metaGen.Add(1)
		}
		b.gen.Add(1)
	}
	if tx.meta {
		b.metaCommitting.Add(-1)
	}
	b.committing.Add(-1)
	if errors.Is(err, dgraph.ErrConflict) {
		return err
	}
	if err == nil && b.jl != nil && (sync || b.jl.backlog() > maxBacklog) {
		// An unsynced commit waits too once the records no round has
		// taken pass maxBacklog: a run of them alone (pins, leases)
		// would grow the journal's buffer without bound.
		return b.jl.wait(lsn)
	}
	return mapErr(err)
}

// Generation returns a number that moves with every committed write
// transaction. While a commit is under way it may already be visible to
// a fresh read but not yet counted; a number shared with readers that
// began before it would let them serve a cache entry older than what a
// fresh read returns. So each call in that window gets a number of its
// own, taken from gen, which the commit then moves past.
func (b *DB) Generation() uint64 {
	if b.committing.Load() > 0 {
		return b.gen.Add(1)
	}
	return b.gen.Load()
}

// MetaGeneration is Generation for the commits that write a key outside
// kv.Content (kv.MetaGenerationer), with the same care for a commit
// under way.
func (b *DB) MetaGeneration() uint64 {
	if b.metaCommitting.Load() > 0 {
		return b.metaGen.Add(1)
	}
	return b.metaGen.Load()
}

// backoff sleeps a random time that grows with try, from at most 100µs up
// to at most about 6ms: long enough for the winning transaction to commit,
// short enough that a request barely notices.
func backoff(ctx context.Context, try int) error {
	limit := int64(100*time.Microsecond) << min(try, 6)
	t := time.NewTimer(time.Duration(rand.Int64N(limit) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// NextID returns the next id of the sequence named kind, starting at 1.
// Ids come from a lease of seqBandwidth ids at a time, written as a
// commit before any id of it is handed out: a commit that uses an id
// comes after its lease in the journal, so ids are never reused after a
// restart or crash once they reached the store.
func (b *DB) NextID(ctx context.Context, kind string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	seq, err := b.sequence(kind)
	if err != nil {
		return 0, err
	}
	id, err := seq.take(b)
	if err != nil {
		return 0, fmt.Errorf("kv: next id of %q: %w", kind, mapErr(err))
	}
	return id, nil
}

// sequence hands out the ids of one kind. Its key holds the end of the
// last lease as 8 big-endian bytes, or the next id once released, as
// Badger's Sequence kept it: stores written by releases that used it
// go on where they were. It is not Badger's, whose leases are written
// around the journal.
type sequence struct {
	key []byte

	mu           sync.Mutex
	next, leased uint64
}

// sequence returns the sequence of kind, reading it on first use.
func (b *DB) sequence(kind string) (*sequence, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq, ok := b.seqs[kind]; ok {
		return seq, nil
	}
	seq := &sequence{key: []byte(seqPrefix + kind)}
	bt := b.db.NewTransaction(false)
	defer bt.Discard()
	item, err := bt.Get(seq.key)
	switch {
	case errors.Is(err, dgraph.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("kv: sequence %q: %w", kind, mapErr(err))
	default:
		err := value(item, func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("a lease of %d bytes", len(v))
			}
			seq.next = binary.BigEndian.Uint64(v)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("kv: sequence %q: %w", kind, err)
		}
	}
	seq.leased = seq.next
	// Ours start at 1 so that 0 can mean "no id".
	seq.next = max(seq.next, 1)
	b.seqs[kind] = seq
	return seq, nil
}

// take returns the sequence's next id, first writing a new lease if the
// last one is used up. The lease is an unsynced commit: it is durable
// with the first synced commit after it, which any commit using its ids
// is. It bypasses Update's priority: NextID runs inside Update's fn.
func (s *sequence) take(b *DB) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= s.leased {
		if err := s.write(b, s.next+seqBandwidth); err != nil {
			return 0, err
		}
		s.leased = s.next + seqBandwidth
	}
	id := s.next
	s.next++
	return id, nil
}

// write stores v as the sequence's value. Only its own sequence writes
// the key, under s.mu, so a conflict is not expected; it is retried.
func (s *sequence) write(b *DB, v uint64) error {
	val := binary.BigEndian.AppendUint64(nil, v)
	for range b.retries + 1 {
		err := b.updateOnce(func(tx kv.Txn) error { return tx.Set(s.key, val) }, false)
		if !errors.Is(err, dgraph.ErrConflict) {
			return err
		}
	}
	return kv.ErrConflict
}

// release writes back the unused part of the lease, so that the next
// Open goes on from the next id.
func (s *sequence) release(b *DB) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= s.leased {
		return nil
	}
	if err := s.write(b, s.next); err != nil {
		return err
	}
	s.leased = s.next
	return nil
}

// TxnBytes is Badger's bound on one transaction: 15% of a memtable
// (1.2 MB with the default 8 MiB), counting each key, its value if it
// stays in the tree (under valueThreshold; a pointer of 12 bytes
// otherwise) and 12 bytes more (kv.Bounded).
func (b *DB) TxnBytes() int64 { return b.db.MaxBatchSize() }

// Exclusive reports true: the directory lock keeps every other process
// out while this one has the store open (kv.Exclusive).
func (b *DB) Exclusive() bool { return true }

// Close waits for calls in flight, returns the unused part of each sequence
// lease, and closes the database. Calls made after Close return kv.ErrClosed;
// closing twice is not an error.
func (b *DB) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for b.active > 0 {
		b.idle.Wait()
	}
	seqs := b.seqs
	b.seqs = nil
	b.mu.Unlock()

	var errs []error
	for kind, seq := range seqs {
		if err := seq.release(b); err != nil {
			errs = append(errs, fmt.Errorf("kv: release sequence %q: %w", kind, err))
		}
	}
	if b.jl != nil {
		if err := b.jl.close(); err != nil {
			errs = append(errs, fmt.Errorf("kv: close journal: %w", err))
		}
	}
	if b.beforeBadgerClose != nil {
		b.beforeBadgerClose()
	}
	if err := b.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("kv: close badger: %w", err))
	}
	if b.group != nil {
		if err := b.group.close(); err != nil {
			errs = append(errs, fmt.Errorf("kv: close logs: %w", err))
		}
	}
	return errors.Join(errs...)
}

// flushKey is the key flushDeletes writes and drops to make Badger flush
// its memtables. It begins with 0x00, like seqPrefix, so no domain key
// starts with it.
const flushKey = kv.EnginePrefix + "flush"

// RunGC gives back the space of deleted and overwritten values: it
// flushes the memtables and compacts the deletes down the tree
// (flushDeletes), then rewrites value-log files until Badger finds none
// worth rewriting (at least half garbage). The daemon calls it periodically; it is a no-op
// for an in-memory store and when another RunGC is already running.
//
// Badger picks the files to rewrite by discard statistics that only
// compactions record, and compactions see only what a memtable flush
// wrote: without the flush, a delete still in a memtable (8 MiB holds
// thousands of them) frees nothing, however often this runs,
// until enough later writes flush it and fill level 0.
func (b *DB) RunGC(ctx context.Context) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.flushDeletes(); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := b.gcOnce()
		switch {
		case err == nil:
			continue
		case errors.Is(err, dgraph.ErrNoRewrite),
			errors.Is(err, dgraph.ErrRejected),
			errors.Is(err, dgraph.ErrGCInMemoryMode):
			return nil
		default:
			return fmt.Errorf("kv: value log gc: %w", err)
		}
	}
}

// gcOnce rewrites at most one value-log file, and makes what it moved
// durable before the file is deleted. Badger moves the live values with
// unsynced writes (SyncWrites is off, see Open) and deletes the old file
// at once, unless an iterator is open: then it deletes it when the last
// one closes. So an iterator is held across the rewrite and closed only
// after a sync round that covers the value log; without it, a crash soon
// after a collection could lose values whose only durable copy was in
// the deleted file. Values an earlier release put there under today's
// valueThreshold move into the write-ahead log instead, which every
// round syncs.
func (b *DB) gcOnce() error {
	if b.group == nil {
		return b.db.RunValueLogGC(0.5)
	}
	t := b.db.NewTransaction(false)
	it := t.NewIterator(dgraph.IteratorOptions{Prefix: []byte(flushKey)})
	err := b.db.RunValueLogGC(0.5)
	if err == nil {
		if serr := b.group.wait(); serr != nil {
			// The store takes no more writes (see commitRounds);
			// the iterator and its transaction are left open so that
			// the old file, which may hold the only durable copy, stays
			// until the process exits.
			return serr
		}
	}
	it.Close()
	t.Discard()
	return err
}

// flushDeletes writes the memtables to level 0 and compacts level 0 into
// the tree, then, while deletes sit in a level above the one holding what
// they delete, compacts the tree into one level (Badger's Flatten). That
// records the values that deletes left behind in the discard statistics
// RunValueLogGC goes by: Badger notes a value as garbage only when a
// compaction brings its key and the key's delete together, and compacts a
// level into the next only when the level outgrows its target (a tenth of
// the next): a tree of two levels kept all 39 MiB of the values deleted
// below it through any number of runs (TestRunGCDeepDeletes). Flatten
// rewrites the tables the deletes overlap, so it runs only after deletes.
//
// Badger has no call to flush the memtables but DropPrefix, which does it
// and compacts level 0 before it drops its prefix, and only when some key
// has it; so a key is written to be dropped. Writes wait meanwhile
// (b.writes): Badger would refuse them. Flatten lets them go on.
func (b *DB) flushDeletes() error {
	if b.db.Opts().InMemory {
		return nil
	}
	b.writes.Lock()
	var err error
	if b.jl != nil {
		// The compaction can drop a delete, or an expired entry, with
		// every version of its key: a replay would then find nothing
		// newer than an earlier record's set of the key and undo half
		// of the commit whose record a crash lost. So every commit the
		// flush takes has its record durable first.
		err = b.jl.wait(b.jl.appended())
	}
	if err == nil {
		err = b.db.Update(func(t *dgraph.Txn) error { return t.Set([]byte(flushKey), nil) })
	}
	if err == nil {
		err = b.db.DropPrefix([]byte(flushKey))
	}
	b.writes.Unlock()
	if err != nil {
		return fmt.Errorf("kv: flushing memtables: %w", mapErr(err))
	}
	// A live store nearly always has some deletes above (expired
	// tokens, overwrites), and Flatten rewrites every table they
	// overlap: at most once per flattenEvery, not at every collection.
	if !deletesAbove(b.db.Levels()) || !b.flattenDue() {
		return nil
	}
	// One worker: a second finds no table the first has not taken
	// and logs a warning each time.
	if err := b.db.Flatten(1); err != nil {
		return fmt.Errorf("kv: compacting deletes: %w", mapErr(err))
	}
	return nil
}

// flattenDue reports whether flattenEvery has passed since the last
// Flatten, and if so counts this one.
func (b *DB) flattenDue() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.flattened.IsZero() && time.Since(b.flattened) < flattenEvery {
		return false
	}
	b.flattened = time.Now()
	return true
}

// flattenEvery is the least time between two Flattens of RunGC: space
// that deletes free deep in the tree comes back within a day, and a large
// tree is not rewritten at every hourly collection.
const flattenEvery = 24 * time.Hour

// deletesAbove reports whether a level above the deepest one that holds
// data holds deletes (stale data, in Badger's words): only a compaction
// down to where their keys are frees what they delete.
func deletesAbove(levels []dgraph.LevelInfo) bool {
	last := -1
	for i, l := range levels {
		if l.Size > 0 {
			last = i
		}
	}
	for _, l := range levels[:max(last, 0)] {
		if l.StaleDatSize > 0 {
			return true
		}
	}
	return false
}

// mapErr translates Badger's errors to kv's. Unknown errors are
// wrapped, keeping their text for the log.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dgraph.ErrKeyNotFound):
		return kv.ErrNotFound
	case errors.Is(err, dgraph.ErrTxnTooBig):
		return kv.ErrTxnTooBig
	case errors.Is(err, dgraph.ErrConflict):
		return kv.ErrConflict
	case errors.Is(err, dgraph.ErrReadOnlyTxn):
		return kv.ErrReadOnly
	case errors.Is(err, dgraph.ErrDBClosed):
		return kv.ErrClosed
	default:
		return fmt.Errorf("kv: badger: %w", err)
	}
}

// movesMeta reports whether a write of key moves MetaGeneration: keys
// outside kv.Content do, but for the engine's own (sequence leases),
// which no cache of metadata holds.
func movesMeta(key []byte) bool {
	return !kv.Content(key) && !bytes.HasPrefix(key, []byte(kv.EnginePrefix))
}

// txn adapts a dgraph.Txn to Txn.
type txn struct {
	t   *dgraph.Txn
	ops *txnCounts
	// journaled: the store journals commits, so writes keeps what this
	// transaction wrote, in order, for its record.
	journaled bool
	writes    []op
	// meta: a key outside kv.Content was written or deleted, so the
	// commit moves MetaGeneration.
	meta bool
	// memo holds what Get read, by key (see Get).
	memo map[string]memoVal
	// pending counts the writes so far (TxnStats.ScansSorting).
	pending uint64
}

// sorting counts a scan in TxnStats.ScansSorting when t holds writes.
func (t *txn) sorting() {
	if t.pending > 0 {
		t.ops.scansSorting.Add(1)
	}
}

// Get remembers what it read for the rest of the transaction: vfs reads
// the same records many times in one (each check walks the item's
// folders up to the root: its depth, its locks, its path), and a read
// of Badger costs a search of the memtables and levels where a second
// read of the same key in this snapshot can only find the same value,
// or what the transaction itself wrote, which Set and Delete forget.
// Keys that expire (SetTTL) are read afresh each time, as Badger decides
// expiry at each read.
func (t *txn) Get(key []byte) ([]byte, error) {
	t.ops.gets.Add(1)
	if m, ok := t.memo[string(key)]; ok {
		if m.missing {
			return nil, kv.ErrNotFound
		}
		return bytes.Clone(m.v), nil
	}
	item, err := t.t.Get(key)
	if errors.Is(err, dgraph.ErrKeyNotFound) {
		t.remember(key, memoVal{missing: true})
	}
	if err != nil {
		return nil, mapErr(err)
	}
	var v []byte
	err = value(item, func(val []byte) error {
		if item.ExpiresAt() != 0 || len(val) > maxMemoValue {
			v = bytes.Clone(val)
			if v == nil {
				v = []byte{}
			}
			return nil
		}
		// The caller's copy and the memo's in one allocation: a small
		// PUT reads a dozen records.
		b := make([]byte, 2*len(val))
		copy(b, val)
		copy(b[len(val):], val)
		v = b[:len(val):len(val)]
		t.remember(key, memoVal{v: b[len(val):]})
		return nil
	})
	return v, mapErr(err)
}

// maxMemoValue bounds the values Get remembers: records, not contents;
// maxMemoKeys how many: a request's transaction reads a few dozen keys,
// a listing's may read thousands once each, which are not worth keeping.
const (
	maxMemoValue = 1 << 10
	maxMemoKeys  = 128
)

// memoVal is a value Get read, or that there was none.
type memoVal struct {
	v       []byte
	missing bool
}

func (t *txn) remember(key []byte, m memoVal) {
	if t.memo == nil {
		t.memo = make(map[string]memoVal, 16)
	}
	if len(t.memo) >= maxMemoKeys {
		return
	}
	t.memo[string(key)] = m
}

// forget drops what Get remembers of key, which the transaction changes.
func (t *txn) forget(key []byte) {
	if t.memo != nil {
		delete(t.memo, string(key))
	}
}

// Set copies key and value: Badger keeps references to them until commit,
// and callers commonly reuse a key buffer across calls.
func (t *txn) Set(key, value []byte) error {
	t.meta = t.meta || movesMeta(key)
	t.forget(key)
	k, v := clonePair(key, value)
	if err := t.t.Set(k, v); err != nil {
		return mapErr(err)
	}
	t.journal(op{kind: opSet, key: k, value: v})
	return nil
}

// journal keeps o for the commit's journal record. The record is written
// at commit, before Badger lets go of the key and value, which no one
// changes meanwhile. Every write passes here, so it counts them too
// (pending).
func (t *txn) journal(o op) {
	t.pending++
	if !t.journaled {
		return
	}
	if t.writes == nil {
		t.writes = make([]op, 0, journalOpsHint)
	}
	t.writes = append(t.writes, o)
}

// journalOpsHint is the room a transaction's first write makes for its
// record: a file system request writes 8 to 18 keys (a small PUT 15, the
// MKCOL of a folder 17, its rename 18), which took five growths of the
// slice from empty, some 4 KB allocated and copied for a 1.5 KB record.
const journalOpsHint = 24

// clonePair copies key and value into one allocation, each capped at its
// own length so that an append to one never writes over the other.
func clonePair(key, value []byte) ([]byte, []byte) {
	b := make([]byte, len(key)+len(value))
	n := copy(b, key)
	copy(b[n:], value)
	return b[:n:n], b[n:]
}

// SetTTL relies on Badger's per-entry expiry, which has a resolution of one
// second: the key expires between ttl-1s and ttl after the write.
func (t *txn) SetTTL(key, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("kv: SetTTL with non-positive ttl %v", ttl)
	}
	t.meta = t.meta || movesMeta(key)
	t.forget(key)
	k, v := clonePair(key, value)
	e := dgraph.NewEntry(k, v).WithTTL(ttl)
	if err := t.t.SetEntry(e); err != nil {
		return mapErr(err)
	}
	t.journal(op{kind: opSetTTL, key: k, value: v, expiresAt: e.ExpiresAt})
	return nil
}

func (t *txn) Delete(key []byte) error {
	t.meta = t.meta || movesMeta(key)
	t.forget(key)
	k := bytes.Clone(key)
	if err := t.t.Delete(k); err != nil {
		return mapErr(err)
	}
	t.journal(op{kind: opDelete, key: k})
	return nil
}

func (t *txn) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	t.ops.scans.Add(1)
	t.sorting()
	it := t.t.NewIterator(iterOptions(prefix, false))
	defer it.Close()
	seek := prefix
	if len(start) >= len(prefix) && bytes.Compare(start, prefix) > 0 {
		seek = start
	}
	it.Seek(seek)
	return visit(it, prefix, fn)
}

func (t *txn) ScanReverse(prefix, start []byte, fn func(key, value []byte) error) error {
	t.ops.scans.Add(1)
	t.sorting()
	// No Prefix option here: with it, Badger's Valid hides the key a seek
	// to the prefix's end lands on, and Rewind seeks to the prefix itself,
	// which in reverse finds nothing but the prefix.
	it := t.t.NewIterator(iterOptions(nil, true))
	defer it.Close()
	switch {
	case len(start) < len(prefix) || (!bytes.HasPrefix(start, prefix) && bytes.Compare(start, prefix) > 0):
		// From the end of the prefix. A reverse Seek lands on the last key
		// <= its argument, and every key with the prefix sorts before the
		// prefix's successor, so seek there and step over the successor
		// itself if it exists. Without a successor (prefix empty or all
		// 0xFF), every key after the prefix has it: start at the last key.
		end := prefixEnd(prefix)
		if end == nil {
			it.Rewind()
			break
		}
		it.Seek(end)
		if it.Valid() && bytes.Equal(it.Item().Key(), end) {
			it.Next()
		}
	case bytes.Compare(start, prefix) < 0:
		return nil // start is before every key with the prefix
	default:
		it.Seek(start)
	}
	return visit(it, prefix, fn)
}

// iterOptions sets Prefix so that Badger skips tables without the prefix,
// and skips value prefetching: values under valueThreshold live in the LSM
// tree next to their keys, so reading them in fn costs no extra I/O;
// prefetching would copy every value in advance, and read the larger ones
// from the value log even when fn stops or ignores them.
func iterOptions(prefix []byte, reverse bool) dgraph.IteratorOptions {
	o := dgraph.DefaultIteratorOptions
	o.PrefetchValues = false
	o.Prefix = prefix
	o.Reverse = reverse
	return o
}

// visit calls fn for each item from the iterator's position while keys
// keep the prefix.
func visit(it *dgraph.Iterator, prefix []byte, fn func(key, value []byte) error) error {
	for ; it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		key := item.Key()
		err := value(item, func(v []byte) error { return fn(key, v) })
		if errors.Is(err, kv.ErrStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// prefixEnd returns the smallest key greater than every key with prefix,
// or nil if there is none (the prefix is empty or all 0xFF).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// slogLogger routes Badger's log to slog. Info and debug lines are dropped:
// Badger reports every flush and compaction at info level.
type slogLogger struct {
	l *slog.Logger
}

func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (s slogLogger) Warningf(format string, args ...any) {
	s.l.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (slogLogger) Infof(string, ...any)  {}
func (slogLogger) Debugf(string, ...any) {}

// value is item.Value with a check Badger leaves out: a value in the
// value log that does not read (a power cut kept the entry pointing to
// it and lost its bytes) comes back from Badger as empty bytes, with no
// error (Badger logs one). A value that goes to the value log is never
// empty (valueThreshold), and an entry's ValueSize is its length, so an
// empty value of a positive size is such a one.
func value(item *dgraph.Item, fn func([]byte) error) error {
	return item.Value(func(v []byte) error {
		if len(v) == 0 && item.ValueSize() > 0 {
			return fmt.Errorf("%w: key %q at version %d", kv.ErrDamaged, item.Key(), item.Version())
		}
		return fn(v)
	})
}
