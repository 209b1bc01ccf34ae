package vfs_test

import (
	"context"
	"fmt"
	"testing"

	"berth/vfs"
)

// TestEquivalent: a path whose names name nothing as sent finds the
// items whose names are their NFC or NFD forms, the exact bytes first,
// and does so by point reads: a scan of the names that share a missing
// name's ASCII beginning read the whole of a large folder for every new
// name that began with an accented letter, or with a prefix all its
// names share.
func TestEquivalent(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dir, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "Photos", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		e.write(t, dir.ID, fmt.Sprintf("IMG_%04d.jpg", i), nil)
	}
	const nfc, nfd = "\u00e9t\u00e9.txt", "e\u0301te\u0301.txt" // été.txt
	e.write(t, dir.ID, nfc, nil)
	e.write(t, dir.ID, "both-"+nfc, nil)
	e.write(t, dir.ID, "both-"+nfd, nil)
	e.write(t, dir.ID, "only-nfd-"+nfd, nil)
	for _, c := range []struct{ name, path, want string }{
		{"ASCII alone, unread", "/Photos/IMG_0001.jpg", "/Photos/IMG_0001.jpg"},
		{"NFD finds the NFC name", "/Photos/" + nfd, "/Photos/" + nfc},
		{"NFC finds the NFD name", "/Photos/only-nfd-" + "\u00e9t\u00e9.txt", "/Photos/only-nfd-" + nfd},
		{"the exact bytes win", "/Photos/both-" + nfd, "/Photos/both-" + nfd},
		{"a new name with an accent first is kept", "/Photos/\u00e9cole.jpg", "/Photos/\u00e9cole.jpg"},
		{"a new name with the folder's prefix is kept", "/Photos/IMG_e\u0301.jpg", "/Photos/IMG_e\u0301.jpg"},
		{"a trailing slash is kept", "/Photos/" + nfd + "/", "/Photos/" + nfc + "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.db.TxnStats()
			if got := e.fs.Equivalent(ctx, e.root.ID, c.path); got != c.want {
				t.Fatalf("Equivalent(%q) = %q, want %q", c.path, got, c.want)
			}
			after := e.db.TxnStats()
			if scans, gets := after.Scans-before.Scans, after.Gets-before.Gets; scans != 0 || gets > 6 {
				t.Errorf("%d scans and %d reads for a path of two names", scans, gets)
			}
		})
	}
}
