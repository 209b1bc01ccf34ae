package chunk

import (
	"math/rand/v2"
	"testing"
)

// TestScanLanes holds scan, which rolls several fingerprints at once, to
// scan1, which rolls one: the same first match and fingerprint for
// every mask, starting fingerprint and length, and for matches planted
// in each lane, at each lane's first and last byte, in several lanes of
// one round, and in the tail after the rounds. A bug found later becomes
// a row here.
func TestScanLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	round := scanLanes * laneBlock
	// fpAt is the fingerprint after data[at], rolled from fp at data[0].
	fpAt := func(fp uint64, data []byte, at int) uint64 {
		for _, c := range data[:at+1] {
			fp = fp<<1 + gear[c]
		}
		return fp
	}
	for _, tc := range []struct {
		name  string
		n     int
		mask  uint64
		fp    uint64
		plant []int // positions made to match (where some byte value can)
	}{
		{"empty", 0, maskL, 0, nil},
		{"shorter than a round", round - 1, maskL, 7, nil},
		{"one round, no match", round, maskS, 0, nil},
		{"rounds and a tail, no match", 3*round + 100, maskS, 0, nil},
		{"carried fingerprint", 2 * round, maskS, 0xdeadbeefcafe, nil},
		{"every mask bit clear matches at once", round, 0, 0, nil},
		{"lane 0 first byte", round, maskL, 0, []int{0}},
		{"lane 0 last byte", round, maskL, 0, []int{laneBlock - 1}},
		{"lane 1 first byte", round, maskL, 0, []int{laneBlock}},
		{"lane 3 last byte", round, maskL, 0, []int{round - 1}},
		{"lane 3 early, lane 0 late", round, maskL, 0, []int{laneBlock - 2, 3*laneBlock + 5}},
		{"lanes 1 and 2 at one step", round, maskL, 0, []int{laneBlock + 9, 2*laneBlock + 9}},
		{"second round", 2 * round, maskL, 3, []int{round + 2*laneBlock + 100}},
		{"tail", 2*round + 500, maskL, 0, []int{2*round + 499}},
		{"near the window", round, maskL, 0, []int{laneBlock + window}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for try := 0; try < 20; try++ {
				data := random(tc.n)
				// The planted positions match a mask of the bits clear in
				// all their fingerprints, about 64 >> len(plant) of them,
				// so that few other positions do.
				masks := []uint64{tc.mask, maskS, maskL}
				if len(tc.plant) > 0 {
					var or uint64
					for _, at := range tc.plant {
						or |= fpAt(tc.fp, data, at)
					}
					masks = []uint64{^or}
					if j, _ := scan1(tc.fp, ^or, data); j < 0 || j > tc.plant[0] {
						t.Fatalf("planted a match at %d, found %d", tc.plant[0], j)
					}
				}
				for _, mask := range masks {
					wantJ, wantF := scan1(tc.fp, mask, data)
					gotJ, gotF := scan(tc.fp, mask, data)
					if gotJ != wantJ || gotF != wantF {
						t.Fatalf("try %d, mask %x: scan %d %x, one fingerprint %d %x", try, mask, gotJ, gotF, wantJ, wantF)
					}
				}
			}
		})
	}
}

// BenchmarkScan compares one fingerprint with scanLanes of them over
// 3 MiB where nothing matches, the span past a chunk's normal size.
//
//	go test -run '^$' -bench Scan ./vfs/chunk
func BenchmarkScan(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	const never = ^uint64(0) // a fingerprint of zero only
	for _, bc := range []struct {
		name string
		f    func(uint64, uint64, []byte) (int, uint64)
	}{{"one", scan1}, {"lanes", scan}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				bc.f(1, never, data)
			}
		})
	}
}
