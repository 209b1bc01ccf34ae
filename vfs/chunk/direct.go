package chunk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Direct writes. A chunk written through the page cache costs the kernel a
// copy into freshly allocated cache pages, their dirty accounting and later
// their writeback: on this project's 2-core VM, 2.3 CPU seconds of system
// time per GiB (dd, 1 MiB writes, fsync at the end), more than hashing,
// chunking and compressing together. With O_DIRECT the device reads the
// blob from the writer's own memory: 0.2 s/GiB for the same dd, and three
// times the rate. The data is on the device when the write returns; the
// fsync at Commit still makes the allocation (and the device's cache)
// durable, so nothing changes for crash safety.
//
// O_DIRECT wants the memory address, the file offset and the length
// aligned to the device's block. The Writer's blob buffers are allocated
// aligned (alignedSlice), so its blobs go to the device without a copy;
// other callers' blobs are staged through an aligned buffer in pieces. The
// last, partial block of a blob is written through the page cache: the
// fsync covers both.
const (
	// dioAlign is the alignment kept for direct writes: 4 KiB suits
	// devices with 512-byte and with 4 KiB logical blocks.
	dioAlign = 4096
	// directMin: blobs shorter than this go through the page cache, where
	// a copy costs less than a device round trip on the writer's
	// goroutine.
	directMin = 64 << 10
	// stageSize is the staging buffer for blobs that are not aligned.
	stageSize = 1 << 20
)

// alignedSlice returns a slice of length n whose first byte is aligned
// for direct writes.
func alignedSlice(n int) []byte {
	b := make([]byte, n+dioAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % dioAlign); r != 0 {
		off = dioAlign - r
	}
	return b[off : off+n : off+n]
}

// isAligned reports whether b starts on a direct-write boundary.
func isAligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%dioAlign == 0
}

// directWriter writes blobs to new files with O_DIRECT until the file
// system refuses it (tmpfs, some network file systems), then through the
// page cache; it reads cold blobs back the same way (readCold). It is one
// store's, as what it learns is of that store's directory.
type directWriter struct {
	off   atomic.Bool // set once the file system refused a direct write
	stage sync.Pool   // *[]byte of stageSize, aligned
	// readBefore names the blobs read directly lately: one read again
	// is read through the page cache (readCold), which keeps a blob
	// read twice (a file downloaded again) for the reads after, and
	// leaves one read once (a fresh upload's first download) out of it.
	readBefore recentNames
	// noCachestat is set once cachestat(2) has failed: a kernel before
	// 6.5, or a sandbox that refuses it.
	noCachestat atomic.Bool
}

// create makes name for writing, with O_DIRECT when blob is large enough
// and direct writes have not been refused; direct reports which.
func (dw *directWriter) create(name string, size int) (f *os.File, direct bool, err error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if size >= directMin && !dw.off.Load() {
		f, err = os.OpenFile(name, flags|unix.O_DIRECT, 0o640)
		if !errors.Is(err, unix.EINVAL) {
			return f, err == nil, err
		}
		dw.off.Store(true)
	}
	f, err = os.OpenFile(name, flags, 0o640)
	return f, false, err
}

// write writes blob to f, a new file that create opened. With direct,
// the whole blocks go straight from memory (through the staging buffer
// when blob is not aligned) and the tail through the page cache.
func (dw *directWriter) write(f *os.File, blob []byte, direct bool) error {
	if !direct {
		_, err := f.Write(blob)
		return err
	}
	n := len(blob) &^ (dioAlign - 1)
	err := dw.writeBlocks(f, blob[:n])
	if errors.Is(err, unix.EINVAL) {
		// The file system wants a larger alignment than ours: start
		// over through the page cache, and stop trying.
		dw.off.Store(true)
		if err = setDirect(f, false); err == nil {
			_, err = f.WriteAt(blob, 0)
		}
		return err
	}
	if err != nil || n == len(blob) {
		return err
	}
	if err := setDirect(f, false); err != nil {
		return err
	}
	_, err = f.WriteAt(blob[n:], int64(n))
	return err
}

