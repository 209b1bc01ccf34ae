package vfs

import (
	"math"
	"strings"
	"testing"
)

// TestKeys pins the stored key layout (keys.go) byte for byte: a key
// built differently is a store whose records are not found where they
// are, so every kind and every sort of name is written out here, not
// built by the code it checks. Each key is also exactly as long as its
// room: a caller appending to one (a prefix made a key) gets a copy, not
// a write into another key.
func TestKeys(t *testing.T) {
	const (
		a   = "\x01\x02\x03\x04\x05\x06\x07\x08" // id 0x0102030405060708
		z   = "\x00\x00\x00\x00\x00\x00\x00\x00"
		max = "\xff\xff\xff\xff\xff\xff\xff\xff"
		one = "\x00\x00\x00\x00\x00\x00\x00\x01"
	)
	const id = 0x0102030405060708
	long := strings.Repeat("n", 255)
	multi := "Straße 日本語 🙂.txt"
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"root", rootKey(id), "R/" + a + "/"},
		{"usage", usageKey(id, 15), "U/" + a + "/\x00\x00\x00\x00\x00\x00\x00\x0f/"},
		{"quota", quotaKey(id), "Q/" + a + "/"},
		{"location", locKey(id), "N/" + a + "/"},
		{"location of id 0", locKey(0), "N/" + z + "/"},
		{"folder marker", genKey(math.MaxUint64), "G/" + max + "/"},
		{"top folder", topKey(id), "F/" + a + "/"},
		{"children", childPrefix(id), "C/" + a + "/"},
		{"child", childKey(id, "f.txt"), "C/" + a + "/f.txt"},
		{"child, empty name", childKey(id, ""), "C/" + a + "/"},
		{"child, one byte", childKey(1, "a"), "C/" + one + "/a"},
		{"child, 255 bytes", childKey(id, long), "C/" + a + "/" + long},
		{"child, multibyte", childKey(id, multi), "C/" + a + "/" + multi},
		{"child, name with a slash", childKey(id, "a/b"), "C/" + a + "/a/b"},
		{"deleted children", deletedPrefix(id), "D/" + a + "/"},
		{"deleted child", deletedKey(id, 1), "D/" + a + "/" + one + "/"},
		{"times", timePrefix(id), "T/" + a + "/"},
		{"time", timeKey(id, 1, math.MaxUint64), "T/" + a + "/" + one + "/" + max + "/"},
		{"time before 1970", timeKey(1, -1, 1), "T/" + one + "/" + max + "/" + one + "/"},
		{"revisions", revPrefix(id), "V/" + a + "/"},
		{"revision", revKey(id, 1), "V/" + a + "/" + one + "/"},
		{"properties", propPrefix(id), "P/" + a + "/"},
		{"property", propKey(id, "DAV:displayname"), "P/" + a + "/DAV:displayname"},
		{"property, empty name", propKey(id, ""), "P/" + a + "/"},
		{"property, multibyte", propKey(id, multi), "P/" + a + "/" + multi},
		{"tally", tallyKey(id, 0), "Y/" + a + "/" + z + "/"},
		{"tally quota", tallyQuotaKey(id), "Z/" + a + "/"},
		{"intent", intentPrefix(id), "I/" + a + "/"},
		{"intent part", intentKey(id, 1), "I/" + a + "/" + one + "/"},
		{"staged", stagedKey(id), "S/" + a + "/"},
		{"staged part", stagedPartKey(id, 1), "W/" + a + "/" + one + "/"},
		{"names", nameEntryPrefix(id), "E/" + a + "/"},
		{"name", nameEntryKey(id, 1), "E/" + a + "/" + one + "/"},
		{"trigram", gramPrefix(id, "ABC"), "X/" + a + "/ABC/"},
		{"trigram entry", gramKey(id, "ABC", 1), "X/" + a + "/ABC/" + one + "/"},
		{"trigram, multibyte", gramPrefix(id, "ÄÄÄ"), "X/" + a + "/ÄÄÄ/"},
		{"trigram entry, multibyte", gramKey(id, "日本語", math.MaxUint64), "X/" + a + "/日本語/" + max + "/"},
		{"trigram entry, four-byte runes", gramKey(1, "🙂🙂🙂", 1), "X/" + one + "/🙂🙂🙂/" + one + "/"},
		{"listing sums", listSumPrefix(id), "H/" + a + "/"},
		{"listing sum", listSumKey(id, 15), "H/" + a + "/\x00\x00\x00\x00\x00\x00\x00\x0f/"},
		{"locked children", lockedPrefix(id), "L/" + a + "/"},
		{"locked child", lockedKey(id, 1), "L/" + a + "/" + one + "/"},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, tc.got, tc.want)
		}
		if cap(tc.got) != len(tc.got) {
			t.Errorf("%s: key of %d bytes has room for %d", tc.name, len(tc.got), cap(tc.got))
		}
	}
}
