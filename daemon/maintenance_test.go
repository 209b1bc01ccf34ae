package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/config"
	"berth/vfs"
)

func TestFsckAndGCCommands(t *testing.T) {
	data := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"gc", "--data", data}, &stdout, &stderr); err != nil {
		t.Fatalf("gc: %v\n%s", err, stderr.String())
	}
	stdout.Reset()
	err := run(t.Context(), []string{"fsck", "--verify", "--data", data}, &stdout, &stderr)
	if err != nil || stdout.Len() == 0 {
		t.Fatalf("fsck: %v, printed %q", err, stdout.String())
	}
	if errors.Is(err, errFsckProblems) {
		t.Fatal("fsck found problems in an empty store")
	}
}

// TestFsckNamesTheChunks: fsck lists each chunk it found wrong, not only
// how many, so the operator can restore that chunk file from a backup.
func TestFsckNamesTheChunks(t *testing.T) {
	ctx := t.Context()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.CreateRoot(ctx, "r", vfs.RootSync)
	if err == nil {
		// Over vfs.InlineMax, so the contents go to the chunk store.
		_, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "f.bin", bytes.NewReader(content(1, 100<<10)), vfs.WriteOptions{})
	}
	st.close(log)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := filepath.Glob(filepath.Join(cfg.Data, "chunks", "*", "*"))
	if err != nil || len(chunks) == 0 {
		t.Fatalf("no chunk files: %v", err)
	}
	if err := os.Remove(chunks[0]); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = run(ctx, []string{"fsck", "--data", cfg.Data}, &stdout, &stderr)
	if !errors.Is(err, errFsckProblems) {
		t.Fatalf("fsck of a store missing a chunk: %v", err)
	}
	if want := "missing " + filepath.Base(chunks[0]); !strings.Contains(stdout.String(), want) {
		t.Errorf("fsck printed %q, want a line %q", stdout.String(), want)
	}
}

