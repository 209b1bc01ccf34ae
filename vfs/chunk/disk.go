package chunk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// tempPrefix marks blobs being written. Walk skips them; CleanTemp removes
// the ones a crash left behind.
const tempPrefix = ".tmp-"

// Disk is a Store that keeps each blob in its own file under
// dir/ab/<hex id>, where ab is the first byte of the id. The 256 directories
// are made (and synced) by NewDisk, so storing a chunk never creates a
// directory, and a batch of a few hundred chunks syncs at most 256
// directories. A million chunks (about a terabyte) is 4,000 files per
// directory, which ext4's and xfs's hashed directories handle without
// trouble. One level measured about a third faster than two (ab/cd/<hex id>)
// in BenchmarkDisk/batch: half as many directories to sync per batch, and
// no mkdir per new chunk. Stores written with the older two-level layout are
// still read: Get, Has, Delete and Walk also look in dir/ab/cd/<hex id>. Files whose names start with
// ".tmp-" in the same directories are blobs being written (by Put or a
// staged Batch); Walk skips them and CleanTemp removes them.
//
// Disk is also a Batcher: a batch writes its chunks without syncing and
// syncs them all at Commit, which is several times faster than a Put per
// chunk (see BenchmarkStore).
//
// A chunk renamed into place shows in its directory before the directory's
// sync makes the rename durable. Until that sync, Has and Put of its id
// wait for it (see landing): an upload that took the chunk as stored would
// skip it and could commit a file that a crash then leaves without it.
type Disk struct {
	dir     string
	also    []string // DiskOptions.Also
	reserve int64    // DiskOptions.Reserve
	free    func() (int64, error)
	// read is the last free space CheckSpace read from the file system,
	// kept when free is statfs (readKept, see freeFresh).
	read     atomic.Pointer[freeRead]
	readKept bool
	fresh    time.Duration // freeFresh; tests change it

	// mu guards landing. Has and Put look for a chunk holding it shared,
	// and a rename is announced holding it exclusively, so no rename can
	// slip in between the check and the look.
	mu      sync.RWMutex
	landing map[ID]*landing

	// beforeSync, set by tests, runs after chunks are renamed into place
	// and before their directories are synced.
	beforeSync func()

	direct directWriter // writes blobs past the page cache (direct.go)
}

// landing is a chunk renamed, or about to be renamed, into place whose
// directory is not synced yet; n counts the Puts and batches landing it,
// and done closes when the last of them has synced.
type landing struct {
	n    int
	done chan struct{}
}

// land announces that ids are about to be renamed into place.
func (d *Disk) land(ids []ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		l := d.landing[id]
		if l == nil {
			l = &landing{done: make(chan struct{})}
			d.landing[id] = l
		}
		l.n++
	}
}

// landed says that the directories of ids are synced (or failed to sync:
// a chunk whose rename failed to become durable is left to the error
// that the store reported).
func (d *Disk) landed(ids []ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		l := d.landing[id]
		if l.n--; l.n == 0 {
			close(l.done)
			delete(d.landing, id)
		}
	}
}

