package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/agent/agenttest"
)

// e2eRoot is one person's root on the real server (agenttest), with
// what the mapping tests ask of it.
type e2eRoot struct {
	t    *testing.T
	srv  *agenttest.Server
	p    agenttest.Person
	root uint64
}

func newE2ERoot(t *testing.T, srv *agenttest.Server, login string) *e2eRoot {
	t.Helper()
	p := srv.CreatePerson(t, login, false)
	return &e2eRoot{t: t, srv: srv, p: p, root: p.RootID}
}

// call sends a request as the person and decodes a 200 answer into out;
// anything else fails the test.
func (s *e2eRoot) call(method, p string, form url.Values, out any) {
	s.t.Helper()
	s.srv.JSON(s.t, s.p.Token, method, p, form, out)
}

// upload stores data as name in the root's top folder.
func (s *e2eRoot) upload(name, data string) {
	s.t.Helper()
	s.uploadIn(0, name, data)
}

// uploadIn stores data as name in folder (0: the root's top folder).
func (s *e2eRoot) uploadIn(folder uint64, name, data string) {
	s.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write([]byte(data))
	mw.Close()
	where := fmt.Sprintf("%s/api/2/files/%d", s.srv.URL, s.root)
	if folder != 0 {
		where += fmt.Sprintf("/folder/%d", folder)
	}
	req, _ := http.NewRequest("POST", where+"/upload", &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+s.p.Token)
	resp, err := s.srv.Client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		out, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("upload %s: %d %s", name, resp.StatusCode, out)
	}
}

// tree is the root's files, relative path -> contents (folders end in
// "/" and map to ""), and their ids.
func (s *e2eRoot) tree() (map[string]string, map[string]uint64) {
	s.t.Helper()
	files, ids, err := s.tryTree()
	if err != nil {
		s.t.Fatal(err)
	}
	return files, ids
}

// tryTree is tree, or an error when an item listed went before the walk
// read it (404): the agent syncing while a test compares the trees.
func (s *e2eRoot) tryTree() (map[string]string, map[string]uint64, error) {
	s.t.Helper()
	files, ids := map[string]string{}, map[string]uint64{}
	var walk func(p, rel string) error
	walk = func(p, rel string) error {
		code, b := s.srv.Do(s.t, s.p.Token, "GET", p+"?include_children=true", nil)
		if code != 200 {
			return fmt.Errorf("list %q: %d %s", rel, code, b)
		}
		var f struct{ Children []remoteItem }
		if err := json.Unmarshal(b, &f); err != nil {
			s.t.Fatalf("list %q: %v", rel, err)
		}
		for _, ch := range f.Children {
			r := path.Join(rel, path.Base(ch.Path))
			ids[r] = ch.ID
			if ch.dir() {
				files[r+"/"] = ""
				if err := walk(fmt.Sprintf("/api/2/files/%d/folder/%d", s.root, ch.ID), r); err != nil {
					return err
				}
				continue
			}
			code, b := s.srv.Do(s.t, s.p.Token, "GET", fmt.Sprintf("/api/2/files/%d/%d/download", s.root, ch.ID), nil)
			if code != 200 {
				return fmt.Errorf("download %s: %d %s", r, code, b)
			}
			files[r] = string(b)
		}
		return nil
	}
	err := walk(fmt.Sprintf("/api/2/files/%d", s.root), "")
	return files, ids, err
}

// mapFolder enables machine's file server and maps dir to the root.
func (s *e2eRoot) mapFolder(machine uint64, dir string) uint64 {
	s.t.Helper()
	s.call("POST", fmt.Sprintf("/api/2/machine/%d/server/enable", machine), url.Values{}, nil)
	var mp struct{ ID uint64 }
	s.call("POST", fmt.Sprintf("/api/2/machine/%d/mappings/create", machine), url.Values{"path": {dir}, "root_id": {fmt.Sprint(s.root)}}, &mp)
	return mp.ID
}

// status is GET /api/2/machine/<id>/status.
func (s *e2eRoot) status(machine uint64) (subs []Subscription, synced bool) {
	var st struct {
		Results struct {
			Subscriptions []Subscription `json:"subscriptions"`
			Synced        bool           `json:"synced"`
		} `json:"results"`
	}
	code, body := s.srv.Do(s.t, s.p.Token, "GET", fmt.Sprintf("/api/2/machine/%d/status", machine), nil)
	if code != 200 || json.Unmarshal(body, &st) != nil {
		s.t.Logf("status: %d %s", code, body)
	}
	return st.Results.Subscriptions, st.Results.Synced
}

// localTree is the folder's files as tree gives the root's.
func localTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || d.Name() == markerName {
			return nil
		}
		r, _ := filepath.Rel(dir, p)
		r = filepath.ToSlash(r)
		if d.IsDir() {
			out[r+"/"] = ""
			return nil
		}
		b, _ := os.ReadFile(p)
		out[r] = string(b)
		return nil
	})
	return out
}

