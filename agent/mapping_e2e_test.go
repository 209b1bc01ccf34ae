package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth/berthtest"
)

// e2eServer is the real berth binary serving a fresh data directory,
// and a REST client signed in as its first administrator.
type e2eServer struct {
	t        *testing.T
	bin      string
	data     string
	base     string
	cert     string
	password string
	token    string
	root     uint64
	org      uint64
	http     *http.Client
	mu       sync.Mutex
	stderr   bytes.Buffer
}

// startE2EServer builds berth and starts it (skipped with -short).
func startE2EServer(t *testing.T) *e2eServer {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	s := &e2eServer{t: t, bin: berthtest.BuildBerth(t), data: filepath.Join(t.TempDir(), "data")}
	cmd := exec.Command(s.bin, "serve", "--data", s.data, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--log-format", "json", "--shutdown-grace", "5s", "--gc-interval", "0s")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	listening := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "listening" {
				a, _ := rec["https"].(string)
				listening <- a
			}
		}
		cmd.Wait()
	}()
	select {
	case a := <-listening:
		s.base = "https://" + a
	case <-done:
		t.Fatalf("berth exited:\n%s", s.log())
	case <-time.After(90 * time.Second):
		t.Fatalf("berth did not start:\n%s", s.log())
	}
	s.cert = filepath.Join(s.data, "tls", "cert.pem")
	s.http = trustClient(t, s.cert)
	pw, err := os.ReadFile(filepath.Join(s.data, "initial-admin-password"))
	if err != nil {
		t.Fatal(err)
	}
	s.password = strings.TrimSpace(string(pw))
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	s.call("POST", "/oauth/token", url.Values{"grant_type": {"password"}, "username": {"admin"}, "password": {s.password}}, &tok)
	s.token = tok.AccessToken
	var me struct {
		RootID    uint64 `json:"root_id"`
		CompanyID uint64 `json:"company_id"`
	}
	s.call("GET", "/api/2/person", nil, &me)
	s.root, s.org = me.RootID, me.CompanyID
	s.call("POST", fmt.Sprintf("/api/2/organization/%d/policy/update", s.org), url.Values{"file_server_enabled": {"true"}}, nil)
	return s
}

