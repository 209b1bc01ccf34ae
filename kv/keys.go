package kv

import "encoding/binary"

// Key returns prefix followed by each part as 8 big-endian bytes, the
// layout described in the package documentation. Key("node/", root, id)
// is the key of a node; Key("node/", root) the prefix to scan a root's nodes.
func Key(prefix string, parts ...uint64) []byte {
	k := make([]byte, 0, len(prefix)+8*len(parts))
	k = append(k, prefix...)
	for _, p := range parts {
		k = binary.BigEndian.AppendUint64(k, p)
	}
	return k
}

// KeyString is Key with a trailing string, for keys that end in a name:
// KeyString("child/", []uint64{root, parent}, name). The string is last and
// unterminated, so a scan of KeyString(p, ids, "ab") also finds "abc"; scan
// Key(p, ids...) to list every name under ids.
func KeyString(prefix string, ids []uint64, s string) []byte {
	k := make([]byte, 0, len(prefix)+8*len(ids)+len(s))
	k = append(k, prefix...)
	for _, id := range ids {
		k = binary.BigEndian.AppendUint64(k, id)
	}
	return append(k, s...)
}

// AppendUint64 appends v to b as 8 big-endian bytes, so that integer keys
// sort numerically under bytewise comparison.
func AppendUint64(b []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(b, v)
}

// Uint64At decodes the big-endian integer at key[offset:offset+8], the
// inverse of AppendUint64; Uint64At(k, len("node/")+8) is the node id of a
// Key("node/", root, id). It panics if key is too short, like a slice
// expression, because a short key means the caller's layout is wrong.
func Uint64At(key []byte, offset int) uint64 {
	return binary.BigEndian.Uint64(key[offset : offset+8])
}