// eventually retries check until it returns nil or the wait runs out.
func eventually(t *testing.T, wait time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, wait, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sameTrees is nil when the local folder and the root hold the same
// files, and says how they differ otherwise.
func sameTrees(t *testing.T, s *e2eRoot, dir string) error {
	l := localTree(t, dir)
	r, _, err := s.tryTree()
	if err != nil {
		return err
	}
	if maps.Equal(l, r) {
		return nil
	}
	return fmt.Errorf("local %v\nroot %v", slices.Sorted(maps.Keys(l)), slices.Sorted(maps.Keys(r)))
}

// fastTiming makes in-process tests quick; the real process keeps the
// defaults.
var fastTiming = syncTiming{Debounce: 100 * time.Millisecond, MaxDelay: time.Second, Poll: 500 * time.Millisecond, Rescan: 10 * time.Second}

// inProcessAgent runs an Agent with mapped folders against s, with its
// state file in stateDir ("" a new one), until stop or the test's end.
func inProcessAgent(t *testing.T, s *e2eRoot, stateDir string) (a *Agent, stop func()) {
	t.Helper()
	return inProcessAgentWith(t, s, stateDir, s.srv.Client)
}

// inProcessAgentWith is inProcessAgent with the HTTP client hc.
func inProcessAgentWith(t *testing.T, s *e2eRoot, stateDir string, hc *http.Client) (a *Agent, stop func()) {
	t.Helper()
	return inProcessAgentRefresh(t, s, stateDir, hc, 0)
}

// inProcessAgentRefresh is inProcessAgentWith reading its set-up every
// refresh (0: the default).
func inProcessAgentRefresh(t *testing.T, s *e2eRoot, stateDir string, hc *http.Client, refresh time.Duration) (a *Agent, stop func()) {
	t.Helper()
	if stateDir == "" {
		stateDir = t.TempDir()
	}
	a, err := New(Config{
		Server: s.srv.URL, Login: s.p.Login, StateFile: filepath.Join(stateDir, "state.json"),
		Password: func() (string, error) { return s.p.Password, nil }, HTTPClient: hc,
		Logger:       slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		SetupRefresh: refresh,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := a.startMappings(fastTiming)
	registerLs(a) // what may be listed follows the mappings
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); a.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-ran; m.stopAll() }) }
	t.Cleanup(stop)
	eventually(t, 30*time.Second, "the agent connects", func() error {
		if a.MachineID() == 0 {
			return fmt.Errorf("no machine id")
		}
		return nil
	})
	return a, stop
}

// tWriter logs what is written to it in the test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

const syncWait = 30 * time.Second

// TestMappingE2E runs the real server with an agent in this process and
// then a real `berth agent` process: a mapping merged at first, then kept
// in step both ways (new files, changes, renames, deletes), a conflict
// that keeps both versions, and a deleted mapping that keeps both sides'
// files.
// fileMode is an error when the file at p has not permissions want.
func fileMode(p string, want fs.FileMode) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if got := fi.Mode().Perm(); got != want {
		return fmt.Errorf("%s has mode %#o, want %#o", filepath.Base(p), got, want)
	}
	return nil
}

