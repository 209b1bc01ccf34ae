package chunk

import (
	"github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc"
)

// The cut points are those of go-cdc-chunkers' FastCDC ("fastcdc-v1.0.0",
// normalization level 2, the sizes of writer.go), computed here on slices
// so that a stream held in segments is cut in place, without the
// library's copy into its scan buffer, and so that segments can be cut on
// separate goroutines (see segment.go). TestCutMatchesLibrary holds the
// two to the same cuts: changing them would stop new uploads from
// deduplicating against old ones.
var (
	gear         = &fastcdc.G
	maskS, maskL = fastcdcMasks(normalChunkSize, 2)
)

// fastcdcMasks is the library's calculateMasks: the bits of the normal
// size, plus (for chunks still short of it) or minus (past it) the
// normalization level, spread evenly over the 64-bit fingerprint.
func fastcdcMasks(normalSize, level int) (small, large uint64) {
	bits := 0
	for 1<<(bits+1) <= normalSize {
		bits++
	}
	return spacedMask(bits + level), spacedMask(bits - level)
}

func spacedMask(ones int) uint64 {
	step := 64 / ones
	var m uint64
	for i := range ones {
		if pos := 63 - i*step; pos >= 0 {
			m |= 1 << pos
		}
	}
	return m
}

// cut returns the length of the chunk that starts data, as FastCDC cuts
// it when data is all it can see (at most maxChunkSize bytes matter).
func cut(data []byte) int { return cutSplit(data, nil) }

// cutSplit is cut over the concatenation of a and b, without making it.
func cutSplit(a, b []byte) int {
	n := min(len(a)+len(b), maxChunkSize)
	if n <= minChunkSize {
		return n
	}
	normal := min(normalChunkSize, n)
	var fp uint64
	for _, r := range [2]struct {
		from, to int
		mask     uint64
	}{{minChunkSize, normal, maskS}, {normal, n, maskL}} {
		if r.from < len(a) {
			end := min(r.to, len(a))
			j, f := scan(fp, r.mask, a[r.from:end])
			if j >= 0 {
				return r.from + j
			}
			fp = f
		}
		if r.to > len(a) {
			start := max(r.from, len(a))
			j, f := scan(fp, r.mask, b[start-len(a):r.to-len(a)])
			if j >= 0 {
				return start + j
			}
			fp = f
		}
	}
	return n
}

// scan rolls the gear fingerprint over data and returns the index of the
// first byte after which it matches mask (or -1) and the fingerprint
// there (or at the end).
//
// One rolling hash is a chain of a shift and an add per byte, two cycles
// that no core runs faster, and it was a third of a write's CPU. But the
// fingerprint is a sum of table entries shifted left once per byte
// since: after 64 bytes an entry has left the 64 bits. So the value at
// any position follows from the 64 bytes before it alone (once the hash
// has run that long), and scan rolls scanLanes independent fingerprints
// over adjacent blocks of laneBlock bytes at once, each started 64 bytes
// before its block, which the core overlaps. The first match is the
// earliest lane's: a lane's match at step i is first of all lanes only
// once the lanes before it have no match left in the rest of their
// blocks, which scan checks one lane at a time.
func scan(fp, mask uint64, data []byte) (int, uint64) {
	g := gear
	pos := 0
	for ; len(data)-pos >= scanLanes*laneBlock; pos += scanLanes * laneBlock {
		w := (*[scanLanes * laneBlock]byte)(data[pos:])
		f0 := fp
		f1 := warm(w[1*laneBlock-window : 1*laneBlock])
		f2 := warm(w[2*laneBlock-window : 2*laneBlock])
		f3 := warm(w[3*laneBlock-window : 3*laneBlock])
		for i := range laneBlock {
			f0 = f0<<1 + g[w[i]]
			f1 = f1<<1 + g[w[i+1*laneBlock]]
			f2 = f2<<1 + g[w[i+2*laneBlock]]
			f3 = f3<<1 + g[w[i+3*laneBlock]]
			if f0&mask == 0 || f1&mask == 0 || f2&mask == 0 || f3&mask == 0 {
				for k, f := range [scanLanes]uint64{f0, f1, f2, f3} {
					at := pos + k*laneBlock + i
					if f&mask == 0 {
						return at, f
					}
					if j, f := scan1(f, mask, data[at+1:pos+(k+1)*laneBlock]); j >= 0 {
						return at + 1 + j, f
					}
				}
			}
		}
		fp = f3
	}
	j, f := scan1(fp, mask, data[pos:])
	if j >= 0 {
		j += pos
	}
	return j, f
}

const (
	// scanLanes fingerprints roll at once: four overlap on cores of
	// 2020 and later (BenchmarkScan); more run out of registers.
	scanLanes = 4
	// laneBlock is each lane's share of a round. A match ends the round
	// with up to three blocks' remainders scanned one lane at a time, so
	// a short block keeps that cheap; the 64 bytes each lane rolls first
	// are what a long block saves.
	laneBlock = 4 << 10
	// window is how many bytes a fingerprint depends on: its 64 bits.
	window = 64
)

// warm returns the fingerprint after data, rolled from zero.
func warm(data []byte) uint64 {
	var fp uint64
	for _, c := range data {
		fp = fp<<1 + gear[c]
	}
	return fp
}

// scan1 is scan with one fingerprint, for what is left after whole rounds.
func scan1(fp, mask uint64, data []byte) (int, uint64) {
	g := gear
	for i, c := range data {
		fp = fp<<1 + g[c]
		if fp&mask == 0 {
			return i, fp
		}
	}
	return -1, fp
}

// genuine reports whether a cut of length p found in the n bytes from a
// chunk's start is the one a longer view would find too: a fingerprint
// match, or the maximum size reached. Otherwise the chunk only ended
// where the view did.
func genuine(p, n int) bool {
	return p < n || n >= maxChunkSize
}

// MaxChunkSize is the longest chunk Cut returns: a caller that cuts a
// stream holds this many bytes of it (or all that is left) per cut.
const MaxChunkSize = maxChunkSize

// Cut returns the length of the chunk that starts data, cut where berth's
// writer cuts it, when data holds MaxChunkSize bytes or all that is left
// of the stream. A client that cuts its files with it (berth agent) finds
// the same chunk boundaries the server does, so the chunks of a file's
// new contents that the stored revision already has can be named by
// their byte ranges instead of sent.
func Cut(data []byte) int { return cut(data) }
