package chunk_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"berth/vfs/chunk"
)

// TestStoredOnlyWhenDurable: a chunk renamed into place shows in the
// directory before the sync of the directory makes the rename durable.
// Until then neither Has nor a Put of the same id may report it stored: an
// upload that found it would skip storing it and commit a file that a
// crash at that moment leaves without the chunk (the rename lost, the temp
// file removed at the next start).
func TestStoredOnlyWhenDurable(t *testing.T) {
	ctx := context.Background()
	for _, how := range []struct {
		name  string
		store func(d *chunk.Disk, id chunk.ID, blob []byte) error
	}{
		{"put", func(d *chunk.Disk, id chunk.ID, blob []byte) error { return d.Put(ctx, id, blob) }},
		{"batch", func(d *chunk.Disk, id chunk.ID, blob []byte) error {
			b := d.NewBatch()
			defer b.Abort()
			if err := b.Add(ctx, id, blob); err != nil {
				return err
			}
			return b.Commit(ctx)
		}},
	} {
		t.Run(how.name, func(t *testing.T) {
			d := newDisk(t)
			blob := []byte("a chunk")
			id := chunk.Sum(blob)
			renamed, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			chunk.SetBeforeSync(d, func() {
				once.Do(func() {
					close(renamed)
					<-resume
				})
			})
			stored := make(chan error, 1)
			go func() { stored <- how.store(d, id, blob) }()
			<-renamed
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if has, err := d.Has(short, id); has && err == nil {
				t.Error("Has reported a chunk whose rename is not durable yet")
			}
			if err := d.Put(short, id, blob); err == nil {
				t.Error("Put returned on a chunk whose rename is not durable yet")
			}
			cancel()
			close(resume)
			if err := <-stored; err != nil {
				t.Fatal(err)
			}
			if has, err := d.Has(ctx, id); !has || err != nil {
				t.Fatalf("Has after the store returned = %v, %v", has, err)
			}
			if got, err := d.Get(ctx, id); err != nil || string(got) != string(blob) {
				t.Fatalf("Get = %q, %v", got, err)
			}
		})
	}
}
