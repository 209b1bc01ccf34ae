package chunk_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"

	"berth/vfs/chunk"
)

// TestEncode holds the cases of a chunk's encoding: the seal round trip,
// what Decode and Verify say of damaged or legacy blobs. An encoding bug
// found later becomes a row here.
func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		// was in writer_test.go
		{"EncodeDecode", encodeDecode},
		// was in writer_test.go
		{"SealedCorruption", sealedCorruption},
		// was in writer_test.go
		{"LegacyZstdBlob", legacyZstdBlob},
		// was in writer_test.go
		{"VerifyPlain", verifyPlain},
		{"Malformed", malformed},
	} {
		t.Run(tc.name, tc.run)
	}
}

// encoders are the encodings a Writer writes or wrote: S2 now, sealed
// zstd before. Both must keep decoding.
func encoders() map[string]func(chunk.ID, []byte) []byte {
	enc := chunk.NewEncoder()
	return map[string]func(chunk.ID, []byte) []byte{
		"s2":   func(id chunk.ID, plain []byte) []byte { return chunk.Encode(nil, id, plain) },
		"zstd": func(id chunk.ID, plain []byte) []byte { return chunk.EncodeZstd(nil, enc, id, plain) },
	}
}

func encodeDecode(t *testing.T) {
	dec := chunk.NewDecoder()
	defer dec.Close()
	for name, encode := range encoders() {
		t.Run(name, func(t *testing.T) { encodeDecodeWith(t, encode, dec) })
	}
}

func encodeDecodeWith(t *testing.T, encode func(chunk.ID, []byte) []byte, dec *zstd.Decoder) {
	for _, plain := range [][]byte{nil, []byte("x"), textData(1, mib), randomData(1, mib), mixedData(1, mib)} {
		id := chunk.Sum(plain)
		blob := encode(id, plain)
		got, err := chunk.Decode(id, blob, dec)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Decode(Encode(%d bytes)) = %d bytes, %v", len(plain), len(got), err)
		}
		if err := chunk.Verify(id, blob, dec); err != nil {
			t.Fatalf("Verify(Encode(%d bytes)) = %v", len(plain), err)
		}
		if _, err := chunk.Decode(chunk.Sum([]byte("other")), blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("Decode with wrong id = %v, want ErrCorrupt", err)
		}
	}
	for _, blob := range [][]byte{nil, {7, 1, 2}, {1, 0xde, 0xad}, {2, 0xde, 0xad}, {3, 0xde, 0xad}} {
		if _, err := chunk.Decode(chunk.ID{}, blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("Decode(%v) = %v, want ErrCorrupt", blob, err)
		}
	}
}

// sealedCorruption flips one bit at a time across a compressed blob:
// every flip, in the header, the seal or the frame, is ErrCorrupt.
func sealedCorruption(t *testing.T) {
	for name, encode := range encoders() {
		t.Run(name, func(t *testing.T) { sealedCorruptionWith(t, encode) })
	}
}

func sealedCorruptionWith(t *testing.T, encode func(chunk.ID, []byte) []byte) {
	dec := chunk.NewDecoder()
	defer dec.Close()
	plain := textData(3, mib)
	id := chunk.Sum(plain)
	blob := encode(id, plain)
	if len(blob) > len(plain)/2 {
		t.Fatalf("text did not compress: %d of %d bytes", len(blob), len(plain))
	}
	step := len(blob)/200 + 1
	for i := 0; i < len(blob); i += step {
		bad := bytes.Clone(blob)
		bad[i] ^= 0x10
		if _, err := chunk.Decode(id, bad, dec); !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("bit flipped at %d of %d: Decode = %v, want ErrCorrupt", i, len(blob), err)
		}
	}
	if _, err := chunk.Decode(id, blob[:len(blob)-1], dec); !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("truncated blob: Decode = %v, want ErrCorrupt", err)
	}
}

