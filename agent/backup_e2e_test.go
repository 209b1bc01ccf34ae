package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth/agent"
	"berth/agent/agenttest"
)

// makeTree writes files under dir: small ones spread over folders of 50,
// and big ones (each of bigSize) at the top, from seed's random bytes.
// It returns the files' paths relative to dir.
func makeTree(t testing.TB, dir string, seed uint64, small, smallMax, big, bigSize int) []string {
	t.Helper()
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed)}))
	buf := make([]byte, max(smallMax, bigSize))
	var out []string
	write := func(rel string, n int) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		fillRandom(rng, buf[:n])
		if err := os.WriteFile(p, buf[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	for i := range small {
		write(fmt.Sprintf("d%02d/e%d/f%04d.bin", i/50, i%3, i), 1+rng.IntN(smallMax))
	}
	for i := range big {
		write(fmt.Sprintf("big%02d.bin", i), bigSize)
	}
	return out
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := rng.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
}

// treeBytes is the total size of the files under dir.
func treeBytes(t testing.TB, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return nil
	})
	return n
}

// reportFile is the path of a backup's report in agent a's state folder.
func reportFile(a *agenttest.Agent, root uint64, name string) string {
	return filepath.Join(filepath.Dir(a.StateFile), fmt.Sprintf("backup-%d", root), name)
}

