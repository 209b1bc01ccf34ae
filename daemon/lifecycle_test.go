package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
)

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := berthtest.BuildBerth(t)
	data := filepath.Join(t.TempDir(), "data")

	// First start: empty data directory.
	p := startDaemon(t, bin, data)
	certFile := filepath.Join(data, "tls", "cert.pem")
	client := trustingClient(t, certFile)

	status, body := get(t, client, "https://"+p.addrs["https"]+"/api/2/version")
	if status != 200 || body != `{"version":"2.0.0"}` {
		t.Errorf("version: %d %s", status, body)
	}
	if got := alpn(t, p.addrs["https"]); got != "http/1.1" {
		t.Errorf("protocol with tls.http2 off (the default) = %q, want http/1.1", got)
	}
	// The certificate names localhost too.
	_, port, _ := strings.Cut(p.addrs["https"], ":")
	if status, _ := get(t, client, "https://localhost:"+port+"/api/2/version"); status != 200 {
		t.Errorf("version via localhost: %d", status)
	}
	status, body = get(t, http.DefaultClient, "http://"+p.addrs["http"]+"/api/2/version")
	if status != 400 || body != `{"error":"insecure_transport","error_description":"requests must use HTTPS"}` {
		t.Errorf("plain HTTP: %d %s", status, body)
	}
	// Plain HTTP sent to the HTTPS port gets the same JSON answer.
	status, body = get(t, http.DefaultClient, "http://"+p.addrs["https"]+"/api/2/version")
	if status != 400 || body != `{"error":"insecure_transport","error_description":"requests must use HTTPS"}` {
		t.Errorf("plain HTTP to the HTTPS port: %d %s", status, body)
	}
	// WebDAV requests and the share-link pages' are logged and counted
	// like the API's, WebDAV's under one route, the pages' by pattern
	// (never the link's hash): an unauthenticated request is enough. The
	// pages were neither logged nor counted, so an operator saw nothing
	// of the traffic of links, or of their failures.
	for _, c := range []struct {
		path, route string
		status      int
	}{
		{"/webdav/", "/webdav/", http.StatusUnauthorized},
		{"/s/nosuchlinkhash", "GET /s/{hash}", http.StatusNotFound},
	} {
		if status, _ := get(t, client, "https://"+p.addrs["https"]+c.path); status != c.status {
			t.Errorf("GET %s: %d, want %d", c.path, status, c.status)
		}
		// Both are written once the answer has gone: wait for them a little.
		logged := func() bool {
			for _, line := range strings.Split(p.stderr(), "\n") {
				var rec struct {
					Msg, Route, Method string
					Status             int
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && rec.Route == c.route && rec.Method == "GET" && rec.Status == c.status {
					return true
				}
			}
			return false
		}
		counted := fmt.Sprintf(`berth_http_requests_total{code="%d",method="GET",route="%s"} 1`, c.status, c.route)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			status, body = get(t, http.DefaultClient, "http://"+p.addrs["metrics"]+"/metrics")
			if logged() && strings.Contains(body, counted) {
				break
			}
		}
		if !logged() {
			t.Errorf("no request log line for GET %s:\n%s", c.path, p.stderr())
		}
		if !strings.Contains(body, counted) {
			t.Errorf("/metrics does not count GET %s as %s:\n%s", c.path, counted, body)
		}
		if strings.Contains(p.stderr(), "nosuchlinkhash") || strings.Contains(body, "nosuchlinkhash") {
			t.Errorf("a link's hash is in the log or the metrics")
		}
	}
	for _, want := range []string{"berth_http_requests_total", "berth_kv_", "berth_vfs_written_bytes_total", "berth_chunks_stored_total", "go_goroutines", "process_cpu_seconds_total"} {
		if status != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (status %d) lacks %s", status, want)
		}
	}
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-sk", "https://"+p.addrs["https"]+"/api/2/version").Output()
		if err != nil || strings.TrimSpace(string(out)) != `{"version":"2.0.0"}` {
			t.Errorf("curl -k: %v %q", err, out)
		}
	} else {
		t.Log("curl not installed; skipping the curl check")
	}

	pwFile := filepath.Join(data, initialPasswordFile)
	fi, err := os.Stat(pwFile)
	if err != nil {
		t.Fatalf("initial password file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", pwFile, fi.Mode().Perm())
	}
	checkFirstLogin(t, client, "https://"+p.addrs["https"], pwFile)
	password, _ := os.ReadFile(pwFile)
	if len(strings.TrimSpace(string(password))) < 20 || !strings.Contains(p.stderr(), strings.TrimSpace(string(password))) {
		t.Errorf("password %q too short or not printed", password)
	}
	if fi, err := os.Stat(filepath.Join(data, "tls", "key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key.pem: %v %v", err, fi)
	}
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory: %v %v", err, fi)
	}
	certBefore, _ := os.ReadFile(certFile)
	p.stop(t)
	if !strings.Contains(p.stderr(), `"msg":"stopped"`) {
		t.Errorf("no clean stop logged:\n%s", p.stderr())
	}

	// fsck on the stopped data directory finds nothing wrong.
	out, err := exec.Command(bin, "fsck", "--data", data).CombinedOutput()
	if err != nil {
		t.Errorf("fsck: %v\n%s", err, out)
	}

	// Second start: same certificate, no second administrator; HTTP/2
	// on request.
	p = startDaemon(t, bin, data, "--tls-http2")
	if got := alpn(t, p.addrs["https"]); got != "h2" {
		t.Errorf("protocol with --tls-http2 = %q, want h2", got)
	}
	certAfter, _ := os.ReadFile(certFile)
	if !bytes.Equal(certBefore, certAfter) {
		t.Error("the certificate was regenerated on the second start")
	}
	if strings.Contains(p.stderr(), "first start") || strings.Contains(p.stderr(), "first run") {
		t.Errorf("second start ran the first-run setup again:\n%s", p.stderr())
	}
	if again, _ := os.ReadFile(pwFile); !bytes.Equal(again, password) {
		t.Error("the initial password file changed on the second start")
	}
	status, _ = get(t, trustingClient(t, certFile), "https://"+p.addrs["https"]+"/api/2/version")
	if status != 200 {
		t.Errorf("second start: version status %d", status)
	}
	p.stop(t)
}

