package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/config"
	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
	"berth/vfs/chunk/s3"
)

// s3CheckTimeout bounds the start-up check of the bucket: an endpoint
// that takes no connection (a firewall dropping packets) fails the start
// with a message rather than hanging it.
const s3CheckTimeout = 30 * time.Second

// Abilities of the disk store the daemon uses when the store has them;
// found by type assertion, so an S3 store goes without.
type (
	// freeSpacer reports the free space of the store's file system and
	// the part of it kept in reserve.
	freeSpacer interface {
		Free() (int64, error)
		Reserve() int64
	}
	// tempCleaner removes what writes a crash interrupted left behind.
	tempCleaner interface {
		CleanTemp(ctx context.Context) error
	}
)

// checkChunkStore refuses a chunk store that is not the one the files of
// db are in (vfs.CheckChunkStore), where the two may part: a metadata
// store several nodes share, each with its own storage settings, or
// chunks in a bucket that another deployment's settings may name too. A
// Badger store and the disk store beside it in one data directory cannot
// part, and are not asked. db nil (berth migrate's target, checked by
// its own fsck) asks nothing.
func checkChunkStore(ctx context.Context, cfg config.Config, db kv.Store, chunks chunk.Marked) error {
	if db == nil {
		return nil
	}
	if x, ok := db.(kv.Exclusive); ok && x.Exclusive() && cfg.Storage.Backend != "s3" {
		return nil
	}
	return vfs.CheckChunkStore(ctx, db, chunks)
}

// openChunks opens the chunk store storage.backend names: the disk store
// in the data directory, or the S3 bucket behind retries and a limit on
// requests in flight. reg may be nil. With db, the metadata store the
// chunks belong to, it refuses a chunk store that is not db's
// (checkChunkStore).
func openChunks(ctx context.Context, cfg config.Config, log *slog.Logger, reg prometheus.Registerer, db kv.Store) (chunk.Store, error) {
	var store chunk.Store
	switch cfg.Storage.Backend {
	case "s3":
		o := cfg.Storage.S3
		cctx, cancel := context.WithTimeout(ctx, s3CheckTimeout)
		st, err := s3.Open(cctx, s3.Options{
			Endpoint: o.Endpoint, Bucket: o.Bucket, Region: o.Region, Prefix: o.Prefix, PathStyle: o.PathStyle,
			AccessKey: o.AccessKey, SecretKey: o.SecretKey, SessionToken: o.SessionToken, CredentialsFile: o.CredentialsFile,
			Parallelism: o.Parallelism,
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("opening chunk store (storage.backend s3): %w", err)
		}
		if err := checkChunkStore(ctx, cfg, db, st); err != nil {
			return nil, fmt.Errorf("opening chunk store (storage.backend s3, bucket %s, prefix %q): %w", o.Bucket, o.Prefix, err)
		}
		log.Info("file contents in S3", "endpoint", o.Endpoint, "bucket", o.Bucket, "prefix", o.Prefix)
		m := newStoreMetrics(reg) // each attempt's latency and failure
		// Retry outside the limit: a call waiting out its backoff gives
		// its slot to another.
		store = remoteChunks{
			Retry:   chunk.NewRetry(chunk.NewLimit(meteredStore{st, m}, o.MaxRequests), chunk.RetryOptions{Retryable: m.retryable}),
			reserve: dataReserve{dirs: reserveDirs(cfg), reserve: int64(cfg.Storage.Reserve)},
		}
	default:
		d, err := chunk.OpenDisk(filepath.Join(cfg.Data, "chunks"), chunk.DiskOptions{Reserve: int64(cfg.Storage.Reserve), Also: reserveDirs(cfg)})
		if err != nil {
			return nil, fmt.Errorf("opening chunk store: %w", err)
		}
		if err := checkChunkStore(ctx, cfg, db, d); err != nil {
			return nil, fmt.Errorf("opening chunk store (storage.backend disk, %s): %w", filepath.Join(cfg.Data, "chunks"), err)
		}
		store = d
	}
	if sc, ok := store.(chunk.SpaceChecker); ok {
		if err := sc.CheckSpace(0); err != nil {
			log.Warn("the data directory's disk is down to its reserve: uploads are refused until space is freed (storage.reserve)", "error", err)
		}
	}
	if fs, ok := store.(freeSpacer); ok && reg != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "berth_storage_free_bytes",
				Help: "Free bytes on the data directory's file system, the fullest of its chunks' and metadata's when mounted apart (for an unprivileged writer).",
			}, func() float64 {
				free, err := fs.Free()
				if err != nil {
					return math.NaN()
				}
				return float64(free)
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "berth_storage_reserve_bytes",
				Help: "Free space berth leaves on the data directory's file system (storage.reserve); writes stop there.",
			}, func() float64 { return float64(fs.Reserve()) }),
		)
	}
	// Temp files of chunk writes a crash interrupted are never referenced.
	if tc, ok := store.(tempCleaner); ok {
		if err := tc.CleanTemp(ctx); err != nil {
			return nil, fmt.Errorf("cleaning chunk store: %w", err)
		}
	}
	return store, nil
}

