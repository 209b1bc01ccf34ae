package webdav_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/vfs"
)

// TestCopyMoveOverwriteRefusedKeepsDestination: a COPY or MOVE with
// Overwrite: T onto an existing destination that is then refused (the
// source locked by someone else, the quota, an excluded extension, a
// destination that holds the source) leaves the destination as it was.
func TestCopyMoveOverwriteRefusedKeepsDestination(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.SpaceQuota = "1000"
	pol.ExcludedExtensions = ".exe"
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	ctx := context.Background()
	put := func(p, body string) {
		t.Helper()
		st, _, b := f.do("PUT", p, strings.NewReader(body))
		if st != http.StatusCreated && st != http.StatusNoContent {
			t.Fatalf("PUT %s: %d %q", p, st, b)
		}
	}
	kept := func(what, p, wantBody string) {
		t.Helper()
		if got, err := f.read(p); err != nil || string(got) != wantBody {
			t.Fatalf("%s: %s is %q, %v; want %q", what, p, got, err, wantBody)
		}
	}
	big := strings.Repeat("a", 600)
	put("/a.txt", big)
	put("/b.txt", "b")

	// Over the quota: a copy of 600 bytes onto b.txt.
	st, _, body := f.do("COPY", "/a.txt", nil, "Destination", f.url("/b.txt"))
	want(t, "COPY over the quota", st, http.StatusInsufficientStorage, body)
	kept("COPY over the quota", "/b.txt", "b")

	// An excluded extension: b.exe was stored before the policy said so.
	if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "b.exe", strings.NewReader("old exe"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"COPY", "MOVE"} {
		st, _, body = f.do(m, "/b.txt", nil, "Destination", f.url("/b.exe"))
		want(t, m+" to an excluded name", st, http.StatusForbidden, body)
		kept(m+" to an excluded name", "/b.exe", "old exe")
	}

	// The source locked by someone else (a REST lock).
	n, err := f.lookup("/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := f.fs.Lock(ctx, f.root.ID, n.ID, vfs.LockRequest{Owner: "person:999", Holder: "person:999", Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.url("/b.txt"))
	want(t, "MOVE of a locked file", st, http.StatusLocked, body)
	kept("MOVE of a locked file", "/b.txt", "b")
	if err := f.fs.Unlock(ctx, f.root.ID, n.ID, lk.Token); err != nil {
		t.Fatal(err)
	}

	// The destination is a collection above the source.
	st, _, body = f.do("MKCOL", "/p", nil)
	want(t, "MKCOL", st, http.StatusCreated, body)
	put("/p/c.txt", "c")
	for _, m := range []string{"COPY", "MOVE"} {
		st, _, body = f.do(m, "/p/c.txt", nil, "Destination", f.url("/p"))
		want(t, m+" onto the collection above", st, http.StatusForbidden, body)
		kept(m+" onto the collection above", "/p/c.txt", "c")
	}

	// What is allowed replaces the destination.
	st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.url("/b.txt"))
	want(t, "MOVE over b.txt", st, http.StatusNoContent, body)
	kept("MOVE over b.txt", "/b.txt", big)
	st, _, body = f.do("COPY", "/p", nil, "Destination", f.url("/b.exe"), "Depth", "0")
	want(t, "COPY Depth 0 over b.exe", st, http.StatusNoContent, body)
	if n, err := f.lookup("/b.exe"); err != nil || !n.Dir {
		t.Fatalf("b.exe after COPY Depth 0 of a collection over it: %+v %v", n, err)
	}
}
