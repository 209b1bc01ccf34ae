package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBackupInterval is how long the agent waits between the runs of
// a backup when Config.BackupInterval is not set (docs/agent.md
// "Backups").
const DefaultBackupInterval = time.Hour

// backupWorkers is how many files one run sends at a time: enough to
// hide a round trip per file, few enough to leave the machine its
// disk.
const backupWorkers = 4

// backupManager runs the machine's backups: one job per backup root,
// each backed up at start, every interval and on backup_now, one run at
// a time, and the restores from them.
type backupManager struct {
	a        *Agent
	interval time.Duration
	dir      string // the agent's state folder
	// wire counts every byte the agent's HTTP client wrote to its TCP
	// connections (TLS records included): what a run sent is measured
	// there, not estimated.
	wire atomic.Int64

	mu       sync.Mutex
	jobs     map[uint64]*backupJob
	restores map[*restoreRun]struct{}
}

// backupJob is one backup root and the local folder it backs up.
type backupJob struct {
	root  uint64
	path  string // the server's form
	local string // this machine's form
	kick  chan struct{}
	// runMu holds one run or restore at a time.
	runMu sync.Mutex
	ix    *backupIndex // opened at the first run, under runMu

	// Under backupManager.mu.
	loopCtx context.Context
	stop    context.CancelFunc // ends the loop and its run
	lastOK  bool
	excl    int64
	running *Transfer
}

// startBackups is the backups feature: the backup_now and restore
// commands, the runs kept for the set-up's backups, and their part of
// status.
func startBackups(a *Agent) {
	interval := a.cfg.BackupInterval
	if interval <= 0 {
		interval = DefaultBackupInterval
	}
	m := &backupManager{a: a, interval: interval, dir: filepath.Dir(a.cfg.StateFile),
		jobs: make(map[uint64]*backupJob), restores: make(map[*restoreRun]struct{})}
	a.backups = m
	m.countWire()
	a.OnSetup(m.setup)
	a.AddStatus(m.status)
	a.Handle("backup_now", m.backupNow)
	a.Handle("restore", m.restoreCmd)
}

// countWire wraps the client's dialer so every byte written to the
// server's connections is counted.
func (m *backupManager) countWire() {
	c := m.a.client
	var tr *http.Transport
	switch t := c.http.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return // a caller's own transport: not counted
	}
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, n: &m.wire}, nil
	}
	hc := *c.http
	hc.Transport = tr
	c.http = &hc
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// WireBytes returns the bytes the agent has written to the server's
// connections since it started.
func (a *Agent) WireBytes() int64 {
	if a.backups == nil {
		return 0
	}
	return a.backups.wire.Load()
}

// setup starts a loop for each backup of s not running under ctx, and
// stops the loops of backups s no longer has.
func (m *backupManager) setup(ctx context.Context, s Setup) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := map[uint64]bool{}
	for _, b := range s.Backups {
		keep[b.ID] = true
		j := m.jobs[b.ID]
		if j == nil || j.path != b.Path {
			j = &backupJob{root: b.ID, path: b.Path, local: filepath.Clean(localPath(b.Path)), kick: make(chan struct{}, 1)}
			m.jobs[b.ID] = j
		}
		if j.loopCtx != nil && j.loopCtx.Err() == nil {
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		j.loopCtx, j.stop = lctx, cancel
		go func() {
			defer cancel()
			m.loop(lctx, j)
			m.mu.Lock()
			current := m.jobs[j.root] == j
			m.mu.Unlock()
			if !current {
				j.runMu.Lock()
				if j.ix != nil {
					j.ix.close()
					j.ix = nil
				}
				j.runMu.Unlock()
			}
		}()
	}
	for id, j := range m.jobs {
		if !keep[id] {
			delete(m.jobs, id)
			if j.stop != nil {
				// The backup ended: its run stops where it is (the
				// index holds what the server acknowledged).
				j.stop()
			}
		}
	}
}

// loop runs j now, every interval and when kicked, until ctx ends or j
// is no longer one of the machine's backups.
func (m *backupManager) loop(ctx context.Context, j *backupJob) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-j.kick:
		}
		m.mu.Lock()
		current := m.jobs[j.root] == j
		m.mu.Unlock()
		if !current {
			return
		}
		if err := m.run(ctx, j); err != nil && ctx.Err() == nil {
			m.a.log.Warn("backup run failed", "root", j.root, "path", j.local, "err", err)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(m.interval)
	}
}

