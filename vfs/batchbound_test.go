package vfs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"berth/vfs"
)

// TestCopyAtDefaultBatch copies, with the production batch size and kv
// settings, a folder just under the weight one transaction takes, made of
// the heaviest items: names of 255 bytes, bodies and dead properties just
// small enough to stay in kv's tree. It guards the margin between
// defaultRefBatch and Badger's transaction bound, which follows kv's
// memtable size.
func TestCopyAtDefaultBatch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	src, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "src", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const files = 255 // with one property each and the folder: weight 511
	body := strings.Repeat("b", 1000)
	prop := []byte(strings.Repeat("v", 900))
	for i := range files {
		name := fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 250))
		n, err := e.fs.WriteFile(ctx, e.root.ID, src.ID, name, strings.NewReader(body), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.fs.PatchProps(ctx, e.root.ID, n.ID, map[string][]byte{"urn:x " + strings.Repeat("p", 100): prop}, nil, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := e.fs.Copy(ctx, e.root.ID, src.ID, e.root.ID, e.root.FolderID, "copy", vfs.WriteOptions{})
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	kids, _, err := e.fs.List(ctx, e.root.ID, cp.ID)
	if err != nil || len(kids) != files {
		t.Fatalf("the copy lists %d items, %v", len(kids), err)
	}
}
