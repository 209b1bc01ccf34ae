package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lcClient talks to one running berth as its first administrator.
type lcClient struct {
	t        *testing.T
	c        *http.Client
	base     string
	password string
	token    string
	root     int
}

// newLCClient logs in as the administrator whose password the first run
// wrote into data.
func newLCClient(t *testing.T, p *daemonProc, data string) *lcClient {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(data, initialPasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	lc := &lcClient{
		t:        t,
		c:        trustingClient(t, filepath.Join(data, "tls", "cert.pem")),
		base:     "https://" + p.addrs["https"],
		password: strings.TrimSpace(string(pw)),
	}
	lc.token = lc.login()
	var person struct {
		RootID int `json:"root_id"`
	}
	status, body := lc.do(http.MethodGet, "/api/2/person", nil, "")
	if status != 200 || json.Unmarshal(body, &person) != nil || person.RootID == 0 {
		t.Fatalf("GET /api/2/person: %d %s", status, body)
	}
	lc.root = person.RootID
	return lc
}

func (lc *lcClient) login() string {
	lc.t.Helper()
	resp, err := lc.c.PostForm(lc.base+"/oauth/token", url.Values{
		"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"}, "password": {lc.password},
	})
	if err != nil {
		lc.t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&tok) != nil || tok.AccessToken == "" {
		lc.t.Fatalf("password grant: %d", resp.StatusCode)
	}
	return tok.AccessToken
}

