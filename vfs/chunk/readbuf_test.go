package chunk

import (
	"context"
	"testing"
)

// TestReadBufferSize: a Reader's new chunk buffer holds what it is for,
// in whole blocks for a direct read, and is never larger than the 4 MiB
// and a block each buffer was before size classes. A bug found later
// becomes a row here.
func TestReadBufferSize(t *testing.T) {
	room := blobRoom(maxChunkSize)
	for _, tc := range []struct {
		name string
		need int
	}{
		{"empty chunk's blob", blobRoom(0)},
		{"tiny chunk's blob", blobRoom(100)},
		{"1 MiB chunk's blob", blobRoom(1 << 20)},
		{"1 MiB chunk decoded", 1 << 20},
		{"largest chunk decoded", maxChunkSize},
		{"largest chunk's blob", room},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewReadPool(ReadPoolOptions{})
			r := p.NewReader(context.Background(), NewMemory(), nil)
			defer r.Close()
			n := cap(*p.get(r, tc.need))
			if n < tc.need || n%dioAlign != 0 {
				t.Fatalf("buffer of %d bytes for %d: too small or not whole blocks", n, tc.need)
			}
			if n > room {
				t.Fatalf("buffer of %d bytes for %d, more than the %d of the largest blob", n, tc.need, room)
			}
			if n > tc.need+tc.need/4+dioAlign {
				t.Fatalf("buffer of %d bytes for %d: more than a quarter wasted", n, tc.need)
			}
		})
	}
}
