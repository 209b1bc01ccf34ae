package postgres

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// tracer counts the round trips the engine makes to the database: each
// statement sent on its own, each batch (its statements go together), and
// each statement prepared for the connection's statement cache. A
// request's cost on a database over the network is mostly its round
// trips, so the figure is what to watch (RoundTrips, the benchmarks) when
// a change to the engine or to vfs adds reads.
type tracer struct {
	n atomic.Uint64
}

var (
	_ pgx.QueryTracer   = (*tracer)(nil)
	_ pgx.BatchTracer   = (*tracer)(nil)
	_ pgx.PrepareTracer = (*tracer)(nil)
)

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return ctx
}

func (t *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.n.Add(1)
	return ctx
}

func (t *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t *tracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

func (t *tracer) TracePrepareEnd(_ context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared {
		t.n.Add(1)
	}
}

// RoundTrips returns how many round trips to the database the store has
// made since Open (see tracer): divided by the requests served, the
// figure a change to the engine or to vfs's reads should lower.
func (d *DB) RoundTrips() uint64 { return d.trace.n.Load() }
