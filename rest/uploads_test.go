package rest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth/berthtest"
	"berth/httpserve"
	"berth/vfs"
	"berth/vfs/chunk"
)

// refusedSizes are the body sizes the refused-upload tests send: n of
// them from 1 MiB to 150 MiB, where curl sends Expect: 100-continue.
func refusedSizes(n int) []int64 {
	const lo, hi = 1 << 20, 150 << 20
	s := make([]int64, n)
	for i := range s {
		s[i] = lo + int64(i)*(hi-lo)/int64(n-1)
	}
	return s
}

// zeros is an endless reader of zero bytes, so a test streams a large
// body without holding it.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// TestRefusedUploadAnswered: an upload that berth refuses once it has
// begun to read the body (a name taken by a folder: 409 name_conflict; a
// full disk: 503 temporarily_unavailable) reaches the client as the JSON
// error, also when the client sent Expect: 100-continue and is still
// sending a large body. Before, net/http answered and closed the
// connection with most of the body unread, and curl saw "broken pipe"
// instead of the answer (8 of 8 tries from 1 to 150 MiB, issue 11).
func TestRefusedUploadAnswered(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	f := newFixtureWith(t, fixtureOptions{Disk: chunk.DiskOptions{
		Reserve: 1 << 30,
		Free:    func() (int64, error) { return free.Load(), nil },
	}})
	f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "taken")
	cases := []struct {
		name, file string
		full       bool
		status     int
		code       string
		tries      int // sizes from 1 to 150 MiB; every try must be answered
	}{
		{"name of a folder", "taken", false, http.StatusConflict, "name_conflict", 20},
		{"disk full", "new.bin", true, http.StatusServiceUnavailable, "temporarily_unavailable", 5},
	}
	clients := []struct {
		name string
		send func(t *testing.T, file string, size int64) (int, []byte, error)
	}{
		{"go", f.sendExpecting},
		{"curl", f.curlExpecting(t)},
		{"go, HTTP/2", f.sendH2},
	}
	for _, c := range cases {
		for _, cl := range clients {
			t.Run(c.name+"/"+cl.name, func(t *testing.T) {
				if c.full {
					free.Store(1<<30 - 1)
					defer free.Store(1 << 40)
				}
				tries := c.tries
				if testing.Short() {
					tries = 3
				}
				for _, size := range refusedSizes(tries) {
					status, body, err := cl.send(t, c.file, size)
					if err != nil {
						t.Errorf("%d bytes: no answer: %v", size, err)
						continue
					}
					if status != c.status || !strings.Contains(string(body), `"error":"`+c.code+`"`) {
						t.Errorf("%d bytes: got %d %s, want %d %s", size, status, body, c.status, c.code)
					}
				}
			})
		}
	}
	if _, err := f.fs.Lookup(t.Context(), f.root.ID, "/new.bin"); err == nil {
		t.Error("new.bin was stored on a full disk")
	}
}

// TestRefusedUploadDrainBounded: what berth reads of a refused upload to
// keep its answer deliverable is bounded (httpserve.MaxDrain), so a client
// cannot make it read gigabytes for nothing. A body that announces more
// is not read at all; one that announces nothing is read up to the bound.
func TestRefusedUploadDrainBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends some 256 MiB")
	}
	f := newFixture(t)
	f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "taken")
	for _, c := range []struct {
		name string
		size int64 // announced; -1 for none (chunked)
		max  int64 // what the client may have sent: the bound and buffers
	}{
		{"announced over the bound", 4 << 30, 64 << 20},
		{"chunked, endless", -1, httpserve.MaxDrain + 64<<20},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent := &httpserve.CountingBody{R: zeros{}}
			var content io.Reader = sent
			if c.size >= 0 {
				content = io.LimitReader(sent, c.size)
			}
			status, body, err := f.postExpecting(t, "taken", content, c.size)
			if sent.N > c.max {
				t.Errorf("the client sent %d bytes before berth gave up, want at most %d", sent.N, c.max)
			}
			if err == nil && (status != http.StatusConflict || !strings.Contains(string(body), "name_conflict")) {
				t.Errorf("got %d %s, want 409 name_conflict or a closed connection", status, body)
			}
			t.Logf("sent %d bytes; answer %d %s, error %v", sent.N, status, body, err)
		})
	}
}

// sendExpecting uploads size zero bytes as file over HTTP/1.1 with
// Expect: 100-continue, streaming the body, and returns the answer.
func (f *fixture) sendExpecting(t *testing.T, file string, size int64) (int, []byte, error) {
	t.Helper()
	return f.postExpecting(t, file, io.LimitReader(zeros{}, size), size)
}

// sendH2 is sendExpecting over HTTP/2, where berth reads nothing more
// of a refused body: the stream's end asks the client to stop.
func (f *fixture) sendH2(t *testing.T, file string, size int64) (int, []byte, error) {
	t.Helper()
	return f.post(t, f.client.Transport, file, io.LimitReader(zeros{}, size), size)
}