// backupNow answers backup_now {root_id}: a run of that backup starts
// now (or right after the one in progress).
func (m *backupManager) backupNow(_ context.Context, args json.RawMessage) (any, error) {
	var in struct {
		RootID uint64 `json:"root_id"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.RootID == 0 {
		return nil, &APIError{Code: "invalid_request", Description: "backup_now takes {root_id}"}
	}
	m.mu.Lock()
	j := m.jobs[in.RootID]
	m.mu.Unlock()
	if j == nil {
		return nil, &APIError{Code: "not_found", Description: "this machine has no backup into that root"}
	}
	select {
	case j.kick <- struct{}{}:
	default: // one is due already
	}
	return struct{}{}, nil
}

// status reports each backup as a subscription and the runs and restores
// in progress as transfers.
func (m *backupManager) status() ([]Subscription, []Transfer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]uint64, 0, len(m.jobs))
	for id := range m.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, k int) bool { return ids[i] < ids[k] })
	subs := []Subscription{}
	trs := []Transfer{}
	for _, id := range ids {
		j := m.jobs[id]
		subs = append(subs, Subscription{RsubID: j.root, SyncedFolder: j.path, Synced: j.lastOK && j.running == nil, ExclFiles: j.excl})
		if j.running != nil {
			trs = append(trs, *j.running)
		}
	}
	for r := range m.restores {
		trs = append(trs, r.transfer())
	}
	return subs, trs
}

// RunReport is what one backup run did, kept as last-run.json in the
// backup's state folder (docs/agent.md "Backups").
type RunReport struct {
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	OK        bool      `json:"ok"`
	Error     string    `json:"error,omitempty"`
	Scanned   int64     `json:"scanned"`    // files looked at
	Sent      int64     `json:"sent"`       // files whose contents were sent
	Deleted   int64     `json:"deleted"`    // items deleted on the server
	Excluded  int64     `json:"excl_files"` // files skipped
	ReadBytes int64     `json:"read_bytes"` // bytes of the files sent
	Literal   int64     `json:"literal_bytes"`
	WireBytes int64     `json:"wire_bytes"` // written to the server's connections while the run lasted
}

// jobDir is j's folder in the agent's state folder.
func (m *backupManager) jobDir(root uint64) string {
	return filepath.Join(m.dir, fmt.Sprintf("backup-%d", root))
}

// run backs j's folder up once.
func (m *backupManager) run(ctx context.Context, j *backupJob) error {
	j.runMu.Lock()
	defer j.runMu.Unlock()
	rep := RunReport{Started: time.Now()}
	wire0 := m.wire.Load()
	tr := &Transfer{Kind: "backup", RootID: j.root, Path: j.path}
	m.mu.Lock()
	j.running = tr
	m.mu.Unlock()
	r := &backupRun{m: m, j: j, rep: &rep, tr: tr}
	err := r.do(ctx)
	rep.Sent, rep.Literal = r.sent.Load(), r.literal.Load()
	rep.Finished, rep.OK = time.Now(), err == nil
	rep.WireBytes = m.wire.Load() - wire0
	if err != nil {
		rep.Error = err.Error()
	}
	m.mu.Lock()
	j.running = nil
	j.lastOK = err == nil
	j.excl = rep.Excluded
	m.mu.Unlock()
	if b, merr := json.MarshalIndent(rep, "", "  "); merr == nil {
		if werr := writePrivate(filepath.Join(m.jobDir(j.root), "last-run.json"), b); werr != nil {
			m.a.log.Warn("writing a backup's report", "err", werr)
		}
	}
	m.a.log.Info("backup run", "root", j.root, "ok", rep.OK, "sent", rep.Sent, "deleted", rep.Deleted, "wire_bytes", rep.WireBytes)
	return err
}

// backupRun is one run of a backup.
type backupRun struct {
	m   *backupManager
	j   *backupJob
	ix  *backupIndex
	rep *backupReport
	tr  *Transfer
	// adopt: the last run did not end, so a file the index does not
	// know may have been stored with its answer lost; the server's
	// listing is asked before sending it again.
	adopt   bool
	listed  map[string]map[string]remoteItem // folder path -> name -> item
	mu      sync.Mutex
	sent    atomic.Int64
	literal atomic.Int64
}

type backupReport = RunReport

// do walks the folder, sends what changed, and deletes on the server what
// is gone here.
func (r *backupRun) do(ctx context.Context) error {
	j := r.j
	if j.ix == nil {
		ix, err := openIndex(r.m.jobDir(j.root))
		if err != nil {
			return err
		}
		j.ix = ix
	}
	r.ix = j.ix
	// A folder that is missing or not a folder (a disk not mounted)
	// stops the run: taken as empty, it would delete the backup's files.
	fi, err := os.Stat(j.local)
	if err != nil {
		return fmt.Errorf("agent: the backed-up folder: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("agent: the backed-up folder %s is not a folder", j.local)
	}
	if r.adopt, err = r.ix.begin(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	files := make(chan fileJob)
	var wg sync.WaitGroup
	for range backupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fj := range files {
				if err := r.sendFile(ctx, fj); err != nil {
					cancel(err)
				}
			}
		}()
	}
	seen := make(map[string]struct{}, len(r.ix.entries))
	var skipped []string // folders that could not be read: kept as they are
	walkErr := filepath.WalkDir(j.local, func(abs string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		rel, rerr := filepath.Rel(j.local, abs)
		if rerr != nil {
			return rerr
		}
		if rel == "." {
			return err
		}
		p := "/" + filepath.ToSlash(rel)
		if err != nil {
			r.excluded(p, err)
			if d != nil && d.IsDir() {
				seen[p] = struct{}{}
				skipped = append(skipped, p)
				return fs.SkipDir
			}
			return nil
		}
		seen[p] = struct{}{}
		switch {
		case d.IsDir():
			return r.folder(ctx, p)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				r.excluded(p, err)
				return nil
			}
			r.rep.Scanned++
			old := r.ix.get(p)
			if old != nil && !old.Dir && old.Size == info.Size() && old.MtimeNs == info.ModTime().UnixNano() && old.Ino == inodeOf(info) {
				return nil // unchanged: not read
			}
			if old != nil && old.Dir {
				if err := r.deleteRemote(ctx, old); err != nil {
					return err
				}
			}
			r.mu.Lock()
			r.tr.Total += info.Size()
			r.mu.Unlock()
			select {
			case files <- fileJob{path: p, abs: abs, old: old}:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		default:
			// Links, devices, sockets: not backed up (docs/agent.md).
			r.mu.Lock()
			r.rep.Excluded++
			r.mu.Unlock()
		}
		return nil
	})
	close(files)
	wg.Wait()
	if walkErr != nil {
		return walkErr
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	// What is gone here goes to the server's trash; a folder goes with
	// what it holds.
	var gone []string
	for _, p := range r.ix.paths() {
		if _, ok := seen[p]; ok || under(p, skipped) || under(p, gone) {
			continue
		}
		e := r.ix.get(p)
		if e == nil {
			continue
		}
		if err := r.deleteRemote(ctx, e); err != nil {
			return err
		}
		if e.Dir {
			gone = append(gone, p)
		}
	}
	return r.ix.end()
}

// under reports whether p is below one of dirs.
func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (r *backupRun) excluded(p string, err error) {
	r.mu.Lock()
	r.rep.Excluded++
	r.mu.Unlock()
	r.m.a.log.Warn("not backed up", "root", r.j.root, "path", p, "err", err)
}

// folder makes sure the server has folder p.
func (r *backupRun) folder(ctx context.Context, p string) error {
	old := r.ix.get(p)
	if old != nil && old.Dir {
		return nil
	}
	if old != nil {
		if err := r.deleteRemote(ctx, old); err != nil {
			return err
		}
	}
	var out struct {
		ID uint64 `json:"id"`
	}
	err := r.write(ctx, writeReq{path: p, folder: true}, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusUnauthorized {
		r.excluded(p, err)
		return fs.SkipDir
	}
	if err != nil {
		return err
	}
	return r.ix.put(indexEntry{Path: p, Dir: true, ID: out.ID})
}

// deleteRemote moves e's item on the server to the trash (a folder with
// what it holds) and forgets it and what is below it.
func (r *backupRun) deleteRemote(ctx context.Context, e *indexEntry) error {
	u := fmt.Sprintf("/api/2/files/%d/%d/delete", r.j.root, e.ID)
	if e.Dir {
		u = fmt.Sprintf("/api/2/files/%d/folder/%d/delete", r.j.root, e.ID)
	}
	err := r.m.a.client.PostForm(ctx, u, nil, nil)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		err = nil // gone already
	}
	if err != nil {
		return err
	}
	r.rep.Deleted++
	return r.ix.remove(e.Path)
}

// parentOf returns the folder path of p ("/" for a top-level item).
func parentOf(p string) string { return path.Dir(p) }