// do sends a REST request with the bearer token; body may be nil.
func (lc *lcClient) do(method, path string, body io.Reader, contentType string) (int, []byte) {
	lc.t.Helper()
	req, err := http.NewRequest(method, lc.base+path, body)
	if err != nil {
		lc.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+lc.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := lc.c.Do(req)
	if err != nil {
		lc.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		lc.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// upload stores data as name in the root, over REST or WebDAV, and returns
// the status, or an error when no answer came.
func (lc *lcClient) upload(name string, data []byte, dav bool) (int, error) {
	var req *http.Request
	var err error
	if dav {
		req, err = http.NewRequest(http.MethodPut, lc.base+"/webdav/admin/"+name, bytes.NewReader(data))
		if err != nil {
			return 0, err
		}
		req.SetBasicAuth("admin", lc.password)
	} else {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, err := mw.CreateFormFile("file", name)
		if err != nil {
			return 0, err
		}
		fw.Write(data)
		mw.Close()
		req, err = http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/2/files/%d/upload", lc.base, lc.root), &body)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+lc.token)
	}
	resp, err := lc.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// read returns the file's status and contents over WebDAV.
func (lc *lcClient) read(name string) (int, []byte) {
	lc.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, lc.base+"/webdav/admin/"+name, nil)
	req.SetBasicAuth("admin", lc.password)
	resp, err := lc.c.Do(req)
	if err != nil {
		lc.t.Fatalf("GET %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		lc.t.Fatalf("GET %s: %v", name, err)
	}
	return resp.StatusCode, b
}

// listing returns the live files of the root's top folder, name to size,
// and the root's space_used.
func (lc *lcClient) listing() (map[string]int64, int64) {
	lc.t.Helper()
	status, body := lc.do(http.MethodGet, fmt.Sprintf("/api/2/files/%d?include_children=true", lc.root), nil, "")
	var root struct {
		SpaceUsed int64 `json:"space_used"`
		Children  []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
			Type string `json:"type"`
		} `json:"children"`
	}
	if status != 200 || json.Unmarshal(body, &root) != nil {
		lc.t.Fatalf("listing: %d %s", status, body)
	}
	files := map[string]int64{}
	for _, c := range root.Children {
		if c.Type == "file" {
			files[strings.TrimPrefix(c.Path, "/")] = c.Size
		}
	}
	return files, root.SpaceUsed
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *daemonProc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("berth did not die after SIGKILL")
	}
}

// fsck runs `berth fsck --verify` on the stopped data directory.
func fsck(t *testing.T, bin, data string) {
	t.Helper()
	out, err := exec.Command(bin, "fsck", "--verify", "--data", data).CombinedOutput()
	if err != nil {
		t.Errorf("fsck --verify: %v\n%s", err, out)
	}
}

// content is the deterministic body of an upload.
func content(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestKillDuringUploads: SIGKILL in the middle of a burst of concurrent
// uploads over REST and WebDAV, small (kept inline) and large (chunked),
// of new files and of new revisions of existing ones. After the restart
// every upload that was answered 200/201 reads back byte for byte (or
// the revision that was being written over it, if that one committed), no
// other new file is visible, the root's space_used is what the committed
// revisions add up to, and fsck --verify finds nothing wrong.
func TestKillDuringUploads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data)
	lc := newLCClient(t, p, data)

	sizes := []int{0, 100, 16 << 10, 16<<10 + 1, 300 << 10, 3 << 20, 9 << 20}
	type attempt struct {
		name     string
		size     int
		seed     uint64
		answered bool
	}
	const workers = 10                  // the last two write new revisions of one file each
	tries := make([][]attempt, workers) // per worker, in order
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := attempt{name: fmt.Sprintf("w%d-%d.bin", w, i), size: sizes[(w+i)%len(sizes)], seed: uint64(w*1000 + i)}
				if w >= workers-2 {
					a.name = fmt.Sprintf("over%d.bin", w)
				}
				tries[w] = append(tries[w], a)
				status, err := lc.upload(a.name, content(a.seed, a.size), w%2 == 1)
				if err != nil {
					return // the daemon is gone
				}
				if status != http.StatusOK && status != http.StatusCreated && status != http.StatusNoContent {
					t.Errorf("upload %s: status %d", a.name, status)
					return
				}
				tries[w][i].answered = true
			}
		})
	}
	time.Sleep(2 * time.Second)
	p.kill(t)
	close(stop)
	wg.Wait()

	p = startDaemon(t, bin, data)
	if !strings.Contains(p.stderr(), "unclean shutdown") {
		t.Errorf("the start after SIGKILL did not recover as after a crash:\n%s", p.stderr())
	}
	lc = newLCClient(t, p, data)
	files, used := lc.listing()
	// matches reports whether name reads back as a.
	matches := func(a attempt) bool {
		size, visible := files[a.name]
		if !visible || size != int64(a.size) {
			return false
		}
		status, b := lc.read(a.name)
		return status == 200 && bytes.Equal(b, content(a.seed, a.size))
	}
	var want int64 // the committed revisions
	seen := map[string]bool{}
	answered := 0
	for w, ts := range tries {
		for _, a := range ts {
			if a.answered {
				answered++
				want += int64(a.size)
			}
		}
		if len(ts) == 0 {
			continue
		}
		last := ts[len(ts)-1]
		if w >= workers-2 {
			// The file holds the last answered revision or the one in
			// flight at the kill.
			seen[last.name] = true
			switch {
			case !last.answered && matches(last):
				want += int64(last.size)
			case len(ts) >= 2 && !last.answered && matches(ts[len(ts)-2]):
			case last.answered && matches(last):
			default:
				t.Errorf("%s holds neither its last answered revision nor the one in flight", last.name)
			}
			continue
		}
		for _, a := range ts {
			seen[a.name] = true
			_, visible := files[a.name]
			switch {
			case a.answered && !visible:
				t.Errorf("%s was answered 200/201 and is gone", a.name)
			case visible && !matches(a):
				t.Errorf("%s does not read back what was sent", a.name)
			case visible && !a.answered:
				want += int64(a.size) // committed; the answer was lost
			}
		}
	}
	for name := range files {
		if !seen[name] {
			t.Errorf("unexpected file %s", name)
		}
	}
	if used != want {
		t.Errorf("space_used %d, the committed revisions add up to %d", used, want)
	}
	if answered == 0 {
		t.Error("no upload finished before the kill")
	}
	t.Logf("%d uploads answered, %d files visible after the restart", answered, len(files))
	p.stop(t)
	fsck(t, bin, data)
}

