package kv

import "testing"

// TestContent: which keys a file write may change without moving
// MetaGeneration.
func TestContent(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool
	}{
		{VFSChild + "\x00\x01name", true},
		{VFSUsage + "\x01", true},
		{VFSRev + "\x01\x02", true},
		{VFSListSum + "\x01", true},
		{ActivityRecord + "\x01", true},
		{ActivityPerson + "\x01", true},
		{VFSRoot + "\x01", false},
		{VFSTop + "\x01", false},
		{VFSMarker + "clean", false},
		{AccountPerson + "\x01", false},
		{AccountLock + "\x01", false},
		{ShareSubscribers + "\x01", false},
		{"", false},
		{"a/", false},
		{"act", false},
	} {
		if got := Content([]byte(c.key)); got != c.want {
			t.Errorf("Content(%q) = %v, want %v", c.key, got, c.want)
		}
	}
	// Every vfs prefix is content but the three above; no other
	// package's is.
	for _, r := range Prefixes() {
		p := r.Prefix
		want := r.Owner == "vfs" && p != VFSRoot && p != VFSTop && p != VFSMarker
		if r.Owner == "activity" {
			want = true
		}
		if got := Content([]byte(p + "\x01")); got != want {
			t.Errorf("prefix %q: Content = %v, want %v", p, got, want)
		}
	}
}