// legacyZstdBlob reads the encoding earlier versions wrote: header 1 and
// a checksummed zstd frame, verified by hashing the plain bytes.
func legacyZstdBlob(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	dec := chunk.NewDecoder()
	defer dec.Close()
	plain := textData(4, mib)
	id := chunk.Sum(plain)
	blob := enc.EncodeAll(plain, []byte{1})
	got, err := chunk.Decode(id, blob, dec)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("legacy blob: %d bytes, %v", len(got), err)
	}
	if _, err := chunk.Decode(chunk.Sum(nil), blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("legacy blob with wrong id = %v, want ErrCorrupt", err)
	}
}

// TestVerifyPlain: a frame sealed for an id whose plain bytes it does not
// hold passes the fast check (only a writer bug could make one) but not
// fsck's deep one.
func verifyPlain(t *testing.T) {
	for name, encode := range encoders() {
		t.Run(name, func(t *testing.T) { verifyPlainWith(t, encode) })
	}
}

func verifyPlainWith(t *testing.T, encode func(chunk.ID, []byte) []byte) {
	dec := chunk.NewDecoder()
	defer dec.Close()
	plain := textData(5, mib)
	wrong := chunk.Sum([]byte("not these bytes"))
	blob := encode(wrong, plain)
	if _, err := chunk.Decode(wrong, blob, dec); err != nil {
		t.Fatalf("Decode = %v, want the seal to hold", err)
	}
	if err := chunk.Verify(wrong, blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("Verify = %v, want ErrCorrupt", err)
	}
}

// malformed: blobs no Writer makes, at the bounds of what a reader
// checks (the seal's length, the flags, a chunk's largest size), are
// ErrCorrupt to Decode, to Verify and to a ReadPool, never plain bytes.
func malformed(t *testing.T) {
	dec := chunk.NewDecoder()
	defer dec.Close()
	head := func(flag byte, n int) []byte { return append([]byte{flag}, make([]byte, n)...) }
	// A chunk one byte past the largest, sealed for its own id: the
	// seal holds, the size does not.
	big := bytes.Repeat([]byte("berth "), (chunk.MaxChunkSize+1)/6+1)[:chunk.MaxChunkSize+1]
	bigID := chunk.Sum(big)
	bigBlob := chunk.Encode(nil, bigID, big)
	if len(bigBlob) > len(big)/2 {
		t.Fatalf("the large chunk did not compress: %d of %d bytes", len(bigBlob), len(big))
	}
	var zero chunk.ID
	for _, tc := range []struct {
		name string
		id   chunk.ID
		blob []byte
	}{
		{"empty", zero, nil},
		{"raw, wrong bytes", zero, head(0, 3)},
		{"sealed zstd, a byte short of its seal", zero, head(2, 31)},
		{"sealed zstd, only a wrong seal", zero, head(2, 32)},
		{"s2, a byte short of its seal", zero, head(3, 31)},
		{"s2, only a wrong seal", zero, head(3, 32)},
		{"s2, a wrong seal and a frame", zero, head(3, 64)},
		{"unknown flag 4", zero, head(4, 64)},
		{"unknown flag 255", zero, head(255, 64)},
		{"s2, past the largest chunk", bigID, bigBlob},
		{"raw, flagged s2", chunk.Sum([]byte("plain")), append([]byte{3}, "plain"...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if plain, err := chunk.Decode(tc.id, tc.blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
				t.Errorf("Decode = %d bytes, %v; want ErrCorrupt", len(plain), err)
			}
			if err := chunk.Verify(tc.id, tc.blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
				t.Errorf("Verify = %v; want ErrCorrupt", err)
			}
			s := chunk.NewMemory()
			if err := s.Put(t.Context(), tc.id, tc.blob); err != nil {
				t.Fatal(err)
			}
			r := chunk.NewReader(t.Context(), s, []chunk.Ref{{ID: tc.id, Size: 5}})
			defer r.Close()
			if _, err := r.ReadAt(make([]byte, 1), 0); !errors.Is(err, chunk.ErrCorrupt) {
				t.Errorf("ReadAt = %v; want ErrCorrupt", err)
			}
		})
	}
}
