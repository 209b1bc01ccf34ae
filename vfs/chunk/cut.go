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
// first byte after which it matches mask (or -1) and the fingerprint.
func scan(fp, mask uint64, data []byte) (int, uint64) {
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