// durable reports whether id is stored for good: it waits while a rename of
// id is not synced, then looks for the file.
func (d *Disk) durable(ctx context.Context, id ID) (bool, error) {
	for {
		d.mu.RLock()
		l := d.landing[id]
		if l == nil {
			ok, err := d.exists(id)
			d.mu.RUnlock()
			return ok, err
		}
		d.mu.RUnlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

var (
	_ Store        = (*Disk)(nil)
	_ SpaceChecker = (*Disk)(nil)
)

// DiskOptions tune a Disk store.
type DiskOptions struct {
	// Reserve is the free space, in bytes, that the store leaves on its
	// file system: a new chunk that would bring the free space below it is
	// refused with ErrNoSpace, and so is everything else that asks
	// CheckSpace first. The reserve is for what must not meet a full disk:
	// the metadata store beside the chunks writes through memory maps,
	// where running out of space is a SIGBUS that kills the process, not an
	// error; and deletes, logins and compaction still need some room.
	// 0 keeps no reserve.
	Reserve int64
	// Free reports the free bytes of the store's file system; nil means
	// statfs(2) of the store's directory. Tests set it to simulate a disk
	// that fills up.
	Free func() (int64, error)
	// Also names other directories whose file systems the reserve holds
	// as well: the metadata store's, which an operator may mount apart
	// from the chunks (a small fast disk). Its memory-mapped logs fill
	// that disk, not the chunks', and a reserve counted on the chunks'
	// alone let them fill it to a SIGBUS. The free space is the least
	// of the store's and theirs; Free, when set, replaces all of them.
	Also []string
}

// NewDisk opens (creating if needed) a disk store rooted at dir, with no
// reserve.
func NewDisk(dir string) (*Disk, error) { return OpenDisk(dir, DiskOptions{}) }

// OpenDisk opens (creating if needed) a disk store rooted at dir.
func OpenDisk(dir string, opts DiskOptions) (*Disk, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("chunk: open store: %w", err)
	}
	// The 256 first-level directories are made up front, so a Put pays at
	// most one directory creation (and its parent's fsync), not two.
	created := false
	for i := range 256 {
		err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("%02x", i)), 0o750)
		if err == nil {
			created = true
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("chunk: open store: %w", err)
		}
	}
	if created {
		if err := syncDir(dir); err != nil {
			return nil, fmt.Errorf("chunk: open store: %w", err)
		}
	}
	d := &Disk{dir: dir, also: opts.Also, reserve: opts.Reserve, free: opts.Free, landing: make(map[ID]*landing), fresh: freeFresh}
	if d.free == nil {
		d.free = func() (int64, error) { return d.statfs(true) }
		d.readKept = true
	}
	return d, nil
}

// A reading of the file system's free space far enough above the reserve
// answers CheckSpace for a while without a statfs(2), which walks the
// store's path each time: it was a twentieth of a small PUT's system
// CPU. Far enough is freeMargin more than the reserve and the new data,
// and a while is freeFresh, so that only a file system filling at 20
// GB/s or more (by berth or anything else) could pass the reserve
// unseen; nearer the reserve every check asks. A simulated disk
// (DiskOptions.Free) is asked every time: it may jump.
const (
	freeFresh  = 50 * time.Millisecond
	freeMargin = 1 << 30
)

// freeRead is free space read from the file system, and when (monotonic).
type freeRead struct {
	free int64
	at   time.Time
	// granted is what CheckSpace let through against this reading: the
	// margin is kept in bytes, whatever the rate of writes.
	granted atomic.Int64
}

// statfs returns the bytes an unprivileged writer may still use on the
// store's file system, or on the fullest of DiskOptions.Also's: root's
// reserved blocks do not count, since the daemon should not depend on
// running as root. With inodes, a file system down to its inode reserve
// (InodeReserve) is ErrNoSpace whatever its free bytes.
func (d *Disk) statfs(inodes bool) (int64, error) {
	keep := int64(0)
	if inodes {
		keep = InodeReserve(d.reserve)
	}
	free, err := FreeSpace(d.dir, keep)
	for _, dir := range d.also {
		if err != nil {
			break
		}
		var f int64
		f, err = FreeSpace(dir, keep)
		free = min(free, f)
	}
	return free, err
}

// InodeReserve is the inodes a reserve of reserve bytes also keeps free
// (one per MiB, at least 64): every chunk is a file, and on a file system
// with few inodes (ext4 made with -T largefile, a small tmpfs) files of a
// few dozen KiB ran out of inodes long before bytes. The reserve, counted
// in bytes alone, then let writes through until Badger could not create
// its next memtable's file; it went on without one, and the next read
// dereferenced it: the daemon died of a nil pointer.
func InodeReserve(reserve int64) int64 { return max(64, reserve>>20) }

