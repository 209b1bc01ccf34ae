package badger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"berth/kv"
)

// groupSync makes what Badger wrote to its own logs durable: the
// journal's checkpoints call it (see journal), and so does a value-log
// collection before Badger deletes the file it emptied.
//
// Badger runs with SyncWrites off. After a transaction commits, its entries
// are in a memtable's write-ahead log (*.mem) and, for large values, the
// value log (*.vlog), in the page cache. wait fsyncs those files and the
// directory, so everything committed before the call survives power loss
// when it returns. Calls that come together share a round.
//
// Badger appends to the newest write-ahead log and the newest value log
// only; it creates a newer log after its last write to the older one. So
// a round syncs the newest log of each kind, and an older one only until a
// round has synced it after a newer one appeared: from then on it holds
// nothing unsynced. (Badger's DB.Sync syncs only the active memtable's
// log: a memtable rotated between a commit and its sync would leave that
// commit unsynced until its flush.) The directory is synced when the set
// of logs changed, so a log created by a rotation is there after a crash.
type groupSync struct {
	dir string

	mu   sync.Mutex // guards commitRounds and syncFile
	cond sync.Cond
	commitRounds

	// syncFile, when set (by tests), makes one file's data durable in
	// place of an fdatasync through the file kept open in logs.
	syncFile func(name string) error

	// Counters for SyncStats.
	rounds, files atomic.Uint64

	// Touched only by the goroutine running a round (one at a time),
	// and by close once no round can start.
	settled map[string]bool // older logs synced since a newer one appeared
	names   string          // the logs seen by the last round, to spot changes
	// The directory and the logs stay open from round to round: opening
	// and listing them with os.ReadDir and os.Open each round cost as
	// much CPU as a sixth of the round's fdatasyncs (perf, 2,000 PUTs of
	// 4 KiB from 8 clients).
	dirf *os.File
	logs map[string]openLog // by name
	buf  []byte             // getdents' buffer
}

// openLog is a log kept open, with the inode it was opened at: a name
// that now lists another inode is opened again.
type openLog struct {
	f   *os.File
	ino uint64
}

func newGroupSync(dir string) *groupSync {
	g := &groupSync{dir: dir, settled: map[string]bool{}, logs: map[string]openLog{}}
	g.cond.L = &g.mu
	return g
}

// close closes the files rounds kept open. The store calls it after
// Badger closed, when no round runs or starts.
func (g *groupSync) close() error {
	var errs []error
	for name, l := range g.logs {
		errs = append(errs, l.f.Close())
		delete(g.logs, name)
	}
	if g.dirf != nil {
		errs = append(errs, g.dirf.Close())
		g.dirf = nil
	}
	return errors.Join(errs...)
}

// commitRounds is group commit's core, which the journal's rounds and
// groupSync's syncs of Badger's logs share: rounds run one at a time, a
// caller waits for the round that covers it (groupSync's: one that
// started after its call; the journal's: one that took its record), and
// the first failure stands for good. After a failed fsync Linux marks
// the pages it could not write clean again, so the next fsync succeeds
// whatever was lost, and a log with a hole is replayed only up to it:
// commits acknowledged after the failure would vanish at the next start.
// So nothing more is acknowledged.
type commitRounds struct {
	started, done uint64 // rounds started and finished, in order
	running       bool
	failed        error // the first round's error, wrapped in kv.ErrNotDurable
}

// await returns once covered reports true, running run as a round
// (cond.L released meanwhile) whenever none runs and covered is still
// false. cond.L must be held, and covered is called with it held; cond
// is broadcast as each round ends. It returns nil, the error of the
// round that covered the call, or that of a later one (a durable commit
// then reported failed: the safe side), since no round starts after a
// failed one.
func (r *commitRounds) await(cond *sync.Cond, covered func() bool, run func() error) error {
	for !covered() {
		if r.failed != nil {
			return r.failed
		}
		if r.running {
			cond.Wait()
			continue
		}
		r.running = true
		r.started++
		n := r.started
		cond.L.Unlock()
		err := run()
		cond.L.Lock()
		r.running = false
		r.done = n
		if err != nil {
			r.fail(err)
		}
		cond.Broadcast()
	}
	return r.failed
}

