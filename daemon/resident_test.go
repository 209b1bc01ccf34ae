package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"

	"berth/config"
)

// TestPageOut: the pages of a shared file mapping under the trimmed
// directory leave the resident set and keep their contents, written or
// not yet synced; a mapping elsewhere is left alone.
func TestPageOut(t *testing.T) {
	const size = 8 << 20
	dir, other := t.TempDir(), t.TempDir()
	mapped := func(dir string) []byte {
		f, err := os.OpenFile(filepath.Join(dir, "000001.vlog"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Munmap(m) })
		for i := range m {
			m[i] = byte(i % 251)
		}
		return m
	}
	trimmed, kept := mapped(dir), mapped(other)
	before := rssFile(t)
	if err := pageOut(dir + "/"); err != nil {
		t.Skipf("MADV_PAGEOUT not available here: %v", err)
	}
	after := rssFile(t)
	if before-after < size*3/4 {
		t.Errorf("RssFile %d KiB -> %d KiB: the %d KiB mapping was not paged out", before>>10, after>>10, size>>10)
	}
	if before-after > size+size/4 {
		t.Errorf("RssFile %d KiB -> %d KiB: more than the trimmed mapping left", before>>10, after>>10)
	}
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i % 251)
	}
	if !bytes.Equal(trimmed, want) || !bytes.Equal(kept, want) {
		t.Fatal("a mapping's contents changed")
	}
}

// rssFile is this process's file-backed resident memory, in bytes.
func rssFile(t *testing.T) int64 {
	t.Helper()
	n, ok := residentFile()
	if !ok {
		t.Skip("no RssFile in /proc/self/status")
	}
	return n
}

// TestMemoryLimit: the soft limit is the configured one, or derived from
// the memtables, upload buffers and read-ahead buffers beyond the
// default; the upload budget is never unbounded, and the configuration's
// 0 read-ahead buffers is none, not vfs's default.
func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		m           config.Memory
		limit, segs int64
		ahead       int64
	}{
		{"defaults", config.Default().Memory, 72 << 20, 1, 16 << 20},
		{"more read-ahead buffers", config.Memory{KVMemtable: 8 << 20, ReadAheadBuffers: 48 << 20}, 104 << 20, 1, 48 << 20},
		{"fewer read-ahead buffers", config.Memory{KVMemtable: 8 << 20, ReadAheadBuffers: 4 << 20}, 72 << 20, 1, 4 << 20},
		{"shared upload buffers", config.Memory{KVMemtable: 8 << 20, UploadBuffers: 8 << 20}, 80 << 20, 8 << 20, -1},
		{"configured", config.Memory{Limit: 200 << 20, KVMemtable: 8 << 20, UploadBuffers: 8 << 20}, 200 << 20, 8 << 20, -1},
		{"larger tables and buffers", config.Memory{KVMemtable: 64 << 20, UploadBuffers: 64 << 20}, 304 << 20, 64 << 20, -1},
		{"no shared upload buffers", config.Memory{KVMemtable: 8 << 20}, 72 << 20, 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memoryLimit(tc.m); got != tc.limit {
				t.Errorf("memoryLimit = %d MiB, want %d MiB", got>>20, tc.limit>>20)
			}
			if got := segmentBudget(tc.m); got != tc.segs {
				t.Errorf("segmentBudget = %d, want %d", got, tc.segs)
			}
			if got := readAheadBudget(tc.m); got != tc.ahead {
				t.Errorf("readAheadBudget = %d, want %d", got, tc.ahead)
			}
		})
	}
}

// TestMemoryLimitCountsZipLayouts: a derived soft limit rises by what
// the layouts of the zips being served hold, and falls back when they
// end; a configured limit, or GOMEMLIMIT, stays as set. Left out, the
// layouts (up to memory.zip_layouts, 54 MiB, of live heap) took most of
// the derived 72 MiB, and the collector ran all the time they were held.
func TestMemoryLimitCountsZipLayouts(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	log := slog.New(slog.DiscardHandler)
	derived := memoryLimit(config.Default().Memory)
	for _, tc := range []struct {
		name       string
		m          config.Memory
		gomemlimit string
		want       int64 // after 10 MiB held; 0: not raised
	}{
		{"derived", config.Default().Memory, "", derived + 10<<20},
		{"configured", config.Memory{Limit: 200 << 20, KVMemtable: 8 << 20}, "", 0},
		{"GOMEMLIMIT", config.Default().Memory, "100MiB", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			held := applyMemoryLimit(tc.m, log)
			if (held == nil) != (tc.want == 0) {
				t.Fatalf("raised by zip layouts: %v, want %v", held != nil, tc.want != 0)
			}
			if held == nil {
				return
			}
			held(10 << 20)
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("10 MiB of layouts held: limit %d MiB, want %d MiB", got>>20, tc.want>>20)
			}
			held(0)
			if got := debug.SetMemoryLimit(-1); got != derived {
				t.Errorf("none held: limit %d MiB, want %d MiB", got>>20, derived>>20)
			}
		})
	}
}
