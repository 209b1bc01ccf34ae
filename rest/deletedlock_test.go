package rest

import (
	"net/http"
	"testing"
)

// TestDeletedItemLocks pins what docs/api.md says of locks on deleted
// items: a lock held when the item was deleted stays (is_locked), the
// holder may still release it (unlock is the one change a deleted item
// takes), and anything else, a new lock included, is 404.
func TestDeletedItemLocks(t *testing.T) {
	f := newFixture(t)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	for _, step := range []string{"lock", "delete"} {
		if st, body := f.postForm(f.at("/api/2/files/%d/%d/"+step, fj.ID), nil); st != http.StatusOK {
			t.Fatalf("%s: %d %s", step, st, body)
		}
	}
	state := func() fileJSON {
		t.Helper()
		_, body := f.get(f.at("/api/2/files/%d/%d", fj.ID))
		var got fileJSON
		decode(t, body, &got)
		return got
	}
	if got := state(); !got.IsDeleted || !got.IsLocked {
		t.Fatalf("deleted while locked: %+v", got)
	}
	if st, body := f.postForm(f.at("/api/2/files/%d/%d/unlock", fj.ID), nil); st != http.StatusOK {
		t.Fatalf("unlock deleted: %d %s", st, body)
	}
	if got := state(); !got.IsDeleted || got.IsLocked {
		t.Fatalf("after unlock: %+v", got)
	}
	st, body := f.postForm(f.at("/api/2/files/%d/%d/lock", fj.ID), nil)
	wantError(t, st, body, http.StatusNotFound, "not_found")
}
