package kv

import (
	"bytes"
	"testing"
)

// TestKeyHelpers: the key builders write the layout of the package
// documentation, and integers read back and order numerically.
func TestKeyHelpers(t *testing.T) {
	tests := []struct {
		name      string
		got, want []byte
	}{
		{"Key", Key("node/", 1, 0x0102030405060708),
			[]byte("node/\x00\x00\x00\x00\x00\x00\x00\x01\x01\x02\x03\x04\x05\x06\x07\x08")},
		{"Key without parts is the prefix", Key("rev/"), []byte("rev/")},
		{"KeyString is Key and the string", KeyString("child/", []uint64{3, 4}, "name.txt"),
			append(Key("child/", 3, 4), "name.txt"...)},
		{"AppendUint64 is big-endian", AppendUint64([]byte("x"), 258), []byte("x\x00\x00\x00\x00\x00\x00\x01\x02")},
	}
	for _, tc := range tests {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if got := Uint64At(Key("node/", 1, 0x0102030405060708), len("node/")+8); got != 0x0102030405060708 {
		t.Errorf("Uint64At = %#x", got)
	}
	// Big-endian keys order numerically.
	if bytes.Compare(Key("n/", 255), Key("n/", 256)) >= 0 {
		t.Error("Key(255) sorts after Key(256)")
	}
}
