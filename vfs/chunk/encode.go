package chunk

import (
	"crypto/subtle"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
)

// Blob header bytes. The header lets a reader tell the encodings apart
// without trusting anything outside the blob.
//
//   - encRaw: the plain bytes follow; a read checks that they hash to the id.
//   - encZstd: a zstd frame follows; a read decodes it and hashes the plain
//     bytes. Written by earlier versions, still read.
//   - encSealed: a 32-byte seal then a zstd frame without its own checksum.
//     The seal is BLAKE3 keyed with the id over the frame, so a read checks
//     the few stored bytes instead of the several times larger plain ones:
//     on text that compresses 8:1 this makes reads about 1.5 times faster
//     (hashing the plain bytes cost a third of the decoding). A frame
//     whose seal holds is, bit for bit, the one written for this id, and
//     zstd decoding is deterministic, so corruption is still an error.
//     Fsck's deep check (Verify) also hashes the plain bytes. Written by
//     earlier versions, still read.
//   - encS2: a 32-byte seal, as for encSealed, then an S2 block
//     (klauspost/compress/s2, default level). What Encode writes now.
//
// Why S2 and not zstd on the write path (BenchmarkEncode, 1 MiB chunks,
// one core of this 2-core machine under load 11, MB/s of plain bytes and
// stored/plain):
//
//	            random            text (logs)       mixed (64 KiB each)
//	zstd fastest  1,560  1.00     206  0.165        627  0.584
//	S2            21,600  1.00    402  0.286      1,640  0.660
//	S2 better     12,500  1.00    289  0.268      1,000  0.640
//
// With the probe below and the BLAKE3 hash, what the Writer does per chunk
// (Encode) went from 1,020 MB/s (zstd) to 2,180 on random chunks, and
// from 250 to 550 on text.
//
// zstd at its fastest level compresses text at about 200 MB/s a core: on a
// 2-core server that alone caps an upload of text below the disk's 1.2
// GB/s, and it gives up on incompressible data at 1.5 GB/s, a third of the
// CPU a random upload costs. S2 gives up on incompressible chunks at about
// 20 GB/s (nearly free: every byte is looked at once) and compresses text
// twice as fast, for files some 1.7 times larger on text, still a
// quarter of the plain size; it also decodes several times faster than
// zstd, which reads gain. "Better" costs 1.4 to 1.6 times the CPU for 4% to
// 6% smaller blobs: not worth it on the hot path. Compression is then never
// what bounds a write; the bytes stay checked by the same seal.
const (
	encRaw    byte = 0
	encZstd   byte = 1
	encSealed byte = 2
	encS2     byte = 3
)

// sealSize is the length of a sealed blob's seal.
const sealSize = 32

// blobHead is what precedes a sealed blob's frame: the header byte and
// the seal.
const blobHead = 1 + sealSize

// maxBlobLen is the room encodeInto needs for a chunk of n plain bytes:
// the head and S2's bound on a block of n bytes, which a raw blob (1+n)
// never exceeds.
func maxBlobLen(n int) int { return blobHead + s2.MaxEncodedLen(n) }

// minSavingNum/minSavingDen: a compressed chunk is kept only if it is at most
// 31/32 (about 97%) of the plain size. Below that saving the decompression
// cost on every read is not worth the few bytes.
const (
	minSavingNum = 31
	minSavingDen = 32
)

// Sum returns the ID of plain bytes.
func Sum(plain []byte) ID { return ID(blake3.Sum256(plain)) }

// seal is the keyed hash that ties a stored zstd frame to its id.
func seal(id ID, frame []byte) [sealSize]byte {
	h, err := blake3.NewKeyed(id[:])
	if err != nil {
		panic(err) // only a key of the wrong length fails; an ID is 32 bytes
	}
	_, _ = h.Write(frame)
	var out [sealSize]byte
	h.Sum(out[:0])
	return out
}

// Encode appends the blob for plain, whose id is id, to dst[:0] and returns
// it: the header byte then either a sealed S2 block (when it shrinks the
// chunk by a few percent) or the plain bytes. It is safe for concurrent use.
func Encode(dst []byte, id ID, plain []byte) []byte {
	need := maxBlobLen(len(plain))
	if cap(dst) < need {
		dst = alignedSlice(need)
	}
	return encodeInto(dst[:need], id, plain)
}

// encodeInto is Encode into dst, of maxBlobLen(len(plain)) bytes: the
// one encoding of Encode and of the Writer, which cuts dst from its
// arena. It returns the part of dst the blob takes.
func encodeInto(dst []byte, id ID, plain []byte) []byte {
	if !incompressible(dst[blobHead:], plain) {
		if blob, ok := sealS2(dst, id, plain); ok {
			return blob
		}
	}
	dst[0] = encRaw
	return dst[:1+copy(dst[1:], plain)]
}

// EncodeZstd is Encode with the sealed zstd encoding earlier versions
// wrote (encSealed). Readers still take it; tests use it to make such
// blobs. enc must come from NewEncoder and is not safe for concurrent use.
func EncodeZstd(dst []byte, enc *zstd.Encoder, id ID, plain []byte) []byte {
	dst = append(dst[:0], make([]byte, blobHead)...)
	dst = enc.EncodeAll(plain, dst)
	if !worth(len(dst)-blobHead, len(plain)) {
		dst = append(dst[:0], encRaw)
		return append(dst, plain...)
	}
	dst[0] = encSealed
	s := seal(id, dst[blobHead:])
	copy(dst[1:blobHead], s[:])
	return dst
}