// FreeSpace returns the bytes an unprivileged writer may still use on
// dir's file system (statfs(2) f_bavail). When keepInodes is positive
// and the file system counts inodes (btrfs does not) but has fewer than
// keepInodes free, it returns ErrNoSpace.
func FreeSpace(dir string, keepInodes int64) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("chunk: statfs %s: %w", dir, err)
	}
	if keepInodes > 0 && st.Files > 0 && int64(st.Ffree) < keepInodes {
		return 0, fmt.Errorf("%w: %s has %d inodes free, %d kept in reserve", ErrNoSpace, dir, st.Ffree, keepInodes)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil // Bsize is int32 on 386 and arm
}

// Free returns the free bytes of the store's file system, as the reserve
// counts them (its inodes aside).
func (d *Disk) Free() (int64, error) {
	if d.readKept {
		return d.statfs(false)
	}
	return d.free()
}

// Reserve returns the free space the store leaves (DiskOptions.Reserve).
func (d *Disk) Reserve() int64 { return d.reserve }

// CheckSpace implements SpaceChecker. It costs at most one statfs(2), a
// few microseconds, and most often none (freeFresh), so it runs before
// every new chunk.
func (d *Disk) CheckSpace(need int64) error {
	if d.reserve <= 0 {
		return nil
	}
	if d.readKept {
		if r := d.read.Load(); r != nil && time.Since(r.at) < d.fresh && r.free-r.granted.Add(need)-d.reserve >= freeMargin {
			return nil
		}
	}
	now := time.Now()
	free, err := d.free()
	if err != nil {
		return err
	}
	if d.readKept {
		r := &freeRead{free: free, at: now}
		r.granted.Store(need)
		d.read.Store(r)
	}
	if free-need < d.reserve {
		return fmt.Errorf("%w: %d bytes free, %d needed, %d kept in reserve", ErrNoSpace, free, need, d.reserve)
	}
	return nil
}

// noSpace marks the file system's own "no space" errors as ErrNoSpace, so
// that a disk that fills up without a reserve (or faster than it) is a
// clear refusal, not an internal error.
func noSpace(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// Dir returns the directory the store lives in.
func (d *Disk) Dir() string { return d.dir }

func (d *Disk) fanout(id ID) string {
	return filepath.Join(d.dir, id.String()[0:2])
}

// legacyPath is where the two-level layout kept id.
func (d *Disk) legacyPath(id ID) string {
	h := id.String()
	return filepath.Join(d.dir, h[0:2], h[2:4], h)
}

// Path returns the file that holds id's blob (which may not exist).
func (d *Disk) Path(id ID) string {
	return filepath.Join(d.fanout(id), id.String())
}

// Put writes blob to a temporary file in the target directory, syncs it,
// renames it into place and syncs the directory, so that after a crash the
// name either is absent or holds the complete blob.
func (d *Disk) Put(ctx context.Context, id ID, blob []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	final := d.Path(id)
	if ok, err := d.durable(ctx, id); err != nil || ok {
		return err
	}
	if err := d.CheckSpace(int64(len(blob))); err != nil {
		return err
	}
	dir := d.fanout(id)
	tmp, err := d.writeTemp(dir, blob, true)
	if err != nil {
		return err
	}
	ids := []ID{id}
	d.land(ids)
	defer d.landed(ids)
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("chunk: put %s: %w", id, noSpace(err))
	}
	if d.beforeSync != nil {
		d.beforeSync()
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("chunk: put %s: %w", id, noSpace(err))
	}
	return nil
}

