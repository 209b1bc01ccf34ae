package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fromAddr is a client whose connections come from the loopback address
// ip (127.0.0.0/8 is all loopback on Linux), so the daemon sees distinct
// client addresses without leaving the machine.
func fromAddr(t *testing.T, data, ip string) *http.Client {
	c := trustingClient(t, filepath.Join(data, "tls", "cert.pem"))
	tr := c.Transport.(*http.Transport)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	tr.DialContext = d.DialContext
	tr.MaxIdleConnsPerHost = 200
	c.Timeout = 60 * time.Second
	return c
}

// TestLoginFlood: 1,000 wrong sign-ins at once from eight client
// addresses, over the OAuth password grant and WebDAV Basic, against the
// administrator and unknown logins. Every answer is one the lockout
// gives, with its exact body (and Retry-After where the client must
// wait); the daemon stays up, its memory bounded; the flood's addresses
// are throttled and counted in the metrics; and the administrator, whose
// account the flood locked, still signs in from the address they signed
// in from before (a known address).
func TestLoginFlood(t *testing.T) {
	_, data, p, lc := runningDaemon(t, "--lockout-hash-queue", "16", "--lockout-refusal-delay", "200ms")
	const attempts, addrs = 1000, 8
	clients := make([]*http.Client, addrs)
	for i := range clients {
		clients[i] = fromAddr(t, data, fmt.Sprintf("127.0.0.%d", i+2))
	}

	type answer struct {
		dav        bool
		status     int
		body       string
		retryAfter string
		challenge  string
	}
	answers := make(chan answer, attempts)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range attempts {
		wg.Go(func() {
			<-start
			c := clients[i%addrs]
			// A quarter at the administrator, the rest spread over
			// logins that exist nowhere (password spraying).
			login := "admin"
			if i%4 != 0 {
				login = fmt.Sprintf("user%d", i)
			}
			var resp *http.Response
			var err error
			dav := i%4 == 3
			if dav {
				req, _ := http.NewRequest("PROPFIND", lc.base+"/webdav/", nil)
				req.Header.Set("Depth", "0")
				req.SetBasicAuth(login, fmt.Sprintf("wrong password %d", i))
				resp, err = c.Do(req)
			} else {
				resp, err = c.PostForm(lc.base+"/oauth/token", url.Values{
					"grant_type": {"password"}, "client_id": {"anchor"},
					"username": {login}, "password": {fmt.Sprintf("wrong password %d", i)},
				})
			}
			if err != nil {
				answers <- answer{status: -1, body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{dav: dav, status: resp.StatusCode, body: string(b),
				retryAfter: resp.Header.Get("Retry-After"), challenge: resp.Header.Get("WWW-Authenticate")}
		})
	}
	close(start)
	wg.Wait()
	close(answers)

	counts := map[string]int{}
	for a := range answers {
		kind := fmt.Sprintf("%s %d", map[bool]string{false: "oauth", true: "webdav"}[a.dav], a.status)
		counts[kind]++
		if a.status == -1 {
			if counts[kind] <= 3 {
				t.Errorf("no answer: %s", a.body)
			}
			continue
		}
		if problem := floodAnswerProblem(a.dav, a.status, a.body, a.retryAfter, a.challenge); problem != "" && counts[kind] <= 3 {
			t.Errorf("%s: %s: %q (Retry-After %q)", kind, problem, a.body, a.retryAfter)
		}
	}
	t.Logf("answers: %v", counts)
	if counts["oauth -1"]+counts["webdav -1"] > 0 {
		t.Logf("berth's warnings:\n%s", grepLines(p.stderr(), `"level":"WARN"`))
	}

	// Each flood address, trying on one login after another, is
	// throttled within AddressMaxFailures (10) failures of its own.
	for i, c := range clients {
		throttled := false
		for j := range 11 {
			resp, err := c.PostForm(lc.base+"/oauth/token", url.Values{
				"grant_type": {"password"}, "client_id": {"anchor"},
				"username": {fmt.Sprintf("spray%d-%d", i, j)}, "password": {"wrong password"},
			})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if problem := floodAnswerProblem(false, resp.StatusCode, string(b), resp.Header.Get("Retry-After"), ""); problem != "" {
				t.Fatalf("address %d, attempt %d: %s: %d %s", i, j, problem, resp.StatusCode, b)
			}
			if resp.StatusCode == http.StatusTooManyRequests {
				throttled = true
				break
			}
		}
		if !throttled {
			t.Errorf("address 127.0.0.%d was not throttled after 11 more failures", i+2)
		}
	}

	// Still up, memory bounded.
	if p.cmd.ProcessState != nil {
		t.Fatalf("berth exited during the flood:\n%s", p.stderr())
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			t.Logf("peak RSS %d MiB", kb>>10)
			if kb > 512<<10 {
				t.Errorf("peak RSS %d MiB during the flood, want under 512", kb>>10)
			}
		}
	}
	// The administrator's account is locked for strangers: by the flood,
	// or by a few more guesses (the flood's may have been shed with 503
	// before they counted), yet the administrator's token and sign-in
	// work from 127.0.0.1, where they signed in before.
	guesser := fromAddr(t, data, "127.0.0.201")
	for j := range 6 {
		resp, err := guesser.PostForm(lc.base+"/oauth/token", url.Values{
			"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"}, "password": {fmt.Sprintf("late guess %d", j)},
		})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusForbidden {
			break
		}
	}
	if status, body := lc.do(http.MethodGet, "/api/2/person", nil, ""); status != http.StatusOK {
		t.Fatalf("the signed-in client's token after the flood: %d %s", status, body)
	}
	lc.token = lc.login()
	if status, body := lc.do(http.MethodGet, "/api/2/person", nil, ""); status != http.StatusOK {
		t.Fatalf("a new sign-in after the flood: %d %s", status, body)
	}
	stranger := fromAddr(t, data, "127.0.0.200")
	resp, err := stranger.PostForm(lc.base+"/oauth/token", url.Values{
		"grant_type": {"password"}, "client_id": {"anchor"}, "username": {"admin"}, "password": {lc.password},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"error":"account_locked"`) {
		t.Errorf("the right password from a new address after the flood: %d %s, want 403 account_locked", resp.StatusCode, b)
	}

	// The metrics tell the operator.
	mresp, err := http.Get("http://" + p.addrs["metrics"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"berth_address_lockouts_total", `berth_login_failures_total{reason="address_locked"}`, "berth_account_lockouts_total", "berth_password_checks_waiting"} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(string(mb), "berth_address_lockouts_total 8") {
		t.Errorf("not all 8 flood addresses throttled:\n%s", grepLines(string(mb), "berth_address_lockouts_total"))
	}
}

// floodAnswerProblem says what is wrong with one answer to a wrong
// sign-in during a flood ("" when nothing is).
func floodAnswerProblem(dav bool, status int, body, retryAfter, challenge string) string {
	if dav {
		switch status {
		case http.StatusUnauthorized:
			if !strings.HasPrefix(challenge, "Basic ") {
				return "401 without a Basic challenge"
			}
			return ""
		case http.StatusForbidden:
			if !strings.HasPrefix(body, "Too many failed logins; the account is locked until ") || retryAfter == "" {
				return "403 is not the lock"
			}
			return ""
		case http.StatusTooManyRequests:
			if !strings.HasPrefix(body, "Too many failed sign-ins from your network address; try again after ") || retryAfter == "" {
				return "429 is not the throttle"
			}
			return ""
		case http.StatusServiceUnavailable:
			if retryAfter != "1" {
				return "503 without Retry-After: 1"
			}
			return ""
		}
		return "unexpected status"
	}
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return "not a JSON error"
	}
	switch {
	// The token endpoint's answer to wrong credentials (docs/api.md).
	case status == http.StatusBadRequest && e.Error == "invalid_grant" && e.Description == "the username or password is wrong":
	case status == http.StatusForbidden && e.Error == "account_locked" && strings.HasPrefix(e.Description, "too many failed logins; the account is locked until ") && retryAfter != "":
	case status == http.StatusTooManyRequests && e.Error == "too_many_attempts" && strings.HasPrefix(e.Description, "too many failed sign-ins from your network address; try again after ") && retryAfter != "":
	case status == http.StatusServiceUnavailable && e.Error == "temporarily_unavailable" && retryAfter == "1":
	default:
		return "unexpected answer"
	}
	return ""
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestHandshakeErrorFlood: connections that fail their TLS handshake
// (garbage, plain HTTP to the HTTPS port, a close before the hello) each
// made net/http write a warn line, at every log level, so one client
// opening connections wrote the log as fast as it liked (7,000 lines a
// second). Now each listener writes a bounded number of them a minute,
// and TLS clients are still served.
func TestHandshakeErrorFlood(t *testing.T) {
	// Every window the lines may span, from before the daemon's first
	// line, bounds them: however slowly a loaded machine runs the
	// flood, which once had to fit in 60 s.
	start := time.Now()
	_, _, p, lc := runningDaemon(t)
	const conns = 600
	// Plain HTTP is answered and lingered over (half a second each), so
	// it is every 50th connection only.
	sends := []string{"\x16\x03\x01\x00\x05hello", "\x00\x00\x00\x00\x00\x00\x00\x00", ""}
	for i := range conns {
		c, err := net.Dial("tcp", p.addrs["https"])
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		s := sends[i%len(sends)]
		if i%50 == 0 {
			s = "GET / HTTP/1.0\r\n\r\n"
		}
		if s != "" {
			io.WriteString(c, s)
			io.Copy(io.Discard, c) // until berth closes it
		}
		c.Close()
	}
	// The last lines are written as the connections close.
	time.Sleep(300 * time.Millisecond)
	lines := strings.Count(p.stderr(), "TLS handshake error")
	elapsed := time.Since(start)
	// A window starts at its first line, so this many began at most.
	windows := int(elapsed/errorLogWindow) + 1
	if lines == 0 || lines > windows*errorLogBurst {
		t.Errorf("%d connections that failed their handshake wrote %d lines in %v, want 1 to %d", conns, lines, elapsed.Round(time.Second), windows*errorLogBurst)
	}
	if status, err := lc.upload("after.bin", []byte("still served"), false); err != nil || status != http.StatusOK {
		t.Errorf("upload after the flood: %d %v", status, err)
	}
}

// TestErrorLogLimit: the bound of serverErrorLog passes the first lines
// of each window, shared by the handlers derived from it, and reports
// the lines it left out in one line at the end of the window.
func TestErrorLogLimit(t *testing.T) {
	var buf lockedBuffer
	base := slog.NewJSONHandler(&buf, nil)
	const window = 200 * time.Millisecond
	h := newLimitedHandler(base, 3, window)
	// The windows go by the test's clock, which moves only when told:
	// on a loaded machine the eleven lines below took longer than a
	// window of the real one, and more than 3 passed. The line that
	// reports those left out still comes on a real timer.
	start, elapsed := time.Now(), atomic.Int64{}
	h.l.now = func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	logger := slog.New(h).With("listener", "https")
	for i := range 10 {
		logger.Warn("handshake", "i", i)
	}
	slog.New(h.WithGroup("g")).Warn("handshake", "i", 10) // same bound
	if got := strings.Count(buf.String(), `"msg":"handshake"`); got != 3 {
		t.Fatalf("%d lines passed in the first window, want 3:\n%s", got, buf.String())
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), `"left_out":8`) {
		if time.Now().After(deadline) {
			t.Fatalf("no line reports the 8 left out:\n%s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed.Add(int64(window))
	logger.Warn("handshake", "i", 11) // a new window
	if got := strings.Count(buf.String(), `"msg":"handshake"`); got != 4 {
		t.Errorf("%d lines after the window ended, want 4:\n%s", got, buf.String())
	}
	// A handler's panic (WebDAV and the pages recover none: net/http
	// logs it) passes however full the window: a client's flood of bad
	// handshakes must not hide it.
	for i := range 5 {
		logger.Warn("handshake", "i", 12+i)
	}
	logger.Warn("http: panic serving 127.0.0.1:1234: boom\ngoroutine 1 [running]:")
	if !strings.Contains(buf.String(), "http: panic serving") {
		t.Errorf("a panic's line was left out of a full window:\n%s", buf.String())
	}
}