// TestPurgeDeletedCommand: purge-deleted on a stopped data directory
// purges what was deleted long enough ago and frees its chunks; it refuses
// to run without --older-than, so an operator never empties the trash by
// accident.
func TestPurgeDeletedCommand(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	cfg := config.Default()
	cfg.Data = data
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("trash "), 200_000) // chunked, not inline
	gone, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "gone.txt", bytes.NewReader(content), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "kept.txt", strings.NewReader("kept"), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.files.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st.close(log)

	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{
		{"purge-deleted", "--data", data},
		{"purge-deleted", "--data", data, "--older-than", "-1h"},
	} {
		if err := run(ctx, args, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--older-than") {
			t.Errorf("%v: %v, want an error naming --older-than", args, err)
		}
	}
	// Deleted a moment ago: not older than an hour.
	if err := run(ctx, []string{"purge-deleted", "--data", data, "--older-than", "1h"}, &stdout, &stderr); err != nil {
		t.Fatalf("purge-deleted: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "purged 0 deleted items") {
		t.Errorf("purge-deleted --older-than 1h printed %q", stdout.String())
	}
	stdout.Reset()
	if err := run(ctx, []string{"purge-deleted", "--data", data, "--older-than", "0s"}, &stdout, &stderr); err != nil {
		t.Fatalf("purge-deleted: %v\n%s", err, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "purged 1 deleted items") || strings.Contains(out, "removed 0") {
		t.Errorf("purge-deleted --older-than 0s printed %q", out)
	}
	stdout.Reset()
	if err := run(ctx, []string{"fsck", "--verify", "--data", data}, &stdout, &stderr); err != nil {
		t.Fatalf("fsck after purge-deleted: %v %s", err, stdout.String())
	}

	st, err = openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	if _, err := st.files.Stat(ctx, root.ID, gone.ID); err == nil {
		t.Error("the purged file is still there")
	}
	u, err := st.files.Usage(ctx, root.ID)
	if err != nil || u.DeletedSize != 0 || u.FileCount != 1 {
		t.Errorf("usage after the purge: %+v %v", u, err)
	}
	if _, err := st.files.Stat(ctx, root.ID, kept.ID); err != nil {
		t.Errorf("the live file: %v", err)
	}
}

// TestCollectorPurgesDeleted: with gc.purge_deleted_after set, the
// background collection purges what was deleted long enough ago and then
// frees its chunks, while the daemon runs.
func TestCollectorPurgesDeleted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	log, st, root := storesWithRoot(t)
	gone, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "gone.txt", bytes.NewReader(bytes.Repeat([]byte("trash "), 200_000)), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.files.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // gone.txt is now older than 200ms

	done := make(chan struct{})
	go func() {
		defer close(done)
		collectGarbage(ctx, 10*time.Millisecond, time.Hour, st, log) // purges nothing yet
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	if _, err := st.files.Stat(context.Background(), root.ID, gone.ID); err != nil {
		t.Fatalf("purged with purge_deleted_after 1h: %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = make(chan struct{})
	go func() {
		defer close(done)
		collectGarbage(ctx, 10*time.Millisecond, 200*time.Millisecond, st, log)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, goneErr := st.files.Stat(ctx, root.ID, gone.ID)
		rep, err := st.files.Fsck(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if goneErr != nil && rep.Chunks == 0 && rep.OK() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: stat %v, fsck %s", goneErr, rep)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

// TestKillDuringCollection: the background collection runs every 100ms
// and purges what was deleted, while uploads store and delete files whose
// chunks other uploads store again (deduplicated against chunks the
// collector is about to remove), then SIGKILL. Every upload answered
// before the kill succeeds: the collector leaves alone the chunks an
// upload holds (no 503 over either front end). Files that were kept read
// back byte for byte while it runs and after the restart, and fsck
// --verify is clean.
func TestKillDuringCollection(t *testing.T) {
	bin, data, p, lc := runningDaemon(t, "--gc-interval", "100ms", "--gc-purge-deleted-after", "1ns")

	body := func(k int) []byte { return content(uint64(500+k), 1<<20+k) }
	var (
		mu   sync.Mutex
		kept = map[string]int{} // answered, never deleted: content index
		// The content a churning worker deleted last, which keeping
		// workers store again while the collector may be removing it.
		lastDeleted atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := w*100000 + i // churn: new content every time
				if w >= 2 {
					k = int(lastDeleted.Load())
				}
				name := fmt.Sprintf("w%d-%d.bin", w, i)
				status, err := lc.upload(name, body(k), w%2 == 1)
				if err != nil {
					return
				}
				if status != http.StatusOK && status != http.StatusCreated {
					t.Errorf("upload %s: %d", name, status)
					return
				}
				if w < 2 {
					// Churn: delete it again, for the collector.
					if status, _, err := lc.dav(http.MethodDelete, name, nil); err != nil {
						return
					} else if status != http.StatusNoContent {
						t.Errorf("DELETE %s: %d", name, status)
						return
					}
					lastDeleted.Store(int64(k))
					continue
				}
				mu.Lock()
				kept[name] = k
				mu.Unlock()
				if status, b, err := lc.dav(http.MethodGet, name, nil); err != nil {
					return
				} else if status != 200 || !bytes.Equal(b, body(k)) {
					t.Errorf("%s read back %d, %d bytes while the collector ran", name, status, len(b))
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	p.kill(t)
	close(stop)
	wg.Wait()
	if !strings.Contains(p.stderr(), "chunk gc") {
		t.Errorf("the collector never ran:\n%s", p.stderr())
	}
	removed := 0
	for _, line := range strings.Split(p.stderr(), "\n") {
		if strings.Contains(line, "chunk gc") && !strings.Contains(line, "removed 0") {
			removed++
		}
	}
	t.Logf("%d collections removed chunks", removed)
	if t.Failed() {
		for _, line := range strings.Split(p.stderr(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"status":5`) {
				t.Log(line)
			}
		}
	}

	p = startDaemon(t, bin, data, "--gc-interval", "100ms", "--gc-purge-deleted-after", "1ns")
	lc = newLCClient(t, p, data)
	time.Sleep(300 * time.Millisecond) // a collection or two after the restart
	for name, k := range kept {
		if status, b := lc.read(name); status != 200 || !bytes.Equal(b, body(k)) {
			t.Errorf("%s after the restart: %d, %d bytes", name, status, len(b))
		}
	}
	t.Logf("%d files kept", len(kept))
	p.stop(t)
	fsck(t, bin, data)
}

// TestKillDuringCopyPurgeAndGC: SIGKILL during a WebDAV COPY of a folder
// too large for one transaction, during `berth purge-deleted` and during
// `berth gc`. The copy appears whole or not at all, the source and a
// file kept aside read back byte for byte after each kill, fsck --verify
// is clean, and in the end the root's space_used is the kept files.
func TestKillDuringCopyPurgeAndGC(t *testing.T) {
	bin, data, p, lc := runningDaemon(t)

	// Over vfs's 512 references per transaction; chunked, not inline;
	// files i and i+350 share their chunk.
	const n = 700
	body := func(i int) []byte { return content(uint64(100+i%350), 17<<10+i%350) }
	if status, _, err := lc.dav("MKCOL", "src", nil); err != nil || status != http.StatusCreated {
		t.Fatalf("MKCOL: %d %v", status, err)
	}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if status, _, err := lc.dav(http.MethodPut, fmt.Sprintf("src/f%03d", i), bytes.NewReader(body(i))); err != nil || status != http.StatusCreated {
					t.Errorf("PUT f%03d: %d %v", i, status, err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	keep := content(7, 3<<20)
	if status, err := lc.upload("keep.bin", keep, true); err != nil || status != http.StatusCreated {
		t.Fatalf("upload keep.bin: %d %v", status, err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// checkSrc reads every file of folder back.
	checkFolder := func(when, folder string) {
		t.Helper()
		for i := range n {
			status, b, err := lc.dav(http.MethodGet, fmt.Sprintf("%s/f%03d", folder, i), nil)
			if err != nil || status != 200 || !bytes.Equal(b, body(i)) {
				t.Fatalf("%s: %s/f%03d: %d, %d bytes, %v", when, folder, i, status, len(b), err)
			}
		}
		if status, b := lc.read("keep.bin"); status != 200 || !bytes.Equal(b, keep) {
			t.Fatalf("%s: keep.bin: %d, %d bytes", when, status, len(b))
		}
	}

	// A first COPY measures how long one takes; the second is killed
	// half way.
	start := time.Now()
	if status, b, err := lc.dav("COPY", "src", nil, "Destination", lc.base+"/webdav/admin/probe", "Depth", "infinity"); err != nil || status != http.StatusCreated {
		t.Fatalf("COPY: %d %v %s", status, err, b)
	}
	took := time.Since(start)
	if status, _, err := lc.dav(http.MethodDelete, "probe", nil); err != nil || status != http.StatusNoContent {
		t.Fatalf("DELETE probe: %d %v", status, err)
	}
	go lc.dav("COPY", "src", nil, "Destination", lc.base+"/webdav/admin/dst", "Depth", "infinity")
	time.Sleep(took / 2)
	p.kill(t)
	t.Logf("a COPY of %d files took %v; killed the next after %v", n, took, took/2)
	p = startDaemon(t, bin, data)
	lc.base = "https://" + p.addrs["https"]
	checkFolder("after a COPY was killed", "src")
	status, b, err := lc.dav("PROPFIND", "dst", nil, "Depth", "1")
	switch {
	case err != nil:
		t.Fatal(err)
	case status == http.StatusNotFound:
		t.Log("the killed COPY left nothing")
	case status == http.StatusMultiStatus:
		if got := strings.Count(string(b), "<D:response>"); got != n+1 {
			t.Errorf("the killed COPY left dst with %d entries, want %d or none", got-1, n)
		}
		checkFolder("after a COPY was killed", "dst")
	default:
		t.Fatalf("PROPFIND dst: %d %s", status, b)
	}
	for _, dir := range []string{"src", "dst"} {
		if status, _, err := lc.dav(http.MethodDelete, dir, nil); err != nil || (status != http.StatusNoContent && status != http.StatusNotFound) {
			t.Fatalf("DELETE %s: %d %v", dir, status, err)
		}
	}
	p.stop(t)

	for _, d := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond} {
		t.Logf("purge-deleted: %s", runKilled(t, bin, d, "purge-deleted", "--older-than", "0s", "--data", data))
	}
	t.Logf("gc: %s", runKilled(t, bin, 150*time.Millisecond, "gc", "--data", data))
	fsck(t, bin, data)

	p = startDaemon(t, bin, data)
	lc.base = "https://" + p.addrs["https"]
	if status, b := lc.read("keep.bin"); status != 200 || !bytes.Equal(b, keep) {
		t.Fatalf("keep.bin: %d, %d bytes", status, len(b))
	}
	p.stop(t)
	t.Logf("purge-deleted: %s", runKilled(t, bin, time.Minute, "purge-deleted", "--older-than", "0s", "--data", data))
	fsck(t, bin, data)
	p = startDaemon(t, bin, data)
	lc.base = "https://" + p.addrs["https"]
	files, used := lc.listing()
	if len(files) != 1 || used != int64(len(keep)) {
		t.Errorf("in the end: files %v, space_used %d, want keep.bin and %d", files, used, len(keep))
	}
	p.stop(t)
	fsck(t, bin, data)
}

// TestResetPassword: the way back into a locked-out administrator's
// account (issue 12: five mistyped passwords locked the only account with
// no way out). Over the real daemon the administrator is locked, which the
// answer, the log and the metrics tell; reset-password is refused while
// berth runs, and on the stopped directory refuses an unknown login and a
// short BERTH_RESET_PASSWORD, then sets a password; after a restart the
// old password and the old token are refused and the new password logs in
// at once, the lock cleared.
func TestResetPassword(t *testing.T) {
	bin, data, p, lc := runningDaemon(t, "--lockout-max-failures", "3")
	oldPassword, oldToken := lc.password, lc.token
	grant := func(base, password string) (int, string) {
		t.Helper()
		resp, err := lc.c.PostForm(base+"/oauth/token", url.Values{
			"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"}, "password": {password},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	const wrong = "not the password 0"
	for i := range 3 {
		status, body := grant(lc.base, wrong)
		if want := map[bool]int{true: 403, false: 400}[i == 2]; status != want {
			t.Fatalf("wrong password %d: %d %s, want %d", i, status, body, want)
		}
	}
	status, body := grant(lc.base, oldPassword)
	if status != 403 || !strings.Contains(body, `"account_locked"`) || !strings.Contains(body, "locked until ") || !strings.Contains(body, "(about 15 minutes)") {
		t.Fatalf("right password while locked: %d %s, want 403 account_locked saying until when", status, body)
	}
	_, metrics := get(t, http.DefaultClient, "http://"+p.addrs["metrics"]+"/metrics")
	for _, want := range []string{`berth_login_failures_total{reason="bad_password"} 3`, `berth_login_failures_total{reason="locked"} 1`,
		`berth_login_failures_total{reason="unknown_login"} 0`, "berth_account_lockouts_total 1"} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	logs := p.stderr()
	if !strings.Contains(logs, `"level":"WARN","msg":"login failed"`) || !strings.Contains(logs, `"msg":"account locked: too many failed logins"`) ||
		// The right password refused by the lock appears once: in the
		// first start's message, not in the log.
		!strings.Contains(logs, `"login":"admin"`) || strings.Contains(logs, wrong) || strings.Count(logs, oldPassword) != 1 {
		t.Errorf("the log does not tell the failures and the lockout with the login alone:\n%s", logs)
	}

	resetArgs := []string{"reset-password", "--data", data, "admin"}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), resetArgs, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "in use by another berth") {
		t.Fatalf("reset-password while berth runs: %v, want the data directory in use", err)
	}
	p.stop(t)

	newPassword := ""
	for _, c := range []struct {
		name, env string
		args      []string
		// fails: a part of the error; "" for success.
		fails string
		// unprintable: standard error refuses writes (closed, a full disk).
		unprintable bool
	}{
		{"unknown login", "", []string{"reset-password", "--data", data, "nobody"}, `no person in ` + data + ` has the username or e-mail address "nobody"`, false},
		{"short password from the environment", "short", resetArgs, "BERTH_RESET_PASSWORD", false},
		{"no login", "", []string{"reset-password", "--data", data}, "accepts 1 arg(s)", false},
		// The random password was set and lost, with a success: the
		// account as lost as before and the operator told it was not.
		{"random password, standard error unwritable", "", resetArgs, "set but could not be printed (run reset-password again)", true},
		{"password from the environment", "a password from the environment", resetArgs, "", false},
		{"random password, by e-mail address", "", []string{"reset-password", "--data", data, "ADMIN@localhost"}, "", false},
	} {
		t.Setenv(resetPasswordEnv, c.env)
		stdout.Reset()
		stderr.Reset()
		var errOut io.Writer = &stderr
		if c.unprintable {
			errOut = unwritable{}
		}
		err := run(t.Context(), c.args, &stdout, errOut)
		if c.fails != "" {
			if err == nil || !strings.Contains(err.Error(), c.fails) {
				t.Errorf("%s: %v, want an error naming %q", c.name, err, c.fails)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, stderr.String())
		}
		if strings.Contains(stderr.String(), c.env) && c.env != "" {
			t.Errorf("%s: the password from the environment was printed:\n%s", c.name, stderr.String())
		}
		newPassword = c.env
		if c.env == "" {
			_, after, ok := strings.Cut(stderr.String(), "berth: new password for admin: ")
			newPassword, _, _ = strings.Cut(after, "\n")
			if !ok || len(newPassword) != 26 {
				t.Fatalf("%s: no new password printed:\n%s", c.name, stderr.String())
			}
		}
	}

	p = startDaemon(t, bin, data)
	base := "https://" + p.addrs["https"]
	if status, body := grant(base, oldPassword); status != 400 || !strings.Contains(body, `"invalid_grant"`) {
		t.Errorf("old password after the reset: %d %s, want 400 invalid_grant", status, body)
	}
	if status, body := grant(base, "a password from the environment"); status != 400 {
		t.Errorf("the replaced environment password after the reset: %d %s, want 400", status, body)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/api/2/person", nil)
	req.Header.Set("Authorization", "Bearer "+oldToken)
	resp, err := lc.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token from before the reset: %d, want 401", resp.StatusCode)
	}
	// Two failures above, the lock's three gone: the new password logs in.
	if status, body := grant(base, newPassword); status != 200 || !strings.Contains(body, `"access_token"`) {
		t.Fatalf("new password: %d %s, want 200 with a token", status, body)
	}
	p.stop(t)
}

// unwritable is a standard error that refuses every write.
type unwritable struct{}

func (unwritable) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stderr: bad file descriptor")
}

// TestExpireUploads: the background job ends a staged upload once it
// has expired, and the chunk GC then removes its chunks.
func TestExpireUploads(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	log, st, root := storesWithRoot(t)
	up, err := st.files.Stage(ctx, root.ID, root.FolderID, "big.bin", vfs.StageOptions{Length: 4 << 20, TTL: 2 * time.Second}, vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.files.Append(ctx, up.ID, 0, bytes.NewReader(bytes.Repeat([]byte("half "), 400_000)), vfs.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		expireUploads(ctx, 20*time.Millisecond, st, log)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := st.files.StagedInfo(ctx, up.ID); err != nil {
			if _, err := st.files.GC(ctx); err != nil {
				t.Fatal(err)
			}
			rep, err := st.files.Fsck(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Chunks == 0 && rep.OK() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired upload was not ended within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

// storesWithRoot opens the daemon's stores over a new data directory
// with the default configuration, closed when t ends, and creates a sync
// root in them.
func storesWithRoot(t *testing.T) (*slog.Logger, *stores, vfs.Root) {
	t.Helper()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(t.Context(), cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close(log) })
	root, err := st.files.CreateRoot(t.Context(), "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	return log, st, root
}