// writeTemp writes blob to a new temporary file in dir (remade if it went
// missing), large blobs with O_DIRECT (see direct.go). With sync it fsyncs
// the file; without, it only starts writeback of what went through the
// page cache (a batch syncs at Commit).
func (d *Disk) writeTemp(dir string, blob []byte, sync bool) (string, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := filepath.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
	f, direct, err := d.direct.create(name, len(blob))
	if errors.Is(err, fs.ErrNotExist) {
		// NewDisk made dir: only remake it if it went missing, rather
		// than pay a failed mkdir per chunk.
		if _, err = d.mkdir(dir); err == nil {
			f, direct, err = d.direct.create(name, len(blob))
		}
	}
	if err != nil {
		return "", fmt.Errorf("chunk: create temp: %w", noSpace(err))
	}
	err = d.direct.write(f, blob, direct)
	if err == nil {
		switch {
		case sync:
			err = f.Sync()
		case !direct:
			// A direct write leaves at most its last block in the
			// page cache: not worth a call.
			err = startWriteback(f)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", fmt.Errorf("chunk: write temp: %w", noSpace(err))
	}
	return name, nil
}

// mkdir recreates dir if it went missing since NewDisk made it, syncing the
// root so that it stays; made reports that it did.
func (d *Disk) mkdir(dir string) (made bool, err error) {
	err = os.Mkdir(dir, 0o750)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err == nil {
		err = syncDir(d.dir)
	}
	if err != nil {
		return false, fmt.Errorf("chunk: mkdir: %w", noSpace(err))
	}
	return true, nil
}

// syncDir fsyncs a directory, making the renames and creations in it durable.
func syncDir(dir string) error { return syncFile(dir) }

// Get reads the whole blob; chunks are at most a few MiB.
func (d *Disk) Get(ctx context.Context, id ID) ([]byte, error) {
	return d.GetInto(ctx, id, nil)
}

// GetInto is Get reading into dst, grown when too small, so that readers
// can reuse one buffer for many chunks.
func (d *Disk) GetInto(ctx context.Context, id ID, dst []byte) ([]byte, error) {
	blob, _, err := d.getWarm(ctx, id, dst, -1)
	return blob, err
}

// getWarm is GetInto that also tells whether the blob was in the page
// cache whole when asked for (warm): a Reader fetches ahead only chunks
// that were not (see Reader.load). A blob whose state is not known (one
// shorter than directMin, or on a file system without direct reads) is
// not warm. A blob file longer than limit (when limit >= 0) is
// ErrCorrupt before a byte of it is read: a Reader reads chunks with the
// cap of the longest blob a Writer makes, so that a chunk file that grew
// on disk costs no buffer of its size before its check refuses it.
func (d *Disk) getWarm(ctx context.Context, id ID, dst []byte, limit int) (blob []byte, warm bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if !d.direct.off.Load() && !d.direct.noCachestat.Load() {
		blob, warm, ok, err := d.direct.readPath(d.Path(id), dst, limit)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, id, err)
		}
		if ok {
			return blob, warm, nil
		}
	}
	f, err := os.Open(d.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(d.legacyPath(id))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, false, fmt.Errorf("chunk: get %s: %w", id, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("chunk: get %s: %w", id, err)
	}
	n := int(st.Size())
	if limit >= 0 && n > limit {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, id, tooLong(n, limit))
	}
	if n >= directMin && !d.direct.off.Load() {
		var ok bool
		if dst, ok, warm = d.direct.readCold(f, n, dst); ok {
			return dst, warm, nil
		}
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	if _, err := io.ReadFull(f, dst); err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, id, err)
	}
	return dst, warm, nil
}

var (
	_ BufferGetter = (*Disk)(nil)
	_ warmGetter   = (*Disk)(nil)
)

// Has reports whether id's file exists, durably: while a rename of id
// into place waits for its directory's sync, Has waits too.
func (d *Disk) Has(ctx context.Context, id ID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return d.durable(ctx, id)
}

// exists looks for id's file in both layouts.
func (d *Disk) exists(id ID) (bool, error) {
	_, err := os.Stat(d.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		_, err = os.Stat(d.legacyPath(id))
	}
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("chunk: has %s: %w", id, err)
}

