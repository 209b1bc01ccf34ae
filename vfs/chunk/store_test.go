package chunk_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth/vfs/chunk"
	"berth/vfs/chunk/chunktest"
)

func newDisk(t *testing.T) *chunk.Disk {
	t.Helper()
	d, err := chunk.NewDisk(filepath.Join(t.TempDir(), "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDiskConformance(t *testing.T) {
	chunktest.Run(t, func(t *testing.T) chunk.Store { return newDisk(t) })
}

func TestMemoryConformance(t *testing.T) {
	chunktest.Run(t, func(t *testing.T) chunk.Store { return chunk.NewMemory() })
}

func TestDiskLayoutAndCleanTemp(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	b := []byte("hello")
	id := chunk.Sum(b)
	if err := d.Put(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	h := id.String()
	want := filepath.Join(d.Dir(), h[:2], h)
	if d.Path(id) != want {
		t.Fatalf("Path = %s, want %s", d.Path(id), want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("blob not at %s: %v", want, err)
	}
	// A crash mid-Put leaves a temp file: Walk and Size ignore it and
	// CleanTemp removes it.
	tmp := filepath.Join(filepath.Dir(want), ".tmp-deadbeef")
	if err := os.WriteFile(tmp, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	size, err := d.Size(ctx)
	if err != nil || size != int64(len(b)) {
		t.Fatalf("Size with a temp file = %d, %v; want %d", size, err, len(b))
	}
	var ids []chunk.ID
	if err := d.Walk(ctx, func(id chunk.ID) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("Walk = %v, want [%s]", ids, id)
	}
	if err := d.CleanTemp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp file survived CleanTemp: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(want))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("left temp file %s", e.Name())
		}
	}
}

// Stores written with the two-level layout (ab/cd/<id>) stay readable.
func TestDiskLegacyLayout(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	b := []byte("old layout")
	id := chunk.Sum(b)
	h := id.String()
	legacy := filepath.Join(d.Dir(), h[:2], h[2:4], h)
	if err := os.MkdirAll(filepath.Dir(legacy), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Get(ctx, id); err != nil || string(got) != string(b) {
		t.Fatalf("Get legacy = %q, %v", got, err)
	}
	if has, err := d.Has(ctx, id); err != nil || !has {
		t.Fatalf("Has legacy = %v, %v", has, err)
	}
	var ids []chunk.ID
	if err := d.Walk(ctx, func(id chunk.ID) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("Walk = %v, want [%s]", ids, id)
	}
	if size, err := d.Size(ctx); err != nil || size != int64(len(b)) {
		t.Fatalf("Size = %d, %v", size, err)
	}
	if err := d.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if has, _ := d.Has(ctx, id); has {
		t.Fatal("legacy chunk survived Delete")
	}
}
