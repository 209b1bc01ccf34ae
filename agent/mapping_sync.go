package agent

import (
	"berth/atomicfile"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// syncer keeps one mapped folder and its root in step (docs/agent.md,
// "Mapped folders"). Its fields past the first group belong to run's
// goroutine; mu guards what status reads.
type syncer struct {
	m         Mapping
	c         *Client
	log       *slog.Logger
	timing    syncTiming
	host      string
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	indexPath string
	removed   atomic.Bool

	ix      *syncIndex
	local   *localView
	remote  remoteTree
	rv      map[string]remoteItem
	dirty   map[string]bool // relative path -> deep (a folder created or moved in)
	refused map[string]localItem
	odd     map[string]bool // a folder on one side where the other has a file
	clean   bool            // the last reconcile found nothing to do
	// rescanNext makes the next cycle walk the whole folder (it was
	// missing: its watches are gone).
	rescanNext bool
	ixChanged  bool // the index changed since it was saved
	failures   int  // cycles failed in a row

	mu      sync.Mutex
	synced  bool
	lastErr error
	excl    int64
	tr      *Transfer
	trBytes atomic.Int64
}

// run syncs until ctx ends.
func (s *syncer) run(ctx context.Context) error {
	folder := localPath(s.m.Path)
	if !filepath.IsAbs(folder) {
		return fmt.Errorf("agent: mapped folder %q is not an absolute path", s.m.Path)
	}
	ix, err := loadIndex(s.indexPath, s.m.ID, s.m.RootID, folder)
	if err != nil {
		return err
	}
	// A new mapping creates its folder. A folder that was synced and is
	// gone (a drive not mounted, a folder removed) is not read as
	// everything deleted: the mapping waits for it.
	for {
		if _, err := os.Stat(filepath.Join(folder, markerName)); err == nil {
			break
		}
		if len(ix.Entries) == 0 {
			if err := os.MkdirAll(folder, 0o755); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(filepath.Join(folder, markerName), []byte(markerText), 0o644); err != nil {
				return err
			}
			continue
		}
		s.setState(false, fmt.Errorf("%w: %s", errFolderMissing, folder))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.timing.Poll):
		}
	}
	// A mapped folder that is a link is synced where it leads (its
	// contents are never followed through links).
	if real, err := filepath.EvalSymlinks(folder); err == nil {
		folder = real
	}
	s.ix = ix
	s.local = newLocalView(folder)
	s.remote = remoteTree{c: s.c, rootID: s.m.RootID}
	s.dirty = map[string]bool{}
	s.refused = map[string]localItem{}
	s.odd = map[string]bool{}
	w := s.watch()
	var events chan fsnotify.Event
	var werrs chan error
	if w != nil {
		defer w.Close()
		events, werrs = w.Events, w.Errors
	}
	if err := s.local.rescan(w); err != nil {
		return err
	}
	s.local.removeLeftovers()
	poll := time.NewTimer(s.timing.Poll)
	defer poll.Stop()
	rescan := time.NewTicker(s.timing.Rescan)
	defer rescan.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	var debounceC <-chan time.Time
	var firstEvent time.Time
	now := make(chan struct{}, 1)
	now <- struct{}{}
	full, localDirty := false, true
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if s.onEvent(ev, w) {
				localDirty = true
				s.mu.Lock()
				s.synced = false // pending until the next cycle
				s.mu.Unlock()
				if firstEvent.IsZero() {
					firstEvent = time.Now()
				}
				wait := min(s.timing.Debounce, max(0, s.timing.MaxDelay-time.Since(firstEvent)))
				debounce.Reset(wait)
				debounceC = debounce.C
			}
			continue
		case err, ok := <-werrs:
			if !ok {
				werrs = nil
				continue
			}
			// An overflow lost events: walk everything.
			s.log.Warn("file system events lost; rescanning", "err", err)
			full = true
		case <-debounceC:
			debounceC, firstEvent = nil, time.Time{}
		case <-poll.C:
		case <-rescan.C:
			full = true
		case <-now:
		}
		ops, err := s.cycle(ctx, w, full, localDirty)
		full, localDirty = false, false
		if err != nil {
			s.failures++
		} else {
			s.failures = 0
		}
		poll.Reset(s.pollDelay())
		if err != nil && ctx.Err() == nil {
			s.log.Warn("sync cycle", "err", err, "failures", s.failures)
		}
		if ops > 0 && err == nil {
			// Confirm at once that what was done left both sides equal.
			select {
			case now <- struct{}{}:
			default:
			}
		}
	}
}

