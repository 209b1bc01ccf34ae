package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"berth/vfs"
)

// TestLookupWithParent: one read gives an item and its folder, as Lookup
// gives each, and the folder's errors.
func TestLookupWithParent(t *testing.T) {
	e := newEnv(t)
	docs, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "docs", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, docs.ID, "a.txt", []byte("a"))
	e.write(t, e.root.FolderID, "top.txt", []byte("t"))
	gone, err := e.fs.Mkdir(ctx, e.root.ID, docs.ID, "gone", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, parent string // parent: the folder's path, "" when an error
		found        bool
		err          error
	}{
		{"/docs/a.txt", "/docs", true, nil},
		{"/docs/a.txt/", "/docs", true, nil},
		{"/docs/new.txt", "/docs", false, nil},
		{"/docs", "/", true, nil},
		{"/top.txt", "/", true, nil},
		{"/new", "/", false, nil},
		{"/missing/new", "", false, vfs.ErrNotExist},
		{"/docs/gone/new", "", false, vfs.ErrNotExist},
		{"/top.txt/new", "", false, vfs.ErrNotDir},
		{"/", "", false, vfs.ErrInvalidName},
		{"/docs/../a.txt", "", false, vfs.ErrInvalidName},
		{"docs/a.txt", "", false, vfs.ErrInvalidName},
	} {
		parent, n, found, err := e.fs.LookupWithParent(ctx, e.root.ID, c.path)
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%s: %v, want %v", c.path, err, c.err)
			continue
		}
		if c.err != nil {
			continue
		}
		if want := mustLookup(t, e, c.parent); parent.ID != want.ID || parent.Path != want.Path || !parent.Dir {
			t.Errorf("%s: folder %+v, want %+v", c.path, parent, want)
		}
		if found != c.found {
			t.Errorf("%s: found %v, want %v", c.path, found, c.found)
			continue
		}
		if !found {
			if !reflect.DeepEqual(n, vfs.Node{}) {
				t.Errorf("%s: nothing found, and a node %+v", c.path, n)
			}
			continue
		}
		if want := mustLookup(t, e, c.path); !reflect.DeepEqual(n, want) {
			t.Errorf("%s: item %+v, want Lookup's %+v", c.path, n, want)
		}
	}
}

// TestSmallBodyReadFirst: a body announced to fit in its record is read
// before the checks, and must come out as any other: stored whole when it
// is larger than announced, refused by the same errors, and the checks
// still run before any byte is read under a quota.
func TestSmallBodyReadFirst(t *testing.T) {
	e := newEnv(t)
	e.write(t, e.root.FolderID, "file", []byte("x"))
	small := bytes.Repeat([]byte("s"), 4096)
	large := randBytes(7, vfs.InlineMax*3)
	for _, c := range []struct {
		name   string
		parent uint64
		body   io.Reader
		opts   vfs.WriteOptions
		want   []byte // stored contents, or nil for an error
		err    error
	}{
		{"announced", e.root.FolderID, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096}, small, nil},
		{"larger than announced", e.root.FolderID, bytes.NewReader(large), vfs.WriteOptions{DeclaredSize: 10}, large, nil},
		{"exactly InlineMax", e.root.FolderID, bytes.NewReader(large[:vfs.InlineMax]), vfs.WriteOptions{DeclaredSize: vfs.InlineMax}, large[:vfs.InlineMax], nil},
		{"over the file size", e.root.FolderID, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 10, MaxFileSize: 100}, nil, vfs.ErrFileTooLarge},
		{"larger, over the file size", e.root.FolderID, bytes.NewReader(large), vfs.WriteOptions{DeclaredSize: 10, MaxFileSize: vfs.InlineMax * 2}, nil, vfs.ErrFileTooLarge},
		{"no such folder", 999999, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096}, nil, vfs.ErrNotExist},
		{"over the quota", e.root.FolderID, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096, SpaceQuota: 100}, nil, vfs.ErrQuotaExceeded},
		{"over the quota, unread", e.root.FolderID, failing{errors.New("body was read")}, vfs.WriteOptions{DeclaredSize: 4096, SpaceQuota: 100}, nil, vfs.ErrQuotaExceeded},
		{"cut off", e.root.FolderID, io.MultiReader(bytes.NewReader(small[:100]), failing{io.ErrUnexpectedEOF}), vfs.WriteOptions{DeclaredSize: 4096}, nil, io.ErrUnexpectedEOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := e.fs.WriteFile(ctx, e.root.ID, c.parent, "f-"+c.name, c.body, c.opts)
			if c.want == nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("%v, want %v", err, c.err)
				}
				if _, err := e.fs.Lookup(ctx, e.root.ID, "/f-"+c.name); !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("refused write left a file: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.read(t, n.ID); !bytes.Equal(got, c.want) {
				t.Fatalf("stored %d bytes, want %d", len(got), len(c.want))
			}
		})
	}
}