// checkFirstLogin logs in as the first administrator with the password the
// first run wrote, over OAuth2 and over WebDAV, in the real binary: a file
// PUT over WebDAV is the same file REST lists in the administrator's root.
func checkFirstLogin(t *testing.T, client *http.Client, base, pwFile string) {
	t.Helper()
	pw, err := os.ReadFile(pwFile)
	if err != nil {
		t.Fatal(err)
	}
	password := strings.TrimSpace(string(pw))
	resp, err := client.PostForm(base+"/oauth/token", url.Values{
		"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"}, "password": {password},
	})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != 200 || tok.AccessToken == "" {
		t.Fatalf("password grant: %d", resp.StatusCode)
	}

	req, _ := http.NewRequest(http.MethodPut, base+"/webdav/admin/hello.txt", strings.NewReader("hello over webdav"))
	req.SetBasicAuth("admin", password)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("WebDAV PUT: %d", resp.StatusCode)
	}

	req, _ = http.NewRequest(http.MethodGet, base+"/api/2/person", nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var person struct {
		RootID int `json:"root_id"`
	}
	json.NewDecoder(resp.Body).Decode(&person)
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/2/files/%d?include_children=true", base, person.RootID), nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"path":"/hello.txt"`) {
		t.Fatalf("REST listing of the root after a WebDAV PUT: %d %s", resp.StatusCode, body)
	}
}

func TestVersionCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"version"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "API 2.0.0") {
		t.Fatalf("version printed %q", stdout.String())
	}
}

