package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"berth/kv/postgres/pgtest"
)

// TestRaiseSequence: ids after a raise are above the floor, a lower floor
// leaves a sequence alone, and a kind never used starts above it.
func TestRaiseSequence(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	d, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.NextID(ctx, "used"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		kind  string
		floor uint64
		above uint64 // the next id a new process gets must exceed it
	}{
		{"used", 5000, 5000},
		{"used", 10, 5000}, // lower: no change
		{"new", 700, 700},
	}
	for _, tt := range tests {
		if err := d.RaiseSequence(ctx, tt.kind, tt.floor); err != nil {
			t.Fatalf("RaiseSequence(%s, %d): %v", tt.kind, tt.floor, err)
		}
	}
	// A second store on the same database, as the node after migrate.
	other, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tt := range tests {
		id, err := other.NextID(ctx, tt.kind)
		if err != nil {
			t.Fatal(err)
		}
		if id <= tt.above {
			t.Errorf("NextID(%s) after raising to %d = %d, want above %d", tt.kind, tt.floor, id, tt.above)
		}
	}
}

// TestNextOrderedID: ordered ids rise in the order they are asked for,
// whichever of two stores on one database asks, past every id either
// leased, where NextID's leases interleave (A's first lease is below
// B's, so A's next id is below B's earlier one).
func TestNextOrderedID(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	var nodes [2]*DB
	for i := range nodes {
		d, err := Open(ctx, Options{DSN: dsn, IDLease: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		nodes[i] = d
	}
	a, b := nodes[0], nodes[1]
	leasedA, _ := a.NextID(ctx, "leased")
	leasedB, _ := b.NextID(ctx, "leased")
	if again, _ := a.NextID(ctx, "leased"); again > leasedB {
		t.Fatalf("NextID: A %d, B %d, A again %d: the leases do not interleave as this test expects", leasedA, leasedB, again)
	}
	var last uint64
	for i := range 25 {
		d := nodes[i%2]
		if i%3 == 0 {
			if _, err := d.NextID(ctx, "mixed"); err != nil {
				t.Fatal(err)
			}
		}
		id, err := d.NextOrderedID(ctx, "ordered")
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("NextOrderedID call %d on node %d = %d, not above the previous %d", i, i%2, id, last)
		}
		last = id
		// Past every id a lease of the same kind reserved.
		leased, _ := d.NextID(ctx, "mixed")
		mixed, err := nodes[(i+1)%2].NextOrderedID(ctx, "mixed")
		if err != nil {
			t.Fatal(err)
		}
		if mixed <= leased {
			t.Fatalf("NextOrderedID(mixed) = %d after the other store's lease handed out %d", mixed, leased)
		}
	}
}

// TestSequencesCommitAsync: the sequences' statements run on connections
// whose commits do not wait for the WAL flush (seqConns), and only
// theirs: the activity log takes an id a write, and each id's commit
// held the sequence's row through a disk flush, queueing every node's
// writes on it. Transactions and the other statements still wait.
func TestSequencesCommitAsync(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	d, err := Open(ctx, Options{DSN: srv.NewDatabase(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		name string
		pool interface {
			QueryRow(context.Context, string, ...any) pgx.Row
		}
		want string
	}{
		{"sequences", d.seq, "off"},
		{"transactions", d.pool, "on"},
		{"generation and expiry", d.aux, "on"},
	} {
		var got string
		if err := tc.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&got); err != nil || got != tc.want {
			t.Errorf("%s: synchronous_commit %q (%v), want %q", tc.name, got, err, tc.want)
		}
	}
	if id, err := d.NextOrderedID(ctx, "activity"); err != nil || id == 0 {
		t.Fatalf("NextOrderedID: %d %v", id, err)
	}
}
