package chunk

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"
)

// checked remembers, for blobs a ReadPool has verified in full (the plain
// bytes' BLAKE3 for a raw blob, the seal for a sealed one), the XXH3-64
// of the stored bytes. A later read of the same blob computes it and,
// when it matches, decodes without hashing again; when it does not, the
// blob is verified in full as on a first read, so bytes that fail their
// hash are never served. Hashing the plain bytes of every raw chunk on
// every read was the largest cost of a large download after TLS (0.5
// CPU s/GiB of about 2.6).
//
// XXH3 rather than the CRC-32C this used before: on this project's
// 2-core VM (1 MiB, in cache) it runs at 84 GB/s against 21 for
// CRC-32C (hardware, three streams) and 0.67 for BLAKE3 on a loaded
// core; and 64 bits miss a changed blob less often than 32.
//
// It is bounded by maxChecked entries (about 80 bytes each); when full it
// starts afresh, which costs one full verification per chunk dropped.
type checked struct {
	mu sync.Mutex
	m  map[ID]uint64
}

// maxChecked bounds checked: 16,384 blobs, 16 GiB of 1 MiB chunks, about
// 1.3 MiB of memory when full.
const maxChecked = 1 << 14

// decode is decodeInto through the memo: a blob whose XXH3 is the one
// remembered for id is decoded without its hash or seal checked again;
// any other is checked in full, and remembered when it holds.
func (c *checked) decode(dst []byte, id ID, blob []byte, dec *zstd.Decoder) ([]byte, error) {
	sum := xxh3.Hash(blob)
	c.mu.Lock()
	want, ok := c.m[id]
	c.mu.Unlock()
	if ok && want == sum {
		if plain, ok, err := decodeVerified(dst, id, blob); ok {
			return plain, err
		}
	}
	plain, err := decodeInto(dst, id, blob, dec)
	if err != nil {
		return nil, err
	}
	c.store(id, sum)
	return plain, nil
}

// store records sum as verified id's, starting afresh when full.
func (c *checked) store(id ID, sum uint64) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxChecked {
		c.m = make(map[ID]uint64)
	}
	c.m[id] = sum
	c.mu.Unlock()
}

// remember records blob, which the caller made from plain bytes whose
// hash is id (a Writer), as verified: its first read is checked by its
// XXH3, not hashed in full. A blob changed on the device after that
// fails the check and is verified in full, as any other.
func (c *checked) remember(id ID, blob []byte) {
	c.store(id, xxh3.Hash(blob))
}

// decodeVerified decodes a blob already verified: raw and S2 blobs (what
// Encode writes) without their hash or seal; ok is false for the legacy
// zstd encodings, which take decodeInto's path.
func decodeVerified(dst []byte, id ID, blob []byte) (plain []byte, ok bool, err error) {
	switch {
	case len(blob) == 0:
		return nil, false, nil
	case blob[0] == encRaw:
		return blob[1:], true, nil
	case blob[0] == encS2 && len(blob) >= blobHead:
		plain, err := decodeS2(dst, id, blob[blobHead:])
		return plain, true, err
	}
	return nil, false, nil
}

// decodeS2 decodes the S2 block of a sealed blob whose seal has held (now
// or, for checked, on an earlier read of the same bytes), so its length
// is the writer's; the cap guards only against a writer bug allocating
// without bound.
func decodeS2(dst []byte, id ID, frame []byte) ([]byte, error) {
	n, err := s2.DecodedLen(frame)
	if err != nil || n > maxChunkSize {
		return nil, fmt.Errorf("%w: %s: s2 block of %d bytes: %v", ErrCorrupt, id, n, err)
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	plain, err := s2.Decode(dst[:n], frame)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, id, err)
	}
	return plain, nil
}
