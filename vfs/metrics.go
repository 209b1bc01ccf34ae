package vfs

import (
	"context"
	"errors"
	"sync"
	"time"

	"berth/vfs/chunk"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	ops *prometheus.CounterVec
	// okOps holds the "ok" child of ops by Op (Op to
	// prometheus.Counter), made on first use: WithLabelValues checks,
	// hashes and looks up both labels on every call, which every small
	// GET's read paid. Ops are a fixed set, so the map is bounded.
	okOps         sync.Map
	bytesWritten  prometheus.Counter
	bytesRead     prometheus.Counter
	bytesStored   prometheus.Counter
	chunksStored  prometheus.Counter
	chunksDeduped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_vfs_operations_total",
			Help: "File-system operations by kind and result (ok, the error class, or refused: by the caller's own check).",
		}, []string{"op", "result"}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_vfs_written_bytes_total", Help: "Plain bytes of file contents committed.",
		}),
		bytesRead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_vfs_read_bytes_total", Help: "Plain bytes of file contents read.",
		}),
		bytesStored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_chunk_stored_bytes_total", Help: "Encoded bytes of new chunks written to the chunk store.",
		}),
		chunksStored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_chunks_stored_total", Help: "Chunks written to the chunk store.",
		}),
		chunksDeduped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_chunks_deduplicated_total", Help: "Chunks not written because the store already had them.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.ops, m.bytesWritten, m.bytesRead, m.bytesStored, m.chunksStored, m.chunksDeduped)
	}
	return m
}

// registerReads registers gauges of what the downloads of pool hold: all
// their chunk buffers, and the part the chunks fetched ahead hold of the
// read-ahead budget, beside the budget. A budget that stays full is
// downloads fetching fewer chunks ahead than they would (slower off a
// cold disk), usually because stalled ones hold it.
func (m *metrics) registerReads(reg prometheus.Registerer, pool *chunk.ReadPool) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_vfs_read_buffers_bytes",
			Help: "Bytes of chunk buffers the downloads in progress hold: the chunks they send and those fetched ahead.",
		}, func() float64 { return float64(pool.Memory().Held) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_vfs_read_ahead_bytes",
			Help: "Bytes of the read-ahead budget taken by chunks downloads fetch ahead of the one they send.",
		}, func() float64 { return float64(pool.Memory().Ahead) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_vfs_read_ahead_budget_bytes",
			Help: "The read-ahead budget all downloads share (memory.read_ahead_buffers); past it they fetch fewer chunks ahead.",
		}, func() float64 { return float64(pool.Memory().Budget) }),
	)
}

// registerZips registers gauges of what the layouts of the zips being
// served hold of their budget, beside the budget, and how many
// requesters hold some: a total near the budget with few requesters is
// a few downloads of large folders, each held to its share; with many,
// zips are being refused as busy.
func (m *metrics) registerZips(reg prometheus.Registerer, s *zipShares) {
	if reg == nil {
		return
	}
	held := func() (total int64, by int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.total, len(s.by)
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_vfs_zip_layout_bytes",
			Help: "Bytes of the zip layout budget that the zips being served hold.",
		}, func() float64 { t, _ := held(); return float64(t) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_vfs_zip_layout_budget_bytes",
			Help: "The budget the layouts of all zips being served share (memory.zip_layouts); one requester holds at most half of what the others leave.",
		}, func() float64 { return float64(s.budget) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_vfs_zip_requesters",
			Help: "Requesters (share links, persons) whose zips being served hold part of the zip layout budget.",
		}, func() float64 { _, n := held(); return float64(n) }),
	)
}

// registerStaged registers gauges of the staged uploads in progress and
// of the bytes their declared lengths reserve against the quotas, read
// from the store at each scrape (one scan of the upload records, which
// are as many as the uploads in progress and those finished in the last
// finishedGrace). A reservation is room nobody else can use and no
// usage figure shows (nothing is stored for it), so an operator sees it
// here; an administrator ends an upload with tus's DELETE.
func (m *metrics) registerStaged(reg prometheus.Registerer, fs *FS) {
	if reg == nil {
		return
	}
	reg.MustRegister(stagedCollector{
		fs: fs,
		uploads: prometheus.NewDesc("berth_vfs_staged_uploads",
			"Staged (tus) uploads in progress, expired ones not yet swept included.", nil, nil),
		reserved: prometheus.NewDesc("berth_vfs_staged_reserved_bytes",
			"Bytes the declared lengths of the staged uploads in progress reserve against the quotas.", nil, nil),
	})
}

// stagedCollector collects registerStaged's gauges.
type stagedCollector struct {
	fs                *FS
	uploads, reserved *prometheus.Desc
}

func (c stagedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.uploads
	ch <- c.reserved
}

// stagedScrapeTimeout bounds the scan of a scrape.
const stagedScrapeTimeout = 10 * time.Second

func (c stagedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stagedScrapeTimeout)
	defer cancel()
	n, bytes, err := c.fs.stagedTotals(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.uploads, err)
		ch <- prometheus.NewInvalidMetric(c.reserved, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.uploads, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.reserved, prometheus.GaugeValue, float64(bytes))
}

// errorClasses bound the result label to a fixed set.
var errorClasses = []struct {
	err   error
	label string
}{
	{ErrNotExist, "not_found"}, {ErrNameConflict, "name_conflict"}, {ErrLocked, "locked"},
	{ErrRootDeleted, "root_deleted"}, {ErrInvalidName, "invalid_name"}, {ErrNameTooLong, "name_too_long"},
	{ErrNotDir, "not_dir"}, {ErrIsDir, "is_dir"}, {ErrExtensionExcluded, "policy"},
	{ErrFileTooLarge, "policy"}, {ErrQuotaExceeded, "quota"}, {ErrNoSuchLock, "no_such_lock"},
	{ErrRootItem, "root_item"}, {ErrBusy, "busy"}, {ErrNoSpace, "no_space"}, {context.Canceled, "canceled"}, {context.DeadlineExceeded, "canceled"},
	{ErrTooDeep, "too_deep"}, {ErrMetadataLimit, "metadata_limit"}, {ErrChanged, "changed"},
	{ErrUploadOffset, "upload_offset"}, {ErrChecksumMismatch, "checksum_mismatch"}, {ErrZipTooLarge, "zip_too_large"},
}

// refusal marks, for the metrics alone, an error that a caller's check
// returned (WriteAt's, MkdirAt's, DeleteAt's): the caller's own error,
// which no class above names, is a request the caller refused, counted
// as "refused" and not as "error", a failure of the store.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// counted is err as the metrics count it: refusal{err} when err is, or
// wraps, refused, the error the caller's check returned (nil when it
// returned none).
func counted(err, refused error) error {
	if err != nil && refused != nil && errors.Is(err, refused) {
		return refusal{err}
	}
	return err
}

func (m *metrics) observe(op Op, err error) {
	if err == nil {
		c, ok := m.okOps.Load(op)
		if !ok {
			c, _ = m.okOps.LoadOrStore(op, m.ops.WithLabelValues(string(op), "ok"))
		}
		c.(prometheus.Counter).Inc()
		return
	}
	result := "error"
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			result = c.label
			break
		}
	}
	if r := (refusal{}); result == "error" && errors.As(err, &r) {
		result = "refused"
	}
	m.ops.WithLabelValues(string(op), result).Inc()
}
