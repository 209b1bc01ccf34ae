package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"berth/config"
	"berth/vfs"

	"berth/berthtest"
)

// mountTmpfs mounts a tmpfs of size MiB on a fresh directory, or skips the
// test where that is not allowed (not root, no mount(8), a container
// without CAP_SYS_ADMIN). The in-process TestFullDisk of rest, TestSpace of webdav, and
// vfs cover the same refusals with a simulated disk everywhere.
func mountTmpfs(t *testing.T, mib int) string {
	t.Helper()
	return mountTmpfsWith(t, fmt.Sprintf("size=%dm", mib))
}

// mountTmpfsWith is mountTmpfs with mount(8)'s -o options (size=,
// nr_inodes=).
func mountTmpfsWith(t *testing.T, opts string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
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
	bin := berthtest.BuildBerth(t)
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
			stored[uploadedID(t, body)] = content
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

// diskUsage is what the files under dir take on disk: the blocks
// allocated (Badger's open logs are sparse, so their length says
// little) and the directories' own blocks, as du counts them.
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// openSpaceStores opens the daemon's stores on a new data directory with
// no disk reserve, as the space tests measure it, and makes alice's root;
// the caller closes the stores (a test may reopen them).
func openSpaceStores(t *testing.T) (config.Config, *slog.Logger, *stores, vfs.Root) {
	t.Helper()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Storage.Reserve = 0
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(context.Background(), cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.CreateRoot(context.Background(), "alice", vfs.RootSync)
	if err != nil {
		st.close(log)
		t.Fatal(err)
	}
	return cfg, log, st, root
}

// TestSmallFilesSpaceReturns: about 100 MiB of small files, kept in
// their revision records and so in Badger's tables (the value log with a
// threshold under 12 KiB), deleted, purged and collected as the daemon's
// periodic collection does, give their space back.
func TestSmallFilesSpaceReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MiB")
	}
	ctx := context.Background()
	cfg, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	empty := diskUsage(t, cfg.Data)
	var err error

	const files, size = 8000, 12 << 10
	dir, err := st.files.Mkdir(ctx, root.ID, root.FolderID, "small", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			for i := w; i < files; i += 4 {
				name := fmt.Sprintf("f%05d.bin", i)
				if _, err := st.files.WriteFile(ctx, root.ID, dir.ID, name, bytes.NewReader(content(uint64(i), size)), vfs.WriteOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	full := diskUsage(t, cfg.Data)

	if err := st.files.Delete(ctx, root.ID, dir.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	start := time.Now()
	collectOnce(ctx, time.Nanosecond, st, log) // one run of the periodic collection
	after := diskUsage(t, cfg.Data)
	t.Logf("data directory: empty %d MiB, %d small files %d MiB, deleted, purged and collected %d MiB (collection %v)",
		empty>>20, files, full>>20, after>>20, time.Since(start).Round(time.Millisecond))
	// The metadata store's journal is a ring of three files of 16 MiB
	// that it writes over in place, whatever is stored or deleted: a
	// fixed cost, counted apart.
	journal := diskUsage(t, filepath.Join(cfg.Data, "meta", "journal"))
	if journal > 3*(16<<20)+(64<<10) {
		t.Errorf("the journal takes %d MiB, want at most 48", journal>>20)
	}
	after -= journal
	if full-empty < 90<<20 {
		t.Fatalf("the files took %d MiB, want about 94", (full-empty)>>20)
	}
	// What the value log is writing cannot be rewritten yet: up to one
	// value-log file (16 MiB) stays.
	if after-empty > 20<<20 {
		t.Errorf("%d MiB of the deleted files are still on disk", (after-empty)>>20)
	}
	if _, err := st.files.Stat(ctx, root.ID, dir.ID); err == nil {
		t.Error("the deleted folder was not purged")
	}
}

// cutBody is an upload body that fails after n bytes, as a request body
// does when the client goes away.
type cutBody struct {
	r io.Reader
	n int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.r.Read(p[:min(len(p), c.n)])
	c.n -= n
	return n, err
}

// chunkFiles counts the files under the chunk store: chunks, temp files
// (.tmp-) and the fan-out directories.
func chunkFiles(t testing.TB, dir string) (chunks, temps, dirs int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case path == dir:
		case d.IsDir():
			dirs++
		case strings.HasPrefix(d.Name(), ".tmp-"):
			temps++
		default:
			chunks++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return chunks, temps, dirs
}

// TestLargeFilesSpaceReturns: 50 MiB in chunk files, deleted, purged and
// collected, and the chunks of an upload cut halfway, leave the disk;
// temp files a crash left are removed at the next start.
func TestLargeFilesSpaceReturns(t *testing.T) {
	ctx := context.Background()
	cfg, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	chunksDir := filepath.Join(cfg.Data, "chunks")
	empty := diskUsage(t, cfg.Data)

	big, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "big.bin", bytes.NewReader(content(1, 50<<20)), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := diskUsage(t, cfg.Data)
	n, _, dirs := chunkFiles(t, chunksDir)
	t.Logf("50 MiB file: data directory %d MiB, %d chunk files in %d fan-out directories", full>>20, n, dirs)

	_, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "cut.bin", &cutBody{r: bytes.NewReader(content(2, 40<<20)), n: 20 << 20}, vfs.WriteOptions{})
	if err == nil {
		t.Fatal("an upload whose body failed was stored")
	}
	cut := diskUsage(t, cfg.Data)
	n, temps, _ := chunkFiles(t, chunksDir)
	t.Logf("after an upload cut at 20 MiB: %d MiB, %d chunk files, %d temp files", cut>>20, n, temps)
	if temps != 0 {
		t.Errorf("the cut upload left %d temp files", temps)
	}

	if err := st.files.Delete(ctx, root.ID, big.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	collectOnce(ctx, time.Nanosecond, st, log)
	after := diskUsage(t, cfg.Data)
	n, temps, dirs = chunkFiles(t, chunksDir)
	t.Logf("deleted, purged and collected: %d MiB, %d chunk files, %d temp files, %d empty fan-out directories left", after>>20, n, temps, dirs)
	if n != 0 || temps != 0 {
		t.Errorf("%d chunk files and %d temp files left", n, temps)
	}
	if after-empty > 4<<20 {
		t.Errorf("%d MiB still on disk", (after-empty)>>20)
	}

	// A crash while a chunk was being written leaves its temp file.
	stray := filepath.Join(chunksDir, "ab", ".tmp-0123456789abcdef")
	if err := os.MkdirAll(filepath.Dir(stray), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, make([]byte, 1<<20), 0o640); err != nil {
		t.Fatal(err)
	}
	collectOnce(ctx, time.Nanosecond, st, log)
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("the collector removed a temp file while uploads may be writing it: %v", err)
	}
	st.close(log)
	st, err = openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temp file a crash left is still there after a start: %v", err)
	}
}

// TestRevisionsSpace: every overwrite keeps the file's older revision
// (nothing trims them; the policy's trim_revisions is not acted on), and
// their space, chunked and kept in the metadata store, comes back when
// the file is deleted, purged and collected.
func TestRevisionsSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 60 MiB")
	}
	ctx := context.Background()
	cfg, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	empty := diskUsage(t, cfg.Data)
	var err error
	const overwrites = 40
	var big, small vfs.Node
	for i := range overwrites {
		if big, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "big.bin", bytes.NewReader(content(uint64(i), 1<<20)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if small, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "small.bin", bytes.NewReader(content(uint64(1000+i), 12<<10)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	full := diskUsage(t, cfg.Data)
	for _, n := range []vfs.Node{big, small} {
		revs, err := st.files.Revisions(ctx, root.ID, n.ID)
		if err != nil || len(revs) != overwrites {
			t.Errorf("%s: %d revisions, %v; want %d", n.Name, len(revs), err, overwrites)
		}
	}
	collectOnce(ctx, time.Hour, st, log)
	if kept := diskUsage(t, cfg.Data); kept < full-(4<<20) {
		t.Errorf("the collection freed the space of live revisions: %d MiB of %d", kept>>20, full>>20)
	}
	for _, n := range []vfs.Node{big, small} {
		if err := st.files.Delete(ctx, root.ID, n.ID, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Millisecond)
	collectOnce(ctx, time.Nanosecond, st, log)
	after := diskUsage(t, cfg.Data)
	t.Logf("%d overwrites of a 1 MiB and a 12 KiB file: empty %d MiB, with every revision %d MiB, deleted, purged and collected %d MiB",
		overwrites, empty>>20, full>>20, after>>20)
	if after-empty > 4<<20 {
		t.Errorf("%d MiB of the revisions still on disk", (after-empty)>>20)
	}
}

// TestFullMetadataDisk: the metadata store's directory (meta/) on a
// small disk of its own, as an operator puts it on a fast one, while
// the chunks have room. The reserve was counted on the chunks' disk
// alone, so small files (kept in the metadata store) filled the
// metadata's disk until Badger's memory-mapped value log took a SIGBUS
// and the daemon died; it could not start again until space was freed.
// Now the reserve holds on both: small uploads are refused with the
// spec's 503, logins, reads and deletes go on, writes resume once the
// space is freed, and fsck finds nothing wrong.
func TestFullMetadataDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(data, "meta")
	if err := os.Mkdir(meta, 0o700); err != nil {
		t.Fatal(err)
	}
	disk := mountTmpfs(t, 48)
	if out, err := exec.Command("mount", "--bind", disk, meta).CombinedOutput(); err != nil {
		t.Skipf("cannot bind the small file system at meta/: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", meta).Run() })
	bin := berthtest.BuildBerth(t)
	// Space that something else on the metadata's disk holds, freed later.
	filler := filepath.Join(meta, "filler")
	if err := os.WriteFile(filler, make([]byte, 24<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, bin, data, "--storage-reserve", "8MiB")
	c := newSpaceClient(t, p, data)

	// 8 KB files live in the metadata store; about 16 MiB are free
	// there, 8 above the reserve: some 1,000 uploads at most.
	small := make([]byte, 8000)
	rand.Read(small)
	var stored []uint64
	var refusal []byte
	for i := 0; i < 3000 && refusal == nil; i++ {
		status, body := c.upload(fmt.Sprintf("s%04d.bin", i), small)
		switch status {
		case http.StatusOK:
			stored = append(stored, uploadedID(t, body))
		case http.StatusServiceUnavailable:
			refusal = body
		default:
			t.Fatalf("upload %d: %d %s", i, status, body)
		}
	}
	if refusal == nil || !bytes.Contains(refusal, []byte(`"error":"temporarily_unavailable"`)) {
		t.Fatalf("3000 small uploads on a full metadata disk: refusal %s", refusal)
	}
	if len(stored) < 100 {
		t.Fatalf("refused after %d small uploads; the disk had room for more", len(stored))
	}
	t.Logf("%d small uploads stored before the refusal", len(stored))
	if status, body := c.call("POST", fmt.Sprintf("/api/2/files/%d/create_folder", c.root), strings.NewReader("name=new"), "application/x-www-form-urlencoded"); status != http.StatusServiceUnavailable {
		t.Errorf("create_folder on a full metadata disk: %d %s", status, body)
	}
	c.token = c.login()
	for _, id := range stored {
		status, got := c.call("GET", fmt.Sprintf("/api/2/files/%d/%d/download", c.root, id), nil, "")
		if status != 200 || !bytes.Equal(got, small) {
			t.Fatalf("file %d on a full metadata disk: status %d, %d bytes", id, status, len(got))
		}
	}
	if status, body := c.call("POST", fmt.Sprintf("/api/2/files/%d/%d/delete", c.root, stored[0]), nil, ""); status != 200 {
		t.Errorf("delete on a full metadata disk: %d %s", status, body)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if status, body := c.upload("after.bin", small); status != 200 {
		t.Fatalf("upload after freeing space: %d %s", status, body)
	}
	p.stop(t)
	if out, err := exec.Command(bin, "fsck", "--verify", "--data", data).CombinedOutput(); err != nil {
		t.Errorf("fsck after filling the metadata disk: %v\n%s", err, out)
	}
}

// spaceClient calls a daemon the space tests started, as its first
// administrator.
type spaceClient struct {
	t        *testing.T
	base     string
	client   *http.Client
	password string
	token    string
	root     uint64 // the administrator's root
}

func newSpaceClient(t *testing.T, p *daemonProc, data string) *spaceClient {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(data, initialPasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	c := &spaceClient{t: t, base: "https://" + p.addrs["https"], client: trustingClient(t, filepath.Join(data, "tls", "cert.pem")),
		password: strings.TrimSpace(string(pw))}
	c.token = c.login()
	_, body := c.call("GET", "/api/2/person", nil, "")
	var me struct {
		RootID uint64 `json:"root_id"`
	}
	if err := json.Unmarshal(body, &me); err != nil || me.RootID == 0 {
		t.Fatalf("person: %v %s", err, body)
	}
	c.root = me.RootID
	return c
}

// login signs the administrator in with the password grant.
func (c *spaceClient) login() string {
	c.t.Helper()
	resp, err := c.client.PostForm(c.base+"/oauth/token", url.Values{
		"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"}, "password": {c.password},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 {
		c.t.Fatalf("password grant: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}

func (c *spaceClient) call(method, path string, body io.Reader, ct string) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, body)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// upload stores content as name in the administrator's root folder
// (multipart, as the spec's upload).
func (c *spaceClient) upload(name string, content []byte) (int, []byte) {
	c.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(content)
	mw.Close()
	return c.call("POST", fmt.Sprintf("/api/2/files/%d/upload", c.root), &buf, mw.FormDataContentType())
}

// TestFullDiskInodes: a disk that runs out of inodes long before bytes
// (ext4 made with -T largefile; here a tmpfs of 700 inodes), every chunk
// a file. The reserve counted bytes alone: chunk writes failed with the
// kernel's ENOSPC (503), but small files, kept in the metadata store,
// went on until Badger could not create its next memtable's file; it
// went on without one and the next read killed the daemon with a nil
// pointer. Now the reserve keeps inodes too (chunk.InodeReserve): every
// write that adds data is refused with 503 before, logins and reads go
// on, writes resume once inodes are freed, and fsck finds nothing wrong.
func TestFullDiskInodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	disk := mountTmpfsWith(t, "size=256m,nr_inodes=700")
	bin := berthtest.BuildBerth(t)
	// Inodes something else on the disk holds, freed later.
	fillers := filepath.Join(disk, "fillers")
	if err := os.Mkdir(fillers, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(fillers, strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(disk, "data")
	// A small memtable, so that Badger needs its next file soon.
	p := startDaemon(t, bin, data, "--storage-reserve", "16MiB", "--memory-kv-memtable", "1MiB")
	c := newSpaceClient(t, p, data)

	// 20 KB files: one chunk file each. Then 8 KB files, kept in the
	// metadata store alone.
	stored := map[uint64][]byte{}
	refused := 0
	for i := 0; i < 1000 && refused < 300; i++ {
		content := make([]byte, 20000)
		if refused > 0 {
			content = content[:8000]
		}
		rand.Read(content)
		status, body := c.upload(fmt.Sprintf("f%04d.bin", i), content)
		switch status {
		case http.StatusOK:
			stored[uploadedID(t, body)] = content
		case http.StatusServiceUnavailable:
			if !bytes.Contains(body, []byte(`"error":"temporarily_unavailable"`)) {
				t.Fatalf("refusal %d: %s", refused, body)
			}
			refused++
		default:
			t.Fatalf("upload %d (%d refused before): %d %s", i, refused, status, body)
		}
	}
	if refused == 0 || len(stored) < 100 {
		t.Fatalf("%d uploads stored, %d refused", len(stored), refused)
	}
	t.Logf("%d uploads stored, then %d refused", len(stored), refused)
	c.token = c.login()
	for id, want := range stored {
		status, got := c.call("GET", fmt.Sprintf("/api/2/files/%d/%d/download", c.root, id), nil, "")
		if status != 200 || !bytes.Equal(got, want) {
			t.Fatalf("file %d out of inodes: status %d, %d bytes", id, status, len(got))
		}
	}

	if err := os.RemoveAll(fillers); err != nil {
		t.Fatal(err)
	}
	if status, body := c.upload("after.bin", make([]byte, 20000)); status != 200 {
		t.Fatalf("upload after freeing inodes: %d %s", status, body)
	}
	p.stop(t)
	if out, err := exec.Command(bin, "fsck", "--verify", "--data", data).CombinedOutput(); err != nil {
		t.Errorf("fsck after running out of inodes: %v\n%s", err, out)
	}
}

// TestDataReserveHoldsOnMeta: with the chunks in S3, the reserve kept on
// the data directory holds on the Badger metadata store's directory too,
// which may be a small disk of its own; a PostgreSQL metadata store
// keeps nothing there.
func TestDataReserveHoldsOnMeta(t *testing.T) {
	cfg := config.Default()
	cfg.Data = t.TempDir()
	meta := filepath.Join(cfg.Data, "meta")
	if err := os.Mkdir(meta, 0o700); err != nil {
		t.Fatal(err)
	}
	disk := mountTmpfs(t, 4)
	if out, err := exec.Command("mount", "--bind", disk, meta).CombinedOutput(); err != nil {
		t.Skipf("cannot bind the small file system at meta/: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", meta).Run() })
	r := dataReserve{dirs: reserveDirs(cfg), reserve: 8 << 20}
	if err := r.check(); !errors.Is(err, vfs.ErrNoSpace) {
		t.Errorf("a 4 MiB meta/ under an 8 MiB reserve: %v, want ErrNoSpace", err)
	}
	cfg.Metadata.Backend = "postgres"
	r = dataReserve{dirs: reserveDirs(cfg), reserve: 8 << 20}
	if err := r.check(); err != nil {
		t.Errorf("the same with the metadata in PostgreSQL: %v", err)
	}
}

// uploadedID is the id of the file a REST upload's answer body describes.
func uploadedID(t *testing.T, body []byte) uint64 {
	t.Helper()
	var f struct {
		ID uint64 `json:"id"`
	}
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatal(err)
	}
	return f.ID
}