func TestMappingE2E(t *testing.T) {
	srv := agenttest.StartServer(t)
	srv.SetPolicy(t, 0, url.Values{"file_server_enabled": {"true"}})

	// The read of the set-up at a connection and a reconfigure notice's
	// run at once: the one that began first, if it ends last, must not
	// undo what the later one found (a mapping made as the agent
	// connected was dropped until the next reconnect).
	t.Run("a stale read of the set-up ends last", func(t *testing.T) {
		s := newE2ERoot(t, srv, "ines")
		var hold atomic.Bool
		held, release := make(chan struct{}), make(chan struct{})
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := s.srv.Client.Transport.RoundTrip(r)
			if strings.HasSuffix(r.URL.Path, "/mappings") && hold.CompareAndSwap(true, false) {
				close(held)
				<-release
			}
			return resp, err
		})}
		a, _ := inProcessAgentWith(t, s, "", hc)
		eventually(t, syncWait, "the first set-up", func() error {
			if _, known := a.Setup(); !known {
				return fmt.Errorf("not read yet")
			}
			return nil
		})
		hold.Store(true)
		stale := make(chan error, 1)
		go func() { stale <- a.readSetup(context.Background()) }()
		<-held // it read no mapping, and waits to apply that
		s.mapFolder(a.MachineID(), filepath.Join(t.TempDir(), "Mapped"))
		eventually(t, syncWait, "the notice's set-up", func() error {
			if cur, _ := a.Setup(); len(cur.Mappings) != 1 {
				return fmt.Errorf("%d mappings", len(cur.Mappings))
			}
			return nil
		})
		close(release)
		if err := <-stale; err != nil {
			t.Fatal(err)
		}
		if cur, _ := a.Setup(); len(cur.Mappings) != 1 {
			t.Fatalf("after the stale read ended: %d mappings, want 1", len(cur.Mappings))
		}
	})

	// The agent does not take the server's word for names: a listing
	// (the server's, or a man in the middle's) that calls a folder ".."
	// must not make the agent write, rename or upload anything outside
	// the mapped folder. Before, the folder's files were downloaded next
	// to the mapped folder, and a file already there was set aside as a
	// conflict, replaced by the server's and its old contents uploaded.
	t.Run("a listing that names a folder outside the mapped one", func(t *testing.T) {
		s := newE2ERoot(t, srv, "hana")
		base := t.TempDir()
		dir := filepath.Join(base, "Mapped")
		writeFile(t, filepath.Join(base, "secret.txt"), "kept on this machine")
		var up struct{ ID uint64 }
		s.call("POST", fmt.Sprintf("/api/2/files/%d/create_folder", s.root), url.Values{"name": {"up"}}, &up)
		s.uploadIn(up.ID, "planted.txt", "planted by the server")
		s.uploadIn(up.ID, "secret.txt", "the server's secret.txt, longer than the local one")
		s.upload("plain.txt", "an ordinary file")
		top := fmt.Sprintf("/api/2/files/%d", s.root)
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := s.srv.Client.Transport.RoundTrip(r)
			if err != nil || r.Method != "GET" || r.URL.Path != top || resp.StatusCode != 200 {
				return resp, err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			b = bytes.ReplaceAll(b, []byte(`"/up"`), []byte(`"/.."`))
			resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			resp.Header.Del("Content-Length")
			return resp, nil
		})}
		a, _ := inProcessAgentWith(t, s, "", hc)
		s.mapFolder(a.MachineID(), dir)
		eventually(t, syncWait, "the ordinary file", func() error {
			_, err := os.Stat(filepath.Join(dir, "plain.txt"))
			return err
		})
		time.Sleep(10 * fastTiming.Poll) // cycles enough for a conflict to be set aside
		if _, err := os.Stat(filepath.Join(base, "planted.txt")); err == nil {
			t.Error("the agent wrote planted.txt next to the mapped folder")
		}
		if b, err := os.ReadFile(filepath.Join(base, "secret.txt")); err != nil || string(b) != "kept on this machine" {
			t.Errorf("secret.txt next to the mapped folder: %q, %v", b, err)
		}
		ents, _ := os.ReadDir(base)
		if len(ents) != 2 {
			t.Errorf("next to the mapped folder: %v, want only Mapped and secret.txt", ents)
		}
		files, _ := s.tree()
		for p, data := range files {
			if strings.Contains(data, "kept on this machine") {
				t.Errorf("the local secret.txt reached the root as %s", p)
			}
		}
	})

	t.Run("both ways", func(t *testing.T) {
		s := newE2ERoot(t, srv, "mia")
		dir := filepath.Join(t.TempDir(), "Mapped")
		// Before the mapping: a file only here, one only there, one the
		// same on both.
		writeFile(t, filepath.Join(dir, "local0.txt"), "made here")
		writeFile(t, filepath.Join(dir, "same.txt"), "identical")
		s.upload("remote0.txt", "made there")
		s.upload("same.txt", "identical")
		a, _ := inProcessAgent(t, s, "")
		id := s.mapFolder(a.MachineID(), dir)
		eventually(t, syncWait, "first merge", func() error { return sameTrees(t, s, dir) })
		if got := localTree(t, dir); len(got) != 3 {
			t.Fatalf("first merge: %v", got)
		}

		var before os.FileInfo // up.txt here, before its rename there
		var idBefore uint64    // local0.txt there, before its rename here
		steps := []struct {
			name  string
			act   func()
			check func() error // beyond sameTrees; may be nil
		}{
			{"a file and folders made here", func() { writeFile(t, filepath.Join(dir, "a", "b", "new.txt"), "deep") }, nil},
			{"a file changed here", func() { writeFile(t, filepath.Join(dir, "local0.txt"), "changed here, longer") }, nil},
			// A file that comes down is readable as one made here is
			// (0666 less the umask, as a restore's), not the temporary
			// file's 0600 nor a fixed 0644, which gave group and others
			// the read a private umask (here 027) withholds; one that
			// comes down over a local file keeps that file's mode.
			{"a file uploaded there", func() {
				old := setUmask(0o027)
				t.Cleanup(func() { setUmask(old) })
				s.upload("up.txt", "from the root")
			}, func() error {
				return fileMode(filepath.Join(dir, "up.txt"), 0o640)
			}},
			{"a file changed there", func() {
				if err := os.Chmod(filepath.Join(dir, "remote0.txt"), 0o664); err != nil {
					t.Fatal(err)
				}
				s.upload("remote0.txt", "changed there")
			}, func() error { return fileMode(filepath.Join(dir, "remote0.txt"), 0o664) }},
			{"a rename here", func() {
				_, ids := s.tree()
				idBefore = ids["local0.txt"]
				if err := os.Rename(filepath.Join(dir, "local0.txt"), filepath.Join(dir, "renamed.txt")); err != nil {
					t.Fatal(err)
				}
			}, func() error {
				// Moved there, not sent again.
				if _, ids := s.tree(); ids["renamed.txt"] != idBefore {
					return fmt.Errorf("renamed.txt is item %d there, was %d", ids["renamed.txt"], idBefore)
				}
				return nil
			}},
			{"a rename there", func() {
				var err error
				if before, err = os.Stat(filepath.Join(dir, "up.txt")); err != nil {
					t.Fatal(err)
				}
				_, ids := s.tree()
				s.call("POST", fmt.Sprintf("/api/2/files/%d/%d/rename", s.root, ids["up.txt"]), url.Values{"name": {"up2.txt"}}, nil)
			}, func() error {
				// Renamed here, not downloaded again.
				if after, err := os.Stat(filepath.Join(dir, "up2.txt")); err != nil || !os.SameFile(before, after) {
					return fmt.Errorf("up2.txt is not up.txt renamed (%v)", err)
				}
				return nil
			}},
			{"a folder renamed here", func() {
				if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "c")); err != nil {
					t.Fatal(err)
				}
			}, nil},
			{"a delete here", func() { os.Remove(filepath.Join(dir, "renamed.txt")) }, nil},
			{"a delete there", func() {
				_, ids := s.tree()
				s.call("POST", fmt.Sprintf("/api/2/files/%d/%d/delete", s.root, ids["up2.txt"]), url.Values{}, nil)
			}, nil},
			{"a folder deleted here", func() { os.RemoveAll(filepath.Join(dir, "c")) }, nil},
			{"a folder made there", func() {
				s.call("POST", fmt.Sprintf("/api/2/files/%d/create_folder", s.root), url.Values{"name": {"d"}}, nil)
			}, nil},
			{"a folder deleted there", func() {
				_, ids := s.tree()
				s.call("POST", fmt.Sprintf("/api/2/files/%d/folder/%d/delete", s.root, ids["d"]), url.Values{}, nil)
			}, nil},
		}
		for _, st := range steps {
			began := time.Now()
			st.act()
			eventually(t, syncWait, st.name, func() error {
				if err := sameTrees(t, s, dir); err != nil {
					return err
				}
				if st.check != nil {
					return st.check()
				}
				return nil
			})
			t.Logf("%s: in step after %v", st.name, time.Since(began).Round(10*time.Millisecond))
		}
		want := map[string]string{"remote0.txt": "changed there", "same.txt": "identical"}
		if got := localTree(t, dir); !maps.Equal(got, want) {
			t.Fatalf("after the steps: %v, want %v", got, want)
		}
		eventually(t, syncWait, "status synced", func() error {
			subs, synced := s.status(a.MachineID())
			if len(subs) != 1 || subs[0].RsubID != id || subs[0].SyncedFolder != dir || !subs[0].Synced || !synced {
				return fmt.Errorf("status %+v synced %v", subs, synced)
			}
			return nil
		})

		// Deleting the mapping stops the sync and keeps both sides' files.
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/mapping/%d/delete", a.MachineID(), id), url.Values{}, nil)
		eventually(t, syncWait, "the mapping leaves status", func() error {
			if subs, _ := s.status(a.MachineID()); len(subs) != 0 {
				return fmt.Errorf("still %+v", subs)
			}
			return nil
		})
		writeFile(t, filepath.Join(dir, "after.txt"), "not synced")
		s.upload("after-remote.txt", "not synced either")
		time.Sleep(2 * time.Second) // four polls of the fast timing
		if _, ok := localTree(t, dir)["after-remote.txt"]; ok {
			t.Error("a file uploaded after the mapping's deletion came down")
		}
		r, _ := s.tree()
		if _, ok := r["after.txt"]; ok {
			t.Error("a file made after the mapping's deletion went up")
		}
		if r["remote0.txt"] != "changed there" || localTree(t, dir)["same.txt"] != "identical" {
			t.Errorf("files lost when the mapping was deleted: root %v", r)
		}
	})

	t.Run("changes made while the agent was stopped", func(t *testing.T) {
		s := newE2ERoot(t, srv, "ola")
		dir := filepath.Join(t.TempDir(), "Work")
		state := t.TempDir()
		del := func(name string) func() {
			return func() {
				_, ids := s.tree()
				s.call("POST", fmt.Sprintf("/api/2/files/%d/%d/delete", s.root, ids[name]), url.Values{}, nil)
			}
		}
		here := func(name, data string) func() {
			return func() {
				if data == "" {
					os.Remove(filepath.Join(dir, name))
					return
				}
				writeFile(t, filepath.Join(dir, name), data)
			}
		}
		there := func(name, data string) func() { return func() { s.upload(name, data) } }
		rows := []struct {
			name        string
			file, start string // start "": the file does not exist before
			here, there func()
			want        string // "": gone from both sides
			conflict    string // the local version kept under a conflict name
		}{
			{"changed on both, the same", "f1.txt", "v1", here("f1.txt", "v2"), there("f1.txt", "v2"), "v2", ""},
			{"changed on both, differently", "f2.txt", "v1", here("f2.txt", "mine"), there("f2.txt", "theirs"), "theirs", "mine"},
			{"deleted here, changed there", "f3.txt", "v1", here("f3.txt", ""), there("f3.txt", "new there"), "new there", ""},
			{"changed here, deleted there", "f4.txt", "v1", here("f4.txt", "new here"), del("f4.txt"), "new here", ""},
			{"deleted on both", "f5.txt", "v1", here("f5.txt", ""), del("f5.txt"), "", ""},
			{"deleted here", "f6.txt", "v1", here("f6.txt", ""), func() {}, "", ""},
			{"deleted there", "f7.txt", "v1", func() {}, del("f7.txt"), "", ""},
			{"made on both, the same", "f8.txt", "", here("f8.txt", "same"), there("f8.txt", "same"), "same", ""},
			{"made on both, differently", "f9", "", here("f9", "a"), there("f9", "b"), "b", "a"},
		}
		for _, r := range rows {
			if r.start != "" {
				writeFile(t, filepath.Join(dir, r.file), r.start)
			}
		}
		a, stop := inProcessAgent(t, s, state)
		machine := a.MachineID()
		id := s.mapFolder(machine, dir)
		eventually(t, syncWait, "first sync", func() error { return sameTrees(t, s, dir) })
		// What is never synced: a link, the agent's temporary name, a
		// name the server refuses.
		if err := os.Symlink(t.TempDir(), filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, tempPrefix+"x"), "partial")
		writeFile(t, filepath.Join(dir, `back\slash.txt`), "refused")
		eventually(t, syncWait, "excluded files counted", func() error {
			subs, synced := s.status(machine)
			if len(subs) != 1 || subs[0].ExclFiles != 3 || !synced {
				return fmt.Errorf("status %+v", subs)
			}
			return nil
		})
		if r, _ := s.tree(); len(r) != len(rows)-2 {
			t.Fatalf("the root holds %v", slices.Sorted(maps.Keys(r)))
		}
		os.Remove(filepath.Join(dir, "link"))
		os.Remove(filepath.Join(dir, tempPrefix+"x"))
		os.Remove(filepath.Join(dir, `back\slash.txt`))
		stop()

		for _, r := range rows {
			r.here()
			r.there()
		}
		inProcessAgent(t, s, state)
		eventually(t, syncWait, "both sides equal again", func() error { return sameTrees(t, s, dir) })
		l := localTree(t, dir)
		for _, r := range rows {
			got, ok := l[r.file]
			if r.want == "" && ok || r.want != "" && got != r.want {
				t.Errorf("%s: %s is %q (present %v), want %q", r.name, r.file, got, ok, r.want)
			}
			stem := strings.TrimSuffix(r.file, path.Ext(r.file))
			var copies []string
			for n, c := range l {
				if strings.HasPrefix(n, stem+" (conflict from ") {
					if !strings.HasSuffix(n, ")"+path.Ext(r.file)) {
						t.Errorf("%s: conflict name %q", r.name, n)
					}
					copies = append(copies, c)
				}
			}
			if r.conflict == "" && len(copies) != 0 || r.conflict != "" && !slices.Equal(copies, []string{r.conflict}) {
				t.Errorf("%s: conflict copies %q, want %q", r.name, copies, r.conflict)
			}
		}

		// A synced folder that goes missing, or comes back empty (an
		// unmounted drive), deletes nothing there.
		before, _ := s.tree()
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // four polls of the fast timing
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if after, _ := s.tree(); !maps.Equal(before, after) {
			t.Errorf("the root changed when the folder went: %v, was %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
		}
		if subs, synced := s.status(machine); len(subs) != 1 || subs[0].Synced || synced {
			t.Errorf("a missing folder's status: %+v", subs)
		}
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/mapping/%d/delete", machine, id), url.Values{}, nil)
	})

	t.Run("conflict with a berth agent process", func(t *testing.T) {
		s := newE2ERoot(t, srv, "noor")
		ag := srv.NewAgent(t, s.p)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the agent's log:\n%s", ag.Output())
			}
		})
		dir := ag.Path("Desk")
		ag.Start(t)
		machine := ag.WaitOnline(t)
		writeFile(t, filepath.Join(dir, "notes.txt"), "first")
		id := s.mapFolder(machine, dir)
		eventually(t, syncWait, "the file goes up", func() error { return sameTrees(t, s, dir) })
		eventually(t, syncWait, "synced", func() error {
			if subs, synced := s.status(machine); len(subs) != 1 || !synced {
				return fmt.Errorf("status %+v", subs)
			}
			return nil
		})
		rename := func(from, to string) {
			_, ids := s.tree()
			s.call("POST", fmt.Sprintf("/api/2/files/%d/%d/rename", s.root, ids[from]), url.Values{"name": {to}}, nil)
		}
		steps := []struct {
			name string
			act  func()
		}{
			{"uploaded there", func() { s.upload("b.txt", "bee") }},
			{"renamed here", func() { os.Rename(filepath.Join(dir, "b.txt"), filepath.Join(dir, "c.txt")) }},
			{"renamed there", func() { rename("c.txt", "e.txt") }},
			{"deleted here", func() { os.Remove(filepath.Join(dir, "e.txt")) }},
			{"made here in a new folder", func() { writeFile(t, filepath.Join(dir, "f", "g.txt"), "gee") }},
			{"folder deleted there", func() {
				_, ids := s.tree()
				s.call("POST", fmt.Sprintf("/api/2/files/%d/folder/%d/delete", s.root, ids["f"]), url.Values{}, nil)
			}},
		}
		for _, st := range steps {
			began := time.Now()
			st.act()
			eventually(t, syncWait, st.name, func() error { return sameTrees(t, s, dir) })
			t.Logf("%s: in step after %v (berth agent's default timing)", st.name, time.Since(began).Round(10*time.Millisecond))
		}
		if l := localTree(t, dir); len(l) != 1 {
			t.Fatalf("after the steps: %v", l)
		}
		// Both sides change while the agent is stopped.
		ag.Stop(t)
		writeFile(t, filepath.Join(dir, "notes.txt"), "changed here")
		s.upload("notes.txt", "changed there")
		ag.Start(t)
		host, _ := os.Hostname()
		eventually(t, syncWait, "both versions kept on both sides", func() error {
			if err := sameTrees(t, s, dir); err != nil {
				return err
			}
			l := localTree(t, dir)
			if len(l) != 2 || l["notes.txt"] != "changed there" {
				return fmt.Errorf("local %v", l)
			}
			for n, c := range l {
				if n != "notes.txt" && (c != "changed here" || !strings.HasPrefix(n, "notes (conflict from "+host+" ") || !strings.HasSuffix(n, ").txt")) {
					return fmt.Errorf("conflict copy %q = %q", n, c)
				}
			}
			return nil
		})
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/mapping/%d/delete", machine, id), url.Values{}, nil)
		eventually(t, syncWait, "the mapping leaves status", func() error {
			if subs, _ := s.status(machine); len(subs) != 0 {
				return fmt.Errorf("still %+v", subs)
			}
			return nil
		})
		if l := localTree(t, dir); len(l) != 2 {
			t.Fatalf("files lost when the mapping was deleted: %v", l)
		}
	})

	t.Run("two machines on one root", func(t *testing.T) {
		s := newE2ERoot(t, srv, "pia")
		var dirs [2]string
		for i := range dirs {
			ag := srv.NewAgent(t, s.p)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("machine %d's log:\n%s", i+1, ag.Output())
				}
			})
			dirs[i] = ag.Path("Shared")
			ag.Start(t)
			s.mapFolder(ag.WaitOnline(t), dirs[i])
		}
		writeFile(t, filepath.Join(dirs[0], "from1.txt"), "one")
		writeFile(t, filepath.Join(dirs[1], "sub", "from2.txt"), "two")
		want := map[string]string{"from1.txt": "one", "sub/": "", "sub/from2.txt": "two"}
		eventually(t, 2*syncWait, "each machine has the other's file", func() error {
			for i, d := range dirs {
				if l := localTree(t, d); !maps.Equal(l, want) {
					return fmt.Errorf("machine %d has %v", i+1, l)
				}
			}
			return sameTrees(t, s, dirs[0])
		})
		os.Remove(filepath.Join(dirs[1], "from1.txt"))
		eventually(t, 2*syncWait, "a delete on one machine reaches the other", func() error {
			if _, ok := localTree(t, dirs[0])["from1.txt"]; ok {
				return fmt.Errorf("from1.txt is still on machine 1")
			}
			return nil
		})
	})

	t.Run("killed mid-sync", func(t *testing.T) {
		s := newE2ERoot(t, srv, "quin")
		ag := srv.NewAgent(t, s.p)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the agent's log:\n%s", ag.Output())
			}
		})
		dir := ag.Path("Many")
		const n = 300
		for i := range n {
			writeFile(t, filepath.Join(dir, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%03d.txt", i)), strings.Repeat(fmt.Sprint(i), 1000))
		}
		for i := range 30 {
			s.upload(fmt.Sprintf("r%02d.txt", i), fmt.Sprint("remote ", i))
		}
		ag.Start(t)
		s.mapFolder(ag.WaitOnline(t), dir)
		eventually(t, syncWait, "the sync under way", func() error {
			if r, _ := s.tree(); len(r) < 40 {
				return fmt.Errorf("%d items there", len(r))
			}
			return nil
		})
		ag.Kill(t)
		if r, _ := s.tree(); len(r) == n+7+30 {
			t.Log("the sync finished before the kill; the restart only checks it")
		}
		began := time.Now()
		ag.Start(t)
		eventually(t, 2*syncWait, "both sides equal after the restart", func() error { return sameTrees(t, s, dir) })
		t.Logf("the rest of %d files synced %v after the restart", n, time.Since(began).Round(10*time.Millisecond))
		l := localTree(t, dir)
		if len(l) != n+7+30 {
			t.Errorf("%d items, want %d", len(l), n+7+30)
		}
		for name := range l {
			if strings.Contains(name, "(conflict from ") {
				t.Errorf("a conflict copy after a restart: %s", name)
			}
		}
	})

	// A mapping is of a file-server-enabled machine (spec 2.13): with
	// the machine's file server off, or file_server_enabled turned off
	// in the policy, its sync stops, and goes on from its index when
	// both are back. Before, both only refused new mappings.
	t.Run("a mapping pauses while the file server or the policy is off", func(t *testing.T) {
		s := newE2ERoot(t, srv, "pax")
		dir := filepath.Join(t.TempDir(), "Paused")
		writeFile(t, filepath.Join(dir, "a.txt"), "a")
		stateDir := t.TempDir()
		a, _ := inProcessAgentRefresh(t, s, stateDir, s.srv.Client, 2*time.Second)
		machine := a.MachineID()
		mapping := s.mapFolder(machine, dir)
		eventually(t, syncWait, "first sync", func() error { return sameTrees(t, s, dir) })
		paused := func(what string) {
			t.Helper()
			eventually(t, syncWait, what, func() error {
				if subs, _ := s.status(machine); len(subs) != 0 {
					return fmt.Errorf("still syncing: %+v", subs)
				}
				return nil
			})
			writeFile(t, filepath.Join(dir, "here-"+what+".txt"), "not while paused")
			time.Sleep(3 * fastTiming.Poll)
			if r, _ := s.tree(); r["here-"+what+".txt"] != "" {
				t.Fatalf("%s: a file written while paused reached the root", what)
			}
			os.Remove(filepath.Join(dir, "here-"+what+".txt"))
		}
		resumed := func(what string) {
			t.Helper()
			eventually(t, syncWait, what, func() error {
				if subs, _ := s.status(machine); len(subs) != 1 {
					return fmt.Errorf("subscriptions %+v", subs)
				}
				return sameTrees(t, s, dir)
			})
		}

		s.call("POST", fmt.Sprintf("/api/2/machine/%d/server/disable", machine), url.Values{}, nil)
		paused("server-off")
		// A paused mapping's folder is still the machine's mapped
		// folder: the server lets it be listed, and so does the agent.
		// Before, the agent's allowed folders were the mappings in
		// force only, and it refused (403) what the server admitted.
		var ls struct{ Results []string }
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/ls", machine), url.Values{"path": {dir}}, &ls)
		if !slices.Contains(ls.Results, "a.txt") {
			t.Fatalf("ls of the paused mapping's folder: %v", ls.Results)
		}
		// Deleted on the server while paused: the kept index knows the
		// local a.txt was synced, so the resumed sync deletes it here
		// (a lost index would upload it back).
		_, ids, err := s.tryTree()
		if err != nil {
			t.Fatal(err)
		}
		s.call("POST", fmt.Sprintf("/api/2/files/%d/%d/delete", s.root, ids["a.txt"]), url.Values{}, nil)
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/server/enable", machine), url.Values{}, nil)
		resumed("resumed after server/enable")
		if _, ok := localTree(t, dir)["a.txt"]; ok {
			t.Fatal("a.txt, deleted on the server while paused, came back")
		}

		// The policy, turned off above the machine's organization: no
		// notice reaches the agent, its set-up refresh finds it.
		srv.SetPolicy(t, 0, url.Values{"file_server_enabled": {"false"}})
		t.Cleanup(func() { srv.SetPolicy(t, 0, url.Values{"file_server_enabled": {"true"}}) })
		paused("policy-off")
		writeFile(t, filepath.Join(dir, "b.txt"), "b")
		srv.SetPolicy(t, 0, url.Values{"file_server_enabled": {"true"}})
		resumed("resumed with the policy on")

		// Deleted while paused: its index goes, as a running mapping's
		// does when it is deleted. Before, the stopped sync was
		// forgotten at the pause and the index stayed for good.
		index := filepath.Join(stateDir, "mappings", fmt.Sprintf("%d.json", mapping))
		if _, err := os.Stat(index); err != nil {
			t.Fatalf("the index of a running mapping: %v", err)
		}
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/server/disable", machine), url.Values{}, nil)
		paused("server-off-again")
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/mapping/%d/delete", machine, mapping), url.Values{}, nil)
		eventually(t, syncWait, "the paused mapping's index removed", func() error {
			if _, err := os.Stat(index); !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("index of the deleted mapping: %v", err)
			}
			return nil
		})
	})

	// An agent of this release and a server of the one before, which
	// has no /mappings/active (404): every mapping is in force, as
	// that server had it. Before, the set-up was never read, and
	// neither mappings nor backups ran.
	t.Run("a server without mappings/active keeps every mapping in force", func(t *testing.T) {
		s := newE2ERoot(t, srv, "olds")
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/mappings/active") {
				return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Header: http.Header{},
					Body: io.NopCloser(strings.NewReader("404 page not found\n")), Request: r}, nil
			}
			return s.srv.Client.Transport.RoundTrip(r)
		})}
		dir := filepath.Join(t.TempDir(), "Old")
		writeFile(t, filepath.Join(dir, "a.txt"), "a")
		a, _ := inProcessAgentWith(t, s, "", hc)
		s.mapFolder(a.MachineID(), dir)
		eventually(t, syncWait, "first sync", func() error { return sameTrees(t, s, dir) })
	})

	// A mapping deleted on the server while its agent was not running:
	// its index went nowhere, and nothing removed it for good.
	t.Run("a mapping deleted while the agent was stopped forgets its index", func(t *testing.T) {
		s := newE2ERoot(t, srv, "quinn")
		state := t.TempDir()
		dir := filepath.Join(t.TempDir(), "Stale")
		writeFile(t, filepath.Join(dir, "a.txt"), "a")
		a, stop := inProcessAgent(t, s, state)
		machine := a.MachineID()
		id := s.mapFolder(machine, dir)
		eventually(t, syncWait, "first sync", func() error { return sameTrees(t, s, dir) })
		index := filepath.Join(state, "mappings", fmt.Sprintf("%d.json", id))
		eventually(t, syncWait, "the index written", func() error {
			_, err := os.Stat(index)
			return err
		})
		stop()
		s.call("POST", fmt.Sprintf("/api/2/machine/%d/mapping/%d/delete", machine, id), url.Values{}, nil)
		inProcessAgent(t, s, state)
		eventually(t, syncWait, "the index removed", func() error {
			if _, err := os.Stat(index); !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
		if l := localTree(t, dir); l["a.txt"] != "a" {
			t.Fatalf("the folder's files went with the index: %v", l)
		}
	})

	t.Run("a download cut by a kill leaves no partial file after the restart", func(t *testing.T) {
		s := newE2ERoot(t, srv, "quill")
		ag := srv.NewAgent(t, s.p)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the agent's log:\n%s", ag.Output())
			}
		})
		dir := ag.Path("Cut")
		s.upload("kept.txt", "kept")
		ag.Start(t)
		machine := ag.WaitOnline(t)
		s.mapFolder(machine, dir)
		eventually(t, syncWait, "first sync", func() error { return sameTrees(t, s, dir) })
		ag.Kill(t)
		// What a kill in the middle of a download leaves: the agent's
		// temporary file, in the folder and in a subfolder.
		writeFile(t, filepath.Join(dir, tempPrefix+"1815773022"), "partial")
		writeFile(t, filepath.Join(dir, "sub", tempPrefix+"99"), "partial")
		ag.Start(t)
		eventually(t, syncWait, "the partial files gone", func() error {
			if err := sameTrees(t, s, dir); err != nil {
				return err
			}
			subs, _ := s.status(machine)
			if len(subs) != 1 || subs[0].ExclFiles != 0 {
				return fmt.Errorf("status %+v", subs)
			}
			return nil
		})
	})

	t.Run("big files stream both ways", func(t *testing.T) {
		s := newE2ERoot(t, srv, "rui")
		dir := filepath.Join(t.TempDir(), "Big")
		a, _ := inProcessAgent(t, s, "")
		s.mapFolder(a.MachineID(), dir)
		big := func(seed byte) string {
			b := make([]byte, 24<<20)
			for i := range b {
				b[i] = byte(i*7919>>8) ^ seed
			}
			return string(b)
		}
		writeFile(t, filepath.Join(dir, "up.bin"), big(1))
		eventually(t, 2*syncWait, "a big file goes up", func() error { return sameTrees(t, s, dir) })
		s.upload("down.bin", big(2))
		eventually(t, 2*syncWait, "a big file comes down", func() error { return sameTrees(t, s, dir) })
		if left, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(left) != 0 {
			t.Errorf("temporary files left: %v", left)
		}
	})

	t.Run("a quiet mapping asks only for listings and gets 304s", func(t *testing.T) {
		s := newE2ERoot(t, srv, "sam")
		dir := filepath.Join(t.TempDir(), "Quiet")
		for i := range 100 {
			writeFile(t, filepath.Join(dir, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%d.txt", i)), fmt.Sprint(i))
		}
		rt := &countingTransport{base: s.srv.Client.Transport}
		a, _ := inProcessAgentWith(t, s, "", &http.Client{Transport: rt})
		s.mapFolder(a.MachineID(), dir)
		eventually(t, syncWait, "synced", func() error {
			if subs, _ := s.status(a.MachineID()); len(subs) != 1 || !subs[0].Synced {
				return fmt.Errorf("status %+v", subs)
			}
			return sameTrees(t, s, dir)
		})
		rt.reset()
		time.Sleep(3 * time.Second) // six polls of the fast timing
		got := rt.reset()
		t.Logf("3 s of a quiet mapping of 100 files in 21 folders: %v", got)
		for k, n := range got {
			if k != "GET listing 304" && !strings.HasPrefix(k, "POST reply") && !strings.HasPrefix(k, "GET channel") {
				t.Errorf("a quiet mapping sent %d× %s", n, k)
			}
		}
		if got["GET listing 304"] < 21 {
			t.Errorf("%d listings in 3 s, want at least one poll of 21 folders", got["GET listing 304"])
		}
	})

	// Last: it restarts the server the other subtests share.
	t.Run("the sync resumes after the server restarts", func(t *testing.T) {
		s := newE2ERoot(t, srv, "tove")
		dir := filepath.Join(t.TempDir(), "Resume")
		writeFile(t, filepath.Join(dir, "before.txt"), "before")
		a, _ := inProcessAgent(t, s, "")
		id := s.mapFolder(a.MachineID(), dir)
		eventually(t, syncWait, "first sync", func() error { return sameTrees(t, s, dir) })
		srv.Restart(t)
		writeFile(t, filepath.Join(dir, "after.txt"), "after")
		s.upload("remote-after.txt", "there")
		eventually(t, 3*syncWait, "synced again after the restart", func() error { return sameTrees(t, s, dir) })
		eventually(t, syncWait, "status", func() error {
			if subs, _ := s.status(a.MachineID()); len(subs) != 1 || subs[0].RsubID != id || !subs[0].Synced {
				return fmt.Errorf("status %+v", subs)
			}
			return nil
		})
	})
}

// countingTransport counts the agent's requests by method, kind and
// status.
type countingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	kind := "other"
	switch p := req.URL.Path; {
	case strings.Contains(p, "/agent/channel"):
		kind = "channel"
	case strings.Contains(p, "/agent/reply"):
		kind = "reply"
	case strings.HasSuffix(p, "/download"):
		kind = "download"
	case strings.HasSuffix(p, "/upload"):
		kind = "upload"
	case req.URL.Query().Get("include_children") == "true":
		kind = "listing"
	}
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[fmt.Sprintf("%s %s %d", req.Method, kind, code)]++
	c.mu.Unlock()
	return resp, err
}

// reset returns the counts so far and starts again.
func (c *countingTransport) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
