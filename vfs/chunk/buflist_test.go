package chunk

import (
	"bytes"
	"context"
	"runtime"
	"testing"
)

// TestBufList holds a Writer's buffer lists to what they promise: kept
// through garbage collections while a Write runs, at most max of them,
// and handed to the pool when the last Write ends, so that an idle
// Writer keeps none. A bug found later becomes a row here.
func TestBufList(t *testing.T) {
	buf := func() *[]byte { b := make([]byte, 1<<20); return &b }
	kept := func(l *bufList) int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.free)
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"kept through collections", func(t *testing.T) {
			l := newBufList(2)
			a, b := buf(), buf()
			l.put(a)
			l.put(b)
			runtime.GC()
			runtime.GC()
			if kept(l) != 2 {
				t.Fatalf("kept %d after two collections, want 2", kept(l))
			}
			if got := l.get(0); got != b {
				t.Fatal("get did not return the last buffer put")
			}
		}},
		{"at most max", func(t *testing.T) {
			l := newBufList(1)
			l.put(buf())
			l.put(buf())
			if kept(l) != 1 {
				t.Fatalf("kept %d, want 1", kept(l))
			}
		}},
		{"idle hands them to the pool", func(t *testing.T) {
			l := newBufList(2)
			l.put(buf())
			l.idle()
			if kept(l) != 0 {
				t.Fatalf("kept %d after idle, want 0", kept(l))
			}
		}},
		{"a Writer keeps none once its Writes end", func(t *testing.T) {
			w := NewWriter(NewMemory(), WriterOptions{SegmentSize: maxChunkSize, Segments: 2})
			data := bytes.Repeat([]byte("berth keeps no buffer idle "), 1<<19) // 13.5 MiB
			if _, _, err := w.Write(context.Background(), bytes.NewReader(data), -1); err != nil {
				t.Fatal(err)
			}
			if n := kept(w.segs) + kept(w.bufs); n != 0 {
				t.Fatalf("an idle Writer keeps %d buffers in its lists", n)
			}
			if w.arena.buf != nil || w.arena.inUse != 0 {
				t.Fatalf("an idle Writer keeps its blob arena (%d pages in use)", w.arena.inUse)
			}
			if w.active.Load() != 0 {
				t.Fatalf("%d Writes counted running", w.active.Load())
			}
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}