// Probing: a chunk of at least probeMin bytes is first sampled at
// probeCount spread places of probeSize bytes; when the samples do
// not compress, the chunk is stored raw without compressing the rest.
// S2 on incompressible data still copies every byte out as a literal (in
// a profile of a random upload, as much CPU as the copy into the page
// cache); the probe costs a sixteenth of that. A chunk compressible only
// in a part no sample touches is stored raw: a few percent of the bytes
// of such rare chunks, for a cheap bail-out on every photo, video and
// archive.
const (
	probeMin   = 256 << 10
	probeCount = 4
	probeSize  = 16 << 10
)

// incompressible reports whether the probe's samples of plain (a chunk of
// at least probeMin bytes) do not compress: then plain is stored raw
// without compressing the rest. scratch holds at least
// s2.MaxEncodedLen(probeSize) bytes (a chunk's maxBlobLen less the head).
func incompressible(scratch, plain []byte) bool {
	if len(plain) < probeMin {
		return false
	}
	var in, out int
	for i := range probeCount {
		// The first and last bytes and thirds between: no power of
		// two apart, so data that alternates by one is not missed.
		off := (len(plain) - probeSize) * i / (probeCount - 1)
		sample := plain[off : off+probeSize]
		in += len(sample)
		out += len(s2.Encode(scratch, sample))
	}
	return !worth(out, in)
}

// sealS2 writes the sealed S2 blob of plain into dst, of at least
// maxBlobLen(len(plain)) bytes, and reports whether it
// saves enough to keep. It returns the part of dst written either way.
func sealS2(dst []byte, id ID, plain []byte) ([]byte, bool) {
	frame := s2.Encode(dst[blobHead:], plain)
	dst = dst[:blobHead+len(frame)]
	if !worth(len(frame), len(plain)) {
		return dst, false
	}
	dst[0] = encS2
	s := seal(id, frame)
	copy(dst[1:blobHead], s[:])
	return dst, true
}

// worth reports whether encoded bytes of plain save enough to keep.
func worth(encoded, plain int) bool {
	return int64(encoded)*minSavingDen <= int64(plain)*minSavingNum
}

// Decode returns the plain bytes of blob, checking it against id: the plain
// bytes' hash for raw blobs, the seal for sealed ones. A blob that does not
// check out or decode is ErrCorrupt. The result may alias blob (raw chunks
// are not copied).
func Decode(id ID, blob []byte, dec *zstd.Decoder) ([]byte, error) {
	return decodeInto(nil, id, blob, dec)
}

// Verify is Decode that also hashes the plain bytes of every encoding: the
// deep check of fsck, which trusts neither the seal nor the decoder.
func Verify(id ID, blob []byte, dec *zstd.Decoder) error {
	plain, err := Decode(id, blob, dec)
	if err != nil {
		return err
	}
	if Sum(plain) != id {
		return fmt.Errorf("%w: %s: plain bytes do not hash to the id", ErrCorrupt, id)
	}
	return nil
}

// compressed reports whether blob decodes into a separate buffer.
func compressed(blob []byte) bool {
	return len(blob) > 0 && (blob[0] == encZstd || blob[0] == encSealed || blob[0] == encS2)
}

// decodeInto is Decode with a reusable destination for the zstd cases.
func decodeInto(dst []byte, id ID, blob []byte, dec *zstd.Decoder) ([]byte, error) {
	if len(blob) == 0 {
		return nil, fmt.Errorf("%w: %s: empty blob", ErrCorrupt, id)
	}
	switch blob[0] {
	case encRaw:
		plain := blob[1:]
		if Sum(plain) != id {
			return nil, fmt.Errorf("%w: %s: hash mismatch", ErrCorrupt, id)
		}
		return plain, nil
	case encZstd:
		plain, err := dec.DecodeAll(blob[1:], dst[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, id, err)
		}
		if Sum(plain) != id {
			return nil, fmt.Errorf("%w: %s: hash mismatch", ErrCorrupt, id)
		}
		return plain, nil
	case encSealed:
		frame, err := unseal(id, blob)
		if err != nil {
			return nil, err
		}
		plain, err := dec.DecodeAll(frame, dst[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, id, err)
		}
		return plain, nil
	case encS2:
		frame, err := unseal(id, blob)
		if err != nil {
			return nil, err
		}
		return decodeS2(dst, id, frame)
	default:
		return nil, fmt.Errorf("%w: %s: unknown encoding %d", ErrCorrupt, id, blob[0])
	}
}

// unseal returns the frame of a sealed blob (encSealed, encS2) once its
// seal holds for id.
func unseal(id ID, blob []byte) ([]byte, error) {
	if len(blob) < blobHead {
		return nil, fmt.Errorf("%w: %s: short sealed blob", ErrCorrupt, id)
	}
	frame := blob[blobHead:]
	s := seal(id, frame)
	if subtle.ConstantTimeCompare(s[:], blob[1:blobHead]) != 1 {
		return nil, fmt.Errorf("%w: %s: seal mismatch", ErrCorrupt, id)
	}
	return frame, nil
}

// NewEncoder returns an encoder for EncodeZstd: fastest level, single-threaded
// because the Writer already runs one encoder per worker, and without zstd's
// own checksum, which the seal makes redundant.
func NewEncoder() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),
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