// remoteChunks is a chunk store off this machine (S3) that still keeps
// storage.reserve free on the data directory's disk: the metadata store
// writes there and must never meet a full disk (chunk.DiskOptions.Reserve
// says why), so what grows it stops at the reserve as with the disk
// store. Embedding *chunk.Retry keeps its GetInto for the readers.
type remoteChunks struct {
	*chunk.Retry
	reserve dataReserve
}

var (
	_ chunk.SpaceChecker = remoteChunks{}
	_ freeSpacer         = remoteChunks{}
)

// CheckSpace asks the data directory's disk, for which need (a chunk's
// size, which goes elsewhere) does not count.
func (r remoteChunks) CheckSpace(int64) error { return r.reserve.check() }

// Free is the data directory's disk's free space.
func (r remoteChunks) Free() (int64, error) { return r.reserve.free() }

// Reserve is storage.reserve.
func (r remoteChunks) Reserve() int64 { return r.reserve.reserve }

// reserveDirs are the directories whose file systems storage.reserve
// holds besides the chunks': the data directory, and the Badger metadata
// store's directory in it, which an operator may mount apart (a small
// fast disk). Badger writes through memory maps: on a full disk that is
// a SIGBUS, and a reserve counted on the chunks' disk alone let small
// files, folders and sessions fill a separate metadata disk until the
// daemon died, and could not start again.
func reserveDirs(cfg config.Config) []string {
	dirs := []string{cfg.Data}
	if cfg.Metadata.Backend == "badger" || cfg.Metadata.Backend == "" {
		dirs = append(dirs, filepath.Join(cfg.Data, "meta"))
	}
	return dirs
}

// dataReserve is the free space kept on the data directory's disks.
type dataReserve struct {
	dirs    []string // reserveDirs
	reserve int64
}

// free returns what an unprivileged writer may still use of the fullest
// of the data directory's file systems, as chunk.Disk counts it.
func (d dataReserve) free() (int64, error) {
	return d.space(0)
}

// space is free, with ErrNoSpace for a file system down to keepInodes
// (chunk.FreeSpace).
func (d dataReserve) space(keepInodes int64) (int64, error) {
	free := int64(math.MaxInt64)
	for _, dir := range d.dirs {
		f, err := chunk.FreeSpace(dir, keepInodes)
		if err != nil {
			return 0, err
		}
		free = min(free, f)
	}
	return free, nil
}

func (d dataReserve) check() error {
	if d.reserve <= 0 {
		return nil
	}
	free, err := d.space(chunk.InodeReserve(d.reserve))
	if err != nil {
		return err
	}
	if free < d.reserve {
		return fmt.Errorf("%w: the data directory's disk has %d bytes free, %d kept in reserve", chunk.ErrNoSpace, free, d.reserve)
	}
	return nil
}