// TestSignalDuringFirstStart: a signal at several moments of the first
// start. SIGTERM while berth is still starting (opening its stores,
// creating the first administrator) is a stop like any other: the process
// exits 0, as systemd expects of a service it stops (TestStopDuringStart).
// SIGKILL after a few milliseconds, once the generated password is on
// disk (the administrator does not exist yet), once the administrator
// exists, once the TLS key is written (TestKillDuringFirstStart). Either
// way the next start ends up with an administrator who logs in with the
// password in the data directory, and fsck --verify finds nothing wrong.
func TestSignalDuringFirstStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := berthtest.BuildBerth(t)
	after := func(d time.Duration) func(time.Time, string, string) bool {
		return func(start time.Time, _, _ string) bool { return time.Since(start) >= d }
	}
	exists := func(name string) func(time.Time, string, string) bool {
		return func(_ time.Time, data, _ string) bool {
			_, err := os.Stat(filepath.Join(data, name))
			return err == nil
		}
	}
	for _, m := range []struct {
		name string
		sig  syscall.Signal
		// reached reports whether to signal now, from the time berth
		// was started, the data directory and what berth has logged.
		reached func(start time.Time, data, log string) bool
	}{
		{"SIGTERM, stores opening", syscall.SIGTERM, exists("meta")},
		{"SIGTERM, first run", syscall.SIGTERM, exists(initialPasswordFile)},
		{"SIGKILL after 10ms", syscall.SIGKILL, after(10 * time.Millisecond)},
		{"SIGKILL after 60ms", syscall.SIGKILL, after(60 * time.Millisecond)},
		{"SIGKILL, password written", syscall.SIGKILL, exists(initialPasswordFile)},
		{"SIGKILL, administrator created", syscall.SIGKILL, func(_ time.Time, _, log string) bool { return strings.Contains(log, "first run: created") }},
		{"SIGKILL, TLS key written", syscall.SIGKILL, exists("tls/key.pem")},
	} {
		t.Run(m.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(bin, "serve", "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			var out lockedBuffer
			cmd.Stderr = &out
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for !m.reached(start, data, out.String()) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("the moment never came:\n%s", out.String())
				}
				time.Sleep(200 * time.Microsecond)
			}
			cmd.Process.Signal(m.sig)
			err := cmd.Wait()
			if m.sig == syscall.SIGTERM && err != nil {
				t.Errorf("SIGTERM during the start: %v\n%s", err, out.String())
			}
			t.Logf("signalled:\n%s", out.String())

			p := startDaemon(t, bin, data)
			newLCClient(t, p, data) // logs in, finds the sync root
			p.stop(t)
			fsck(t, bin, data)
		})
	}
}

