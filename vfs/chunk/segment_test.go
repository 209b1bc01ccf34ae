package chunk_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc"

	"berth/vfs/chunk"
)

// TestSegments holds the cases of cutting a stream in segments: the cuts
// are those of go-cdc-chunkers' FastCDC reading the whole stream, whatever
// the segment size, the stream's length against it, and the data; an edit
// near a segment boundary adds only a few chunks. A bug found later
// becomes a row here.
func TestSegments(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"CutMatchesLibrary", cutMatchesLibrary},
		{"SegmentsCutAsOne", segmentsCutAsOne},
		{"EditNearBoundary", editNearBoundary},
		{"BudgetSharedByWrites", budgetSharedByWrites},
	} {
		t.Run(tc.name, tc.run)
	}
}

// libraryCuts returns the chunk lengths of the library's FastCDC over data,
// with the Writer's sizes.
func libraryCuts(t *testing.T, data []byte) []int {
	t.Helper()
	ch, err := chunkers.NewChunker("fastcdc-v1.0.0", bytes.NewReader(data), &chunkers.ChunkerOpts{
		MinSize: 256 << 10, NormalSize: 1 << 20, MaxSize: chunk.MaxChunkSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for {
		c, err := ch.Next()
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if len(c) > 0 {
			out = append(out, len(c))
		}
		if err == io.EOF {
			return out
		}
	}
}

func zeroData(_ uint64, n int) []byte { return make([]byte, n) }

var segmentKinds = []struct {
	name string
	gen  func(uint64, int) []byte
}{{"random", randomData}, {"text", textData}, {"mixed", mixedData}, {"zeros", zeroData}}

func cutMatchesLibrary(t *testing.T) {
	const lo, normal, hi = 256 << 10, 1 << 20, chunk.MaxChunkSize
	sizes := []int{0, 1, lo - 1, lo, lo + 1, normal - 1, normal, normal + 1, hi - 1, hi, hi + 1, 20*mib + 123}
	for _, k := range segmentKinds {
		for _, n := range sizes {
			data := k.gen(uint64(n), n)
			var got []int
			for pos := 0; pos < len(data); {
				c := chunk.Cut(data[pos:min(pos+hi, len(data))])
				got = append(got, c)
				pos += c
			}
			if want := libraryCuts(t, data); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s/%d: cut %v, library %v", k.name, n, got, want)
			}
		}
	}
}

func segmentsCutAsOne(t *testing.T) {
	const seg = chunk.MaxChunkSize
	sizes := []int{0, 1, seg - 1, seg, seg + 1, 2 * seg, 5*seg + 777}
	for _, k := range segmentKinds {
		for _, n := range sizes {
			data := k.gen(uint64(n)+9, n)
			want := libraryCuts(t, data)
			for _, opts := range []chunk.WriterOptions{
				{SegmentSize: seg, Segments: 2, Workers: 1},
				{SegmentSize: seg + 12345, Segments: 3},
				{SegmentSize: seg, SegmentBudget: 1}, // its own slot only: one at a time
				{SegmentSize: seg, SegmentBudget: seg},
				{},
			} {
				s := chunk.NewMemory()
				refs := write(t, chunk.NewWriter(s, opts), data)
				var got []int
				for _, r := range refs {
					got = append(got, int(r.Size))
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s/%d, segments of %d: cuts %v, one chunker %v", k.name, n, opts.SegmentSize, got, want)
				}
				if back := readAll(t, s, refs); !bytes.Equal(back, data) {
					t.Fatalf("%s/%d: read back differs", k.name, n)
				}
			}
		}
	}
}

// editNearBoundary changes one byte just before, at and just after a
// segment boundary (and a control far from one): the second version adds
// no more than a few chunks.
func editNearBoundary(t *testing.T) {
	const seg = chunk.MaxChunkSize
	for _, off := range []int{2*seg - 1, 2 * seg, 2*seg + 1, 2*seg + 300<<10, 5*seg/2 + 3} {
		data := randomData(77, 12*seg)
		s := chunk.NewMemory()
		var c counts
		w := chunk.NewWriter(s, chunk.WriterOptions{SegmentSize: seg, Segments: 2, Observer: c.observe})
		write(t, w, data)
		before := c.stored.Load()
		data[off] ^= 0xff
		write(t, w, data)
		if added := c.stored.Load() - before; added > 3 {
			t.Fatalf("one byte at %d (segments of %d) added %d chunks", off, seg, added)
		}
	}
}

// budgetSharedByWrites: Writes at once over a budget of one shared
// segment all finish (each has its own slot; the shared one passes
// between them) and store their streams whole.
func budgetSharedByWrites(t *testing.T) {
	const seg = chunk.MaxChunkSize
	s := chunk.NewMemory()
	w := chunk.NewWriter(s, chunk.WriterOptions{SegmentSize: seg, Segments: 3, SegmentBudget: seg})
	var wg sync.WaitGroup
	datas, refs := make([][]byte, 6), make([][]chunk.Ref, 6)
	for i := range datas {
		datas[i] = randomData(uint64(100+i), 5*seg+i*1000)
		wg.Go(func() {
			var err error
			if refs[i], _, err = w.Write(context.Background(), bytes.NewReader(datas[i]), -1); err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, data := range datas {
		if back := readAll(t, s, refs[i]); !bytes.Equal(back, data) {
			t.Fatalf("write %d: read back differs", i)
		}
	}
}
