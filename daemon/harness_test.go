package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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

	"berth/berthtest"
	"berth/config"
)

// daemonProc is a running berth and what it said.
type daemonProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	output bytes.Buffer // all of stderr
	addrs  map[string]string
	done   chan error
}

func (p *daemonProc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// startDaemon starts bin on dataDir with every listener on a free port and
// waits for its "listening" log line.
func startDaemon(t *testing.T, bin, dataDir string, extra ...string) *daemonProc {
	t.Helper()
	return startDaemonEnv(t, bin, dataDir, nil, extra...)
}

// startDaemonEnv is startDaemon with env (KEY=value) added to the
// process's otherwise empty environment.
func startDaemonEnv(t *testing.T, bin, dataDir string, env []string, extra ...string) *daemonProc {
	t.Helper()
	args := append([]string{"serve", "--data", dataDir,
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--log-format", "json", "--shutdown-grace", "10s", "--gc-interval", "0s"}, extra...)
	cmd := exec.Command(bin, args...)
	// Keep the parent's environment out: BERTH_* there must not leak in.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &daemonProc{cmd: cmd, done: make(chan error, 1)}
	listening := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			p.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "listening" {
				continue
			}
			addrs := map[string]string{}
			for _, k := range []string{"https", "http", "metrics"} {
				addrs[k], _ = rec[k].(string)
			}
			listening <- addrs
		}
		p.done <- cmd.Wait()
		close(listening)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	// Generous: the first start hashes a password with argon2id.
	select {
	case addrs, ok := <-listening:
		if !ok {
			t.Fatalf("berth exited before listening:\n%s", p.stderr())
		}
		p.addrs = addrs
	case <-time.After(60 * time.Second):
		t.Fatalf("berth did not log its listening line:\n%s", p.stderr())
	}
	return p
}

// stop sends SIGTERM and waits for a clean exit within the grace period.
func (p *daemonProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("berth exited with %v after SIGTERM:\n%s", err, p.stderr())
		}
	case <-time.After(20 * time.Second): // the 10s grace plus slack
		t.Fatalf("berth did not exit after SIGTERM:\n%s", p.stderr())
	}
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

// trustingClient verifies the server against the generated certificate.
func trustingClient(t *testing.T, certFile string) *http.Client {
	t.Helper()
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, certFile)}},
	}
}

// certPool trusts the certificate in certFile, for clients that dial TLS
// themselves.
func certPool(t *testing.T, certFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", certFile)
	}
	return pool
}

// alpn returns the application protocol the server picks when a client
// offers both HTTP/2 and HTTP/1.1.
func alpn(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().NegotiatedProtocol
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// lcClient talks to one running berth as its first administrator.
type lcClient struct {
	t        *testing.T
	c        *http.Client
	base     string
	password string
	token    string
	root     int
}

// runningDaemon builds berth, starts it on a new data directory with the
// extra flags, and logs in as its first administrator: the opening of
// every test that drives the real binary (skipped with -short).
func runningDaemon(t *testing.T, extra ...string) (bin, data string, p *daemonProc, lc *lcClient) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin = berthtest.BuildBerth(t)
	data = filepath.Join(t.TempDir(), "data")
	p = startDaemon(t, bin, data, extra...)
	return bin, data, p, newLCClient(t, p, data)
}

// newLCClient logs in as the administrator whose password the first run
// wrote into data.
func newLCClient(t *testing.T, p *daemonProc, data string) *lcClient {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(data, initialPasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	return loginAs(t, p, filepath.Join(data, "tls", "cert.pem"), strings.TrimSpace(string(pw)))
}

// loginAs logs in on p as the administrator with password, trusting the
// certificate (or authority) in the file trust, and finds their root.
func loginAs(t *testing.T, p *daemonProc, trust, password string) *lcClient {
	t.Helper()
	lc := &lcClient{
		t:        t,
		c:        trustingClient(t, trust),
		base:     "https://" + p.addrs["https"],
		password: password,
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

// firstRead is r that calls fn (unless nil) at its first Read. A request
// body is read once the transport has its connection and has written
// the request's head.
type firstRead struct {
	r  io.Reader
	fn func()
}

func (f *firstRead) Read(p []byte) (int, error) {
	if f.fn != nil {
		f.fn()
		f.fn = nil
	}
	return f.r.Read(p)
}

// slowUpload streams data as name over REST or WebDAV in about d.
func (lc *lcClient) slowUpload(name string, data []byte, d time.Duration, dav bool) (int, error) {
	return lc.slowUploadCtx(context.Background(), name, data, d, dav)
}

// slowUploadCtx is slowUpload, abandoned when ctx ends.
func (lc *lcClient) slowUploadCtx(ctx context.Context, name string, data []byte, d time.Duration, dav bool) (int, error) {
	return lc.slowUploadStarted(ctx, name, data, d, dav, nil)
}

// slowUploadStarted is slowUploadCtx that calls started (unless nil) when
// the request's body begins to go out: the connection is up then, its
// TLS handshake done, so the server has accepted it, and a server told
// to stop serves the request still.
func (lc *lcClient) slowUploadStarted(ctx context.Context, name string, data []byte, d time.Duration, dav bool, started func()) (int, error) {
	var req *http.Request
	if dav {
		req, _ = http.NewRequestWithContext(ctx, http.MethodPut, lc.base+"/webdav/admin/"+name, &firstRead{r: newSlowReader(data, d), fn: started})
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
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/2/files/%d/upload", lc.base, lc.root), &firstRead{r: pr, fn: started})
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
	return lc.slowReadStarted(name, d, nil)
}

// slowReadStarted is slowRead that calls started (unless nil) once the
// answer's head has come: the server is serving the request then.
func (lc *lcClient) slowReadStarted(name string, d time.Duration, started func()) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodGet, lc.base+"/webdav/admin/"+name, nil)
	req.SetBasicAuth("admin", lc.password)
	resp, err := lc.c.Do(req)
	if started != nil {
		started()
	}
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

// runKilled runs a berth subcommand on data and SIGKILLs it after d, or
// lets it finish if it is faster; it returns what the command printed.
func runKilled(t *testing.T, bin string, d time.Duration, args ...string) string {
	t.Helper()
	return runKilledEnv(t, bin, nil, d, args...)
}

// runKilledEnv is runKilled with env added to the command's environment.
func runKilledEnv(t *testing.T, bin string, env []string, d time.Duration, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
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

// basicAuth is the credentials part of an Authorization: Basic header.
func basicAuth(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// waitFor polls cond until it holds or d passes.
func waitFor[T any](t *testing.T, d time.Duration, cond func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v, ok := cond()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tempStores opens cfg's stores in a new temporary data directory, with
// logs discarded, for the test's length.
func tempStores(t *testing.T, cfg config.Config) (*stores, *slog.Logger) {
	t.Helper()
	cfg.Data = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(t.Context(), cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close(log) })
	return st, log
}
