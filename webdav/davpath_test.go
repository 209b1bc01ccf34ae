package webdav

import (
	"strings"
	"testing"
)

// TestPlainPath: davPath's shortcut for paths with nothing to unescape or
// refuse gives what the full cleaning gives, and leaves every other path
// to it.
func TestPlainPath(t *testing.T) {
	deep := strings.Repeat("/a", maxPathDepth)
	for _, c := range []struct {
		rest  string
		plain bool // the shortcut answers
	}{
		{"", true},
		{"/", true},
		{"/alice", true},
		{"/alice/", true},
		{"/alice/docs/report.pdf", true},
		{"/alice/docs/", true},
		{"/alice/ünïcode name.txt", true},
		{deep, true},
		{deep + "/", true},
		{deep + "/a", false}, // too deep
		{"//", false},
		{"/alice//docs", false},
		{"/alice/docs//", false},
		{"/alice/./docs", false},
		{"/alice/../bob", false},
		{"/alice/..", false},
		{"/alice/.", false},
		{"/alice/a%20b", false},
		{"/alice/a%2Fb", false},
		{"/alice/a%2fb", false},
		{"/alice/a%5Cb", false},
		{"/alice/%2E%2E", false},
		{"/alice/bad%zz", false},
		{"/alice/...", true}, // a name, not a step
		{"/alice/.hidden", true},
	} {
		got, ok := plainPath(c.rest)
		if ok != c.plain {
			t.Errorf("%q: shortcut %v, want %v", c.rest, ok, c.plain)
			continue
		}
		want, err := cleanPath(c.rest)
		if ok && (err != nil || got != want) {
			t.Errorf("%q: shortcut %q, full cleaning %q %v", c.rest, got, want, err)
		}
	}
}
