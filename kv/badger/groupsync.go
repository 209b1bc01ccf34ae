package badger

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"berth/kv"
)

// groupSync makes committed transactions durable, many at a time.
//
// Badger runs with SyncWrites off. After a transaction commits, its entries
// are in a memtable's write-ahead log (*.mem) and, for large values, the
// value log (*.vlog), in the page cache. wait fsyncs those files and the
// directory, so the commit survives power loss before Update returns. All
// commits that finished before one sync started share it: with N
// concurrent writers, one fsync round serves up to N commits, where
// Badger's own SyncWrites fsyncs once per transaction.
//
// Badger appends to the newest write-ahead log and the newest value log
// only; it creates a newer log after its last write to the older one. So
// a round syncs the newest log of each kind, and an older one only until a
// round has synced it after a newer one appeared: from then on it holds
// nothing unsynced. (Badger's DB.Sync syncs only the active memtable's
// log: a memtable rotated between a commit and its sync would leave that
// commit unsynced until its flush.) The directory is synced when the set
// of logs changed, so a log created by a rotation is there after a crash.
// A round of folder operations is one fdatasync, of the write-ahead log,
// where values under valueThreshold are; the value log is synced only by
// rounds that cover a commit that wrote to it (vlogDirty), small files'
// records among them.
type groupSync struct {
	dir string

	mu      sync.Mutex
	cond    sync.Cond
	started uint64 // syncs started
	done    uint64 // syncs finished; they run one at a time, in order
	running bool
	// failed is the first sync error, for good. After a failed fsync
	// Linux marks the pages it could not write clean again, so the next
	// fsync succeeds whatever was lost, and a write-ahead log with a hole
	// is replayed only up to it: commits acknowledged after the failure
	// would vanish at the next start. So nothing more is acknowledged.
	failed error

	// vlogDirty: a commit since the last round that synced the value logs
	// wrote to them. A round syncs them only then: most commits (folders,
	// moves, deletes, locks) keep every value in the write-ahead log, and
	// a round that syncs one file instead of two is one fdatasync fewer.
	vlogDirty bool
	// vlogWriters counts writers outside Update that may write to the
	// value log at any moment (value-log GC): while one runs, every
	// round syncs the value logs.
	vlogWriters int

	// syncFile makes one file's data durable (fdatasync; tests replace it).
	syncFile func(name string) error

	// Counters for SyncStats.
	commits, rounds, files atomic.Uint64

	// Touched only by the goroutine running a round (one at a time).
	settled map[string]bool // older logs synced since a newer one appeared
	names   string          // the logs seen by the last round, to spot changes
}

func newGroupSync(dir string) *groupSync {
	g := &groupSync{dir: dir, settled: map[string]bool{}, syncFile: fdatasync}
	g.cond.L = &g.mu
	return g
}

// noteVlog says that a commit is about to write to the value log (a value
// of valueThreshold bytes or more), so that the next round syncs it. It is
// called before the commit, not after: Badger writes the commit's
// write-ahead log entries, which point into the value log, right after
// its value-log entries, and a round that made those entries durable
// without the values they point to would leave, after a power cut, a
// commit that no one was told of with values that do not read. A round
// already running when the commit starts can still do that, as Badger's
// own writeback of its memory-mapped logs can at any time: that commit is
// not acknowledged, and only a power cut in that window exposes it.
func (g *groupSync) noteVlog() {
	g.mu.Lock()
	g.vlogDirty = true
	g.mu.Unlock()
}

// holdVlog makes every round sync the value logs until the returned
// function is called, for a writer that bypasses Update.
func (g *groupSync) holdVlog() (release func()) {
	g.mu.Lock()
	g.vlogWriters++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.vlogWriters--
		// The round that makes the writer's last writes durable
		// still has to sync the value logs.
		g.vlogDirty = true
		g.mu.Unlock()
	}
}

