package daemon

import (
	"log/slog"
	"os"
	"runtime/debug"

	"berth/config"
)

// memoryBase is the part of the derived memory limit that the memory
// settings do not size: the runtime, the TLS connections, one upload's
// own segment and chunk buffers, and the read-ahead budget's default
// (memoryBaseReadAhead).
const memoryBase = 48 << 20

// memoryBaseReadAhead is the read-ahead budget that memoryBase has room
// for, config's default memory.read_ahead_buffers: one download's
// read-ahead. Only a larger budget raises the derived limit; a smaller
// one leaves it (an upload's buffers take the room).
const memoryBaseReadAhead = 16 << 20

// memoryLimit returns the Go runtime's soft memory limit for m: m.Limit
// when set, else derived from what the other settings let the daemon
// hold (docs/operations.md "Memory"): memoryBase, the metadata store's
// memtables (two arenas of about 1.3 times kv_memtable, and a table being
// flushed), and the upload buffers all uploads share. It does not bound
// the heap: near it the runtime collects more often and hands freed
// memory back to the kernel at once, instead of keeping it for a while
// after a peak (a large upload's buffers, a memtable flush).
func memoryLimit(m config.Memory) int64 {
	if m.Limit > 0 {
		return int64(m.Limit)
	}
	return memoryBase + 3*int64(m.KVMemtable) + int64(m.UploadBuffers) +
		max(int64(m.ReadAheadBuffers)-memoryBaseReadAhead, 0)
}

// applyMemoryLimit sets the runtime's soft memory limit from m unless
// GOMEMLIMIT is set (GOMEMLIMIT=off: none). Where the limit is derived,
// it returns what raises it by what the layouts of the zips being served
// hold (vfs.Options.ZipHeld), nil otherwise: those layouts are live heap
// for as long as their answers last, up to memory.zip_layouts (54 MiB),
// and under a limit that left them out the collector ran all the time
// while they were held (Go lets it take up to half the CPU). The budget
// itself is not added: the limit is also where a large upload's garbage
// is collected, so it would raise the peak of every upload by 54 MiB
// while no zip is served. A configured memory.limit is the operator's
// bound and stays as set.
func applyMemoryLimit(m config.Memory, log *slog.Logger) (zipHeld func(int64)) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	limit := memoryLimit(m)
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", "bytes", limit)
	if m.Limit > 0 {
		return nil
	}
	return func(held int64) { debug.SetMemoryLimit(limit + held) }
}

// readAheadBudget is vfs.Options.ReadAheadBudget for m: the
// configuration's 0 is none (vfs's is its default).
func readAheadBudget(m config.Memory) int64 {
	if m.ReadAheadBuffers == 0 {
		return -1
	}
	return int64(m.ReadAheadBuffers)
}

// segmentBudget is vfs.Options.SegmentBudget for m: 0 upload buffers
// still bounds them, to each upload's own segment.
func segmentBudget(m config.Memory) int64 {
	return max(int64(m.UploadBuffers), 1)
}