// slowReader yields data in pieces, pausing between them, so a request
// body takes about d to send.
type slowReader struct {
	data  []byte
	piece int // bytes between pauses
	left  int // bytes until the next pause
	pause time.Duration
}

func newSlowReader(data []byte, d time.Duration) *slowReader {
	const pieces = 20
	return &slowReader{data: data, piece: max(1, len(data)/pieces), pause: d / pieces}
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if r.left == 0 {
		time.Sleep(r.pause)
		r.left = r.piece
	}
	n := copy(p[:min(len(p), r.left)], r.data)
	r.data = r.data[n:]
	r.left -= n
	return n, nil
}

// slowUpload streams data as name over REST or WebDAV in about d.
func (lc *lcClient) slowUpload(name string, data []byte, d time.Duration, dav bool) (int, error) {
	return lc.slowUploadCtx(context.Background(), name, data, d, dav)
}

// slowUploadCtx is slowUpload, abandoned when ctx ends.
func (lc *lcClient) slowUploadCtx(ctx context.Context, name string, data []byte, d time.Duration, dav bool) (int, error) {
	var req *http.Request
	if dav {
		req, _ = http.NewRequestWithContext(ctx, http.MethodPut, lc.base+"/webdav/admin/"+name, newSlowReader(data, d))
		req.SetBasicAuth("admin", lc.password)
	} else {
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			fw, err := mw.CreateFormFile("file", name)
			if err == nil {
				_, err = io.Copy(fw, newSlowReader(data, d))
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/2/files/%d/upload", lc.base, lc.root), pr)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+lc.token)
	}
	resp, err := lc.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// slowRead downloads name over WebDAV, taking about d, and returns what
// arrived.
func (lc *lcClient) slowRead(name string, d time.Duration) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodGet, lc.base+"/webdav/admin/"+name, nil)
	req.SetBasicAuth("admin", lc.password)
	resp, err := lc.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	const pieces = 20
	piece := max(1, resp.ContentLength/pieces)
	for {
		n, err := io.CopyN(&got, resp.Body, piece)
		if err == io.EOF || (err == nil && n == 0) {
			return resp.StatusCode, got.Bytes(), nil
		}
		if err != nil {
			return resp.StatusCode, got.Bytes(), err
		}
		time.Sleep(d / pieces)
	}
}

// TestStopWithTransfersInFlight: SIGTERM while uploads (REST and WebDAV)
// and a download are running. They all finish within the grace period,
// the process exits 0, what they stored is there after the restart, and
// that start finds a clean shutdown (no recovery sweep).
func TestStopWithTransfersInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data)
	lc := newLCClient(t, p, data)
	big := content(1, 6<<20)
	if status, err := lc.upload("big.bin", big, true); err != nil || status != http.StatusCreated {
		t.Fatalf("upload big.bin: %d %v", status, err)
	}

	files := map[string][]byte{
		"rest-small.bin": content(2, 5000),
		"rest-large.bin": content(3, 4<<20),
		"dav-small.bin":  content(4, 7000),
		"dav-large.bin":  content(5, 4<<20),
	}
	var wg sync.WaitGroup
	for name, b := range files {
		wg.Go(func() {
			status, err := lc.slowUpload(name, b, 3*time.Second, strings.HasPrefix(name, "dav"))
			if err != nil || (status != http.StatusOK && status != http.StatusCreated) {
				t.Errorf("upload %s across SIGTERM: %d %v", name, status, err)
			}
		})
	}
	wg.Go(func() {
		status, b, err := lc.slowRead("big.bin", 3*time.Second)
		if err != nil || status != 200 || !bytes.Equal(b, big) {
			t.Errorf("download across SIGTERM: %d, %d bytes, %v", status, len(b), err)
		}
	})
	time.Sleep(700 * time.Millisecond)
	p.stop(t)
	wg.Wait()
	if t.Failed() {
		t.Logf("berth's log:\n%s", p.stderr())
	}

	p = startDaemon(t, bin, data)
	if strings.Contains(p.stderr(), "unclean shutdown") {
		t.Errorf("the start after a clean stop swept as after a crash:\n%s", p.stderr())
	}
	lc = newLCClient(t, p, data)
	for name, want := range files {
		if status, b := lc.read(name); status != 200 || !bytes.Equal(b, want) {
			t.Errorf("%s after the restart: %d, %d bytes", name, status, len(b))
		}
	}
	p.stop(t)
	fsck(t, bin, data)
}

