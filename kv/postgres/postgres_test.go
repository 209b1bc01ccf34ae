package postgres

import (
	"context"
	"testing"

	"berth/kv"
	"berth/kv/kvtest"
	"berth/kv/postgres/pgtest"
)

// open returns a store on a new database of srv, closed when t ends.
func open(t testing.TB, srv *pgtest.Server, opts Options) *DB {
	t.Helper()
	opts.DSN = srv.NewDatabase(t)
	d, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestConformance runs kv's conformance suite on PostgreSQL, one
// database per subtest.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
	kvtest.Run(t, func(t *testing.T) kv.Store { return open(t, srv, Options{}) })
}
