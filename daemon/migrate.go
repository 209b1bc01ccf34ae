package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/spf13/pflag"

	"berth/config"
	"berth/kv"
	"berth/kv/badger"
	"berth/kv/postgres"
	"berth/vfs"
	"berth/vfs/chunk"
)

// migrateOptions are berth migrate's own flags.
type migrateOptions struct {
	// toConfig is the YAML file of the target: metadata.backend postgres
	// and storage.backend s3 with their keys, as the nodes will have.
	toConfig string
	// force copies into a target that already holds keys or chunks.
	force bool
	// resume goes on with an interrupted migration: chunks the target has
	// are skipped and the keys continue after the greatest it holds.
	resume bool
	// workers is how many chunks are copied or verified at once.
	workers int
	// batchKeys and batchBytes bound one transaction of the key copy.
	batchKeys, batchBytes int
}

// errMigrateProblems is returned when the verification found a
// difference; the report names it.
var errMigrateProblems = errors.New("migrate: the target differs from the source")

// migrateReport is what a migration did and found.
type migrateReport struct {
	chunks, chunksSkipped, keys, expired, sequences atomic.Int64
	chunkBytes                                      atomic.Int64
	verifiedKeys, verifiedChunks                    atomic.Int64
	problems                                        []string
	mu                                              sync.Mutex
	fsck                                            string
	took                                            time.Duration
}

func (r *migrateReport) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The first hundred say enough; the count says the rest.
	if len(r.problems) < 100 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// migrateCommand copies the stopped single-node data directory of src