// writeBlocks writes body, a whole number of blocks, from offset 0.
func (dw *directWriter) writeBlocks(f *os.File, body []byte) error {
	if isAligned(body) {
		_, err := f.WriteAt(body, 0)
		return err
	}
	sp, _ := dw.stage.Get().(*[]byte)
	if sp == nil {
		b := alignedSlice(stageSize)
		sp = &b
	}
	defer dw.stage.Put(sp)
	for off := 0; off < len(body); {
		m := copy(*sp, body[off:])
		if _, err := f.WriteAt((*sp)[:m], int64(off)); err != nil {
			return err
		}
		off += m
	}
	return nil
}

// setDirect turns O_DIRECT on or off for f's further reads and writes.
func setDirect(f *os.File, on bool) error {
	fd := f.Fd()
	flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.O_DIRECT
	} else {
		flags &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, flags)
	return err
}

// Direct reads. A blob written directly is not in the page cache, so the
// first download of a new file reads it from the device. Through the page
// cache that read costs the kernel the same copies and allocations a
// buffered write does: on this project's 2-core VM a cold buffered read
// ran at 434 MB/s and a direct one at 1.4 GB/s (dd, 512 MiB), and a
// WebDAV GET of a 1 GiB file just PUT fell from 614 to 320 MB/s when
// writes went direct. So a blob that is not cached is read directly too;
// one that is (read recently, or written through the page cache) is
// copied from the cache, which is cheaper still.

// readCold reads the n-byte blob of f into dst (grown, aligned) when it is
// not in the page cache, past the cache. ok is false when the caller
// should read it the ordinary way: the blob is cached whole, or the file
// system refuses direct reads, or it was read directly lately
// (dw.readBefore). warm says that the blob was in the page cache whole,
// as far as it could tell: so it is read by the caller, or was read from
// the cache (ok) where cachestat(2) is missing. f is the caller's to
// close: on success with O_DIRECT set.
//
// Whether it is cached is asked of cachestat(2), which changes nothing.
// An RWF_NOWAIT read, which this used before and still does on kernels
// before 6.5, answers EAGAIN for a blob that is not cached but starts the
// kernel's readahead of it first: each cold blob was read twice from the
// device, once into the cache and once directly. Measured on this
// project's 2-core VM (256 fresh blobs of 1 MiB, read once, two runs
// each): 0.11 to 0.15 CPU seconds and 0.52 to 0.58 s against 0.07 to 0.09
// and 0.28 to 0.37 s.
func (dw *directWriter) readCold(f *os.File, n int, dst []byte) (out []byte, ok, warm bool) {
	whole := (n + dioAlign - 1) &^ (dioAlign - 1)
	if cap(dst) < whole || !isAligned(dst) {
		dst = alignedSlice(whole)
	}
	dst = dst[:whole]
	fd := int(f.Fd())
	switch dw.cachedWhole(fd, n) {
	case cacheAll:
		return dst[:0], false, true // the ordinary read copies it from the cache
	case cacheNotAll:
		if dw.readBefore.take(f.Name()) {
			// Read again while still in use (a second download):
			// through the cache this time, so that the reads after
			// it are copies from memory, as a server's that keeps
			// its files there.
			return dst[:0], false, false
		}
	case cacheUnknown:
		m, err := unix.Preadv2(fd, [][]byte{dst[:n]}, 0, unix.RWF_NOWAIT)
		switch {
		case err == nil && m == n:
			return dst[:n], true, true
		case err != nil && !errors.Is(err, unix.EAGAIN):
			// EOPNOTSUPP on kernels or file systems without RWF_NOWAIT.
			return dst[:0], false, false
		}
	}
	if err := setDirect(f, true); err != nil {
		if errors.Is(err, unix.EINVAL) {
			dw.off.Store(true)
		}
		return dst[:0], false, false
	}
	// Whole blocks from offset 0; the file ends within the last, so the
	// read comes back short by the rest of it.
	// On success the caller closes f, flag and all; on failure it reads
	// f the ordinary way, so the flag goes first.
	m, err := unix.Pread(fd, dst, 0)
	if err != nil || m != n {
		if errors.Is(err, unix.EINVAL) {
			dw.off.Store(true)
		}
		_ = setDirect(f, false)
		return dst[:0], false, false
	}
	return dst[:n], true, false
}