// TestStopPastGrace: an upload still running when the grace period ends
// is cut off and stores nothing; the process still exits 0, and the next
// start finds nothing of it.
func TestStopPastGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data, "--shutdown-grace", "1s")
	lc := newLCClient(t, p, data)
	done := make(chan struct{})
	go func() {
		defer close(done)
		status, err := lc.slowUpload("slow.bin", content(6, 4<<20), 8*time.Second, true)
		if err == nil && status < 300 {
			t.Errorf("an upload cut off by the end of the grace period was answered %d", status)
		}
	}()
	time.Sleep(700 * time.Millisecond)
	start := time.Now()
	p.stop(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping took %v with a 1s grace period", d)
	}
	<-done

	p = startDaemon(t, bin, data)
	lc = newLCClient(t, p, data)
	if status, _ := lc.read("slow.bin"); status != http.StatusNotFound {
		t.Errorf("the cut-off upload: GET %d, want 404", status)
	}
	p.stop(t)
	fsck(t, bin, data)
}

// TestKillDuringFirstStart: SIGKILL at several moments of the first start:
// after a few milliseconds, once the generated password is on disk (the
// administrator does not exist yet), once the administrator exists, once
// the TLS key is written. The next start always ends up with an
// administrator who logs in with the password in the data directory, and
// fsck --verify finds nothing wrong.
func TestKillDuringFirstStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	type moment struct {
		name string
		// reached reports whether to kill now, from the data directory
		// and what berth has logged.
		reached func(data, log string) bool
	}
	after := func(d time.Duration) func(string, string) bool {
		start := time.Now()
		return func(string, string) bool { return time.Since(start) >= d }
	}
	exists := func(name string) func(string, string) bool {
		return func(data, _ string) bool {
			_, err := os.Stat(filepath.Join(data, name))
			return err == nil
		}
	}
	for _, m := range []moment{
		{"after 10ms", nil},
		{"after 60ms", nil},
		{"password written", exists(initialPasswordFile)},
		{"administrator created", func(_, log string) bool { return strings.Contains(log, "first run: created") }},
		{"TLS key written", exists("tls/key.pem")},
	} {
		t.Run(m.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(bin, "serve", "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			var out lockedBuffer
			cmd.Stderr = &out
			reached := m.reached
			switch m.name {
			case "after 10ms":
				reached = after(10 * time.Millisecond)
			case "after 60ms":
				reached = after(60 * time.Millisecond)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for !reached(data, out.String()) {
				if time.Now().After(deadline) {
					t.Fatalf("the moment never came:\n%s", out.String())
				}
				time.Sleep(200 * time.Microsecond)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			t.Logf("killed:\n%s", out.String())

			p := startDaemon(t, bin, data)
			newLCClient(t, p, data) // logs in, finds the sync root
			p.stop(t)
			fsck(t, bin, data)
		})
	}
}

// lockedBuffer is a bytes.Buffer a process writes while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestTokensAndLocksSurviveRestart: an access token, a WebDAV lock and a
// REST lock outlive a restart (after SIGKILL and after SIGTERM), and the
// token still expires on time afterwards.
func TestTokensAndLocksSurviveRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	const ttl = 6 * time.Second
	args := []string{"--oauth-access-token-ttl", ttl.String()}
	p := startDaemon(t, bin, data, args...)
	lc := newLCClient(t, p, data)
	issued := time.Now()
	for _, name := range []string{"dav.txt", "rest.txt"} {
		if status, err := lc.upload(name, []byte("locked "+name), true); err != nil || status != http.StatusCreated {
			t.Fatalf("upload %s: %d %v", name, status, err)
		}
	}
	req, _ := http.NewRequest("LOCK", lc.base+"/webdav/admin/dav.txt", strings.NewReader(
		`<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`))
	req.SetBasicAuth("admin", lc.password)
	req.Header.Set("Timeout", "Second-3600")
	resp, err := lc.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	davToken := resp.Header.Get("Lock-Token")
	if resp.StatusCode != 200 || davToken == "" {
		t.Fatalf("LOCK: %d %q", resp.StatusCode, davToken)
	}
	restID := lc.fileID("rest.txt")
	if status, body := lc.do(http.MethodPost, fmt.Sprintf("/api/2/files/%d/%d/lock", lc.root, restID), nil, ""); status != 200 {
		t.Fatalf("REST lock: %d %s", status, body)
	}

	check := func(when string) {
		t.Helper()
		// The old token still works.
		if status, body := lc.do(http.MethodGet, "/api/2/person", nil, ""); status != 200 {
			t.Errorf("%s: the access token: %d %s", when, status, body)
		}
		// The WebDAV lock holds: a PUT without its token is refused, one
		// with it goes through.
		put := func(ifHeader string) int {
			req, _ := http.NewRequest(http.MethodPut, lc.base+"/webdav/admin/dav.txt", strings.NewReader("new "+when))
			req.SetBasicAuth("admin", lc.password)
			if ifHeader != "" {
				req.Header.Set("If", ifHeader)
			}
			resp, err := lc.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if status := put(""); status != http.StatusLocked {
			t.Errorf("%s: PUT without the lock token: %d, want 423", when, status)
		}
		if status := put("(" + davToken + ")"); status != http.StatusNoContent && status != http.StatusCreated && status != http.StatusOK {
			t.Errorf("%s: PUT with the lock token: %d", when, status)
		}
		// The REST lock holds.
		status, body := lc.do(http.MethodGet, fmt.Sprintf("/api/2/files/%d/%d", lc.root, restID), nil, "")
		if status != 200 || !strings.Contains(string(body), `"is_locked":true`) {
			t.Errorf("%s: the REST-locked file: %d %s", when, status, body)
		}
	}

	p.kill(t)
	p = startDaemon(t, bin, data, args...)
	lc.base = "https://" + p.addrs["https"]
	check("after SIGKILL")
	p.stop(t)
	p = startDaemon(t, bin, data, args...)
	lc.base = "https://" + p.addrs["https"]
	check("after SIGTERM")

	time.Sleep(time.Until(issued.Add(ttl + 1500*time.Millisecond)))
	if status, _ := lc.do(http.MethodGet, "/api/2/person", nil, ""); status != http.StatusUnauthorized {
		t.Errorf("the access token past its lifetime: %d, want 401", status)
	}
	p.stop(t)
}

// fileID returns the id of name in the root's top folder.
func (lc *lcClient) fileID(name string) int {
	lc.t.Helper()
	status, body := lc.do(http.MethodGet, fmt.Sprintf("/api/2/files/%d?include_children=true", lc.root), nil, "")
	var root struct {
		Children []struct {
			ID   int    `json:"id"`
			Path string `json:"path"`
		} `json:"children"`
	}
	if status != 200 || json.Unmarshal(body, &root) != nil {
		lc.t.Fatalf("listing: %d %s", status, body)
	}
	for _, c := range root.Children {
		if c.Path == "/"+name {
			return c.ID
		}
	}
	lc.t.Fatalf("%s is not in the root", name)
	return 0
}

// dav sends a WebDAV request as the administrator; headers are name,
// value pairs.
func (lc *lcClient) dav(method, path string, body io.Reader, headers ...string) (int, []byte, error) {
	req, err := http.NewRequest(method, lc.base+"/webdav/admin/"+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth("admin", lc.password)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := lc.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// runKilled runs a berth subcommand on data and SIGKILLs it after d, or
// lets it finish if it is faster; it returns what the command printed.
func runKilled(t *testing.T, bin string, d time.Duration, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return fmt.Sprintf("finished (%v): %s", err, out.String())
	case <-time.After(d):
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return "killed: " + out.String()
	}
}

// TestKillDuringCopyPurgeAndGC: SIGKILL during a WebDAV COPY of a folder
// too large for one transaction, during `berth purge-deleted` and during
// `berth gc`. The copy appears whole or not at all, the source and a
// file kept aside read back byte for byte after each kill, fsck --verify
// is clean, and in the end the root's space_used is the kept files.
func TestKillDuringCopyPurgeAndGC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data)
	lc := newLCClient(t, p, data)

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

// startFails runs `berth serve` with args, which must fail at start, and
// returns its exit error and what it printed.
func startFails(t *testing.T, bin string, cred *syscall.Credential, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", ""}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("berth %v did not fail; it printed:\n%s", args, out)
	}
	if err == nil {
		t.Fatalf("berth %v exited 0:\n%s", args, out)
	}
	return string(out)
}