// perFolder is the least time between two reads of one remote folder's
// listing: a big root is polled less often, so that a quiet agent asks
// at most 40 listings a second.
const perFolder = 25 * time.Millisecond

// pollDelay is the wait before the next look at the root: the timing's
// Poll, or perFolder for each folder when that is longer, longer after
// failures, at most 5 minutes.
func (s *syncer) pollDelay() time.Duration {
	d := max(s.timing.Poll, time.Duration(len(s.remote.cache))*perFolder)
	// Cycles that fail (the server away, a file it keeps refusing) back
	// off: twice the wait per failure, to at most 16 times it.
	d <<= min(s.failures, 4)
	return min(d, 5*time.Minute)
}

// onEvent notes an fsnotify event's path as dirty; false for events of
// no interest (the agent's temporary files).
func (s *syncer) onEvent(ev fsnotify.Event, w *fsnotify.Watcher) bool {
	rel, ok := s.local.rel(ev.Name)
	if !ok || rel == "" || skipName(path.Base(rel)) {
		return false
	}
	if ev.Has(fsnotify.Chmod) && !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) {
		// A permission change, or a touch: its mtime matters.
		if _, ok := s.dirty[rel]; !ok {
			s.dirty[rel] = false
		}
		return true
	}
	deep := ev.Has(fsnotify.Create)
	if deep {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() && w != nil {
			w.Add(ev.Name)
		} else {
			deep = false
		}
	}
	s.dirty[rel] = s.dirty[rel] || deep
	return true
}

// cycle brings the local view up to date (what events marked, or
// everything), reads the root's listings, and reconciles when either side
// may have changed. It returns how many operations it made.
func (s *syncer) cycle(ctx context.Context, w *fsnotify.Watcher, full, localDirty bool) (int, error) {
	full = full || s.rescanNext
	s.rescanNext = false
	if full {
		if err := s.local.rescan(w); err != nil {
			s.setState(false, err)
			return 0, err
		}
		clear(s.dirty)
	} else {
		for rel, deep := range s.dirty {
			s.local.refresh(rel, deep, w)
		}
		clear(s.dirty)
	}
	rv, remoteChanged, err := s.remote.scan(ctx)
	if err != nil {
		s.setState(false, err)
		return 0, err
	}
	s.rv = rv
	if _, err := os.Stat(filepath.Join(s.local.root, markerName)); err != nil {
		err = fmt.Errorf("%w: %s", errFolderMissing, s.local.root)
		s.setState(false, err)
		s.clean, s.rescanNext = false, true
		return 0, err
	}
	if s.clean && !full && !localDirty && !remoteChanged {
		s.setState(true, nil)
		return 0, nil
	}
	ops, err := s.reconcile(ctx)
	if s.ixChanged {
		if serr := s.ix.save(s.indexPath); serr != nil && err == nil {
			err = serr
		} else if serr == nil {
			s.ixChanged = false
		}
	}
	s.clean = err == nil && ops == 0
	s.setState(s.clean && len(s.dirty) == 0, err)
	return ops, err
}

// setState records the outcome of a cycle for status.
func (s *syncer) setState(synced bool, err error) {
	excl := int64(len(s.refused) + len(s.odd))
	if s.local != nil {
		excl += int64(len(s.local.excluded))
	}
	s.mu.Lock()
	s.synced, s.lastErr, s.excl = synced, err, excl
	s.mu.Unlock()
}