// next is await's covered for a caller that needs a round that starts
// after its call: one already running may have started before it.
func (r *commitRounds) next() func() bool {
	target := r.started + 1
	return func() bool { return r.done >= target }
}

// fail records err as the first failure, unless one came before. Called
// with the owner's lock held.
func (r *commitRounds) fail(err error) {
	if r.failed == nil {
		r.failed = fmt.Errorf("%w: %w", kv.ErrNotDurable, err)
	}
}

// wait returns once a sync that started after the call has finished, with
// that sync's error: what Badger wrote before the call is durable.
func (g *groupSync) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.await(&g.cond, g.next(), func() error {
		g.rounds.Add(1)
		return g.syncFiles()
	})
}

// broken returns the error that stopped writes, if any.
func (g *groupSync) broken() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

// syncFiles fsyncs the logs that may hold unsynced commits, then the
// directory if the set of logs changed.
func (g *groupSync) syncFiles() error {
	logs, err := g.list()
	if err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	newest := map[string]uint64{} // by suffix
	for _, l := range logs {
		newest[l.ext] = max(newest[l.ext], l.seq)
	}
	var names strings.Builder
	present := make(map[string]bool, len(logs))
	var todo []dirLog
	for _, l := range logs {
		names.WriteString(l.name + "/")
		present[l.name] = true
		if !g.settled[l.name] {
			todo = append(todo, l)
		}
	}
	// The logs are synced in parallel: a round usually has two (the
	// write-ahead log and the value log), and the file system overlaps
	// their writeback and device flushes. The files are opened here,
	// by the round's own goroutine, which alone touches g.logs.
	errs := make([]error, len(todo))
	files := make([]*os.File, len(todo))
	if g.syncFile == nil {
		for i, l := range todo {
			files[i], errs[i] = g.open(l)
		}
	}
	sync1 := func(i int) {
		if g.syncFile != nil {
			errs[i] = g.syncFile(filepath.Join(g.dir, todo[i].name))
			return
		}
		errs[i] = unix.Fdatasync(int(files[i].Fd()))
	}
	var wg sync.WaitGroup
	for i := range todo {
		if errs[i] != nil {
			continue
		}
		g.files.Add(1)
		if i == len(todo)-1 {
			// The last one on this goroutine, which waits anyway: a
			// round of one log (folder operations) starts none.
			sync1(i)
			break
		}
		wg.Go(func() { sync1(i) })
	}
	wg.Wait()
	for i, l := range todo {
		if err := errs[i]; err != nil && !errors.Is(err, fs.ErrNotExist) {
			// A log removed after the listing was flushed: fine.
			return fmt.Errorf("kv: sync %s: %w", l.name, err)
		}
		if l.seq < newest[l.ext] {
			g.settled[l.name] = true
			// No round syncs it again: a store holds a value log
			// per 16 MiB of values, and keeps none of them open.
			if o, ok := g.logs[l.name]; ok {
				o.f.Close()
				delete(g.logs, l.name)
			}
		}
	}
	for name := range g.settled {
		if !present[name] {
			delete(g.settled, name)
		}
	}
	for name, l := range g.logs {
		if !present[name] {
			// Badger removed it (flushed, or collected): nothing left
			// to sync.
			l.f.Close()
			delete(g.logs, name)
		}
	}
	if names.String() == g.names {
		return nil
	}
	if err := g.dirf.Sync(); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	g.names = names.String()
	return nil
}

// dirLog is a log file as the directory lists it.
type dirLog struct {
	name, ext string
	seq, ino  uint64
}

