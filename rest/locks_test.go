package rest

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"berth/vfs"
)

func TestLocks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", []byte("1"))
	lockPath := f.at("/api/2/files/%d/%d/lock", fj.ID)

	// The owner's lock shows, and does not block the owner's own writes.
	for i := 0; i < 2; i++ { // twice: locking what one holds is a success
		if st, body := f.postForm(lockPath, url.Values{"duration": {"600"}}); st != http.StatusOK {
			t.Fatalf("lock: %d %s", st, body)
		}
	}
	_, body := f.get(f.at("/api/2/files/%d/%d", fj.ID))
	var got fileJSON
	decode(t, body, &got)
	if !got.IsLocked {
		t.Fatalf("not locked: %s", body)
	}
	f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", []byte("2"))
	if st, body := f.postForm(f.at("/api/2/files/%d/%d/unlock", fj.ID), nil); st != http.StatusOK {
		t.Fatalf("unlock: %d %s", st, body)
	}
	n, _ := f.fs.Stat(ctx, f.root.ID, fj.ID)
	if n.Locked() {
		t.Fatal("still locked after unlock")
	}

	// Someone else's lock (a WebDAV client's) blocks the person's writes
	// and their unlock.
	if _, err := f.fs.Lock(ctx, f.root.ID, fj.ID, vfs.LockRequest{Holder: "webdav:other", TokenRequired: true}); err != nil {
		t.Fatal(err)
	}
	st, body := f.upload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", strings.NewReader("3"))
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	st, body = f.postForm(f.at("/api/2/files/%d/%d/rename", fj.ID), url.Values{"name": {"g.txt"}})
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	st, body = f.postForm(f.at("/api/2/files/%d/%d/unlock", fj.ID), nil)
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	st, body = f.postForm(lockPath, nil)
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	// A deep folder lock conflicts with the lock below it.
	st, body = f.postForm(f.at("/api/2/files/%d/folder/%d/lock", d.ID), nil)
	wantError(t, st, body, http.StatusConflict, "resource_locked")

	// Root lock and unlock show in the root object (the other lock would
	// conflict with the deep root lock).
	if err := f.fs.Unlock(ctx, f.root.ID, fj.ID, ""); err != nil {
		t.Fatal(err)
	}
	if st, body := f.postForm(f.at("/api/2/files/%d/lock"), nil); st != http.StatusOK {
		t.Fatalf("lock root: %d %s", st, body)
	}
	_, body = f.get(f.at("/api/2/files/%d"))
	if !bytes.Contains(body, []byte(`"is_locked":true`)) {
		t.Fatalf("root not locked: %s", body)
	}
	if st, body := f.postForm(f.at("/api/2/files/%d/unlock"), nil); st != http.StatusOK {
		t.Fatalf("unlock root: %d %s", st, body)
	}
	_, body = f.get(f.at("/api/2/files/%d"))
	if !bytes.Contains(body, []byte(`"is_locked":false`)) {
		t.Fatalf("root still locked: %s", body)
	}
	st, body = f.postForm(lockPath, url.Values{"duration": {"soon"}})
	wantError(t, st, body, http.StatusBadRequest, "invalid_request")
}

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
