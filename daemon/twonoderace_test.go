package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// topPaths returns the paths of the root's top-level items as lc's node
// lists them, duplicates kept.
func (lc *lcClient) topPaths() []string {
	lc.t.Helper()
	st, body := lc.do(http.MethodGet, fmt.Sprintf("/api/2/files/%d?include_children=true", lc.root), nil, "")
	var f struct {
		Children []struct {
			Path string `json:"path"`
		} `json:"children"`
	}
	if st != 200 || json.Unmarshal(body, &f) != nil || len(f.Children) == 0 {
		lc.t.Fatalf("listing: %d %s", st, body)
	}
	paths := make([]string, len(f.Children))
	for i, c := range f.Children {
		paths[i] = c.Path
	}
	return paths
}

// both runs a on node A's client and b on node B's at the same moment
// and returns their statuses.
func both(a, b func() int) (int, int) {
	var wg sync.WaitGroup
	var sa, sb int
	start := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); <-start; sa = a() }()
	go func() { defer wg.Done(); <-start; sb = b() }()
	close(start)
	wg.Wait()
	return sa, sb
}

// tusUp is a tus upload of the administrator's, made on one node and
// driven through either.
type tusUp struct {
	t     *testing.T
	token string
	path  string
}

// newTus creates, on c's node, a tus upload of size bytes named name in
// folder (0: the top) of root.
func newTus(t *testing.T, c *lcClient, root, folder, name string, size int) *tusUp {
	t.Helper()
	tok, st, _ := c.tokenFor("admin", clusterPassword)
	if tok == "" {
		t.Fatalf("token: %d", st)
	}
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	meta := "root_id " + enc(root) + ",folder_id " + enc(folder) + ",filename " + enc(name)
	req, _ := http.NewRequest(http.MethodPost, c.base+"/api/2/tus/", nil)
	for k, v := range map[string]string{"Authorization": "Bearer " + tok, "Tus-Resumable": "1.0.0", "Upload-Length": fmt.Sprint(size), "Upload-Metadata": meta} {
		req.Header.Set(k, v)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	u, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != 201 || err != nil || u.Path == "" {
		t.Fatalf("tus create on %s: %d %q", c.base, resp.StatusCode, resp.Header.Get("Location"))
	}
	return &tusUp{t: t, token: tok, path: u.Path}
}

// patch sends data at offset through c's node over d and returns the
// status.
func (u *tusUp) patch(c *lcClient, ctx context.Context, offset int, data []byte, d time.Duration) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPatch, c.base+u.path, newSlowReader(data, d))
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", fmt.Sprint(offset))
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.ContentLength = int64(len(data))
	resp, err := c.c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// offset asks c's node where the upload stands.
func (u *tusUp) offset(c *lcClient) int {
	u.t.Helper()
	req, _ := http.NewRequest(http.MethodHead, c.base+u.path, nil)
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	resp, err := c.c.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		u.t.Fatalf("HEAD on %s: %d", c.base, resp.StatusCode)
	}
	var off int
	fmt.Sscan(resp.Header.Get("Upload-Offset"), &off)
	return off
}