// (Badger and chunks on disk) into the PostgreSQL database and S3 bucket
// of the configuration file o.toConfig, then verifies the copy: every key
// equal, every chunk present and hashing to its id, and fsck on the
// target. It streams: keys in key order, o.batchKeys a transaction;
// chunks one object at a time, o.workers at once.
func migrateCommand(ctx context.Context, src config.Config, log *slog.Logger, out io.Writer, o migrateOptions) error {
	start := time.Now()
	if o.toConfig == "" {
		return errors.New("migrate: --to-config is required (the configuration file of the target: metadata.backend postgres, storage.backend s3)")
	}
	if src.Metadata.Backend != "badger" && src.Metadata.Backend != "" || src.Storage.Backend != "disk" && src.Storage.Backend != "" {
		return fmt.Errorf("migrate: the source must be a single-node data directory (metadata.backend badger, storage.backend disk), not %s and %s", src.Metadata.Backend, src.Storage.Backend)
	}
	fs := pflag.NewFlagSet("target", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	if err := fs.Set(config.ConfigFlag, o.toConfig); err != nil {
		return err
	}
	dst, err := config.Load(fs)
	if err != nil {
		return fmt.Errorf("migrate: the target's configuration: %w", err)
	}
	if dst.Metadata.Backend != "postgres" || dst.Storage.Backend != "s3" {
		return fmt.Errorf("migrate: the target (%s) must have metadata.backend postgres and storage.backend s3, not %s and %s", o.toConfig, dst.Metadata.Backend, dst.Storage.Backend)
	}
	// The target's reserve is kept on the source's disk, where migrate
	// runs; the target's own data directory is never written.
	dst.Data = src.Data
	if o.workers < 1 {
		o.workers = 16
	}
	if o.batchKeys < 1 {
		o.batchKeys = 1000
	}
	if o.batchBytes < 1 {
		o.batchBytes = 4 << 20
	}

	if err := checkFormat(src.Data); err != nil {
		return err
	}
	sdb, err := openMetadata(ctx, src, log)
	if err != nil {
		return err
	}
	defer sdb.Close()
	skv, ok := sdb.(*badger.DB)
	if !ok {
		return errors.New("migrate: the source is not a Badger store")
	}
	schunks, err := chunk.OpenDisk(filepath.Join(src.Data, "chunks"), chunk.DiskOptions{})
	if err != nil {
		return fmt.Errorf("migrate: opening the source's chunks: %w", err)
	}
	ddb, err := openMetadata(ctx, dst, log)
	if err != nil {
		return err
	}
	defer ddb.Close()
	dkv, ok := ddb.(*postgres.DB)
	if !ok {
		return errors.New("migrate: the target is not a PostgreSQL store")
	}
	dchunks, err := openChunks(ctx, dst, log, nil, nil)
	if err != nil {
		return err
	}

	empty, err := targetEmpty(ctx, ddb, dchunks)
	if err != nil {
		return fmt.Errorf("migrate: looking into the target: %w", err)
	}
	if !empty && !o.force && !o.resume {
		return errors.New("migrate: the target already holds keys or chunks; --resume goes on with an interrupted migration into it, --force copies over what it holds")
	}

	rep := &migrateReport{}
	// Chunks first: a key that names a chunk is never in the target
	// before the chunk, so an interrupted run leaves no dangling
	// reference behind the keys it copied.
	if err := copyChunks(ctx, schunks, dchunks, o, rep); err != nil {
		return err
	}
	fmt.Fprintf(out, "chunks copied: %d (%d bytes), %d already there\n", rep.chunks.Load(), rep.chunkBytes.Load(), rep.chunksSkipped.Load())
	if err := copyKeys(ctx, skv, ddb, o, rep); err != nil {
		return err
	}
	seqs, err := skv.Sequences(ctx)
	if err != nil {
		return fmt.Errorf("migrate: reading the source's sequences: %w", err)
	}
	for kind, floor := range seqs {
		if err := dkv.RaiseSequence(ctx, kind, floor); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		rep.sequences.Add(1)
	}
	fmt.Fprintf(out, "keys copied: %d (%d expired, left out), sequences: %d\n", rep.keys.Load(), rep.expired.Load(), rep.sequences.Load())

	if err := verifyKeys(ctx, skv, ddb, o, rep); err != nil {
		return err
	}
	if err := verifyChunks(ctx, schunks, dchunks, o, rep); err != nil {
		return err
	}
	files, err := vfs.Open(ctx, ddb, dchunks, vfs.Options{Logger: log.With("component", "vfs")})
	if err != nil {
		return fmt.Errorf("migrate: opening the target's file system: %w", err)
	}
	// Every chunk was hashed above: fsck checks references and counts.
	frep, err := files.Fsck(ctx, false)
	files.Close()
	if err != nil {
		return fmt.Errorf("migrate: fsck of the target: %w", err)
	}
	rep.fsck = frep.String()
	if !frep.OK() {
		rep.problem("fsck of the target: %s", frep.String())
	}
	rep.took = time.Since(start)
	fmt.Fprintf(out, "verified: %d keys equal, %d chunks present with their hash\nfsck of the target: %s\ntook %s\n",
		rep.verifiedKeys.Load(), rep.verifiedChunks.Load(), rep.fsck, rep.took.Round(time.Millisecond))
	for _, p := range rep.problems {
		fmt.Fprintln(out, "problem:", p)
	}
	if len(rep.problems) > 0 {
		return errMigrateProblems
	}
	fmt.Fprintln(out, "migration verified: start the nodes on the target's configuration")
	return nil
}

// targetEmpty reports that db holds no key of berth's and chunks no chunk.
func targetEmpty(ctx context.Context, db kv.Store, chunks chunk.Store) (bool, error) {
	any := false
	err := db.View(ctx, func(tx kv.Txn) error {
		return tx.Scan(nil, nil, func(key, _ []byte) error {
			if bytes.HasPrefix(key, []byte(kv.EnginePrefix)) {
				return nil
			}
			any = true
			return kv.ErrStop
		})
	})
	if err != nil && !errors.Is(err, kv.ErrStop) || any {
		return false, err
	}
	errFound := errors.New("found")
	err = chunks.Walk(ctx, func(chunk.ID) error { return errFound })
	if errors.Is(err, errFound) {
		return false, nil
	}
	return err == nil, err
}

// eachChunk calls fn for every chunk of src from o.workers goroutines and
// returns the first error.
func eachChunk(ctx context.Context, src chunk.Store, workers int, fn func(ctx context.Context, id chunk.ID) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ids := make(chan chunk.ID, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for id := range ids {
				if err := fn(ctx, id); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	err := src.Walk(ctx, func(id chunk.ID) error {
		select {
		case ids <- id:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(ids)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// copyChunks puts every chunk of src into dst as it is stored (encoded
// and compressed, so it is neither decoded nor re-encoded).
func copyChunks(ctx context.Context, src, dst chunk.Store, o migrateOptions, rep *migrateReport) error {
	err := eachChunk(ctx, src, o.workers, func(ctx context.Context, id chunk.ID) error {
		if o.resume || o.force {
			has, err := dst.Has(ctx, id)
			if err != nil {
				return fmt.Errorf("chunk %s in the target: %w", id, err)
			}
			if has {
				rep.chunksSkipped.Add(1)
				return nil
			}
		}
		blob, err := src.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("chunk %s in the source: %w", id, err)
		}
		if err := dst.Put(ctx, id, blob); err != nil {
			return fmt.Errorf("chunk %s into the target: %w", id, err)
		}
		rep.chunks.Add(1)
		rep.chunkBytes.Add(int64(len(blob)))
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: copying chunks: %w", err)
	}
	return nil
}

// pair is one key and value of the source with its expiry.
type pair struct {
	key, value []byte
	expires    time.Time
}

// exportBatches calls flush with the source's keys after start, in key
// order, o.batchKeys or o.batchBytes at a time.
func exportBatches(ctx context.Context, src *badger.DB, start []byte, o migrateOptions, flush func([]pair) error) error {
	var batch []pair
	size := 0
	err := src.Export(ctx, start, func(key, value []byte, expires time.Time) error {
		batch = append(batch, pair{bytes.Clone(key), bytes.Clone(value), expires})
		size += len(key) + len(value)
		if len(batch) < o.batchKeys && size < o.batchBytes {
			return nil
		}
		err := flush(batch)
		batch, size = batch[:0], 0
		return err
	})
	if err == nil && len(batch) > 0 {
		err = flush(batch)
	}
	return err
}

// copyKeys writes the source's keys into dst in key order, one
// transaction a batch; with o.resume it starts after the greatest key the
// target holds, which an interrupted run committed last.
func copyKeys(ctx context.Context, src *badger.DB, dst kv.Store, o migrateOptions, rep *migrateReport) error {
	var start []byte
	if o.resume {
		err := dst.View(ctx, func(tx kv.Txn) error {
			return tx.ScanReverse(nil, nil, func(key, _ []byte) error {
				if bytes.HasPrefix(key, []byte(kv.EnginePrefix)) {
					return nil
				}
				start = bytes.Clone(key)
				return kv.ErrStop
			})
		})
		if err != nil && !errors.Is(err, kv.ErrStop) {
			return fmt.Errorf("migrate: finding where to resume: %w", err)
		}
	}
	err := exportBatches(ctx, src, start, o, func(batch []pair) error {
		now := time.Now()
		var n, expired int64
		err := dst.Update(ctx, func(tx kv.Txn) error {
			n, expired = 0, 0
			for _, p := range batch {
				if p.expires.IsZero() {
					if err := tx.Set(p.key, p.value); err != nil {
						return err
					}
					n++
					continue
				}
				ttl := p.expires.Sub(now)
				if ttl <= 0 {
					expired++
					continue
				}
				if err := tx.SetTTL(p.key, p.value, ttl); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		rep.keys.Add(n)
		rep.expired.Add(expired)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: copying keys: %w", err)
	}
	return nil
}

// verifyKeys reads every key of the source back from dst and compares
// the values, then counts dst's keys: a key the source does not have is
// as much a difference as one missing.
func verifyKeys(ctx context.Context, src *badger.DB, dst kv.Store, o migrateOptions, rep *migrateReport) error {
	var seen int64
	err := exportBatches(ctx, src, nil, o, func(batch []pair) error {
		now := time.Now()
		return dst.View(ctx, func(tx kv.Txn) error {
			for _, p := range batch {
				seen++
				got, err := tx.Get(p.key)
				// A key with a TTL may expire in between.
				if !p.expires.IsZero() && (p.expires.Before(now.Add(time.Minute)) || errors.Is(err, kv.ErrNotFound)) {
					continue
				}
				switch {
				case errors.Is(err, kv.ErrNotFound):
					rep.problem("key %q: missing in the target", p.key)
				case err != nil:
					return err
				case !bytes.Equal(got, p.value):
					rep.problem("key %q: the target's value differs", p.key)
				default:
					rep.verifiedKeys.Add(1)
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("migrate: verifying keys: %w", err)
	}
	var count int64
	err = dst.View(ctx, func(tx kv.Txn) error {
		return tx.Scan(nil, nil, func(key, _ []byte) error {
			if !bytes.HasPrefix(key, []byte(kv.EnginePrefix)) {
				count++
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("migrate: counting the target's keys: %w", err)
	}
	// Missing keys were named above; a key the source does not have
	// shows only in the count.
	if count > seen {
		rep.problem("the target holds %d keys, %d more than the source", count, count-seen)
	}
	return nil
}

// decoders keeps the verifiers' decoders, one per worker at most: each
// holds buffers worth reusing across chunks.
var decoders = sync.Pool{New: func() any { return chunk.NewDecoder() }}

// verifyChunks reads every chunk of src from dst and checks that its
// plain bytes hash to its id.
func verifyChunks(ctx context.Context, src, dst chunk.Store, o migrateOptions, rep *migrateReport) error {
	err := eachChunk(ctx, src, o.workers, func(ctx context.Context, id chunk.ID) error {
		blob, err := dst.Get(ctx, id)
		switch {
		case errors.Is(err, chunk.ErrNotFound):
			rep.problem("chunk %s: missing in the target", id)
			return nil
		case err != nil:
			return fmt.Errorf("chunk %s in the target: %w", id, err)
		}
		dec := decoders.Get().(*zstd.Decoder)
		defer decoders.Put(dec)
		if err := chunk.Verify(id, blob, dec); err != nil {
			rep.problem("chunk %s in the target: %v", id, err)
			return nil
		}
		rep.verifiedChunks.Add(1)
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: verifying chunks: %w", err)
	}
	return nil
}
