package kv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
// Every log file is synced, not only the active memtable's (Badger's
// DB.Sync): a memtable may be rotated between a commit and its sync, and
// the older log stays unsynced until its flush. A log deleted meanwhile was
// flushed to a table, which Badger syncs itself. The directory is synced so
// a log created by a rotation is there after a crash.
type groupSync struct {
	dir string

	mu      sync.Mutex
	cond    sync.Cond
	started uint64 // syncs started
	done    uint64 // syncs finished; they run one at a time, in order
	running bool
	err     error // of the last finished sync
}

func newGroupSync(dir string) *groupSync {
	g := &groupSync{dir: dir}
	g.cond.L = &g.mu
	return g
}

// wait returns once a sync that started after the call has finished, with
// that sync's error. The caller's commit must have returned before.
func (g *groupSync) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	// A sync already running may have started before the commit: only
	// the next one is sure to cover it.
	target := g.started + 1
	for g.done < target {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		n := g.started
		g.mu.Unlock()
		err := g.syncFiles()
		g.mu.Lock()
		g.running = false
		g.done, g.err = n, err
		g.cond.Broadcast()
	}
	return g.err
}

// syncFiles fsyncs every write-ahead and value log, then the directory.
func (g *groupSync) syncFiles() error {
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".mem") && !strings.HasSuffix(name, ".vlog") {
			continue
		}
		if err := fsync(filepath.Join(g.dir, name)); err != nil && !os.IsNotExist(err) {
			// A log removed after the listing was flushed: fine.
			return fmt.Errorf("kv: sync %s: %w", name, err)
		}
	}
	if err := fsync(g.dir); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	return nil
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
