package bench

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth/berthtest"
)

// daemon is the real berth binary running on a temp data directory.
type daemon struct {
	cmd    *exec.Cmd
	addr   string // https host:port
	client *http.Client
	token  string
	stderr bytes.Buffer
	mu     sync.Mutex
}

const daemonPassword = "correct horse battery staple"

// startDaemon starts `berth serve` on the data directory with every
// listener on a loopback port (the first start creates the data
// directory, its certificate and the administrator), logs in as the
// administrator unless token (an access token of an earlier start) is
// given, and returns it; stop (or b.Cleanup) stops it.
func startDaemon(b *testing.B, bin, data, token string) *daemon {
	b.Helper()
	return startDaemonEnv(b, bin, data, token, nil)
}

// startDaemonEnv is startDaemon with env (KEY=value) added to the
// daemon's environment, and extra flags after the usual ones.
func startDaemonEnv(b *testing.B, bin, data, token string, env []string, extra ...string) *daemon {
	b.Helper()
	tmp := b.TempDir()
	d := &daemon{}
	d.cmd = exec.Command(bin, "serve", "--data", data,
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--log-format", "json", "--gc-interval", "0s")
	d.cmd.Args = append(d.cmd.Args, extra...)
	d.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "BERTH_ADMIN_PASSWORD=" + daemonPassword}, env...)
	// The Go runtime's knobs pass through, to try GC settings on the daemon.
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			d.cmd.Env = append(d.cmd.Env, k+"="+v)
		}
	}
	pipe, err := d.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.stop)
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			d.mu.Lock()
			d.stderr.Write(append(sc.Bytes(), '\n'))
			d.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "listening" {
				a, _ := rec["https"].(string)
				listening <- a
			}
		}
	}()
	select {
	case d.addr = <-listening:
	case <-time.After(60 * time.Second):
		d.mu.Lock()
		defer d.mu.Unlock()
		b.Fatalf("berth did not start:\n%s", d.stderr.String())
	}

	// Trust the self-signed certificate of the first run, nothing else.
	pem, err := os.ReadFile(filepath.Join(data, "tls", "cert.pem"))
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	d.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "localhost"},
		ForceAttemptHTTP2: os.Getenv("BERTH_BENCH_H2") == "1",
	}}

	if token != "" {
		// Tokens live in the store, so they outlast a restart; reusing one
		// keeps the password hash (argon2id touches 19 MiB) out of the
		// measured process.
		d.token = token
		return d
	}
	resp, err := d.client.PostForm(d.url("/oauth/token"), url.Values{
		"grant_type": {"password"}, "client_id": {"anchor"},
		"username": {"admin"}, "password": {daemonPassword},
	})
	if err != nil {
		b.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	d.decode(b, resp, &tok)
	d.token = tok.AccessToken
	return d
}

// stop ends the daemon with SIGTERM (a kill after 20 s) and waits for it.
func (d *daemon) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

func (d *daemon) url(path string) string { return "https://" + d.addr + path }

