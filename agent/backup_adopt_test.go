package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth/agent/agenttest"
)

// TestBackupAdoptsAfterCrash: a run that did not end may have stored
// files whose answers it never recorded (killed between the server's
// answer and the journal's line). The next run finds them in the
// server's listing and records them instead of sending them again, so
// no file gets a second, identical revision. Nor does a file restored
// over itself.
func TestBackupAdoptsAfterCrash(t *testing.T) {
	srv := agenttest.StartServer(t)
	alice := srv.CreatePerson(t, "alice", false)
	dir := t.TempDir()
	src := filepath.Join(dir, "tree")
	var files []string
	for i := range 20 {
		rel := fmt.Sprintf("/d%d/f%02d.txt", i%2, i)
		files = append(files, rel)
		p := filepath.Join(src, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(strings.Repeat(rel, 100+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, j, report := startBackupAgent(t, srv, alice, dir, src)
	ctx := context.Background()
	// The index as a run killed after five answers it did not record
	// leaves it.
	j.runMu.Lock()
	ids := map[string]uint64{}
	for _, p := range files[:5] {
		ids[p] = j.ix.get(p).ID
		delete(j.ix.entries, p)
	}
	j.ix.mu.Lock()
	j.ix.dirty = true
	err := j.ix.compact()
	j.ix.mu.Unlock()
	j.runMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.backups.run(ctx, j); err != nil {
		t.Fatal(err)
	}
	rb, _ := os.ReadFile(report)
	if !strings.Contains(string(rb), `"sent": 0,`) {
		t.Errorf("the run after a crash sent files again: %s", rb)
	}
	for p, id := range ids {
		if e := j.ix.get(p); e == nil || e.ID != id || len(e.Chunks) != 1 {
			t.Errorf("%s not recorded again as file %d: %+v", p, id, e)
		}
	}

	// A restore over the backup's own folder (its default target): the
	// files come back with their times to the second, and the run after
	// finds them to be the server's revisions already.
	restored := filepath.Join(dir, "state", fmt.Sprintf("backup-%d", j.root), "last-restore.json")
	start := time.Now()
	srv.JSON(t, alice.Token, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/backup/%d/restore", a.MachineID(), j.root), url.Values{}, nil)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if fi, err := os.Stat(restored); err == nil && fi.ModTime().After(start) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restore did not end")
		}
	}
	if rb, _ := os.ReadFile(restored); !strings.Contains(string(rb), `"ok": true`) || !strings.Contains(string(rb), `"files": 20`) {
		t.Fatalf("the restore: %s", rb)
	}
	if fi, _ := os.Stat(filepath.Join(src, filepath.FromSlash(files[7]))); fi.ModTime().Nanosecond() != 0 {
		t.Errorf("a restored file's time %v is not the API's, to the second", fi.ModTime())
	}
	if err := a.backups.run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if rb, _ := os.ReadFile(report); !strings.Contains(string(rb), `"sent": 0,`) || !strings.Contains(string(rb), `"scanned": 20,`) {
		t.Errorf("the run after a restore over the folder sent files: %s", rb)
	}
	status, body := srv.Do(t, srv.AdminToken(t), http.MethodGet, fmt.Sprintf("/api/2/organization/%d/metrics/usage", srv.OrganizationID(t)), nil)
	if status != 200 || !strings.Contains(string(body), `"revision_count":0`) {
		t.Errorf("usage after the runs: %d %s, want no older revision", status, body)
	}
}

// TestRestoreThroughLinks: a restore writes only inside the folder it
// restores into. A symbolic link already on the disk, in the backup's
// folder or on the way to a target inside it, that leads out of it is
// not written through (before, the restore followed it and wrote where
// it led), and a link that is a file's place is replaced, not followed.
func TestRestoreThroughLinks(t *testing.T) {
	srv := agenttest.StartServer(t)
	alice := srv.CreatePerson(t, "alice", false)
	dir := t.TempDir()
	src := filepath.Join(dir, "tree")
	writeFile(t, filepath.Join(src, "a.txt"), "backed up")
	a, j, _ := startBackupAgent(t, srv, alice, dir, src)
	machine := a.MachineID()
	// In the backup root, as its person (or an administrator) may put
	// them: a folder "out" holding a file, and a file "victim.txt".
	var out struct{ ID uint64 }
	srv.JSON(t, alice.Token, http.MethodPost, fmt.Sprintf("/api/2/files/%d/create_folder", j.root), url.Values{"name": {"out"}}, &out)
	s := &e2eRoot{t: t, srv: srv, p: alice, root: j.root}
	s.uploadIn(out.ID, "planted.txt", "planted")
	s.upload("victim.txt", "restored")
	for _, tc := range []struct {
		name   string
		target string // "" the backup's folder
	}{
		{"a link in the backup's folder", ""},
		{"a target inside the backup's folder through a link", filepath.Join(src, "out", "deeper")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "outside")
			writeFile(t, filepath.Join(outside, "victim.txt"), "kept")
			os.Remove(filepath.Join(src, "out"))
			os.Remove(filepath.Join(src, "victim.txt"))
			if err := os.Symlink(outside, filepath.Join(src, "out")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, "victim.txt"), filepath.Join(src, "victim.txt")); err != nil {
				t.Fatal(err)
			}
			report := filepath.Join(a.backups.jobDir(j.root), "last-restore.json")
			os.Remove(report)
			form := url.Values{}
			if tc.target != "" {
				form.Set("target", tc.target)
			}
			srv.JSON(t, alice.Token, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/backup/%d/restore", machine, j.root), form, nil)
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
				if _, err := os.Stat(report); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the restore did not end")
				}
			}
			rb, _ := os.ReadFile(report)
			t.Logf("restore report: %s", rb)
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Errorf("the folder the link leads to: %v, want only victim.txt", ents)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "victim.txt")); string(b) != "kept" {
				t.Errorf("victim.txt where the link leads: %q, want it kept", b)
			}
		})
	}
}