// TestTwoNodesRaces sends conflicting changes to two real nodes on one
// PostgreSQL database and one S3 bucket at the same moment: the store
// must end as one of them alone would have left it (no duplicate names,
// nothing written into a folder deleted meanwhile), and a node killed
// in the middle of a resumable upload must leave what it acknowledged
// for the other to finish.
func TestTwoNodesRaces(t *testing.T) {
	n := startTwoNodes(t, "0s")
	a, b := n.ca, n.cb

	t.Run("one name made on both nodes at once: one item", func(t *testing.T) {
		for i := range 6 {
			name := fmt.Sprintf("same%d", i)
			mk := func(c *lcClient) func() int {
				return func() int {
					st, _ := c.form(http.MethodPost, fmt.Sprintf("/api/2/files/%d/create_folder", c.root), url.Values{"name": {name}})
					return st
				}
			}
			sa, sb := both(mk(a), mk(b))
			if (sa == 200) == (sb == 200) {
				t.Errorf("create_folder %s on A and B at once: %d and %d, want one 200", name, sa, sb)
			}
			// WebDAV: a new file, with If-None-Match: *.
			file := fmt.Sprintf("same%d.txt", i)
			put := func(c *lcClient, body string) func() int {
				return func() int {
					st, _, err := c.dav(http.MethodPut, file, strings.NewReader(body), "If-None-Match", "*")
					if err != nil {
						t.Errorf("PUT %s: %v", file, err)
					}
					return st
				}
			}
			sa, sb = both(put(a, "from A"), put(b, "from B"))
			if (sa == 201) == (sb == 201) {
				t.Errorf("PUT %s with If-None-Match: * on A and B at once: %d and %d, want one 201", file, sa, sb)
			}
		}
		listedOnce(t, b.topPaths())
	})

	t.Run("folder deleted on A while B uploads into it", func(t *testing.T) {
		if st, _, err := a.dav("MKCOL", "doomed", nil); err != nil || st != 201 {
			t.Fatalf("MKCOL: %d %v", st, err)
		}
		// The body's second half goes out only once A has answered the
		// DELETE: sent over a fixed time, the upload could end before a
		// DELETE slow on a loaded machine, and rightly be stored.
		body := content(7, 2<<20)
		pr, pw := io.Pipe()
		done := make(chan int, 1)
		go func() {
			st, _, err := b.dav(http.MethodPut, "doomed/late.bin", pr)
			if err != nil {
				st = -1
			}
			pr.CloseWithError(errors.New("answered")) // unblocks the writes below
			done <- st
		}()
		pw.Write(body[:1<<20]) // B's PUT is under way
		if st, _, err := a.dav(http.MethodDelete, "doomed", nil); err != nil || st != 204 {
			pw.CloseWithError(errors.New("the DELETE failed"))
			t.Fatalf("DELETE of the folder on A: %d %v", st, err)
		}
		pw.Write(body[1<<20:])
		pw.Close()
		st := <-done
		t.Logf("B's upload into the deleted folder: %d", st)
		if st == 201 || st == 204 {
			t.Errorf("B's upload into a folder A deleted during it: %d, want a refusal", st)
		}
		for _, c := range []*lcClient{a, b} {
			if st, _ := c.read("doomed/late.bin"); st != 404 {
				t.Errorf("GET on %s of the file in the deleted folder: %d, want 404", c.base, st)
			}
		}
	})

	t.Run("collection locked on A: writes into it through B", func(t *testing.T) {
		if st, _, err := a.dav("MKCOL", "held", nil); err != nil || st != 201 {
			t.Fatalf("MKCOL: %d %v", st, err)
		}
		if st, err := a.upload("held/inside.txt", []byte("v1"), true); err != nil || st != 201 {
			t.Fatalf("PUT: %d %v", st, err)
		}
		lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
		st, resp, err := a.dav("LOCK", "held", strings.NewReader(lockBody), "Timeout", "Second-60", "Depth", "infinity")
		if err != nil || st != 200 {
			t.Fatalf("LOCK on A: %d %v %s", st, err, resp)
		}
		token := lockToken(t, resp)
		for _, w := range []struct {
			method, path string
			headers      []string
		}{
			{http.MethodPut, "held/new.txt", nil},
			{http.MethodPut, "held/inside.txt", nil},
			{http.MethodDelete, "held/inside.txt", nil},
			{"MKCOL", "held/sub", nil},
			{"MOVE", "held/inside.txt", []string{"Destination", b.base + "/webdav/admin/moved-out.txt"}},
		} {
			var body *strings.Reader
			if w.method == http.MethodPut {
				body = strings.NewReader("through B")
			}
			var st int
			if body != nil {
				st, _, err = b.dav(w.method, w.path, body, w.headers...)
			} else {
				st, _, err = b.dav(w.method, w.path, nil, w.headers...)
			}
			if err != nil || st != http.StatusLocked {
				t.Errorf("%s %s on B under A's lock of the folder: %d %v, want 423", w.method, w.path, st, err)
			}
		}
		if st, _, err := b.dav("UNLOCK", "held", nil, "Lock-Token", "<"+token+">"); err != nil || st != 204 {
			t.Fatalf("UNLOCK on B: %d %v", st, err)
		}
	})

	t.Run("folders moved into each other on A and B at once: no cycle", func(t *testing.T) {
		for i := range 5 {
			x, y := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
			for _, d := range []string{x, y} {
				if st, _, err := a.dav("MKCOL", d, nil); err != nil || st != 201 {
					t.Fatalf("MKCOL %s: %d %v", d, st, err)
				}
			}
			move := func(c *lcClient, from, into string) func() int {
				return func() int {
					st, _, err := c.dav("MOVE", from, nil, "Destination", c.base+"/webdav/admin/"+into+"/"+from)
					if err != nil {
						t.Errorf("MOVE %s: %v", from, err)
					}
					return st
				}
			}
			sa, sb := both(move(a, x, y), move(b, y, x))
			if sa == 201 && sb == 201 {
				t.Errorf("MOVE %s into %s on A and %s into %s on B at once: both 201", x, y, y, x)
			}
			// Whatever won, both folders are still reachable from the top.
			found := 0
			for _, p := range []string{x, y, y + "/" + x, x + "/" + y} {
				if st, _, _ := b.dav("PROPFIND", p, nil, "Depth", "0"); st == 207 {
					found++
				}
			}
			if found != 2 {
				t.Errorf("round %d: %d of the two folders reachable from the top after the moves (%d, %d)", i, found, sa, sb)
			}
		}
	})

	t.Run("two files renamed to one name on A and B at once: one wins", func(t *testing.T) {
		for i := range 5 {
			f, g, to := fmt.Sprintf("r%da.txt", i), fmt.Sprintf("r%db.txt", i), fmt.Sprintf("r%d.txt", i)
			for _, name := range []string{f, g} {
				if st, err := a.upload(name, []byte(name), true); err != nil || st != 201 {
					t.Fatalf("PUT %s: %d %v", name, st, err)
				}
			}
			move := func(c *lcClient, from string) func() int {
				return func() int {
					st, _, err := c.dav("MOVE", from, nil, "Destination", c.base+"/webdav/admin/"+to, "Overwrite", "F")
					if err != nil {
						t.Errorf("MOVE %s: %v", from, err)
					}
					return st
				}
			}
			sa, sb := both(move(a, f), move(b, g))
			if (sa == 201) == (sb == 201) {
				t.Errorf("MOVE %s and %s to %s with Overwrite: F on A and B at once: %d and %d, want one 201", f, g, to, sa, sb)
			}
		}
		listedOnce(t, b.topPaths())
	})

	t.Run("file moved on B into a folder deleted on A at once", func(t *testing.T) {
		for i := range 5 {
			dir, file := fmt.Sprintf("gone%d", i), fmt.Sprintf("mover%d.txt", i)
			if st, _, err := a.dav("MKCOL", dir, nil); err != nil || st != 201 {
				t.Fatalf("MKCOL: %d %v", st, err)
			}
			if st, err := a.upload(file, []byte("moving"), true); err != nil || st != 201 {
				t.Fatalf("PUT: %d %v", st, err)
			}
			sa, sb := both(func() int {
				st, _, _ := a.dav(http.MethodDelete, dir, nil)
				return st
			}, func() int {
				st, _, _ := b.dav("MOVE", file, nil, "Destination", b.base+"/webdav/admin/"+dir+"/"+file)
				return st
			})
			// The file is either still at the top (the move lost) or
			// went with the folder (the move won, then the delete).
			stTop, _ := b.read(file)
			stIn, _ := b.read(dir + "/" + file)
			t.Logf("round %d: DELETE %d, MOVE %d; then top %d, inside %d", i, sa, sb, stTop, stIn)
			if stIn != 404 {
				t.Errorf("round %d: the file inside the deleted folder answers %d", i, stIn)
			}
			if (stTop == 200) == (sb == 201) {
				t.Errorf("round %d: MOVE answered %d and the file at the top answers %d", i, sb, stTop)
			}
		}
	})

	t.Run("chunked uploads on A and B together past a quota", func(t *testing.T) {
		const size = 3 << 20
		u := a.newUser("bigquota", 0, url.Values{"space_quota": {fmt.Sprint(5 << 20)}})
		statuses := make([]int, 2)
		var wg sync.WaitGroup
		for i, c := range []*lcClient{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				uc := *c
				req, _ := http.NewRequest(http.MethodPut, uc.base+fmt.Sprintf("/webdav/%s/big%d.bin", u.login, i), newSlowReader(content(uint64(40+i), size), 2*time.Second))
				req.SetBasicAuth(u.login, u.password)
				req.ContentLength = size
				resp, err := uc.c.Do(req)
				if err != nil {
					t.Errorf("PUT %d: %v", i, err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			}()
		}
		wg.Wait()
		ok := 0
		for _, st := range statuses {
			if st == 201 || st == 204 {
				ok++
			}
		}
		if ok != 1 {
			t.Errorf("two uploads of %d bytes under a quota of %d on A and B at once: %v, want one stored", size, 5<<20, statuses)
		}
	})

	t.Run("copies on A and B together past a quota", func(t *testing.T) {
		const size = 3 << 20
		u := a.newUser("copyquota", 0, url.Values{"space_quota": {fmt.Sprint(8 << 20)}})
		dav := func(c *lcClient, method, path string, body io.Reader, headers ...string) int {
			req, _ := http.NewRequest(method, c.base+"/webdav/"+u.login+"/"+path, body)
			req.SetBasicAuth(u.login, u.password)
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			resp, err := c.c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if st := dav(a, http.MethodPut, "src.bin", bytes.NewReader(content(50, size))); st != 201 {
			t.Fatalf("PUT: %d", st)
		}
		for i := range 3 {
			cp := func(c *lcClient, to string) func() int {
				return func() int {
					return dav(c, "COPY", "src.bin", nil, "Destination", c.base+"/webdav/"+u.login+"/"+to)
				}
			}
			sa, sb := both(cp(a, fmt.Sprintf("a%d.bin", i)), cp(b, fmt.Sprintf("b%d.bin", i)))
			t.Logf("round %d: COPY on A %d, on B %d", i, sa, sb)
		}
		st, body := a.do(http.MethodGet, fmt.Sprintf("/api/2/person/%d", u.id), nil, "")
		var p struct {
			SpaceUsage int64 `json:"space_usage"`
		}
		if st != 200 || json.Unmarshal(body, &p) != nil {
			t.Fatalf("person: %d %s", st, body)
		}
		if p.SpaceUsage > 8<<20 {
			t.Errorf("space used %d past the quota of %d after copies on both nodes at once", p.SpaceUsage, 8<<20)
		}
	})

	t.Run("tus upload finished on A into a folder deleted on A after B took its first part", func(t *testing.T) {
		st, body := a.form(http.MethodPost, fmt.Sprintf("/api/2/files/%d/create_folder", a.root), url.Values{"name": {"tusdoomed"}})
		var f struct {
			ID int `json:"id"`
		}
		if st != 200 || json.Unmarshal(body, &f) != nil || f.ID == 0 {
			t.Fatalf("create_folder: %d %s", st, body)
		}
		data := content(10, 2<<20)
		up := newTus(t, b, fmt.Sprint(a.root), fmt.Sprint(f.ID), "late.bin", len(data))
		if st, err := up.patch(b, context.Background(), 0, data[:1<<20], 0); err != nil || st != 204 {
			t.Fatalf("first PATCH on B: %d %v", st, err)
		}
		if st, _, err := a.dav(http.MethodDelete, "tusdoomed", nil); err != nil || st != 204 {
			t.Fatalf("DELETE of the folder on A: %d %v", st, err)
		}
		st, err := up.patch(a, context.Background(), 1<<20, data[1<<20:], 0)
		t.Logf("the last PATCH on A, into the deleted folder: %d %v", st, err)
		if err != nil || st == 204 {
			t.Errorf("the last PATCH on A of an upload into a folder deleted meanwhile: %d %v, want a refusal", st, err)
		}
		for _, c := range []*lcClient{a, b} {
			if st, _ := c.read("tusdoomed/late.bin"); st != 404 {
				t.Errorf("GET on %s of the upload in the deleted folder: %d, want 404", c.base, st)
			}
		}
	})

	// Last: it kills B.
	t.Run("B killed mid-PATCH of a tus upload: A resumes and finishes it", func(t *testing.T) {
		body := content(8, 6<<20)
		up := newTus(t, a, fmt.Sprint(a.root), "0", "resumed.bin", len(body))
		patch, offset := up.patch, up.offset
		// The first 2 MiB through B, acknowledged.
		if st, err := patch(b, context.Background(), 0, body[:2<<20], 0); err != nil || st != 204 {
			t.Fatalf("PATCH on B: %d %v", st, err)
		}
		// The rest through B slowly, and B dies in the middle.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			patch(b, ctx, 2<<20, body[2<<20:], 4*time.Second)
		}()
		time.Sleep(1500 * time.Millisecond)
		n.b.kill(t)
		<-done
		got := offset(a)
		if got < 2<<20 || got > len(body) {
			t.Fatalf("offset on A after B died: %d, want at least the %d bytes B acknowledged", got, 2<<20)
		}
		if got < len(body) {
			if st, err := patch(a, context.Background(), got, body[got:], 0); err != nil || st != 204 {
				t.Fatalf("PATCH on A from %d: %d %v", got, st, err)
			}
		}
		if st, data := a.read("resumed.bin"); st != 200 || !bytes.Equal(data, body) {
			t.Fatalf("read on A of the resumed upload: %d, %d bytes, equal %v", st, len(data), bytes.Equal(data, body))
		}
		n.a.stop(t)
		t.Logf("fsck: %s", n.fsck(t))
	})
}

// startRefused starts a node that must refuse to serve: it returns what
// the node printed before it exited, and fails the test if it listens.
func startRefused(t *testing.T, bin, data string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--data", data,
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-format", "json", "--gc-interval", "0s")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("the node exited without an error:\n%s", out.String())
			}
			return out.String()
		case <-time.After(100 * time.Millisecond):
			if strings.Contains(out.String(), `"msg":"listening"`) {
				cmd.Process.Kill()
				<-done
				t.Fatalf("the node started serving:\n%s", out.String())
			}
		}
	}
}

