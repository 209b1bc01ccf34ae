package postgres

import (
	"context"
	"testing"

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
