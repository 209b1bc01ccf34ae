package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"berth/kv"
)

// jobLeaseTTL is how long a node holds a background job's lease without
// renewing it (it renews every third of it): a node that dies mid-job
// gives the job up to another node after at most this long.
const jobLeaseTTL = 30 * time.Second

// clusterJobs runs the background jobs (garbage collection, purges,
// trims, expiries, directory re-imports) once per cluster rather than
// once per node: each run takes the job's lease in the metadata store
// (kv.Lease), and a node that finds another holding it passes the run
// over. On one node the lease is always free and costs one commit per
// run. A nil *clusterJobs runs every job (tests).
type clusterJobs struct {
	db     kv.Store
	holder string
	log    *slog.Logger
}

// newClusterJobs returns the jobs runner of this process, named by host,
// process and a random suffix so that two processes never share a lease.
func newClusterJobs(db kv.Store, log *slog.Logger) *clusterJobs {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &clusterJobs{db: db, holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:])), log: log}
}

// once runs fn under job name's lease, or not at all when another node
// holds it. fn's context ends when the lease is lost.
func (c *clusterJobs) once(ctx context.Context, name string, fn func(ctx context.Context)) {
	if c == nil {
		fn(ctx)
		return
	}
	held, err := kv.NewLease(c.db, name, c.holder, jobLeaseTTL).Run(ctx, func(ctx context.Context) error {
		fn(ctx)
		return nil
	})
	switch {
	case err != nil && ctx.Err() == nil && !errors.Is(err, kv.ErrLeaseLost):
		c.log.Warn("background job lease", "job", name, "error", err)
	case errors.Is(err, kv.ErrLeaseLost):
		c.log.Warn("background job stopped: another node took its lease over", "job", name)
	case !held:
		c.log.Debug("background job runs on another node", "job", name)
	}
}

// sharedOrphanGrace is how long the collector leaves an unreferenced
// chunk when several nodes share the metadata store, so that a download
// on one node of a revision another node just trimmed or purged finishes
// (docs/operations.md, "Several nodes"). One process on a store only it
// opens (Badger) needs none: it removes such chunks at once, as always.
const sharedOrphanGrace = 15 * time.Minute

// orphanGrace is vfs.Options.OrphanGrace for db.
func orphanGrace(db kv.Store) time.Duration {
	if x, ok := db.(kv.Exclusive); ok && x.Exclusive() {
		return 0
	}
	return sharedOrphanGrace
}
