// Package vfs is berth's virtual file system: roots, folders, files and their
// revisions, locks, soft delete, names, listing hashes and space accounting,
// over the kv metadata store and the chunk content store.
//
// vfs does not know users exist. Callers pass a root id and a node id (or a
// path), and the policy limits vfs must enforce atomically as WriteOptions.
// Who may do what is decided by the front ends before they call vfs.
package vfs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"berth/kv"
	"berth/vfs/chunk"

	"github.com/prometheus/client_golang/prometheus"
)

// Op names a kind of change reported to the Observer and counted in metrics.
type Op string

// The operations vfs reports.
const (
	OpCreateRoot Op = "create_root"
	OpDeleteRoot Op = "delete_root"
	OpMkdir      Op = "mkdir"
	OpWrite      Op = "write"
	OpRead       Op = "read"
	OpRename     Op = "rename"
	OpMove       Op = "move"
	OpCopy       Op = "copy"
	OpDelete     Op = "delete"
	OpPurge      Op = "purge"
	OpLock       Op = "lock"
	OpUnlock     Op = "unlock"
)

// Event describes one committed change.
type Event struct {
	Op       Op
	RootID   uint64
	NodeID   uint64
	ParentID uint64
	Name     string
	// OldName is, for an OpRename or OpMove, the item's name before
	// it: Name is the one it has now, and the log must say which item
	// was renamed, not only to what.
	OldName string
	// OldPath and Path are, for an OpMove journalled, the item's path
	// in its root before and after it: a move's names alone do not say
	// from which folder to which.
	OldPath, Path string
	Dir           bool
	Size          int64
	Time          time.Time
	// Actor is WriteOptions.Actor of the change, nil for changes made
	// without one (background jobs, and the operations that take no
	// WriteOptions: their Journal finds the actor in the context).
	Actor any
	// Created is set for an OpWrite that made a new file rather than a
	// new revision of one.
	Created bool
	// Forced is, for an OpUnlock of ForceUnlock, the lock it ended on
	// the item (one event per lock, so the log can name each holder);
	// nil for an unlock by a lock's holder.
	Forced *Lock
}

// Journal records every change inside the transaction that commits it,
// so an acknowledged change always has its record, after a crash too (the
// daemon wires it to the activity log). Record runs once per try of the
// transaction and must not change anything outside tx; an error aborts
// the change. For an operation split over several transactions (see
// intent.go) it runs in the one that makes the change visible.
type Journal interface {
	Record(ctx context.Context, tx kv.Txn, ev Event) error
}

// Observer is told about every committed change, after the commit, on the
// caller's goroutine; it must not block.
type Observer interface {
	Observe(Event)
}

