package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/config"
	"berth/share"
)

// directoryOptions maps the directory section onto the account service:
// the timeout, the networks servers may be at, and the authorities of directory.ca_file, which replace
// the system's for LDAPS servers, as smtp.ca_file does for mail.
func directoryOptions(cfg config.Directory) (account.DirectoryOptions, error) {
	o := account.DirectoryOptions{Timeout: cfg.Timeout}
	nets, err := config.Prefixes(cfg.AllowedNetworks)
	if err != nil {
		return o, fmt.Errorf("directory.allowed_networks: %w", err)
	}
	o.AllowedNetworks = nets
	if cfg.CAFile == "" {
		return o, nil
	}
	pool, err := caPool(cfg.CAFile)
	if err != nil {
		return o, fmt.Errorf("directory.ca_file: %w", err)
	}
	o.RootCAs = pool
	return o, nil
}

// directoryJobs import, in the background, the persons of every
// organization's directory servers (auth sources) whose policy enables
// them (ad_enabled), and give the new ones their sync roots.
type directoryJobs struct {
	jobs     *clusterJobs // runs each round once per cluster; nil: here
	accounts *account.Service
	shares   *share.Service
	log      *slog.Logger
	// imports counts imports by result: ok, error (the server failed
	// or refused berth).
	imports *prometheus.CounterVec
}

// newDirectoryJobs builds the jobs; reg may be nil.
func newDirectoryJobs(accounts *account.Service, shares *share.Service, log *slog.Logger, reg prometheus.Registerer) *directoryJobs {
	j := &directoryJobs{accounts: accounts, shares: shares, log: log,
		imports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_directory_imports_total",
			Help: "Imports of persons from directory servers (auth sources), by result.",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(j.imports)
	}
	return j
}

// loop imports every source at once, then every interval until ctx
// ends; interval 0 turns the schedule off.
func (j *directoryJobs) loop(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	run := func() { j.jobs.once(ctx, "directory-import", j.run) }
	run()
	every(ctx, interval, run)
}

// run imports each source once. One that fails is logged and recorded
// (on the source and in the activity log) and the walk goes on; those of
// organizations whose policy leaves directories off are passed over.
func (j *directoryJobs) run(ctx context.Context) {
	var after uint64
	for ctx.Err() == nil {
		srcs, err := j.accounts.AuthSourcesAfter(ctx, after, 100)
		if err != nil {
			if ctx.Err() == nil {
				j.log.Error("directory import: listing the sources", "error", err)
			}
			return
		}
		for _, a := range srcs {
			after = a.ID
			rep, err := j.accounts.ImportAuthSource(ctx, a.ID)
			// The persons an import made before it failed get
			// their roots too, and those an earlier import made
			// whose roots were never made (ImportReport.Rootless).
			for _, p := range slices.Concat(rep.Created, rep.Rootless) {
				if ctx.Err() != nil {
					return
				}
				// FirstSyncRoot: an import through the API running
				// alongside makes the same persons' roots.
				if _, _, err := j.shares.FirstSyncRoot(ctx, p); err != nil {
					j.log.Warn("sync root of an imported person not created", "person", p.ID, "error", err)
				}
			}
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, account.ErrDirectoryDisabled), errors.Is(err, account.ErrNotFound):
				continue
			case err != nil:
				j.imports.WithLabelValues("error").Inc()
				j.log.Warn("directory import failed", "auth_source", a.ID, "organization", a.OrganizationID, "url", a.URL(), "error", err)
				continue
			}
			j.imports.WithLabelValues("ok").Inc()
			j.log.Info("directory import", "auth_source", a.ID, "organization", a.OrganizationID, "report", rep.String())
		}
		if len(srcs) < 100 {
			return
		}
	}
}
