package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"berth/account"
	"berth/config"
	"berth/vfs"
)

// mountTmpfs mounts a tmpfs of size MiB on a fresh directory, or skips the
// test where that is not allowed (not root, no mount(8), a container
// without CAP_SYS_ADMIN). The in-process TestFullDisk of rest, webdav and
// vfs cover the same refusals with a simulated disk everywhere.
func mountTmpfs(t *testing.T, mib int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small file system to fill (needs root): %v %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// TestFullDisk fills the real daemon's disk. Without a reserve this killed
// it (Badger writes through memory maps: SIGBUS) and it could not start
// again until space was freed. With one, uploads are refused with the
// spec's 503 temporarily_unavailable (WebDAV: 507) before the disk is full,
// the daemon stays up, logins, reads and deletes go on, every file stored
// before reads back byte for byte, and once space is freed writes work
// again; fsck then finds nothing wrong.
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	disk := mountTmpfs(t, 128)
	bin := buildBinary(t)
	// Space that something else on the disk holds, freed later.
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, 40<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(disk, "data")
	p := startDaemon(t, bin, data, "--storage-reserve", "16MiB")
	base := "https://" + p.addrs["https"]
	client := trustingClient(t, filepath.Join(data, "tls", "cert.pem"))
	pw, err := os.ReadFile(filepath.Join(data, initialPasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	password := strings.TrimSpace(string(pw))

	login := func() string {
		t.Helper()
		resp, err := client.PostForm(base+"/oauth/token", url.Values{
			"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"}, "password": {password},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 {
			t.Fatalf("password grant: %d %v", resp.StatusCode, err)
		}
		return tok.AccessToken
	}
	token := login()
	call := func(method, path string, body io.Reader, ct string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, body)
		req.Header.Set("Authorization", "Bearer "+token)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	_, body := call("GET", "/api/2/person", nil, "")
	var me struct {
		RootID uint64 `json:"root_id"`
	}
	if err := json.Unmarshal(body, &me); err != nil || me.RootID == 0 {
		t.Fatalf("person: %v %s", err, body)
	}
	upload := func(name string, content []byte) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", name)
		fw.Write(content)
		mw.Close()
		return call("POST", fmt.Sprintf("/api/2/files/%d/upload", me.RootID), &buf, mw.FormDataContentType())
	}

	// Fill the disk with 4 MiB files until berth refuses. About 70 MiB
	// are free above the reserve: at most a few dozen uploads.
	stored := map[uint64][]byte{}
	var refusal []byte
	for i := 0; i < 40 && refusal == nil; i++ {
		content := make([]byte, 4<<20)
		rand.Read(content)
		status, body := upload(fmt.Sprintf("f%02d.bin", i), content)
		switch status {
		case http.StatusOK:
			var f struct {
				ID uint64 `json:"id"`
			}
			if err := json.Unmarshal(body, &f); err != nil {
				t.Fatal(err)
			}
			stored[f.ID] = content
		case http.StatusServiceUnavailable:
			refusal = body
		default:
			t.Fatalf("upload %d: %d %s", i, status, body)
		}
	}
	if refusal == nil {
		t.Fatal("40 uploads of 4 MiB on a 128 MiB disk were all accepted")
	}
	if len(stored) < 5 {
		t.Fatalf("refused after %d uploads; the disk had room for more", len(stored))
	}
	if !bytes.Contains(refusal, []byte(`"error":"temporarily_unavailable"`)) || !strings.Contains(string(refusal), "storage is full") {
		t.Errorf("refusal body %s", refusal)
	}

	// A refused upload may leave up to a chunk's worth above the reserve.
	// Something else on the disk now takes it, and a little of the
	// reserve: everything that adds data is refused, over both front ends.
	var st syscall.Statfs_t
	if err := syscall.Statfs(disk, &st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filler+"2", make([]byte, int64(st.Bavail)*st.Bsize-12<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if status, body := call("POST", fmt.Sprintf("/api/2/files/%d/create_folder", me.RootID), strings.NewReader("name=new"), "application/x-www-form-urlencoded"); status != http.StatusServiceUnavailable {
		t.Errorf("create_folder on a full disk: %d %s", status, body)
	}
	if status, body := upload("tiny.txt", []byte("small enough for the metadata store")); status != http.StatusServiceUnavailable {
		t.Errorf("small upload on a full disk: %d %s", status, body)
	}
	dav := func(method, path string, body io.Reader) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+"/webdav/admin/"+path, body)
		req.SetBasicAuth("admin", password)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := dav("PUT", "dav.bin", bytes.NewReader(make([]byte, 1<<20))); status != http.StatusInsufficientStorage {
		t.Errorf("WebDAV PUT on a full disk: %d, want 507", status)
	}
	if status := dav("MKCOL", "davdir", nil); status != http.StatusInsufficientStorage {
		t.Errorf("WebDAV MKCOL on a full disk: %d, want 507", status)
	}

	// Logins, reads and deletes go on; nothing stored was harmed.
	token = login()
	var victim uint64
	for id, want := range stored {
		status, got := call("GET", fmt.Sprintf("/api/2/files/%d/%d/download", me.RootID, id), nil, "")
		if status != 200 || !bytes.Equal(got, want) {
			t.Fatalf("file %d on a full disk: status %d, %d bytes, identical %v", id, status, len(got), bytes.Equal(got, want))
		}
		victim = id
	}
	if status, body := call("POST", fmt.Sprintf("/api/2/files/%d/%d/delete", me.RootID, victim), nil, ""); status != 200 {
		t.Errorf("delete on a full disk: %d %s", status, body)
	}
	delete(stored, victim)

	// Space freed by something else: writes work again, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler + "2"); err != nil {
		t.Fatal(err)
	}
	content := make([]byte, 4<<20)
	rand.Read(content)
	if status, body := upload("after.bin", content); status != 200 {
		t.Fatalf("upload after freeing space: %d %s", status, body)
	}
	if status := dav("MKCOL", "davdir", nil); status != http.StatusCreated {
		t.Errorf("WebDAV MKCOL after freeing space: %d", status)
	}
	status, metrics := get(t, http.DefaultClient, "http://"+p.addrs["metrics"]+"/metrics")
	if status != 200 || !strings.Contains(metrics, "berth_storage_free_bytes") || !strings.Contains(metrics, "berth_storage_reserve_bytes 1.6777216e+07") {
		t.Errorf("/metrics lacks the storage gauges")
	}
	p.stop(t)

	out, err := exec.Command(bin, "fsck", "--verify", "--data", data).CombinedOutput()
	if err != nil {
		t.Errorf("fsck after filling the disk: %v\n%s", err, out)
	}
}

// TestFirstRunOnFullDisk: a first start on a disk already down to the
// reserve fails without storing the organization, so the next start, with
// room, creates the organization and its administrator. Storing the
// organization first left one without an administrator: every later start
// took the first run as done, and nobody could log in.
func TestFirstRunOnFullDisk(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Storage.Reserve = 1 << 62 // more than any disk has
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = firstRun(ctx, cfg, st.files, account.New(st.db, accountOptions(cfg)), log, io.Discard)
	if !errors.Is(err, vfs.ErrNoSpace) {
		t.Errorf("first run on a full disk: %v, want ErrNoSpace", err)
	}
	st.close(log)

	cfg.Storage.Reserve = 0
	st, err = openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	accounts := account.New(st.db, accountOptions(cfg))
	if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
		t.Fatalf("first run with room: %v", err)
	}
	p, err := accounts.PersonByLogin(ctx, cfg.Admin.Login)
	if err != nil {
		t.Fatalf("the administrator after the second start: %v", err)
	}
	if _, err := st.files.Root(ctx, p.RootID); err != nil {
		t.Fatalf("the administrator's root: %v", err)
	}
}

// TestFirstRunFailingAtAdministrator: a first start refused while creating
// the administrator (here a password config validation would have caught)
// stores no organization, so the next start runs the first run again and
// an administrator exists; before, the organization stayed and every later
// start skipped the first run, leaving nobody to log in.
func TestFirstRunFailingAtAdministrator(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Admin.Password = "short"
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	accounts := account.New(st.db, accountOptions(cfg))
	if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err == nil {
		t.Fatal("first run with a 5-character password succeeded")
	}
	if has, err := accounts.HasOrganizations(ctx); err != nil || has {
		t.Fatalf("after the failed first run: organizations %v, %v", has, err)
	}
	cfg.Admin.Password = "correct horse battery"
	if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
		t.Fatalf("second first run: %v", err)
	}
	if _, err := accounts.Authenticate(ctx, cfg.Admin.Login, cfg.Admin.Password); err != nil {
		t.Fatalf("the administrator cannot log in: %v", err)
	}
}