// Options configure an FS.
type Options struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: no metrics
	Observer   Observer              // nil: no events
	Journal    Journal               // nil: changes are not recorded
	Now        func() time.Time      // nil: time.Now
	// Holder says whose staged uploads may keep their reservation (nil:
	// all of them, until they expire).
	Holder StagedHolder
	// Workers that hash, compress and store chunks of one upload; 0 means
	// GOMAXPROCS.
	Workers int
	// SegmentBudget is chunk.WriterOptions.SegmentBudget: the upload
	// buffers all uploads share beyond one segment each; 0: no bound.
	SegmentBudget int64
	// ReadAhead is how many chunks a download fetches ahead of the one it
	// sends (chunk.ReadPoolOptions.ReadAhead: 0 is the default, negative
	// none).
	ReadAhead int
	// ReadAheadBudget bounds the memory that the chunks all downloads
	// fetch ahead hold at once (chunk.ReadPoolOptions.AheadBudget: 0 is
	// the default, negative none): past it a download fetches fewer
	// ahead, never waits.
	ReadAheadBudget int64
	// Node names this process among those sharing the stores: what it
	// holds for operations in flight is recorded under the name, and
	// released by another node only once its liveness lease has expired
	// (node.go). A name kept across restarts (the daemon's node id) lets
	// a restarted process release its predecessor's leftovers at once;
	// two live processes must never share one. Empty: a name of its own.
	Node string
	// OrphanGrace is how long the collector leaves a chunk after it first
	// found it unreferenced, so that a download on another node of a
	// revision just trimmed or purged can finish (gc.go). 0 removes it at
	// once, as one node needs.
	OrphanGrace time.Duration
	// ZipBudget is the bytes that the layouts of all the zips being
	// served may hold together (see ZipBudget, its default when 0); each
	// requester's zips may hold at most half of what the others' leave.
	ZipBudget int64
	// ZipHeld, when set, is told what the layouts of the zips being
	// served hold in all, each time it changes, in order: the daemon
	// raises the soft memory limit it derived by as much, since those
	// bytes are live heap that the limit does not count. It must not
	// call back into the FS.
	ZipHeld func(bytes int64)

	// refBatch overrides defaultRefBatch; set by tests (export_test.go)
	// so that small files take the split paths.
	refBatch int
	// stagedBatch overrides defaultStagedBatch; set by tests so that a
	// few uploads take EachStaged's several transactions.
	stagedBatch int
	// batchHook, if set, runs between the transactions of a split
	// operation; tests use it to fail or kill one half way.
	batchHook func(Op)
	// purgeHook, if set, runs after each transaction of a purge (of an
	// item or a deleted root), whether or not it parked chunks (which
	// batchHook waits for); tests kill the process there.
	purgeHook func()
	// zip64At overrides the size and offset from which zips use Zip64
	// fields (0xFFFFFFFF); set by tests, which cannot write 4 GiB.
	zip64At int64
	// zipMax overrides ZipMaxEntries; set by tests.
	zipMax int
	// shortScan overrides ShortQueryScan; set by tests.
	shortScan int
	// nodeTTL overrides the node lease's life (node.go); set by tests.
	nodeTTL time.Duration
	// mendBatch overrides listMendBatch, and mendPause runs after each
	// transaction of the mending of a folder's sum; set by tests.
	mendBatch int
	mendPause func(folder uint64)
}

// FS is the file system over one metadata store and one chunk store. It is
// safe for concurrent use.
type FS struct {
	db     kv.Store
	chunks chunk.Store
	writer *chunk.Writer
	reads  *chunk.ReadPool
	log    *slog.Logger
	obs    Observer
	holder StagedHolder
	// roomFreed is when freeRoom last ran for a root (unix ns, by root
	// id): it runs at most once per freeRoomEvery for one root.
	roomFreed sync.Map
	jnl       Journal
	now       func() time.Time
	m         *metrics

	// heads are InlineMax+1 byte buffers for the start of each upload,
	// which decides between inline and chunked.
	heads sync.Pool

	// roots keeps what Root read until the store's next commit.
	roots *kv.Cache[uint64, cachedRoot]
	// paths keeps what OpenPath read until the store's next commit.
	paths *kv.Cache[pathKey, cachedPath]
	// items keeps what Stat and Open read by id until the next commit.
	items *kv.Cache[itemKey, cachedItem]
	// lists keeps what List read until the store's next commit.
	lists *kv.Cache[listKey, cachedList]

	// pins hold the chunks of uploads in flight, which may have no count
	// yet: the collector removes no pinned chunk (see pinSet).
	pins pinSet

	// gcMu orders the garbage collector against commits of new revisions.
	// The collector removes chunks holding it exclusively, a batch at a
	// time; a commit checks, holding it shared, that each chunk it
	// references without a count is still stored, which the pins make
	// true: the check is the last guard against a revision naming a
	// missing chunk, not a path an upload takes. Both hold it briefly:
	// the collector never waits for a long upload, nor an upload for a
	// whole collection. A failed upload notes its chunks for the
	// collector holding it shared too (see forget).
	gcMu sync.RWMutex

	// node is this process's name among the nodes sharing the stores,
	// lease its liveness lease, renewed until liveStop closes (node.go).
	node     string
	nodeTTL  time.Duration
	lease    *kv.Lease
	liveStop chan struct{}
	liveDone chan struct{}
	// grace is Options.OrphanGrace.
	grace time.Duration

	// refBatch bounds the chunk references one transaction changes; an
	// operation over more is split with intents (see intent.go).
	refBatch int
	// stagedBatch bounds the uploads EachStaged reads a transaction.
	stagedBatch int
	// txnBytes bounds the bytes one transaction of a split operation
	// sets (see defaultTxnBytes).
	txnBytes  int
	batchHook func(Op)
	purgeHook func()
	zip64At   int64 // see Options.zip64At; 0: 0xFFFFFFFF
	zipMax    int   // see Options.zipMax; 0: ZipMaxEntries
	shortScan int   // see Options.shortScan; 0: ShortQueryScan
	// zips is what the layouts of the zips being served hold of
	// Options.ZipBudget.
	zips zipShares

	// backfill is the name index's backfill (index.go), mend the mending
	// of older folders' listing sums (listmend.go): Open's background
	// jobs, which Close stops.
	backfill, mend bgJob
	mendBatch      int          // see Options.mendBatch; 0: listMendBatch
	mendPause      func(uint64) // see Options.mendPause

	// upMu guards uploads, the writes that may hold stored chunks not yet
	// referenced nor noted for the collector, and closed, set by Close.
	// Close records a clean shutdown only when no upload is in flight:
	// one that outlives the metadata store can do neither, and only the
	// sweep of the next start finds its chunks.
	upMu    sync.Mutex
	uploads int
	closed  bool
}