// Delete removes id's file. The directory is synced so a collected chunk does
// not reappear after a crash and get counted twice by a later walk.
func (d *Disk) Delete(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, name := range []string{d.Path(id), d.legacyPath(id)} {
		err := os.Remove(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = syncDir(filepath.Dir(name))
		}
		if err != nil {
			return fmt.Errorf("chunk: delete %s: %w", id, err)
		}
	}
	return nil
}

// Walk calls fn for every stored id. Temporary files and names that are not
// ids are skipped. It stops at the first error from fn or ctx.
func (d *Disk) Walk(ctx context.Context, fn func(ID) error) error {
	return d.walk(ctx, func(_ string, name string, _ fs.DirEntry) error {
		id, err := ParseID(name)
		if err != nil {
			return nil
		}
		return fn(id)
	})
}

// walk visits every file in the fan-out directories, and in the second
// level that the older layout used.
func (d *Disk) walk(ctx context.Context, fn func(dir, name string, e fs.DirEntry) error) error {
	top, err := readDirNames(d.dir)
	if err != nil {
		return err
	}
	for _, a := range top {
		if !isFanout(a) {
			continue
		}
		if err := d.walkDir(ctx, filepath.Join(d.dir, a), true, fn); err != nil {
			return err
		}
	}
	return nil
}

// walkDir calls fn for the files of dir and, if nested, walks its fan-out
// subdirectories (the legacy second level) the same way.
func (d *Disk) walkDir(ctx context.Context, dir string, nested bool, fn func(dir, name string, e fs.DirEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("chunk: walk: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if nested && isFanout(e.Name()) {
				if err := d.walkDir(ctx, filepath.Join(dir, e.Name()), false, fn); err != nil {
					return err
				}
			}
			continue
		}
		if err := fn(dir, e.Name(), e); err != nil {
			return err
		}
	}
	return nil
}

func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("chunk: walk: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func isFanout(name string) bool {
	if len(name) != 2 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil && strings.ToLower(name) == name
}

// Size sums the sizes of the stored blob files (not counting temp files or
// directory overhead).
func (d *Disk) Size(ctx context.Context) (int64, error) {
	var total int64
	err := d.walk(ctx, func(_ string, name string, e fs.DirEntry) error {
		if _, err := ParseID(name); err != nil {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			return fmt.Errorf("chunk: size: %w", err)
		}
		total += info.Size()
		return nil
	})
	return total, err
}

// CleanTemp removes temporary files left by Puts interrupted by a crash. Run
// it at startup, before any Put: a temp file of a Put in progress would be
// removed from under it.
func (d *Disk) CleanTemp(ctx context.Context) error {
	return d.walk(ctx, func(dir, name string, _ fs.DirEntry) error {
		if !strings.HasPrefix(name, tempPrefix) {
			return nil
		}
		err := os.Remove(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("chunk: clean temp: %w", err)
		}
		return nil
	})
}

// markerFile names the store's marker (Marked) in its directory, beside
// the fan-out directories that Walk reads.
const markerFile = "marker"

// Marker reads the store's marker; ErrNotFound when it has none.
func (d *Disk) Marker(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(d.dir, markerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the chunk store's marker", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("chunk: reading the store's marker: %w", err)
	}
	return b, nil
}

// SetMarker writes the store's marker through a synced temporary file
// renamed into place, then syncs the directory.
func (d *Disk) SetMarker(ctx context.Context, m []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.dir, tempPrefix+"marker-")
	if err != nil {
		return fmt.Errorf("chunk: writing the store's marker: %w", noSpace(err))
	}
	_, err = tmp.Write(m)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(d.dir, markerFile))
	}
	if err == nil {
		err = syncDir(d.dir)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("chunk: writing the store's marker: %w", noSpace(err))
	}
	return nil
}

var _ Marked = (*Disk)(nil)