// report is the mapping's subscription line and its transfer, if any.
func (s *syncer) report() (Subscription, *Transfer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := Subscription{RsubID: s.m.ID, SyncedFolder: s.m.Path, Synced: s.synced, ExclFiles: s.excl}
	if s.tr == nil {
		return sub, nil
	}
	tr := *s.tr
	tr.Bytes = s.trBytes.Load()
	return sub, &tr
}

// transfer shows kind of rel in status until the returned func is called.
func (s *syncer) transfer(kind, rel string, total int64) (progress func(int64), end func()) {
	s.mu.Lock()
	s.tr = &Transfer{Kind: kind, RootID: s.m.RootID, Path: "/" + rel, Total: total}
	s.trBytes.Store(0)
	s.mu.Unlock()
	return func(n int64) { s.trBytes.Add(n) }, func() {
		s.mu.Lock()
		s.tr = nil
		s.mu.Unlock()
	}
}

// refusedCodes are the server's answers that name a file it will never
// take as it is: such a file is excluded until it changes.
var refusedCodes = map[string]bool{"invalid_name": true, "name_too_long": true, "invalid_extension": true, "policy_error": true}

func refusal(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && refusedCodes[ae.Code]
}

// reconcile compares every path of the local view, the root and the index
// and makes the two sides equal, in name order so a folder comes before
// what it holds; deleted folders are removed last, deepest first, and
// only when nothing is left in them.
func (s *syncer) reconcile(ctx context.Context) (ops int, firstErr error) {
	keys := map[string]struct{}{}
	for k := range s.local.items {
		keys[k] = struct{}{}
	}
	for k := range s.rv {
		keys[k] = struct{}{}
	}
	for k := range s.ix.Entries {
		keys[k] = struct{}{}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	clear(s.odd)
	ops, firstErr = s.renames(ctx)
	sinceSave := ops
	var folders []string // folders deleted on one side
	for _, p := range sorted {
		if ctx.Err() != nil {
			return ops, ctx.Err()
		}
		if s.excludedBelow(p) {
			continue
		}
		n, deferred, err := s.syncPath(ctx, p)
		ops += n
		if deferred {
			folders = append(folders, p)
		}
		if err != nil {
			s.log.Warn("syncing", "path", p, "err", err)
			if firstErr == nil {
				firstErr = err
			}
		}
		if sinceSave += n; sinceSave >= 200 {
			// Bound what a crash makes the next start compare again.
			if s.ix.save(s.indexPath) == nil {
				s.ixChanged, sinceSave = false, 0
			}
		}
	}
	localKids, remoteKids := map[string]int{}, map[string]int{}
	for k := range s.local.items {
		localKids[relParent(k)]++
	}
	for k := range s.local.excluded {
		localKids[relParent(k)]++
	}
	for k := range s.rv {
		remoteKids[relParent(k)]++
	}
	for i := len(folders) - 1; i >= 0; i-- {
		p := folders[i]
		n, err := s.finishFolder(ctx, p, localKids, remoteKids)
		ops += n
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return ops, firstErr
}

// excludedBelow is whether p lies below (or is) a local path that is
// never synced: nothing is written through a link.
func (s *syncer) excludedBelow(p string) bool {
	if p == markerName {
		return true
	}
	for q := p; q != ""; q = relParent(q) {
		if s.local.excluded[q] {
			return true
		}
	}
	return false
}

// relParent returns the folder of the slash-separated relative path p
// ("" for a top-level item).
func relParent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// syncPath makes one path equal on both sides. deferred reports a folder
// deleted on one side, finished by finishFolder once its contents are
// done.
func (s *syncer) syncPath(ctx context.Context, p string) (ops int, deferred bool, err error) {
	L, lok := s.local.items[p]
	R, rok := s.rv[p]
	I := s.ix.Entries[p]
	ldir, rdir := lok && L.Dir, rok && R.dir()
	lfile, rfile := lok && !L.Dir, rok && !R.dir()
	switch {
	case ldir && rfile:
		// A folder here, a file there: neither is touched; the path is
		// reported among the excluded.
		s.odd[p] = true
		return 0, false, nil
	case lfile && rdir:
		// A file here, a folder there: the file steps aside under a
		// conflict name (uploaded next cycle), the folder comes down.
		if _, err := s.setAside(p); err != nil {
			return 0, false, err
		}
		if err := os.MkdirAll(s.local.abs(p), 0o755); err != nil {
			return 1, false, err
		}
		s.local.items[p] = localItem{Dir: true}
		s.index(p, &syncEntry{Dir: true, RID: R.ID})
		return 2, false, nil
	case ldir && rdir:
		if I == nil || !I.Dir || I.RID != R.ID {
			s.index(p, &syncEntry{Dir: true, RID: R.ID})
		}
		return 0, false, nil
	case ldir && !rok:
		if I != nil && I.Dir {
			return 0, true, nil // deleted there
		}
		_, err := s.ensureRemoteDir(ctx, p)
		return 1, false, err
	case rdir && !lok:
		if I != nil && I.Dir {
			// Deleted here: at once when nothing in it changed there,
			// else item by item and the folder last.
			if done, err := s.deleteRemoteTree(ctx, p); done || err != nil {
				return 1, false, err
			}
			return 0, true, nil
		}
		if err := os.MkdirAll(s.local.abs(p), 0o755); err != nil {
			return 0, false, err
		}
		s.local.items[p] = localItem{Dir: true}
		s.index(p, &syncEntry{Dir: true, RID: R.ID})
		return 1, false, nil
	case !lok && !rok:
		s.unindex(p)
		return 0, false, nil
	}
	// Files (one side may be missing).
	if I != nil && I.Dir {
		I = nil
	}
	if lfile {
		if old, ok := s.refused[p]; ok && old == L {
			return 0, false, nil
		}
		delete(s.refused, p)
	}
	localChanged := lok
	remoteChanged := rok
	if I != nil {
		localChanged = !lok || L.Size != I.Size || L.Mtime != I.Mtime
		remoteChanged = !rok || R.ID != I.RID || R.Rev != I.RRev
	}
	switch {
	case !localChanged && !remoteChanged:
		return 0, false, nil
	case localChanged && !remoteChanged:
		if lok {
			return 1, false, s.upload(ctx, p, L)
		}
		// Deleted here, unchanged there: into the root's trash.
		s.unindex(p)
		if !rok {
			return 0, false, nil
		}
		return 1, false, s.deleteRemote(ctx, p, R)
	case !localChanged && remoteChanged:
		if rok {
			var expect *localItem
			if lok {
				expect = &L
			}
			return 1, false, s.download(ctx, p, R, expect)
		}
		// Deleted there (it is in the root's trash), unchanged here.
		return 1, false, s.deleteLocal(p, I)
	}
	// Changed on both sides.
	switch {
	case !lok && !rok:
		s.unindex(p)
		return 0, false, nil
	case !lok:
		// Deleted here but changed there: the change wins.
		return 1, false, s.download(ctx, p, R, nil)
	case !rok:
		// Changed here but deleted there: the change wins.
		return 1, false, s.upload(ctx, p, L)
	}
	if L.Size == R.Size {
		same, err := s.sameContent(ctx, p, R)
		if err != nil {
			return 0, false, err
		}
		if same {
			s.record(p, L, R)
			return 0, false, nil
		}
	}
	// A conflict: the remote version keeps the name, the local one is
	// set aside under a conflict name and uploaded, so neither is lost.
	cp, err := s.setAside(p)
	if err != nil {
		return 0, false, err
	}
	ops = 1
	if err := s.download(ctx, p, R, nil); err != nil {
		return ops, false, err
	}
	ops++
	if cl, ok := s.local.stat(cp); ok {
		s.local.items[cp] = cl
		if err := s.upload(ctx, cp, cl); err != nil {
			return ops, false, err
		}
		ops++
	}
	return ops, false, nil
}

// conflictName is the name a conflicting local version is set aside
// under: "name (conflict from <host> YYYY-MM-DD HHMMSS).ext", the time in
// UTC, with " 2", " 3"... before the closing parenthesis when taken.
func conflictName(name, host string, at time.Time, taken func(string) bool) string {
	ext := path.Ext(name)
	if ext == name || ext == "." {
		ext = ""
	}
	stem := strings.TrimSuffix(name, ext)
	tag := fmt.Sprintf("conflict from %s %s", host, at.UTC().Format("2006-01-02 150405"))
	for i := 1; ; i++ {
		n := fmt.Sprintf("%s (%s)%s", stem, tag, ext)
		if i > 1 {
			n = fmt.Sprintf("%s (%s %d)%s", stem, tag, i, ext)
		}
		if !taken(n) {
			return n
		}
	}
}

// setAside renames the local file p to its conflict name and returns it.
func (s *syncer) setAside(p string) (string, error) {
	dir := relParent(p)
	cn := conflictName(path.Base(p), s.host, time.Now(), func(n string) bool {
		q := path.Join(dir, n)
		if _, ok := s.rv[q]; ok {
			return true
		}
		_, err := os.Lstat(s.local.abs(q))
		return err == nil
	})
	cp := path.Join(dir, cn)
	if err := os.Rename(s.local.abs(p), s.local.abs(cp)); err != nil {
		return "", err
	}
	s.log.Info("conflict: local version set aside", "path", p, "as", cp)
	delete(s.local.items, p)
	if cl, ok := s.local.stat(cp); ok {
		s.local.items[cp] = cl
	}
	return cp, nil
}

// record notes p as in step: local state L, remote item R.
func (s *syncer) record(p string, L localItem, R remoteItem) {
	s.index(p, &syncEntry{Size: L.Size, Mtime: L.Mtime, RID: R.ID, RRev: R.Rev, RSize: R.Size, RMtime: R.Modified})
}

// ensureRemoteDir returns the id of the root's folder p, creating it and
// the folders above it when missing (0 is the root's top).
func (s *syncer) ensureRemoteDir(ctx context.Context, p string) (uint64, error) {
	if p == "" {
		return 0, nil
	}
	if it, ok := s.rv[p]; ok && it.dir() {
		return it.ID, nil
	}
	parent, err := s.ensureRemoteDir(ctx, relParent(p))
	if err != nil {
		return 0, err
	}
	it, err := s.remote.createFolder(ctx, parent, path.Base(p))
	if err != nil {
		return 0, fmt.Errorf("creating folder %s: %w", p, err)
	}
	s.rv[p] = it
	s.index(p, &syncEntry{Dir: true, RID: it.ID})
	return it.ID, nil
}

// remoteParent is the id of p's folder in the root (0: the top).
func (s *syncer) remoteParent(p string) uint64 {
	if it, ok := s.rv[relParent(p)]; ok {
		return it.ID
	}
	return 0
}

// upload sends the local file p (state L as planned) to the root.
func (s *syncer) upload(ctx context.Context, p string, L localItem) error {
	parent, err := s.ensureRemoteDir(ctx, relParent(p))
	if err != nil {
		return err
	}
	progress, end := s.transfer("upload", p, L.Size)
	defer end()
	it, err := s.remote.upload(ctx, parent, path.Base(p), s.local.abs(p), progress)
	if refusal(err) {
		s.log.Warn("the server refuses this file; it is excluded until it changes", "path", p, "err", err)
		s.refused[p] = L
		return nil
	}
	if err != nil {
		return fmt.Errorf("uploading %s: %w", p, err)
	}
	s.rv[p] = it
	// The index keeps the state planned from: a change made while the
	// file was sent differs from it and is sent next cycle.
	s.record(p, L, it)
	return nil
}

// download brings the root's file R to p. expect is the local state the
// plan saw (nil: none); a different one found at the last moment leaves
// the local file alone for the next cycle.
func (s *syncer) download(ctx context.Context, p string, R remoteItem, expect *localItem) error {
	dir := s.local.abs(relParent(p))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for q := relParent(p); q != ""; q = relParent(q) {
		if _, ok := s.local.items[q]; ok {
			break
		}
		s.local.items[q] = localItem{Dir: true}
	}
	progress, end := s.transfer("download", p, R.Size)
	tmp, err := s.remote.download(ctx, R, dir, progress)
	end()
	if err != nil {
		return fmt.Errorf("downloading %s: %w", p, err)
	}
	now, ok := s.local.stat(p)
	if (expect == nil && ok) || (expect != nil && (!ok || now != *expect)) {
		os.Remove(tmp)
		s.dirty[p] = false
		return fmt.Errorf("%s: %w", p, errRaced)
	}
	// The temporary file has the mode of one made here (createTemp:
	// 0666 less the umask, as a restore writes); one it replaces keeps
	// its mode, which the server does not hold.
	if fi, err := os.Lstat(s.local.abs(p)); err == nil && fi.Mode().IsRegular() {
		if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, s.local.abs(p)); err != nil {
		os.Remove(tmp)
		return err
	}
	L, ok := s.local.stat(p)
	if !ok {
		return fmt.Errorf("%s: %w", p, errRaced)
	}
	s.local.items[p] = L
	s.record(p, L, R)
	return nil
}

// deleteRemote moves the root's item R at p to the root's trash.
func (s *syncer) deleteRemote(ctx context.Context, p string, R remoteItem) error {
	if err := s.remote.delete(ctx, R, s.remoteParent(p)); err != nil {
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != "not_found" {
			return fmt.Errorf("deleting %s in the root: %w", p, err)
		}
	}
	delete(s.rv, p)
	s.unindex(p)
	return nil
}

// deleteLocal removes the local file p after the root's copy was deleted,
// unless it changed since it was last in step (then it is uploaded again
// next cycle).
func (s *syncer) deleteLocal(p string, I *syncEntry) error {
	now, ok := s.local.stat(p)
	if ok && (now.Dir || now.Size != I.Size || now.Mtime != I.Mtime) {
		s.dirty[p] = false
		return fmt.Errorf("%s: %w", p, errRaced)
	}
	if err := os.Remove(s.local.abs(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	delete(s.local.items, p)
	s.unindex(p)
	return nil
}

// finishFolder ends a folder deleted on one side once its contents are
// done: it goes from the other side too when nothing is left in it there,
// and otherwise (something in it changed) it stays on both.
func (s *syncer) finishFolder(ctx context.Context, p string, localKids, remoteKids map[string]int) (int, error) {
	R, rok := s.rv[p]
	_, lok := s.local.items[p]
	switch {
	case rok && !lok: // deleted here
		if remoteKids[p] > 0 {
			if err := os.MkdirAll(s.local.abs(p), 0o755); err != nil {
				return 0, err
			}
			s.local.items[p] = localItem{Dir: true}
			return 1, nil
		}
		if err := s.deleteRemote(ctx, p, R); err != nil {
			return 0, err
		}
		remoteKids[relParent(p)]--
		return 1, nil
	case lok && !rok: // deleted there
		if localKids[p] > 0 {
			_, err := s.ensureRemoteDir(ctx, p)
			return 1, err
		}
		if err := os.Remove(s.local.abs(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Something appeared meanwhile: the next cycle sees it.
			return 0, nil
		}
		delete(s.local.items, p)
		s.unindex(p)
		localKids[relParent(p)]--
		return 1, nil
	}
	return 0, nil
}

// sameContent compares the local file p with the root's R byte for byte,
// streaming both.
func (s *syncer) sameContent(ctx context.Context, p string, R remoteItem) (bool, error) {
	f, err := openNoFollow(s.local.abs(p))
	if err != nil {
		return false, err
	}
	defer f.Close()
	rc, err := s.remote.open(ctx, R)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		n, errA := io.ReadFull(f, a)
		m, errB := io.ReadFull(rc, b)
		if n != m || !bytes.Equal(a[:n], b[:m]) {
			return false, nil
		}
		endA := errA == io.EOF || errA == io.ErrUnexpectedEOF
		endB := errB == io.EOF || errB == io.ErrUnexpectedEOF
		if endA || endB {
			return endA && endB, nil
		}
		if errA != nil {
			return false, errA
		}
		if errB != nil {
			return false, errB
		}
	}
}
