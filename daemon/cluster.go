package daemon

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"berth/agentlink"
	"berth/config"
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

// minClusterSecret is the shortest cluster secret berth takes: 32 bytes,
// as `openssl rand -base64 32` gives 44.
const minClusterSecret = 32

// relayDialTimeout bounds connecting to another node to relay a call: a
// node that is down answers a relayed call with 503 at once (refused), a
// node cut off after at most this long.
const relayDialTimeout = 5 * time.Second

// agentHub returns the hub of the machines' agents connected to this node
// and the cluster secret the relay route takes (empty: it refuses every
// call). On a store this process owns alone (Badger) it is a lone node's
// hub, as ever, whatever the cluster settings say. On a shared store with
// cluster.advertise_url and cluster.secret_file, the hub records the
// agents connected here and relays calls for the others to the node that
// holds them, over HTTPS verified against cluster.ca_file
// (docs/operations.md "Agents on several nodes").
func agentHub(cfg config.Cluster, db kv.Store, node string, log *slog.Logger) (*agentlink.Hub, string, error) {
	if x, ok := db.(kv.Exclusive); ok && x.Exclusive() {
		if cfg.AdvertiseURL != "" {
			log.Info("the cluster settings are ignored: this node's metadata store is its own")
		}
		return agentlink.New(), "", nil
	}
	if cfg.AdvertiseURL == "" {
		log.Warn("other nodes may share this metadata store, but cluster.advertise_url and cluster.secret_file are not set: a machine's agent answers only through the node it is connected to")
		return agentlink.New(), "", nil
	}
	b, err := os.ReadFile(cfg.SecretFile)
	if err != nil {
		return nil, "", fmt.Errorf("cluster.secret_file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < minClusterSecret {
		return nil, "", fmt.Errorf("cluster.secret_file %s: the secret is %d bytes, shorter than %d (make one with: openssl rand -base64 32)", cfg.SecretFile, len(secret), minClusterSecret)
	}
	var roots *x509.CertPool // nil: the system's
	if cfg.CAFile != "" {
		var err error
		if roots, err = caPool(cfg.CAFile); err != nil {
			return nil, "", fmt.Errorf("cluster.ca_file: %w", err)
		}
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: relayDialTimeout}).DialContext,
		TLSHandshakeTimeout: relayDialTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 16,
	}}
	hub := agentlink.NewCluster(agentlink.Cluster{
		Store:   db,
		Node:    node,
		URL:     strings.TrimRight(cfg.AdvertiseURL, "/"),
		Forward: agentlink.HTTPForwarder{Client: client, Secret: secret},
		Logger:  log,
	})
	log.Info("agents' calls are relayed between nodes", "advertise_url", cfg.AdvertiseURL, "node", node)
	return hub, secret, nil
}