func (d *daemon) do(b *testing.B, method, path string, body io.Reader, ct string) *http.Response {
	b.Helper()
	req, err := http.NewRequest(method, d.url(path), body)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

// upload streams size bytes of content as the multipart `file` of an
// upload into folder of root (sent with its length, never buffered
// whole) and returns the file's id.
func (d *daemon) upload(b *testing.B, root, folder uint64, name string, content io.Reader, size int64) uint64 {
	b.Helper()
	body, n, ct := sizedMultipart(name, content, size)
	req, err := http.NewRequest(http.MethodPost, d.url(fmt.Sprintf("/api/2/files/%d/folder/%d/upload", root, folder)), body)
	if err != nil {
		b.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", ct)
	resp, err := d.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var f struct {
		ID uint64 `json:"id"`
	}
	d.decode(b, resp, &f)
	return f.ID
}

func (d *daemon) decode(b *testing.B, resp *http.Response, v any) {
	b.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d %s", resp.Request.URL.Path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		b.Fatalf("%s: %q: %v", resp.Request.URL.Path, body, err)
	}
}

// procStatus reads a "kB" field of /proc/<pid>/status, in bytes.
func procStatus(b *testing.B, pid int, field string) int64 {
	b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// BenchmarkDaemonZipRSS starts the real daemon, uploads a folder of 1,000
// files totalling 1 GiB through REST, restarts the daemon (so that the
// peak is the zip's, not what the uploads left in the heap), downloads the
// folder as a zip and reports the daemon's peak RSS (VmHWM, from its
// start through the zip; target < 100 MiB), with the peak of the upload
// phase for comparison. Run with -benchtime=1x.
func BenchmarkDaemonZipRSS(b *testing.B) {
	bin := berthtest.BuildBerth(b)
	data := filepath.Join(b.TempDir(), "data")
	d := startDaemon(b, bin, data, "")
	var person struct {
		RootID uint64 `json:"root_id"`
	}
	d.decode(b, d.do(b, http.MethodGet, "/api/2/person", nil, ""), &person)
	root := person.RootID
	resp := d.do(b, http.MethodPost, fmt.Sprintf("/api/2/files/%d/create_folder", root),
		strings.NewReader(url.Values{"name": {"zip"}}.Encode()), "application/x-www-form-urlencoded")
	var folder struct {
		ID uint64 `json:"id"`
	}
	d.decode(b, resp, &folder)
	const files = 1000
	for i := range files {
		pr, pw := io.Pipe()
		mw := newMultipart(pw, fmt.Sprintf("file %04d.bin", i), newGen(uint64(1000+i), gib/files))
		var f struct {
			ID uint64 `json:"id"`
		}
		d.decode(b, d.do(b, http.MethodPost, fmt.Sprintf("/api/2/files/%d/folder/%d/upload", root, folder.ID), pr, mw), &f)
	}
	uploadPeak := procStatus(b, d.cmd.Process.Pid, "VmHWM")
	d.stop()
	d = startDaemon(b, bin, data, d.token)
	pid := d.cmd.Process.Pid
	before := procStatus(b, pid, "VmRSS")

	b.SetBytes(gib)
	var n int64
	for b.Loop() {
		resp := d.do(b, http.MethodGet, fmt.Sprintf("/api/2/files/%d/folder/%d/download", root, folder.ID), nil, "")
		var err error
		n, err = drain(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || n < gib {
			b.Fatalf("zip: status %d, %d bytes, %v", resp.StatusCode, n, err)
		}
	}
	b.StopTimer()
	peak := procStatus(b, pid, "VmHWM")
	const mib = 1 << 20
	b.ReportMetric(float64(peak)/mib, "zip-peak-RSS-MiB")
	b.ReportMetric(float64(before)/mib, "RSS-at-start-MiB")
	b.ReportMetric(float64(uploadPeak)/mib, "upload-peak-RSS-MiB")
	b.Logf("zip of %d bytes; peak RSS during the zip %.1f MiB (target < 100), RSS after the start %.1f MiB, peak during the uploads %.1f MiB",
		n, float64(peak)/mib, float64(before)/mib, float64(uploadPeak)/mib)
}

// sizedMultipart returns a multipart body with size bytes of content as
// the part `file`, its length and its content type: the framing around the
// streamed content, as curl -F sends it, with a Content-Length and without
// a pipe or chunked encoding.
func sizedMultipart(name string, content io.Reader, size int64) (io.Reader, int64, string) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", name); err != nil {
		panic(err) // writes to a bytes.Buffer do not fail
	}
	split := head.Len()
	if err := mw.Close(); err != nil {
		panic(err)
	}
	all := head.Bytes()
	pre, post := all[:split], all[split:]
	return io.MultiReader(bytes.NewReader(pre), io.LimitReader(content, size), bytes.NewReader(post)),
		int64(len(pre)) + size + int64(len(post)), mw.FormDataContentType()
}

// newMultipart writes a multipart body with content as the part `file`
// to pw in the background and returns its content type.
func newMultipart(pw *io.PipeWriter, name string, content io.Reader) string {
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", name)
		if err == nil {
			_, err = io.CopyBuffer(part, content, make([]byte, 256<<10))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return mw.FormDataContentType()
}
