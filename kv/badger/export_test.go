package badger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"berth/kv"
)

// TestExport covers what berth migrate reads: every domain key in key
// order with its expiry, from a start key on, never the engine's own
// keys; and a sequence bound at or above every id handed out.
func TestExport(t *testing.T) {
	ctx := context.Background()
	db := openMemory(t, Options{})
	defer db.Close()
	err := db.Update(ctx, func(tx kv.Txn) error {
		for _, k := range []string{"b", "a", "c"} {
			if err := tx.Set([]byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		return tx.SetTTL([]byte("d"), []byte("vd"), time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 3 {
		if last, err = db.NextID(ctx, "node"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		start []byte
		want  string
	}{
		{"all", nil, "a=va b=vb c=vc d=vd+ttl "},
		{"after b", []byte("b"), "c=vc d=vd+ttl "},
		{"after the last", []byte("d"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			err := db.Export(ctx, tt.start, func(k, v []byte, exp time.Time) error {
				got += fmt.Sprintf("%s=%s", k, v)
				if !exp.IsZero() {
					if d := time.Until(exp); d < 58*time.Minute || d > time.Hour+time.Second {
						t.Errorf("%s expires in %v, want about 1h", k, d)
					}
					got += "+ttl"
				}
				got += " "
				return nil
			})
			if err != nil || got != tt.want {
				t.Fatalf("Export(%q) = %q, %v; want %q", tt.start, got, err, tt.want)
			}
		})
	}
	seqs, err := db.Sequences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seqs["node"] < last {
		t.Fatalf("Sequences: node bound %d, below the id %d handed out", seqs["node"], last)
	}
}