// wait returns once a sync that started after the call has finished, with
// that sync's error. The caller's commit must have returned before (and,
// if it wrote to the value log, called noteVlog before it began).
func (g *groupSync) wait() error {
	g.commits.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	// A sync already running may have started before the commit: only
	// the next one is sure to cover it.
	target := g.started + 1
	for g.done < target {
		if g.failed != nil {
			return g.failed
		}
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		n := g.started
		// Every commit this round covers set the flag before it
		// committed; one that sets it later is covered by a later
		// round.
		syncVlog := g.vlogDirty || g.vlogWriters > 0
		g.vlogDirty = false
		g.mu.Unlock()
		g.rounds.Add(1)
		err := g.syncFiles(syncVlog)
		g.mu.Lock()
		g.running = false
		g.done = n
		if err != nil && g.failed == nil {
			g.failed = fmt.Errorf("%w: %w", kv.ErrNotDurable, err)
		}
		g.cond.Broadcast()
	}
	// No round starts after a failed one: this is nil, the error of the
	// round that covered the commit, or that of a later one (a durable
	// commit then reported failed: the safe side).
	return g.failed
}

// broken returns the error that stopped writes, if any.
func (g *groupSync) broken() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

// syncFiles fsyncs the logs that may hold unsynced commits, then the
// directory if the set of logs changed. The value logs are skipped
// unless vlog is set: no commit the round covers wrote to them since
// the last round that synced them.
func (g *groupSync) syncFiles(vlog bool) error {
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	type log struct {
		name string
		seq  uint64
	}
	var logs []log
	newest := map[string]uint64{} // by suffix
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != ".mem" && ext != ".vlog" {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil {
			continue // not a log Badger named
		}
		logs = append(logs, log{name, seq})
		newest[ext] = max(newest[ext], seq)
	}
	var names strings.Builder
	present := make(map[string]bool, len(logs))
	var todo []log
	for _, l := range logs {
		names.WriteString(l.name + "/")
		present[l.name] = true
		if !g.settled[l.name] && (vlog || filepath.Ext(l.name) != ".vlog") {
			todo = append(todo, l)
		}
	}
	// The logs are synced in parallel: a round usually has two (the
	// write-ahead log and the value log), and the file system overlaps
	// their writeback and device flushes.
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, l := range todo {
		wg.Go(func() { errs[i] = g.syncFile(filepath.Join(g.dir, l.name)) })
		g.files.Add(1)
	}
	wg.Wait()
	for i, l := range todo {
		if err := errs[i]; err != nil && !os.IsNotExist(err) {
			// A log removed after the listing was flushed: fine.
			return fmt.Errorf("kv: sync %s: %w", l.name, err)
		}
		if l.seq < newest[filepath.Ext(l.name)] {
			g.settled[l.name] = true
		}
	}
	for name := range g.settled {
		if !present[name] {
			delete(g.settled, name)
		}
	}
	if names.String() == g.names {
		return nil
	}
	if err := fsync(g.dir); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	g.names = names.String()
	return nil
}

// fdatasync makes a log's contents durable. Badger sizes its logs when it
// creates them and writes them through a memory map, which stamps a new
// modification time on every commit: fsync would commit that to the file
// system's journal each round, fdatasync leaves it and still writes
// whatever reading the data back needs (measured with 8 writers:
// BenchmarkUpdateParallel).
func fdatasync(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = unix.Fdatasync(int(f.Fd()))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func fsync(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncStats counts the work of making commits durable since Open.
type SyncStats struct {
	Commits uint64 // write transactions that waited for a sync round
	Rounds  uint64 // sync rounds run; each covered every commit before it
	Files   uint64 // fdatasyncs of log files those rounds issued
}

// SyncStats returns the counts of commits, sync rounds and log fsyncs so
// far, for benchmarks that report fsyncs per operation. A store without
// syncs (NoSync, InMemory) reports zeros.
func (b *DB) SyncStats() SyncStats {
	if b.group == nil {
		return SyncStats{}
	}
	return SyncStats{Commits: b.group.commits.Load(), Rounds: b.group.rounds.Load(), Files: b.group.files.Load()}
}

// TxnStats counts the transactions and reads run since Open, for
// benchmarks that report what one request costs the store.
type TxnStats struct {
	Views   uint64 // read-only transactions
	Updates uint64 // tries of read-write transactions (a conflict retried is two)
	Gets    uint64 // point reads, in both kinds
	Scans   uint64 // prefix scans, in both kinds
}

// txnCounts is TxnStats as the store counts it.
type txnCounts struct{ views, updates, gets, scans atomic.Uint64 }

// TxnStats returns the counts of transactions and reads so far.
func (b *DB) TxnStats() TxnStats {
	return TxnStats{Views: b.ops.views.Load(), Updates: b.ops.updates.Load(), Gets: b.ops.gets.Load(), Scans: b.ops.scans.Load()}
}
