package vfs_test

import (
	"strings"
	"testing"

	"berth/vfs"
)

func TestServableRange(t *testing.T) {
	const none = "bytes=9223372036854775807-"
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"bytes=0-1", "bytes=0-1"},
		{"bytes=-5", "bytes=-5"},
		{"bytes=0-1,4-", "bytes=0-1,4-"},
		{"bytes=-0", none},
		{"bytes= -00 ", none},
		{"bytes=-0,-0", none},
		{"bytes=-0,", none},
		{"bytes=0-1,-0", "bytes=0-1"},
		{"bytes=-0,0-1", "bytes=0-1"},
		{"bytes=0-1, -0 ,4-5", "bytes=0-1,4-5"},
		{"bytes=-0,-10", "bytes=-10"},
		{"bytes=-0,x", "bytes=x"}, // still invalid: ServeContent's 416
		{"bytes=--0", "bytes=--0"},
		{"bytes=0-0", "bytes=0-0"},
		{"items=-0", ""},
		{"items=0-1", ""},
		{"0-1", ""},
		{"Bytes=0-1", "bytes=0-1"},
		{"BYTES=-0,-2", "bytes=-2"},
		// Past MaxRanges parts the Range is ignored; blank and
		// zero-length suffix parts do not count.
		{"bytes=" + strings.Repeat("0-0,", vfs.MaxRanges-1) + "0-0", "bytes=" + strings.Repeat("0-0,", vfs.MaxRanges-1) + "0-0"},
		{"bytes=" + strings.Repeat("0-0,", vfs.MaxRanges) + "0-0", ""},
		{"bytes=" + strings.Repeat("0-0,", vfs.MaxRanges-1) + "0-0,-0, ,", "bytes=" + strings.Repeat("0-0,", vfs.MaxRanges-1) + "0-0, ,"},
	} {
		if got := vfs.ServableRange(tc.in); got != tc.want {
			t.Errorf("ServableRange(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