// Open opens the file system. It first finishes what interrupted
// operations left (see intent.go) and, when the previous process did not
// close the store cleanly, removes the chunks that interrupted uploads left
// without references, so a crash leaks nothing.
func Open(ctx context.Context, db kv.Store, chunks chunk.Store, opts Options) (*FS, error) {
	fs := &FS{
		db: listStore{db}, chunks: chunks, obs: opts.Observer, holder: opts.Holder, jnl: opts.Journal, now: opts.Now, log: opts.Logger,
		m: newMetrics(opts.Registerer), refBatch: opts.refBatch, batchHook: opts.batchHook, purgeHook: opts.purgeHook, zip64At: opts.zip64At, zipMax: opts.zipMax,
		shortScan: opts.shortScan, mendBatch: cmp.Or(opts.mendBatch, listMendBatch), mendPause: opts.mendPause, zips: zipShares{budget: cmp.Or(opts.ZipBudget, ZipBudget), onHeld: opts.ZipHeld},
		roots: kv.NewCache[uint64, cachedRoot](maxCachedRoots),
		paths: kv.NewCache[pathKey, cachedPath](maxCachedPaths),
		items: kv.NewCache[itemKey, cachedItem](maxCachedItems),
		lists: kv.NewCache[listKey, cachedList](maxCachedLists),
	}
	if fs.refBatch <= 0 {
		fs.refBatch = defaultRefBatch
	}
	if fs.stagedBatch = opts.stagedBatch; fs.stagedBatch <= 0 {
		fs.stagedBatch = defaultStagedBatch
	}
	// Half the store's bound: a batch's estimate leaves out the records
	// beside it (usage, journal, intents), and is an estimate.
	fs.txnBytes = defaultTxnBytes
	if b, ok := db.(kv.Bounded); ok {
		fs.txnBytes = int(b.TxnBytes() / 2)
	}
	if fs.log == nil {
		fs.log = slog.New(slog.DiscardHandler)
	}
	fs.node, fs.nodeTTL, fs.grace = opts.Node, opts.nodeTTL, opts.OrphanGrace
	if fs.node == "" {
		fs.node = newNodeName()
	}
	if fs.nodeTTL <= 0 {
		fs.nodeTTL = nodeTTL
	}
	fs.pins = pinSet{db: db, node: fs.node, log: fs.log}
	if fs.now == nil {
		fs.now = time.Now
	}
	fs.reads = chunk.NewReadPool(chunk.ReadPoolOptions{ReadAhead: opts.ReadAhead, AheadBudget: opts.ReadAheadBudget})
	fs.m.registerReads(opts.Registerer, fs.reads)
	fs.m.registerZips(opts.Registerer, &fs.zips)
	fs.m.registerStaged(opts.Registerer, fs)
	fs.heads.New = func() any {
		b := make([]byte, InlineMax+1)
		return &b
	}
	fs.writer = chunk.NewWriter(chunks, chunk.WriterOptions{
		Workers:       opts.Workers,
		SegmentBudget: opts.SegmentBudget,
		Pins:          &fs.pins,
		Verified:      fs.reads,
		Observer: func(stored bool, plain, encoded int) {
			if stored {
				fs.m.chunksStored.Inc()
				fs.m.bytesStored.Add(float64(encoded))
			} else {
				fs.m.chunksDeduped.Inc()
			}
		},
	})
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_upload_segment_bytes",
			Help: "Bytes of the buffers that uploads in flight hold for their streams' segments (see memory.upload_buffers).",
		}, func() float64 { return float64(fs.writer.Held()) }))
	}
	if err := fs.startLiveness(ctx); err != nil {
		return nil, fmt.Errorf("vfs: open: this node's liveness lease: %w", err)
	}
	if err := fs.recover(ctx); err != nil {
		fs.stopLiveness(true)
		return nil, err
	}
	return fs, nil
}