// list returns the logs in the directory (*.mem and *.vlog named by
// Badger's sequence numbers), read again from the start of the
// directory kept open.
func (g *groupSync) list() ([]dirLog, error) {
	if g.dirf == nil {
		f, err := os.Open(g.dir)
		if err != nil {
			return nil, err
		}
		g.dirf = f
		g.buf = make([]byte, 8<<10)
	}
	fd := int(g.dirf.Fd())
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return nil, err
	}
	var logs []dirLog
	for {
		n, err := unix.Getdents(fd, g.buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return logs, nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8,
		// then the name, ended by a NUL.
		for b := g.buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, fmt.Errorf("getdents: a record of %d bytes", reclen)
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if ext := logExt(name); ext != "" {
				if seq, err := strconv.ParseUint(string(name[:len(name)-len(ext)]), 10, 64); err == nil {
					logs = append(logs, dirLog{name: string(name), ext: ext, seq: seq, ino: binary.NativeEndian.Uint64(b[:8])})
				} // else not a log Badger named
			}
			b = b[reclen:]
		}
	}
}

// logExt is ".mem" or ".vlog" for a log's name, "" for any other.
func logExt(name []byte) string {
	for _, ext := range [...]string{".mem", ".vlog"} {
		if bytes.HasSuffix(name, []byte(ext)) {
			return ext
		}
	}
	return ""
}

// open returns log l open, opening it unless it is open at its inode.
func (g *groupSync) open(l dirLog) (*os.File, error) {
	if o, ok := g.logs[l.name]; ok {
		if o.ino == l.ino {
			return o.f, nil
		}
		o.f.Close()
		delete(g.logs, l.name)
	}
	f, err := os.Open(filepath.Join(g.dir, l.name))
	if err != nil {
		return nil, err
	}
	g.logs[l.name] = openLog{f: f, ino: l.ino}
	return f, nil
}

// fdatasync makes a log's contents durable (as rounds do through the
// files they keep open; tests call it by name). Badger sizes its logs when it
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

// SyncStats counts the work of making commits durable since Open.
type SyncStats struct {
	Commits uint64 // write transactions that waited for a journal round
	Rounds  uint64 // journal rounds run; each covered every commit before it
	// Files counts fdatasyncs: the journal's, one a round that wrote,
	// and those of Badger's logs that checkpoints and collections
	// issued.
	Files uint64
	// Checkpoints counts the syncs of Badger's logs that let the
	// journal reuse its slots (and value-log collections' syncs).
	Checkpoints uint64
	// RoundTime is the time journal rounds took, one after the other: a
	// commit that arrives during a round waits for the rest of it and
	// all of the next, so a round's length, more than the count of
	// rounds, is what bounds the rate of a few writers.
	RoundTime time.Duration
	// WaitTime is the time commits spent waiting for their round, summed
	// over commits.
	WaitTime time.Duration
}

// SyncStats returns the counts of commits, rounds and fdatasyncs so far,
// for benchmarks that report fsyncs per operation. A store without syncs
// (NoSync, InMemory) reports zeros.
func (b *DB) SyncStats() SyncStats {
	if b.jl == nil {
		return SyncStats{}
	}
	j, g := b.jl, b.group
	return SyncStats{
		Commits: j.commits.Load(), Rounds: j.rounds.Load(), Files: j.files.Load() + g.files.Load(),
		Checkpoints: g.rounds.Load(),
		RoundTime:   time.Duration(j.roundTime.Load()), WaitTime: time.Duration(j.waitTime.Load()),
	}
}

// TxnStats counts the transactions and reads run since Open, for
// benchmarks that report what one request costs the store.
type TxnStats struct {
	Views   uint64 // read-only transactions
	Updates uint64 // tries of read-write transactions (a conflict retried is two)
	Gets    uint64 // point reads, in both kinds
	Scans   uint64 // prefix scans, in both kinds
	// ScansSorting counts the scans of read-write transactions that held
	// writes already: Badger sorts all of them for each iterator it
	// opens, so a loop that scans between its writes costs the square
	// of its batch.
	ScansSorting uint64
}

// txnCounts is TxnStats as the store counts it.
type txnCounts struct{ views, updates, gets, scans, scansSorting atomic.Uint64 }

// TxnStats returns the counts of transactions and reads so far.
func (b *DB) TxnStats() TxnStats {
	return TxnStats{Views: b.ops.views.Load(), Updates: b.ops.updates.Load(), Gets: b.ops.gets.Load(), Scans: b.ops.scans.Load(), ScansSorting: b.ops.scansSorting.Load()}
}