// TestKillDuringUploads: SIGKILL in the middle of a burst of concurrent
// uploads over REST and WebDAV, small (kept inline) and large (chunked),
// of new files and of new revisions of existing ones. After the restart
// every upload that was answered 200/201 reads back byte for byte (or
// the revision that was being written over it, if that one committed), no
// other new file is visible, the root's space_used is what the committed
// revisions add up to, and fsck --verify finds nothing wrong.
func TestKillDuringUploads(t *testing.T) {
	bin, data, p, lc := runningDaemon(t)

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

// TestStopWithTransfersInFlight: SIGTERM while uploads (REST and WebDAV)
// and a download are running. They all finish within the grace period,
// the process exits 0, what they stored is there after the restart, and
// that start finds a clean shutdown (no recovery sweep).
func TestStopWithTransfersInFlight(t *testing.T) {
	bin, data, p, lc := runningDaemon(t)
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
	// SIGTERM comes once every transfer is under way, where a fixed
	// 700 ms assumed that each one's connection had reached the server
	// by then, which a loaded machine need not do: the stop would then
	// refuse it, and the test fail though berth did right. Each goes on
	// a connection of its own: the server takes a new connection's
	// request after the stop, where it closes a kept-alive one that
	// waits for its next request (net/http's Shutdown), which a client
	// must retry.
	lc.c.CloseIdleConnections()
	var started sync.WaitGroup
	started.Add(len(files) + 1)
	for name, b := range files {
		wg.Go(func() {
			done := sync.OnceFunc(started.Done)
			defer done() // failed before it started
			status, err := lc.slowUploadStarted(context.Background(), name, b, 3*time.Second, strings.HasPrefix(name, "dav"), done)
			if err != nil || (status != http.StatusOK && status != http.StatusCreated) {
				t.Errorf("upload %s across SIGTERM: %d %v", name, status, err)
			}
		})
	}
	wg.Go(func() {
		status, b, err := lc.slowReadStarted("big.bin", 3*time.Second, started.Done)
		if err != nil || status != 200 || !bytes.Equal(b, big) {
			t.Errorf("download across SIGTERM: %d, %d bytes, %v", status, len(b), err)
		}
	})
	started.Wait()
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

// TestStopWithAgentChannel: SIGTERM while a machine's agent holds its
// channel open (GET /api/2/agent/channel, a request that lasts as long
// as the agent runs) ends the channel, so the stop is as quick as the
// transfers in flight allow. Before, net/http's Shutdown waited for the
// channel like any request: every stop with an agent connected waited
// out the whole shutdown_grace (30 s by default, with no listener
// taking connections) and ended in "grace period over".
func TestStopWithAgentChannel(t *testing.T) {
	_, _, p, lc := runningDaemon(t)
	grant := func(guid string) (token, gotGUID string) {
		form := url.Values{"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"},
			"password": {lc.password}, "dns_name": {"box"}, "os_type": {"linux"}}
		if guid != "" {
			form.Set("guid", guid)
		}
		resp, err := lc.c.PostForm(lc.base+"/oauth/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tok struct {
			AccessToken string `json:"access_token"`
			GUID        string `json:"guid"`
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(b, &tok) != nil {
			t.Fatalf("token: %d %s", resp.StatusCode, b)
		}
		return tok.AccessToken, tok.GUID
	}
	_, guid := grant("")
	token, _ := grant(guid)
	req, _ := http.NewRequest(http.MethodGet, lc.base+"/api/2/agent/channel?agent_version=1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := lc.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	hello, err := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || !strings.Contains(hello, `"hello"`) {
		t.Fatalf("channel: %d %q %v", resp.StatusCode, hello, err)
	}
	// A stop that waited for the channel waits out the whole grace and
	// says so ("grace period over"): that line, not the stop's time, is
	// the check, since a loaded machine stops slowly for other reasons.
	start := time.Now()
	p.stop(t)
	t.Logf("stopped in %v", time.Since(start))
	if strings.Contains(p.stderr(), "grace period over") {
		t.Errorf("the stop waited for the agent's channel until the grace was over:\n%s", grepLines(p.stderr(), "grace"))
	}
}

// TestStopPastGrace: an upload still running when the grace period ends
// is cut off and stores nothing; the process still exits 0, and the next
// start finds nothing of it.
func TestStopPastGrace(t *testing.T) {
	bin, data, p, lc := runningDaemon(t, "--shutdown-grace", "1s")
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

// TestAbortedUploadThenStop: uploads the client abandons midway (over
// REST and WebDAV) store nothing; after a clean stop the next start needs
// no recovery and fsck --verify is clean: their chunks are noted for the
// collector, not leaked.
func TestAbortedUploadThenStop(t *testing.T) {
	bin, data, p, lc := runningDaemon(t)
	for _, dav := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			lc.slowUploadCtx(ctx, "aborted.bin", content(9, 6<<20), 3*time.Second, dav)
		}()
		time.Sleep(1500 * time.Millisecond) // several chunks stored
		cancel()
		<-done
	}
	time.Sleep(300 * time.Millisecond)
	p.stop(t)
	fsck(t, bin, data)
	p = startDaemon(t, bin, data)
	if strings.Contains(p.stderr(), "unclean shutdown") {
		t.Errorf("the start after a clean stop swept as after a crash:\n%s", p.stderr())
	}
	if status, _ := newLCClient(t, p, data).read("aborted.bin"); status != http.StatusNotFound {
		t.Errorf("the aborted upload: GET %d, want 404", status)
	}
	p.stop(t)
}

// TestTokensAndLocksSurviveRestart: an access token, a WebDAV lock and a
// REST lock outlive a restart (after SIGKILL and after SIGTERM), and the
// token still expires on time afterwards.
func TestTokensAndLocksSurviveRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := berthtest.BuildBerth(t)
	data := filepath.Join(t.TempDir(), "data")
	// The token must outlive both restarts and the checks after them:
	// its lifetime is the time they are given. They took up to 4.6 s
	// on a loaded 2-core machine, close to the 6 s this was.
	const ttl = 15 * time.Second
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
			t.Errorf("%s, %v after its issue (lifetime %v): the access token: %d %s", when, time.Since(issued).Round(time.Millisecond), ttl, status, body)
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
