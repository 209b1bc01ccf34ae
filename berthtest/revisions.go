package berthtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// SameSecond writes the file name in folder twice, with old and then cur
// as its contents, modified 800 ms apart within one second an hour ago,
// and returns the first one's time and the two revisions' nodes: the
// case HTTP dates, of a second's resolution, cannot tell apart, for the
// tests of date conditions on every front end. opts are the writes'
// options, Modified set here.
func SameSecond(t testing.TB, fs *vfs.FS, root, folder uint64, name, old, cur string, opts vfs.WriteOptions) (time.Time, vfs.Node, vfs.Node) {
	t.Helper()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second).Add(100 * time.Millisecond)
	write := func(body string, at time.Time) vfs.Node {
		opts.Modified = at
		n, err := fs.WriteFile(context.Background(), root, folder, name, strings.NewReader(body), opts)
		if err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		return n
	}
	return t0, write(old, t0), write(cur, t0.Add(800*time.Millisecond))
}