// TestStartRefusalsNameTheProblem: a start that cannot work fails at once
// with a message that names what is wrong, and only that.
func TestStartRefusalsNameTheProblem(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data)

	t.Run("data directory in use", func(t *testing.T) {
		out := startFails(t, bin, nil, "--data", data)
		if !strings.Contains(out, "in use by another") {
			t.Errorf("a second berth on the same data directory printed:\n%s", out)
		}
	})
	t.Run("port in use", func(t *testing.T) {
		out := startFails(t, bin, nil, "--data", filepath.Join(t.TempDir(), "d"), "--listen", p.addrs["https"])
		if !strings.Contains(out, "https listener") || !strings.Contains(out, "address already in use") {
			t.Errorf("a taken port printed:\n%s", out)
		}
	})
	p.stop(t)

	t.Run("unreadable data directory", func(t *testing.T) {
		// A data directory made by another user (root, say, running
		// berth by hand before the service did).
		var cred *syscall.Credential
		if os.Geteuid() == 0 {
			cred = &syscall.Credential{Uid: 65534, Gid: 65534}
			// Let nobody reach the binary.
			for dir := filepath.Dir(bin); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
				os.Chmod(dir, 0o755)
			}
		} else {
			if err := os.Chmod(filepath.Join(data, "meta"), 0); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(filepath.Join(data, "meta"), 0o700)
		}
		out := startFails(t, bin, cred, "--data", data)
		if !strings.Contains(out, "permission denied") || strings.Contains(out, "another berth") {
			t.Errorf("a data directory berth may not open printed:\n%s", out)
		}
	})
	t.Run("corrupt TLS key", func(t *testing.T) {
		key := filepath.Join(data, "tls", "key.pem")
		good, err := os.ReadFile(key)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(key, good, 0o600)
		if err := os.WriteFile(key, []byte("not a key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out := startFails(t, bin, nil, "--data", data)
		if !strings.Contains(out, key) {
			t.Errorf("a corrupt TLS key printed a message without its name %s:\n%s", key, out)
		}
	})
	t.Run("missing configured TLS key", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "missing.pem")
		out := startFails(t, bin, nil, "--data", data, "--tls-cert", filepath.Join(data, "tls", "cert.pem"), "--tls-key", key)
		if !strings.Contains(out, "tls.key") || !strings.Contains(out, key) {
			t.Errorf("a missing TLS key printed:\n%s", out)
		}
	})
}