// recover is Open's recovery, once the node's lease is held.
func (fs *FS) recover(ctx context.Context) error {
	db, chunks := fs.db, fs.chunks
	var clean, used bool
	err := db.Update(ctx, func(tx kv.Txn) error {
		clean, used = false, false
		if _, err := tx.Get(keyClean); err == nil {
			clean = true
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		if err := tx.Scan([]byte(pRoot), nil, func(k, v []byte) error {
			used = true
			return kv.ErrStop
		}); err != nil {
			return err
		}
		return tx.Delete(keyClean)
	})
	if err != nil {
		return fmt.Errorf("vfs: open: %w", err)
	}
	// Always, not only after a crash: a release that failed in a clean
	// run leaves its intent too. Before the sweep, which then finds the
	// chunks only those intents held. Only what processes that are gone
	// left: on a shared store, other nodes' operations run on.
	if n, err := fs.releaseLeft(ctx, true); err != nil {
		return fmt.Errorf("vfs: releasing interrupted operations: %w", err)
	} else if n > 0 {
		fs.log.Warn("vfs: released the references of interrupted operations", "intents", n)
	}
	// A collector's claims (B/) outlive a collector killed between its
	// claim and its delete by their TTL; on a store no other process
	// uses, every claim is a dead process's, and one left standing would
	// keep the sweep below (and uploads) off its chunk for minutes.
	if exclusive(db) {
		if err := fs.dropClaims(ctx); err != nil {
			return fmt.Errorf("vfs: dropping a dead collector's claims: %w", err)
		}
	}
	// Only on a store no other process uses: on a shared one, other
	// nodes' uploads are staging and storing chunks now, and what a dead
	// node stored is noted for the collector when its pins are released.
	if used && !clean && exclusive(db) {
		// Staged chunk files of interrupted uploads, where the store
		// stages them.
		if c, ok := chunks.(interface{ CleanTemp(context.Context) error }); ok {
			if err := c.CleanTemp(ctx); err != nil {
				return fmt.Errorf("vfs: recovery: %w", err)
			}
		}
		rep, err := fs.Sweep(ctx)
		if err != nil {
			return fmt.Errorf("vfs: recovery sweep: %w", err)
		}
		fs.log.Warn("vfs: recovered from an unclean shutdown", "removed_chunks", rep.Deleted)
	}
	if err := fs.startBackfill(ctx); err != nil {
		return fmt.Errorf("vfs: name index: %w", err)
	}
	if err := fs.startListMend(ctx); err != nil {
		return fmt.Errorf("vfs: listing sums: %w", err)
	}
	return nil
}

// roomFor refuses, with ErrNoSpace, an operation that adds to the stores
// when the chunk store's file system is down to its reserve. The metadata
// store lives on the same file system and must never meet a full disk (see
// chunk.DiskOptions.Reserve), so what grows it stops where the chunks do.
// Operations that free space or change records in place (delete, purge,
// rename, move, lock) are not refused, so a full server can be cleaned up.
func (fs *FS) roomFor() error {
	if sc, ok := fs.chunks.(chunk.SpaceChecker); ok {
		return sc.CheckSpace(0)
	}
	return nil
}

// Close marks the store as cleanly closed. It does not close the kv or chunk
// store, which belong to the caller. Uploads still running fail at commit,
// and new ones with ErrBusy; with any running, the store is not marked
// clean, so the next Open removes what they stored, as after a crash.
func (fs *FS) Close() error {
	fs.backfill.stop()
	fs.mend.stop()
	fs.upMu.Lock()
	fs.closed = true
	running := fs.uploads
	fs.upMu.Unlock()
	if running > 0 {
		fs.log.Warn("vfs: closing with uploads running; the next start sweeps the chunks they leave", "uploads", running)
		// The lease stays until it expires: other nodes then release
		// what the uploads hold.
		fs.stopLiveness(false)
		return nil
	}
	fs.pins.flush()
	defer fs.stopLiveness(true)
	fs.gcMu.Lock()
	defer fs.gcMu.Unlock()
	return fs.db.Update(context.Background(), func(tx kv.Txn) error {
		return tx.Set(keyClean, []byte{1})
	})
}

// beginUpload counts an upload in flight until endUpload; after Close it
// is ErrBusy.
func (fs *FS) beginUpload() error {
	fs.upMu.Lock()
	defer fs.upMu.Unlock()
	if fs.closed {
		return fmt.Errorf("%w: the file system is closed", ErrBusy)
	}
	fs.uploads++
	return nil
}

func (fs *FS) endUpload() {
	fs.upMu.Lock()
	fs.uploads--
	fs.upMu.Unlock()
}

func (fs *FS) nowNs() int64 { return fs.now().UnixNano() }

// done records the outcome of one operation in metrics and, on success,
// tells the observer.
func (fs *FS) done(op Op, err error, ev Event) {
	fs.m.observe(op, err)
	var qe *quotaError
	if errors.As(err, &qe) && ev.RootID != 0 {
		// The next write finds the room that uploads of someone who
		// may no longer write here held.
		fs.freeRoom(context.Background(), ev.RootID, qe.lim)
	}
	if err == nil && fs.obs != nil {
		ev.Op = op
		if ev.Time.IsZero() {
			ev.Time = fs.now().UTC()
		}
		fs.obs.Observe(ev)
	}
}

// journal hands ev, op's change by actor, to the Journal in tx, the
// transaction that commits the change.
func (fs *FS) journal(ctx context.Context, tx kv.Txn, op Op, actor any, ev Event) error {
	if fs.jnl == nil {
		return nil
	}
	ev.Op, ev.Actor = op, actor
	if ev.Time.IsZero() {
		ev.Time = fs.now().UTC()
	}
	return fs.jnl.Record(ctx, tx, ev)
}

// update runs fn in a kv write transaction. A conflict that outlasted the
// retries, or a store closing under a request, is ErrBusy: the same request
// succeeds when tried again, which is what a client should be told.
func (fs *FS) update(ctx context.Context, fn func(kv.Txn) error) error {
	err := fs.db.Update(ctx, fn)
	if errors.Is(err, kv.ErrConflict) || errors.Is(err, kv.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return err
}

// bgJob is a job Open starts in the background, to run until it ends or
// Close stops it.
type bgJob struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when it has ended; nil: never started
}

// start runs fn in a goroutine with a context of its own, which ctx's
// end does not cancel (Open's may end long before the job), stop's does.
func (j *bgJob) start(ctx context.Context, fn func(context.Context)) {
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j.cancel, j.done = cancel, make(chan struct{})
	go func() {
		defer close(j.done)
		fn(bg)
	}()
}

// stop stops the job, if started, and waits for it to end.
func (j *bgJob) stop() {
	if j.cancel != nil {
		j.cancel()
		<-j.done
	}
}

// wait waits for the job, if started, to end.
func (j *bgJob) wait() {
	if j.done != nil {
		<-j.done
	}
}