// TestTwoNodesOtherChunkStore: a node configured with the cluster's
// database but another chunk store than the cluster's (storage.backend
// left at disk, another bucket or prefix) refuses to start. Before, it
// served: what it stored was in its own chunk store, unreadable on
// every other node, and what the others stored was missing on it.
func TestTwoNodesOtherChunkStore(t *testing.T) {
	n := startTwoNodes(t, "0s")
	if st, err := n.ca.upload("cluster.bin", content(9, 1<<20), false); err != nil || st != 200 {
		t.Fatalf("upload on A: %d %v", st, err)
	}
	var database, storage []string
	for _, kv := range n.env {
		if strings.HasPrefix(kv, "BERTH_STORAGE_") {
			storage = append(storage, kv)
		} else {
			database = append(database, kv)
		}
	}
	for _, row := range []struct {
		name string
		env  []string
	}{
		{"storage.backend left at disk", database},
		{"another prefix in the cluster's bucket", append(append(slices.Clone(database), storage...), "BERTH_STORAGE_S3_PREFIX=elsewhere")},
		// A node of its own (Badger) on the cluster's bucket: its
		// recovery after a crash sweeps the bucket of every chunk its
		// own metadata does not count, which is all of the cluster's.
		{"metadata.backend left at badger, the cluster's bucket", append(slices.DeleteFunc(slices.Clone(database), func(kv string) bool {
			return strings.HasPrefix(kv, "BERTH_METADATA_")
		}), storage...)},
	} {
		t.Run(row.name, func(t *testing.T) {
			out := startRefused(t, n.bin, filepath.Join(t.TempDir(), "c"), row.env)
			i := strings.Index(out, "this chunk store is not")
			if i < 0 {
				t.Fatalf("the refusal does not say why:\n%s", out)
			}
			t.Logf("refused: %s", out[i:])
		})
	}
	// The cluster's own nodes still start.
	n.b.stop(t)
	n.b = startDaemonEnv(t, n.bin, n.dataB, n.env)
}

// listedOnce fails t for each name listed more than once.
func listedOnce(t *testing.T, names []string) {
	t.Helper()
	counts := map[string]int{}
	for _, name := range names {
		counts[name]++
	}
	for name, c := range counts {
		if c > 1 {
			t.Errorf("%s listed %d times", name, c)
		}
	}
}
