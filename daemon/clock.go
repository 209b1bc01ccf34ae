package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Several nodes read what each stamps by its own clock: the expiry of
// WebDAV and REST locks, the collector's grace for garbage, a staged
// upload's expiry. A node whose clock runs ahead of the one that locked
// a file takes the lock for expired early and lets another's write
// through (docs/operations.md, "Running several nodes"). The database's
// clock is the one all nodes meet, so each node compares its own with
// it, at start and every clockCheckEvery, and says so when they part.

// clockSkewWarn is how far a node's clock may be from the database's
// before it warns: NTP keeps clocks within milliseconds, and a lock's
// shortest life is seconds.
const clockSkewWarn = 2 * time.Second

// clockCheckEvery is how often a node compares its clock again.
const clockCheckEvery = 10 * time.Minute

// dbClock is a metadata store shared by nodes that tells its own time
// (kv/postgres).
type dbClock interface {
	Now(ctx context.Context) (time.Time, error)
}

// clockSkew returns how far the clock now is ahead of db's (negative:
// behind), measured against the midpoint of the round trip.
func clockSkew(ctx context.Context, db dbClock, now func() time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	before := now()
	theirs, err := db.Now(ctx)
	if err != nil {
		return 0, err
	}
	after := now()
	mid := before.Add(after.Sub(before) / 2)
	return mid.Sub(theirs), nil
}

// checkClock measures the skew, sets gauge (nil: none) and warns when it
// passes clockSkewWarn either way. A database it cannot reach is the
// watchdog's to report, not this.
func checkClock(ctx context.Context, db dbClock, now func() time.Time, gauge prometheus.Gauge, log *slog.Logger) {
	skew, err := clockSkew(ctx, db, now)
	if err != nil {
		return
	}
	if gauge != nil {
		gauge.Set(skew.Seconds())
	}
	if skew > clockSkewWarn || skew < -clockSkewWarn {
		log.Warn("this node's clock differs from the database's: keep the nodes' clocks in step (NTP), or locks taken on one node end early or late on another (docs/operations.md, Running several nodes)",
			"ahead_by", skew.Round(time.Millisecond).String())
	}
}

// watchClock runs checkClock now and every clockCheckEvery until ctx
// ends, on a metadata store that tells its time; on any other (Badger,
// one node) it does nothing.
func watchClock(ctx context.Context, db any, reg prometheus.Registerer, log *slog.Logger) {
	c, ok := db.(dbClock)
	if !ok {
		return
	}
	var gauge prometheus.Gauge
	if reg != nil {
		gauge = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_clock_skew_seconds",
			Help: "How far this node's clock is ahead of the metadata database's (negative: behind), measured every 10 minutes.",
		})
		reg.MustRegister(gauge)
	}
	checkClock(ctx, c, time.Now, gauge, log)
	every(ctx, clockCheckEvery, func() { checkClock(ctx, c, time.Now, gauge, log) })
}
