package rest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"berth/vfs"
	"berth/vfs/chunk"
)

// TestFullDisk: on a disk down to its reserve, uploads and new folders get
// 503 temporarily_unavailable (spec 7.2) saying why, and store nothing;
// downloads, renames, deletes and logins go on; and uploads resume once
// space is freed.
func TestFullDisk(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	f := newFixtureWith(t, fixtureOptions{Disk: chunk.DiskOptions{
		Reserve: 1 << 30,
		Free:    func() (int64, error) { return free.Load(), nil },
	}})
	content := bytes.Repeat([]byte("berth "), 500_000) // chunked, not inline
	status, body := f.upload(f.at("/api/2/files/%d/upload"), "kept.bin", bytes.NewReader(content))
	if status != http.StatusOK {
		t.Fatalf("upload with room: %d %s", status, body)
	}
	var kept struct {
		ID uint64 `json:"id"`
	}
	decode(t, body, &kept)

	free.Store(1<<30 - 1)
	full := func(what string, status int, body []byte) {
		t.Helper()
		wantError(t, status, body, http.StatusServiceUnavailable, "temporarily_unavailable")
		if !strings.Contains(string(body), "storage is full") {
			t.Errorf("%s: %s does not say why", what, body)
		}
	}
	status, body = f.upload(f.at("/api/2/files/%d/upload"), "new.bin", bytes.NewReader(content))
	full("upload", status, body)
	status, body = f.upload(f.at("/api/2/files/%d/upload"), "kept.bin", strings.NewReader("a new revision"))
	full("new revision", status, body)
	status, body = f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {"docs"}})
	full("create_folder", status, body)
	for _, p := range []string{"/new.bin", "/docs"} {
		if _, err := f.fs.Lookup(context.Background(), f.root.ID, p); !errors.Is(err, vfs.ErrNotExist) {
			t.Errorf("%s was stored on a full disk: %v", p, err)
		}
	}

	status, body = f.get(f.at("/api/2/files/%d/%d/download", kept.ID))
	if status != http.StatusOK || !bytes.Equal(body, content) {
		t.Fatalf("download on a full disk: %d, identical %v", status, bytes.Equal(body, content))
	}
	status, body = f.postForm(f.at("/api/2/files/%d/%d/rename", kept.ID), url.Values{"name": {"renamed.bin"}})
	if status != http.StatusOK {
		t.Errorf("rename on a full disk: %d %s", status, body)
	}
	status, body = f.postForm("/oauth/token", url.Values{"grant_type": {"password"}, "client_id": {"anchor"},
		"username": {f.person.Username}, "password": {fixturePassword}})
	if status != http.StatusOK {
		t.Errorf("login on a full disk: %d %s", status, body)
	}
	status, body = f.postForm(f.at("/api/2/files/%d/%d/delete", kept.ID), nil)
	if status != http.StatusOK {
		t.Errorf("delete on a full disk: %d %s", status, body)
	}

	free.Store(1 << 40)
	status, body = f.upload(f.at("/api/2/files/%d/upload"), "new.bin", bytes.NewReader(content))
	if status != http.StatusOK {
		t.Fatalf("upload after space was freed: %d %s", status, body)
	}
}
