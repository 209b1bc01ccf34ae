package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// syncTiming is how often a mapping looks for changes (docs/agent.md,
// "Mapped folders").
type syncTiming struct {
	// Debounce is how long the folder must be quiet after a local event
	// before a cycle runs; MaxDelay bounds the wait under a stream of
	// events.
	Debounce, MaxDelay time.Duration
	// Poll is how often the root's listings are asked for with their
	// hashes (mostly 304s).
	Poll time.Duration
	// Rescan is how often the whole local folder is walked and compared by
	// (size, mtime) against the index, in case an event was lost.
	Rescan time.Duration
}

var defaultSyncTiming = syncTiming{Debounce: 300 * time.Millisecond, MaxDelay: 2 * time.Second, Poll: 5 * time.Second, Rescan: 5 * time.Minute}

// mappings runs one syncer per mapped folder of the machine's set-up.
type mappings struct {
	a       *Agent
	timing  syncTiming
	dir     string // where the indexes are kept
	host    string // this machine's name, in conflict copies' names
	mu      sync.Mutex
	running map[uint64]*syncer
	// paused are the mappings the last set-up listed as not in force,
	// each with the done channel of its stopped syncer (nil when none
	// ran): a resumed one starts once that one has finished with the
	// index, and a deleted one's index is removed.
	paused map[uint64]pausedMapping
	wg     sync.WaitGroup
}

// pausedMapping is a mapping not in force: its index path, and the done
// channel of its last syncer (nil when none ran in this process).
type pausedMapping struct {
	indexPath string
	done      chan struct{}
}

// mappingFeature registers mapped folders: a syncer per mapping, started
// and stopped with every set-up the server gives, reported in status.
func mappingFeature(a *Agent) { a.startMappings(defaultSyncTiming) }

func (a *Agent) startMappings(t syncTiming) *mappings {
	host, _ := os.Hostname()
	if host == "" {
		host = "this machine"
	}
	m := &mappings{a: a, timing: t, dir: filepath.Join(filepath.Dir(a.cfg.StateFile), "mappings"), host: host, running: map[uint64]*syncer{}, paused: map[uint64]pausedMapping{}}
	a.OnSetup(m.setup)
	a.AddStatus(m.status)
	return m
}

// setup starts a syncer for each new mapping and stops those of mappings
// gone, paused or changed (a paused one keeps its index). A syncer lives
// as long as the channel that read its
// set-up: after a reconnect the new set-up starts it again.
func (m *mappings) setup(ctx context.Context, s Setup) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[uint64]Mapping{}
	for _, mp := range s.Mappings {
		want[mp.ID] = mp
	}
	paused := map[uint64]bool{}
	for _, mp := range s.Paused {
		paused[mp.ID] = true
	}
	for id, sy := range m.running {
		mp, ok := want[id]
		if ok && sy.m.RootID == mp.RootID && sy.m.Path == mp.Path && sy.ctx.Err() == nil {
			delete(want, id) // running as asked
			continue
		}
		if !ok && !paused[id] {
			// The mapping was deleted: stop, keep both sides' files,
			// forget its index.
			sy.removed.Store(true)
		}
		sy.cancel()
		delete(m.running, id)
		if ok {
			m.start(ctx, mp, sy.done)
			delete(want, id)
		} else if paused[id] {
			m.paused[id] = pausedMapping{indexPath: sy.indexPath, done: sy.done}
		}
	}
	for id, pm := range m.paused {
		if mp, ok := want[id]; ok {
			// Resumed: after the paused syncer, which may still be
			// saving the index, as a changed mapping's new syncer
			// waits for the old one. Started at once, two syncers
			// worked the folder and its index together.
			m.start(ctx, mp, pm.done)
			delete(want, id)
			delete(m.paused, id)
			continue
		}
		if !paused[id] {
			// Deleted while paused: forget its index, as a running
			// mapping's is forgotten when it is deleted.
			delete(m.paused, id)
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				if pm.done != nil {
					<-pm.done
				}
				os.Remove(pm.indexPath)
			}()
		}
	}
	for _, mp := range s.Paused {
		if _, ok := m.paused[mp.ID]; !ok && m.running[mp.ID] == nil {
			m.paused[mp.ID] = pausedMapping{indexPath: m.indexPath(mp.ID)}
		}
	}
	for _, mp := range want {
		m.start(ctx, mp, nil)
	}
	m.forgetStale(s)
}

// forgetStale removes the indexes of mappings the set-up s no longer
// names and no syncer holds: those deleted on the server while the agent
// was not running, which nothing else would ever remove.
func (m *mappings) forgetStale(s Setup) {
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return
	}
	named := map[uint64]bool{}
	for _, mp := range append(slices.Clone(s.Mappings), s.Paused...) {
		named[mp.ID] = true
	}
	for _, e := range entries {
		idText, ok := strings.CutSuffix(e.Name(), ".json")
		id, err := strconv.ParseUint(idText, 10, 64)
		if !ok || err != nil || !e.Type().IsRegular() || named[id] || m.running[id] != nil {
			continue
		}
		if _, held := m.paused[id]; held {
			continue
		}
		os.Remove(filepath.Join(m.dir, e.Name()))
	}
}

// indexPath is where mapping id's index is kept.
func (m *mappings) indexPath(id uint64) string {
	return filepath.Join(m.dir, fmt.Sprintf("%d.json", id))
}

// start runs a syncer for mp once prev (the mapping's previous syncer,
// if any) has finished with the index. m.mu is held.
func (m *mappings) start(ctx context.Context, mp Mapping, prev chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	sy := &syncer{
		m: mp, c: m.a.client, log: m.a.log.With("mapping", mp.ID), timing: m.timing, host: m.host,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		indexPath: m.indexPath(mp.ID),
	}
	m.running[mp.ID] = sy
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(sy.done)
		if prev != nil {
			<-prev
		}
		if err := sy.run(ctx); err != nil && ctx.Err() == nil {
			sy.log.Warn("mapping stopped", "err", err)
			sy.setState(false, err)
		}
		if sy.removed.Load() {
			os.Remove(sy.indexPath)
		}
	}()
}

// stopAll stops every syncer and waits for them (tests; the process
// otherwise ends with its channel).
func (m *mappings) stopAll() {
	m.mu.Lock()
	for _, sy := range m.running {
		sy.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// status is the mappings' part of the status command: one subscription
// per mapping.
func (m *mappings) status() ([]Subscription, []Transfer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var subs []Subscription
	var trs []Transfer
	for _, sy := range m.running {
		sub, tr := sy.report()
		subs = append(subs, sub)
		if tr != nil {
			trs = append(trs, *tr)
		}
	}
	return subs, trs
}

// errRaced is a local file that changed between the plan and the act;
// the next cycle sees the change.
var errRaced = errors.New("agent: the local file changed while syncing it")

// errFolderMissing is a mapped folder that was synced and is no longer
// there, or no longer holds its marker file (an empty mount point where
// a drive was): nothing is synced, and nothing deleted, until it is
// back.
var errFolderMissing = errors.New("agent: the mapped folder is missing")

// watch starts an fsnotify watcher; a system without one (or out of
// watches) leaves the poll and the safety rescan to find local changes.
func (s *syncer) watch() *fsnotify.Watcher {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("no file system events; relying on the rescan", "err", err)
		return nil
	}
	return w
}