// recentMax bounds a recentNames: 4,096 names (4 GiB of 1 MiB chunks)
// take about 0.5 MiB.
const recentMax = 1 << 12

// recentNames is a set of at most recentMax names; when full it starts
// afresh. The zero value is empty and ready.
type recentNames struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// take reports whether name is in the set, and removes it if so, adds it
// if not.
func (r *recentNames) take(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[name]; ok {
		delete(r.m, name)
		return true
	}
	if r.m == nil || len(r.m) >= recentMax {
		r.m = make(map[string]struct{})
	}
	r.m[name] = struct{}{}
	return false
}

// What cachedWhole found of a blob.
const (
	cacheUnknown = iota // cachestat(2) is missing: ask by reading
	cacheAll            // every page is in the page cache
	cacheNotAll         // some page is not
)

var pageSize = os.Getpagesize()

// cachedWhole tells whether the page cache holds the first n bytes of fd
// whole.
func (dw *directWriter) cachedWhole(fd, n int) int {
	if dw.noCachestat.Load() {
		return cacheUnknown
	}
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(fd), &unix.CachestatRange{Len: uint64(n)}, &st, 0); err != nil {
		dw.noCachestat.Store(true)
		return cacheUnknown
	}
	if st.Cache >= uint64((n+pageSize-1)/pageSize) {
		return cacheAll
	}
	return cacheNotAll
}

// readPath reads the blob in the file name into dst (grown; aligned when
// read directly) with the fewest system calls: open with O_DIRECT, fstat,
// cachestat, then one pread past the cache for a blob that is not cached
// (and not read lately, see readBefore), or, with O_DIRECT turned off, the
// reads of the ordinary way. Through an os.File and readCold a chunk
// cost twelve calls (strace of a 256 MiB GET: the poller's failed
// registration and four fcntl for its non-blocking flag, two more for
// O_DIRECT) where five do, plus the File and its finalizer. warm is as readCold's. ok is false when the caller should
// read the blob its own way: the name is missing (a legacy path, or
// none), the file system refuses O_DIRECT, or cachestat(2) is missing
// (readCold then asks by reading; callers skip readPath once
// dw.noCachestat is set). err is a blob shorter than its file
// said (changed under the reader), or a blob longer than limit (when
// limit >= 0), refused before it is read.
func (dw *directWriter) readPath(name string, dst []byte, limit int) (out []byte, warm, ok bool, err error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECT, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			dw.off.Store(true)
		}
		return nil, false, false, nil
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil, false, false, nil
	}
	n := int(st.Size)
	if limit >= 0 && n > limit {
		return nil, false, true, tooLong(n, limit)
	}
	direct := false
	if n >= directMin {
		switch dw.cachedWhole(fd, n) {
		case cacheUnknown:
			return nil, false, false, nil
		case cacheAll:
			warm = true
		case cacheNotAll:
			direct = !dw.readBefore.take(name)
		}
	}
	if direct {
		// Whole blocks from offset 0; the file ends within the last,
		// so the read comes back short by the rest of it.
		whole := (n + dioAlign - 1) &^ (dioAlign - 1)
		if cap(dst) < whole || !isAligned(dst) {
			dst = alignedSlice(whole)
		}
		m, err := unix.Pread(fd, dst[:whole], 0)
		if err == nil && m == n {
			return dst[:n], false, true, nil
		}
		if errors.Is(err, unix.EINVAL) {
			dw.off.Store(true)
		}
	}
	// Through the page cache. F_SETFL changes only the status flags, of
	// which this descriptor has O_DIRECT alone.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		return nil, false, false, nil
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	for off := 0; off < n; {
		m, err := unix.Pread(fd, dst[off:], int64(off))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, false, true, err
		case m == 0:
			return nil, false, true, io.ErrUnexpectedEOF
		}
		off += m
	}
	return dst, warm, true, nil
}

// tooLong is the error of a blob file of n bytes where at most limit
// may be.
func tooLong(n, limit int) error {
	return fmt.Errorf("blob file of %d bytes, more than the %d a chunk's may have", n, limit)
}
