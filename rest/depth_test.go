package rest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"berth/vfs"
)

// A folder or file more than vfs.MaxDepth levels below the root is
// refused in the spec's error form, and nothing is created.
func TestMaxDepthIsInvalidRequest(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	parent := f.root.FolderID
	for i := range vfs.MaxDepth {
		d, err := f.fs.Mkdir(ctx, f.root.ID, parent, fmt.Sprint(i), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parent = d.ID
	}
	st, b := f.postForm(f.at("/api/2/files/%d/folder/%d/create_folder", parent), url.Values{"name": {"deeper"}})
	wantError(t, st, b, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(string(b), "1000") {
		t.Fatalf("the description does not name the limit: %s", b)
	}
	if kids, _, err := f.fs.List(ctx, f.root.ID, parent); err != nil || len(kids) != 0 {
		t.Fatalf("the deepest folder holds %d items (%v), want none", len(kids), err)
	}
}
