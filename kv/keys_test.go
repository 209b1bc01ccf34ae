package kv

import (
	"bytes"
	"testing"
)

func TestKeyHelpers(t *testing.T) {
	k := Key("node/", 1, 0x0102030405060708)
	want := []byte("node/\x00\x00\x00\x00\x00\x00\x00\x01\x01\x02\x03\x04\x05\x06\x07\x08")
	if !bytes.Equal(k, want) {
		t.Fatalf("Key = %q, want %q", k, want)
	}
	if got := Uint64At(k, len("node/")+8); got != 0x0102030405060708 {
		t.Fatalf("Uint64At = %#x", got)
	}
	if !bytes.Equal(Key("rev/"), []byte("rev/")) {
		t.Fatal("Key without parts is the prefix")
	}
	ks := KeyString("child/", []uint64{3, 4}, "name.txt")
	if !bytes.Equal(ks, append(Key("child/", 3, 4), "name.txt"...)) {
		t.Fatalf("KeyString = %q", ks)
	}
	if !bytes.Equal(AppendUint64([]byte("x"), 258), []byte("x\x00\x00\x00\x00\x00\x00\x01\x02")) {
		t.Fatal("AppendUint64 is not big-endian")
	}
	// Big-endian keys order numerically.
	if bytes.Compare(Key("n/", 255), Key("n/", 256)) >= 0 {
		t.Fatal("Key(255) sorts after Key(256)")
	}
}