// postExpecting uploads content as file over HTTP/1.1 with Expect:
// 100-continue and returns the answer. size is content's length, or -1
// to send it chunked without announcing one.
func (f *fixture) postExpecting(t *testing.T, file string, content io.Reader, size int64) (int, []byte, error) {
	t.Helper()
	tc := f.client.Transport.(*http.Transport).TLSClientConfig.Clone()
	tc.NextProtos = []string{"http/1.1"}
	tr := &http.Transport{
		TLSClientConfig:       tc,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1
		ExpectContinueTimeout: 10 * time.Second,
	}
	defer tr.CloseIdleConnections()
	return f.post(t, tr, file, content, size)
}

// post uploads content as file through rt, with Expect: 100-continue.
func (f *fixture) post(t *testing.T, rt http.RoundTripper, file string, content io.Reader, size int64) (int, []byte, error) {
	t.Helper()
	const boundary = "berthexpect"
	head := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=%q\r\nContent-Type: application/octet-stream\r\n\r\n", boundary, file)
	tail := "\r\n--" + boundary + "--\r\n"
	body := io.MultiReader(strings.NewReader(head), content, strings.NewReader(tail))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url(f.at("/api/2/files/%d/upload")), body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	if size >= 0 {
		req.ContentLength = int64(len(head)) + size + int64(len(tail))
	}
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Expect", "100-continue")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// curlExpecting returns a sender that uploads with curl over HTTP/1.1,
// as a sparse file of size bytes (curl streams it from disk; it sends
// Expect: 100-continue for bodies over 1 MiB, and is told to for all).
func (f *fixture) curlExpecting(t *testing.T) func(t *testing.T, file string, size int64) (int, []byte, error) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		return func(t *testing.T, _ string, _ int64) (int, []byte, error) {
			t.Skip("curl is not installed; skipping the curl uploads (install curl to run them)")
			return 0, nil, nil
		}
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	src, out := filepath.Join(dir, "body"), filepath.Join(dir, "answer")
	return func(t *testing.T, file string, size int64) (int, []byte, error) {
		t.Helper()
		err := os.Truncate(src, size)
		if errors.Is(err, fs.ErrNotExist) {
			err = os.WriteFile(src, nil, 0o600)
			if err == nil {
				err = os.Truncate(src, size)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(out)
		cmd := exec.CommandContext(t.Context(), curl, "--silent", "--show-error", "--http1.1", "--cacert", ca,
			"-H", "Authorization: Bearer "+f.token, "-H", "Expect: 100-continue",
			"-F", "file=@"+src+";filename="+file, "-o", out, "-w", "%{http_code}",
			f.url(f.at("/api/2/files/%d/upload")))
		code, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			return 0, nil, fmt.Errorf("curl: %v: %s", err, stderr)
		}
		var status int
		fmt.Sscan(string(code), &status)
		b, err := os.ReadFile(out)
		return status, b, err
	}
}

// Part headers before the file count toward the same bound as the
// fields: mime/multipart alone holds up to 10 MiB of one part's headers.
func TestUploadPartHeadersBounded(t *testing.T) {
	f := newFixture(t)
	up := f.at("/api/2/files/%d/upload")
	send := func(body string) (int, []byte) {
		h := http.Header{}
		h.Set("Content-Type", "multipart/form-data; boundary=XX")
		return f.readAll(f.request(http.MethodPost, up, f.token, strings.NewReader(body), h))
	}
	pad := strings.Repeat("p", 2<<20)
	for name, body := range map[string]string{
		"a field's header": multipartRaw("XX",
			"Content-Disposition: form-data; name=\"other\"\r\nX-Pad: "+pad+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nx") + "--XX--\r\n",
		"many fields' headers": multipartRaw("XX",
			"Content-Disposition: form-data; name=\"f1\"\r\nX-Pad: "+pad[:50000]+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"f2\"\r\nX-Pad: "+pad[:50000]+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"f3\"\r\nX-Pad: "+pad[:50000]+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nx") + "--XX--\r\n",
		"the file's header": multipartRaw("XX",
			"Content-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\nX-Pad: "+pad+"\r\n\r\nx") + "--XX--\r\n",
	} {
		st, b := send(body)
		wantError(t, st, b, http.StatusBadRequest, "invalid_request")
		if !strings.Contains(string(b), "131072") {
			t.Fatalf("%s: the description does not name the limit: %s", name, b)
		}
	}
	if _, err := f.fs.Lookup(t.Context(), f.root.ID, "/a.txt"); err == nil {
		t.Fatal("a.txt was stored")
	}
	// Within the bound, the upload goes through.
	st, b := send(multipartRaw("XX",
		"Content-Disposition: form-data; name=\"file\"; filename=\"c.txt\"\r\nX-Pad: "+strings.Repeat("p", 1000)+"\r\n\r\nx") + "--XX--\r\n")
	if st != http.StatusOK {
		t.Fatalf("upload with a small extra header: %d %s", st, b)
	}
}

// TestFullDisk: on a disk down to its reserve, uploads and new folders get
// 503 temporarily_unavailable (spec 7.2) saying why, and store nothing;
// downloads, renames, deletes and logins go on; and uploads resume once
// space is freed.
func TestFullDisk(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	f := newFixtureWith(t, fixtureOptions{Disk: chunk.DiskOptions{
		Reserve: 1 << 30,
		Free:    func() (int64, error) { return free.Load(), nil },
	}})
	content := bytes.Repeat([]byte("berth "), 500_000) // chunked, not inline
	status, body := f.upload(f.at("/api/2/files/%d/upload"), "kept.bin", bytes.NewReader(content))
	if status != http.StatusOK {
		t.Fatalf("upload with room: %d %s", status, body)
	}
	var kept struct {
		ID uint64 `json:"id"`
	}
	decode(t, body, &kept)

	free.Store(1<<30 - 1)
	full := func(what string, status int, body []byte) {
		t.Helper()
		wantError(t, status, body, http.StatusServiceUnavailable, "temporarily_unavailable")
		if !strings.Contains(string(body), "storage is full") {
			t.Errorf("%s: %s does not say why", what, body)
		}
	}
	status, body = f.upload(f.at("/api/2/files/%d/upload"), "new.bin", bytes.NewReader(content))
	full("upload", status, body)
	status, body = f.upload(f.at("/api/2/files/%d/upload"), "kept.bin", strings.NewReader("a new revision"))
	full("new revision", status, body)
	status, body = f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {"docs"}})
	full("create_folder", status, body)
	for _, p := range []string{"/new.bin", "/docs"} {
		if _, err := f.fs.Lookup(context.Background(), f.root.ID, p); !errors.Is(err, vfs.ErrNotExist) {
			t.Errorf("%s was stored on a full disk: %v", p, err)
		}
	}

	status, body = f.get(f.at("/api/2/files/%d/%d/download", kept.ID))
	if status != http.StatusOK || !bytes.Equal(body, content) {
		t.Fatalf("download on a full disk: %d, identical %v", status, bytes.Equal(body, content))
	}
	status, body = f.postForm(f.at("/api/2/files/%d/%d/rename", kept.ID), url.Values{"name": {"renamed.bin"}})
	if status != http.StatusOK {
		t.Errorf("rename on a full disk: %d %s", status, body)
	}
	status, body = f.postForm("/oauth/token", url.Values{"grant_type": {"password"}, "client_id": {"anchor"},
		"username": {f.person.Username}, "password": {fixturePassword}})
	if status != http.StatusOK {
		t.Errorf("login on a full disk: %d %s", status, body)
	}
	status, body = f.postForm(f.at("/api/2/files/%d/%d/delete", kept.ID), nil)
	if status != http.StatusOK {
		t.Errorf("delete on a full disk: %d %s", status, body)
	}

	free.Store(1 << 40)
	status, body = f.upload(f.at("/api/2/files/%d/upload"), "new.bin", bytes.NewReader(content))
	if status != http.StatusOK {
		t.Fatalf("upload after space was freed: %d %s", status, body)
	}
}

func TestUploadCutOff(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	orig := berthtest.RandomBytes(1, 3<<20)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "keep.bin", orig)
	before, _ := f.fs.Usage(ctx, f.root.ID)
	sum := sha256.Sum256(orig)

	// The connection dies halfway through a new revision and through a
	// new file.
	for _, name := range []string{"keep.bin", "new.bin"} {
		f.cutUpload(name, 8<<20)
	}
	f.cutUpload("keep.bin", 100)

	kids, _, err := f.fs.List(ctx, f.root.ID, f.root.FolderID)
	if err != nil || len(kids) != 1 || kids[0].Name != "keep.bin" || kids[0].RevisionID != fj.RevisionID {
		t.Fatalf("after cut uploads: %+v %v", kids, err)
	}
	if _, got := f.download(fj.ID, nil); sha256.Sum256(got) != sum {
		t.Fatal("keep.bin changed")
	}
	after, _ := f.fs.Usage(ctx, f.root.ID)
	if after != before {
		t.Fatalf("usage changed: %+v -> %+v", before, after)
	}
	if _, err := f.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := f.fs.Fsck(ctx, true)
	if err != nil || !rep.OK() {
		t.Fatalf("fsck after gc: %v %v", rep, err)
	}
	// The server is still up.
	if st, body := f.get(f.at("/api/2/files/%d")); st != http.StatusOK {
		t.Fatalf("%d %s", st, body)
	}
}