// waitReport waits for the report name (last-run.json or
// last-restore.json) of backup root finished after since, and fails the
// test unless it is ok.
func waitReport[R any](t *testing.T, a *agenttest.Agent, root uint64, name string, since time.Time, d time.Duration) R {
	t.Helper()
	var rep struct {
		Finished time.Time `json:"finished"`
		OK       bool      `json:"ok"`
		Error    string    `json:"error"`
	}
	var out R
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(reportFile(a, root, name))
		if err == nil && json.Unmarshal(b, &rep) == nil && rep.Finished.After(since) {
			if !rep.OK {
				t.Fatalf("%s: %s\n%s", name, rep.Error, tail(a.Output()))
			}
			json.Unmarshal(b, &out)
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s after %v within %v:\n%s", name, since, d, tail(a.Output()))
	return out
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// remoteTree lists backup root's tree on the server: path -> size and
// modified ("/" folders have size -1).
func remoteTree(t *testing.T, srv *agenttest.Server, token string, root uint64) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	var walk func(folder uint64)
	walk = func(folder uint64) {
		u := fmt.Sprintf("/api/2/files/%d?include_children=true", root)
		if folder != 0 {
			u = fmt.Sprintf("/api/2/files/%d/folder/%d?include_children=true", root, folder)
		}
		var l struct {
			Children []struct {
				ID       uint64 `json:"id"`
				Path     string `json:"path"`
				Size     int64  `json:"size"`
				Modified string `json:"modified"`
				Type     string `json:"type"`
			} `json:"children"`
		}
		srv.JSON(t, token, http.MethodGet, u, nil, &l)
		for _, c := range l.Children {
			if c.Type == "folder" {
				out[c.Path] = [2]string{"dir", ""}
				walk(c.ID)
				continue
			}
			out[c.Path] = [2]string{fmt.Sprint(c.Size), c.Modified}
		}
	}
	walk(0)
	return out
}

// localTree is remoteTree's view of a local folder.
func localTree(t *testing.T, dir string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		key := "/" + filepath.ToSlash(rel)
		if d.IsDir() {
			out[key] = [2]string{"dir", ""}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[key] = [2]string{fmt.Sprint(fi.Size()), fi.ModTime().UTC().Format("2006-01-02T15:04:05")}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string][2]string) {
	t.Helper()
	bad := 0
	for p, w := range want {
		if g, ok := got[p]; !ok || g != w {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s is %v, want %v", what, p, g, w)
			}
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("%s: %s (%v) should not be there", what, p, g)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d differences (%d items, want %d)", what, bad, len(got), len(want))
	}
}

// TestAgentBackup backs up a tree of 2,000 files and 200 MiB with the
// real server and agent, backs it up again after 10 files changed (and
// one was deleted) and checks what went on the wire, then restores it
// into an empty folder, byte-identical with modification times.
func TestAgentBackup(t *testing.T) {
	srv := agenttest.StartServer(t)
	alice := srv.CreatePerson(t, "alice", false)
	a := srv.NewAgent(t, alice)
	src := a.Path("docs")
	// 1,990 small files of up to 50 KiB (about 48 MiB) and 10 of 15 MiB:
	// 2,000 files, about 200 MiB.
	files := makeTree(t, src, 1, 1990, 50<<10, 10, 15<<20)
	total := treeBytes(t, src)
	a.Start(t)
	id := a.WaitOnline(t)
	mpath := func(p string) string { return fmt.Sprintf("/api/2/machine/%d%s", id, p) }
	var b struct {
		ID uint64 `json:"id"`
	}
	start := time.Now()
	srv.JSON(t, alice.Token, http.MethodPost, mpath("/backups/create"), url.Values{"path": {src}}, &b)
	first := waitReport[agent.RunReport](t, a, b.ID, "last-run.json", start, 15*time.Minute)
	t.Logf("first backup: %d files, %d bytes in %v; %d bytes on the wire", first.Sent, total, first.Finished.Sub(first.Started).Round(time.Millisecond), first.WireBytes)
	if first.Sent != int64(len(files)) || first.Excluded != 0 {
		t.Fatalf("first backup: %+v, want %d files sent", first, len(files))
	}
	sameTree(t, "after the first backup", remoteTree(t, srv, alice.Token, b.ID), localTree(t, src))

	var st struct {
		Results struct {
			Subscriptions []map[string]any `json:"subscriptions"`
			Synced        bool             `json:"synced"`
		} `json:"results"`
	}
	srv.JSON(t, alice.Token, http.MethodGet, mpath("/status"), nil, &st)
	if len(st.Results.Subscriptions) != 1 || st.Results.Subscriptions[0]["rsub_id"] != float64(b.ID) ||
		st.Results.Subscriptions[0]["synced_folder"] != src || st.Results.Subscriptions[0]["synced"] != true || !st.Results.Synced {
		t.Errorf("status after a backup: %+v", st.Results)
	}

	// Ten files change: five small ones rewritten, and five big ones
	// with 100 bytes overwritten in the middle; one small file goes.
	rng := rand.New(rand.NewChaCha8([32]byte{2}))
	var changed int64
	for i := range 5 {
		p := filepath.Join(src, files[i*300])
		fi, _ := os.Stat(p)
		buf := make([]byte, fi.Size())
		fillRandom(rng, buf)
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		changed += fi.Size()
	}
	for i := range 5 {
		f, err := os.OpenFile(filepath.Join(src, fmt.Sprintf("big%02d.bin", i)), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		patch := make([]byte, 100)
		fillRandom(rng, patch)
		if _, err := f.WriteAt(patch, int64(7<<20+i*12345)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		changed += 15 << 20
	}
	gone := files[1001]
	if err := os.Remove(filepath.Join(src, gone)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	srv.JSON(t, alice.Token, http.MethodPost, mpath(fmt.Sprintf("/backup/%d/start", b.ID)), nil, nil)
	second := waitReport[agent.RunReport](t, a, b.ID, "last-run.json", start, 5*time.Minute)
	t.Logf("second backup: %d files sent, %d deleted, %d literal bytes, %d bytes on the wire (%.3f%% of the tree's %d; the changed files hold %d) in %v",
		second.Sent, second.Deleted, second.Literal, second.WireBytes, 100*float64(second.WireBytes)/float64(total), total, changed,
		second.Finished.Sub(second.Started).Round(time.Millisecond))
	if second.Sent != 10 || second.Deleted != 1 {
		t.Errorf("second backup: %+v, want 10 files sent and 1 deleted", second)
	}
	// Sending the ten files whole would be over 75 MiB; their changed
	// chunks are at most two of 4 MiB in each big file.
	if limit := int64(24 << 20); second.WireBytes > limit || second.WireBytes >= changed/3 {
		t.Errorf("second backup sent %d bytes on the wire, want under %d (the changed files hold %d)", second.WireBytes, limit, changed)
	}
	sameTree(t, "after the second backup", remoteTree(t, srv, alice.Token, b.ID), localTree(t, src))

	t.Run("restore into an empty folder", func(t *testing.T) {
		target := a.Path("restored")
		start := time.Now()
		srv.JSON(t, alice.Token, http.MethodPost, mpath(fmt.Sprintf("/backup/%d/restore", b.ID)), url.Values{"target": {target}}, nil)
		rep := waitReport[agent.RestoreReport](t, a, b.ID, "last-restore.json", start, 10*time.Minute)
		t.Logf("restore: %d files, %d bytes in %v", rep.Files, rep.Bytes, rep.Finished.Sub(rep.Started).Round(time.Millisecond))
		sameTree(t, "restored", localTree(t, target), localTree(t, src))
		for _, rel := range files {
			if rel == gone {
				continue
			}
			want, err := os.ReadFile(filepath.Join(src, rel))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(target, rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("restored %s differs (%v)", rel, err)
			}
		}
	})

	t.Run("restore of a folder and the target rule", func(t *testing.T) {
		sub := path.Dir(path.Dir(files[0])) // d00
		target := a.Path("part")
		start := time.Now()
		srv.JSON(t, alice.Token, http.MethodPost, mpath(fmt.Sprintf("/backup/%d/restore", b.ID)), url.Values{"path": {"/" + sub}, "target": {target}}, nil)
		waitReport[agent.RestoreReport](t, a, b.ID, "last-restore.json", start, 5*time.Minute)
		sameTree(t, "a restored folder", localTree(t, target), localTree(t, filepath.Join(src, sub)))
		// A folder that holds files and is not the backup's is refused.
		status, body := srv.Do(t, alice.Token, http.MethodPost, mpath(fmt.Sprintf("/backup/%d/restore", b.ID)), url.Values{"target": {target}})
		wantError(t, "a restore into a folder not empty", status, body, 400, "invalid_request")
		status, body = srv.Do(t, alice.Token, http.MethodPost, mpath(fmt.Sprintf("/backup/%d/restore", b.ID)), url.Values{"target": {"relative/x"}})
		if status != 400 {
			t.Errorf("a relative target: %d %s", status, body)
		}
	})

	t.Run("start of a backup the caller cannot see", func(t *testing.T) {
		bob := srv.CreatePerson(t, "bob", false)
		status, body := srv.Do(t, bob.Token, http.MethodPost, mpath(fmt.Sprintf("/backup/%d/start", b.ID)), nil)
		wantError(t, "bob starts alice's backup", status, body, 404, "not_found")
		status, _ = srv.Do(t, alice.Token, http.MethodPost, mpath("/backup/999999/start"), nil)
		if status != 404 {
			t.Errorf("start of no backup: %d", status)
		}
	})
}

// TestAgentBackupKilled kills the agent (SIGKILL) in the middle of a
// first backup and starts it again: the run it does then finishes the
// backup with every file stored once, none lost and none twice.
func TestAgentBackupKilled(t *testing.T) {
	srv := agenttest.StartServer(t)
	alice := srv.CreatePerson(t, "alice", false)
	a := srv.NewAgent(t, alice)
	src := a.Path("docs")
	files := makeTree(t, src, 3, 600, 256<<10, 0, 0)
	a.Start(t)
	id := a.WaitOnline(t)
	var b struct {
		ID uint64 `json:"id"`
	}
	srv.JSON(t, alice.Token, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/backups/create", id), url.Values{"path": {src}}, &b)
	// Kill it once the journal holds a good part of the files, before
	// the run's report.
	journal := reportFile(a, b.ID, "journal.jsonl")
	deadline := time.Now().Add(5 * time.Minute)
	var lines int
	for ; time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		j, _ := os.ReadFile(journal)
		if lines = strings.Count(string(j), "\n"); lines >= 150 {
			break
		}
	}
	a.Kill(t)
	if _, err := os.Stat(reportFile(a, b.ID, "last-run.json")); err == nil {
		t.Fatalf("the first run ended before the kill (%d journal lines): make the tree bigger", lines)
	}
	t.Logf("killed after %d journal lines of about %d", lines, len(files)+1+12+12*3)
	start := time.Now()
	a.Start(t)
	rep := waitReport[agent.RunReport](t, a, b.ID, "last-run.json", start, 10*time.Minute)
	t.Logf("the run after the restart sent %d files", rep.Sent)
	sameTree(t, "after the restart", remoteTree(t, srv, alice.Token, b.ID), localTree(t, src))
	// None stored twice: the organization (alice's backup root is all
	// that holds files) has exactly the files, and no older revision.
	var u struct {
		Results []map[string]any `json:"results"`
	}
	status, body := srv.Do(t, srv.AdminToken(t), http.MethodGet, fmt.Sprintf("/api/2/organization/%d/metrics/usage", srv.OrganizationID(t)), nil)
	if status != 200 || json.Unmarshal(body, &u) != nil {
		t.Fatalf("usage: %d %s", status, body)
	}
	t.Logf("usage: %s", body)
	if !strings.Contains(string(body), fmt.Sprintf(`"file_count":%d`, len(files))) || !strings.Contains(string(body), `"revision_count":0`) {
		t.Errorf("after a killed and restarted backup the usage is %s, want %d files and no older revision", body, len(files))
	}
}