func (s *e2eServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

func trustClient(t *testing.T, cert string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// call sends a request (form fields for POST) as the administrator and
// decodes a 200 answer into out; anything else fails the test.
func (s *e2eServer) call(method, p string, form url.Values, out any) {
	s.t.Helper()
	if code, body := s.try(method, p, form, out); code != 200 {
		s.t.Fatalf("%s %s: %d %s", method, p, code, body)
	}
}

func (s *e2eServer) try(method, p string, form url.Values, out any) (int, string) {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, s.base+p, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, p, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// upload stores data as name in the root's folder (0: the top).
func (s *e2eServer) upload(folder uint64, name, data string) {
	s.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write([]byte(data))
	mw.Close()
	p := fmt.Sprintf("/api/2/files/%d/upload", s.root)
	if folder != 0 {
		p = fmt.Sprintf("/api/2/files/%d/folder/%d/upload", s.root, folder)
	}
	req, _ := http.NewRequest("POST", s.base+p, &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
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
func (s *e2eServer) tree() (map[string]string, map[string]uint64) {
	s.t.Helper()
	files, ids := map[string]string{}, map[string]uint64{}
	var walk func(p, rel string)
	walk = func(p, rel string) {
		var f struct{ Children []remoteItem }
		s.call("GET", p+"?include_children=true", nil, &f)
		for _, ch := range f.Children {
			r := path.Join(rel, path.Base(ch.Path))
			ids[r] = ch.ID
			if ch.dir() {
				files[r+"/"] = ""
				walk(fmt.Sprintf("/api/2/files/%d/folder/%d", s.root, ch.ID), r)
				continue
			}
			req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/2/files/%d/%d/download", s.base, s.root, ch.ID), nil)
			req.Header.Set("Authorization", "Bearer "+s.token)
			resp, err := s.http.Do(req)
			if err != nil {
				s.t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			files[r] = string(b)
		}
	}
	walk(fmt.Sprintf("/api/2/files/%d", s.root), "")
	return files, ids
}

// localTree is the folder's files as tree gives the root's.
func localTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
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
func sameTrees(t *testing.T, s *e2eServer, dir string) error {
	l := localTree(t, dir)
	r, _ := s.tree()
	if maps.Equal(l, r) {
		return nil
	}
	return fmt.Errorf("local %v\nroot %v", slices.Sorted(maps.Keys(l)), slices.Sorted(maps.Keys(r)))
}

// fastTiming makes in-process tests quick; the real process keeps the
// defaults.
var fastTiming = syncTiming{Debounce: 100 * time.Millisecond, MaxDelay: time.Second, Poll: 500 * time.Millisecond, Rescan: 10 * time.Second}

// inProcessAgent runs an Agent with mapped folders against s until the
// test ends.
func inProcessAgent(t *testing.T, s *e2eServer) (*Agent, *mappings) {
	t.Helper()
	a, err := New(Config{
		Server: s.base, Login: "admin", StateFile: filepath.Join(t.TempDir(), "state.json"),
		Password: func() (string, error) { return s.password, nil }, HTTPClient: trustClient(t, s.cert),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := a.startMappings(fastTiming)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran; m.stopAll() })
	eventually(t, 30*time.Second, "the agent connects", func() error {
		if a.MachineID() == 0 {
			return fmt.Errorf("no machine id")
		}
		return nil
	})
	return a, m
}

// mapFolder enables machine id's file server and maps dir to the root.
func (s *e2eServer) mapFolder(machine uint64, dir string) uint64 {
	s.t.Helper()
	s.call("POST", fmt.Sprintf("/api/2/machine/%d/server/enable", machine), url.Values{}, nil)
	var mp struct{ ID uint64 }
	s.call("POST", fmt.Sprintf("/api/2/machine/%d/mappings/create", machine), url.Values{"path": {dir}, "root_id": {fmt.Sprint(s.root)}}, &mp)
	return mp.ID
}

// status is GET /api/2/machine/<id>/status.
func (s *e2eServer) status(machine uint64) (subs []Subscription, synced bool) {
	var st struct {
		Subscriptions []Subscription `json:"subscriptions"`
		Synced        bool           `json:"synced"`
	}
	if code, body := s.try("GET", fmt.Sprintf("/api/2/machine/%d/status", machine), nil, &st); code != 200 {
		s.t.Logf("status: %d %s", code, body)
	}
	return st.Subscriptions, st.Synced
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
func TestMappingE2E(t *testing.T) {
	s := startE2EServer(t)

	t.Run("both ways", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "Mapped")
		// Before the mapping: a file only here, one only there, one the
		// same on both.
		writeFile(t, filepath.Join(dir, "local0.txt"), "made here")
		writeFile(t, filepath.Join(dir, "same.txt"), "identical")
		s.upload(0, "remote0.txt", "made there")
		s.upload(0, "same.txt", "identical")
		a, _ := inProcessAgent(t, s)
		id := s.mapFolder(a.MachineID(), dir)
		eventually(t, syncWait, "first merge", func() error { return sameTrees(t, s, dir) })
		if got := localTree(t, dir); len(got) != 3 {
			t.Fatalf("first merge: %v", got)
		}

		steps := []struct {
			name string
			act  func()
		}{
			{"a file and folders made here", func() { writeFile(t, filepath.Join(dir, "a", "b", "new.txt"), "deep") }},
			{"a file changed here", func() { writeFile(t, filepath.Join(dir, "local0.txt"), "changed here, longer") }},
			{"a file uploaded there", func() { s.upload(0, "up.txt", "from the root") }},
			{"a file changed there", func() { s.upload(0, "remote0.txt", "changed there") }},
			{"a rename here", func() {
				if err := os.Rename(filepath.Join(dir, "local0.txt"), filepath.Join(dir, "renamed.txt")); err != nil {
					t.Fatal(err)
				}
			}},
			{"a rename there", func() {
				_, ids := s.tree()
				s.call("POST", fmt.Sprintf("/api/2/files/%d/%d/rename", s.root, ids["up.txt"]), url.Values{"name": {"up2.txt"}}, nil)
			}},
			{"a delete here", func() { os.Remove(filepath.Join(dir, "renamed.txt")) }},
			{"a delete there", func() {
				_, ids := s.tree()
				s.call("POST", fmt.Sprintf("/api/2/files/%d/%d/delete", s.root, ids["up2.txt"]), url.Values{}, nil)
			}},
			{"a folder deleted here", func() { os.RemoveAll(filepath.Join(dir, "a")) }},
		}
		for _, st := range steps {
			st.act()
			eventually(t, syncWait, st.name, func() error { return sameTrees(t, s, dir) })
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
		s.upload(0, "after-remote.txt", "not synced either")
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
		// Clean the root for the next test.
		_, ids := s.tree()
		for n, fid := range ids {
			if !strings.Contains(n, "/") {
				s.try("POST", fmt.Sprintf("/api/2/files/%d/%d/delete", s.root, fid), url.Values{}, nil)
			}
		}
	})

	t.Run("conflict with a berth agent process", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "Desk")
		state := filepath.Join(t.TempDir(), "state.json")
		start := func() func() {
			cmd := exec.Command(s.bin, "agent", "--server", s.base, "--login", "admin", "--ca-file", s.cert, "--state-file", state, "--log-level", "debug")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "BERTH_AGENT_PASSWORD=" + s.password}
			var out bytes.Buffer
			cmd.Stderr = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			stopped := false
			stop := func() {
				if stopped {
					return
				}
				stopped = true
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(15 * time.Second):
					cmd.Process.Kill()
					<-exited
				}
				if t.Failed() {
					t.Logf("agent's log:\n%s", out.String())
				}
			}
			t.Cleanup(stop)
			return stop
		}
		stop := start()
		var machine uint64
		eventually(t, syncWait, "the agent process connects", func() error {
			st, err := loadState(state)
			if err != nil || st.MachineID == 0 {
				return fmt.Errorf("no machine id yet (%v)", err)
			}
			machine = st.MachineID
			return nil
		})
		writeFile(t, filepath.Join(dir, "notes.txt"), "first")
		id := s.mapFolder(machine, dir)
		eventually(t, syncWait, "the file goes up", func() error { return sameTrees(t, s, dir) })
		eventually(t, syncWait, "synced", func() error {
			if subs, synced := s.status(machine); len(subs) != 1 || !synced {
				return fmt.Errorf("status %+v", subs)
			}
			return nil
		})
		// Both sides change while the agent is stopped.
		stop()
		writeFile(t, filepath.Join(dir, "notes.txt"), "changed here")
		s.upload(0, "notes.txt", "changed there")
		start()
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
}
