package daemon

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// trimMappings keeps the metadata store's memory-mapped files from
// counting in the daemon's resident memory: every interval it asks the
// kernel to take back (MADV_PAGEOUT) the pages of this process's mappings
// of files under dir, until ctx ends; it returns when it has stopped.
//
// Badger writes its write-ahead logs, value logs and tables through
// mmap and reads them through it: every page written or read stays
// mapped, so the resident set grows with what the store has written
// since the start (10,000 uploads of 4 KiB: 40 MiB of value log, then
// more with every file), though the pages are the kernel's page cache,
// clean once synced, and would be reclaimed under pressure anyway.
// MADV_PAGEOUT unmaps them (a page used again faults back in: from the
// page cache for a dirty page, which reclaim leaves to writeback, from
// disk for a clean one). It never changes what a page holds, unlike
// MADV_DONTNEED, which matters because a range read from
// /proc/self/maps may have been unmapped, and reused by another
// mapping, by the time the advice is given. It trims only once the
// file-backed resident memory has grown by trimSlack since the last
// trim.
func trimMappings(ctx context.Context, dir string, interval time.Duration, log *slog.Logger) {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	t := time.NewTicker(interval)
	defer t.Stop()
	var after int64 // file-backed resident memory after the last trim
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now, ok := residentFile(); ok && now < after+trimSlack {
			continue
		}
		err := pageOut(prefix)
		after, _ = residentFile()
		if err != nil {
			// Not Linux 5.4 or later, or no /proc: nothing to trim.
			log.Warn("memory.kv_map_trim: cannot trim the metadata store's mappings; turning it off", "error", err)
			return
		}
	}
}

// trimSlack is how far the file-backed resident memory may grow before
// trimMappings trims again: a daemon that mostly reads keeps its hot
// table pages mapped instead of reading them from disk again every
// interval.
const trimSlack = 4 << 20

// residentFile returns the process's file-backed resident memory
// (RssFile) in bytes.
func residentFile() (int64, bool) {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// pageOut advises MADV_PAGEOUT over every mapping of a file whose path
// starts with prefix.
func pageOut(prefix string) error {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode path (which may hold spaces)
		line := sc.Text()
		rng, rest, _ := strings.Cut(line, " ")
		for range 4 {
			_, rest, _ = strings.Cut(strings.TrimLeft(rest, " "), " ")
		}
		if !strings.HasPrefix(strings.TrimLeft(rest, " "), prefix) {
			continue
		}
		lo, hi, ok := strings.Cut(rng, "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT)
		switch errno {
		case 0, unix.ENOMEM, unix.EAGAIN:
			// ENOMEM: unmapped since maps was read.
		default:
			return errno
		}
	}
	return sc.Err()
}
