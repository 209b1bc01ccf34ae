package chunk

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
)

// Blob header bytes. The header lets a reader tell the two encodings apart
// without trusting anything outside the blob.
const (
	encRaw  byte = 0
	encZstd byte = 1
)

// minSavingNum/minSavingDen: a compressed chunk is kept only if it is at most
// 31/32 (about 97%) of the plain size. Below that saving the decompression
// cost on every read is not worth the few bytes.
const (
	minSavingNum = 31
	minSavingDen = 32
)

// Sum returns the ID of plain bytes.
func Sum(plain []byte) ID { return ID(blake3.Sum256(plain)) }

// Encode appends the blob for plain to dst[:0] and returns it: one header byte
// then either the zstd frame (when it shrinks the chunk by a few percent) or
// the plain bytes. enc must have been created for EncodeAll use; it is not
// safe for concurrent use, so callers keep one per goroutine.
func Encode(dst []byte, enc *zstd.Encoder, plain []byte) []byte {
	dst, ok := compress(dst, enc, plain)
	if ok {
		return dst
	}
	dst = append(dst[:0], encRaw)
	return append(dst, plain...)
}

// compress writes the zstd blob of plain into dst[:0] and reports whether it
// is worth keeping. The slice is returned either way so its capacity is
// reused.
func compress(dst []byte, enc *zstd.Encoder, plain []byte) ([]byte, bool) {
	dst = append(dst[:0], encZstd)
	dst = enc.EncodeAll(plain, dst)
	return dst, int64(len(dst)-1)*minSavingDen <= int64(len(plain))*minSavingNum
}

// Decode returns the plain bytes of blob and checks that they hash to id. A
// blob that does not decode, or decodes to other bytes, is ErrCorrupt.
// The result may alias blob (raw chunks are not copied).
func Decode(id ID, blob []byte, dec *zstd.Decoder) ([]byte, error) {
	return decodeInto(nil, id, blob, dec)
}

// decodeInto is Decode with a reusable destination for the zstd case.
func decodeInto(dst []byte, id ID, blob []byte, dec *zstd.Decoder) ([]byte, error) {
	if len(blob) == 0 {
		return nil, fmt.Errorf("%w: %s: empty blob", ErrCorrupt, id)
	}
	var plain []byte
	switch blob[0] {
	case encRaw:
		plain = blob[1:]
	case encZstd:
		var err error
		plain, err = dec.DecodeAll(blob[1:], dst[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, id, err)
		}
	default:
		return nil, fmt.Errorf("%w: %s: unknown encoding %d", ErrCorrupt, id, blob[0])
	}
	if Sum(plain) != id {
		return nil, fmt.Errorf("%w: %s: hash mismatch", ErrCorrupt, id)
	}
	return plain, nil
}

// NewEncoder returns an encoder for Encode: fastest level, single-threaded
// because the Writer already runs one encoder per worker.
func NewEncoder() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		// Only invalid options make NewWriter fail; ours are constant.
		panic(err)
	}
	return enc
}

// NewDecoder returns a decoder for Decode. The memory cap guards against a
// corrupt frame header that claims a huge window.
func NewDecoder() *zstd.Decoder {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(maxChunkSize*2))
	if err != nil {
		panic(err)
	}
	return dec
}
