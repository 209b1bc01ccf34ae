package rest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth/account"
	"berth/kv"
	"berth/share"
	"berth/vfs"
)

// tusClient speaks tus 1.0 to one server as the holder of token, with
// net/http alone, as a tus client library does.
type tusClient struct {
	t      *testing.T
	base   string
	client *http.Client
	token  string
}

func (f *fixture) tus(t *testing.T, token string) *tusClient {
	return &tusClient{t: t, base: f.srv.URL, client: f.client, token: token}
}

// do sends one tus request; body may be nil.
func (c *tusClient) do(method, path string, h http.Header, body io.Reader, length int64) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.ContentLength = length
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// tusMeta is an Upload-Metadata header.
func tusMeta(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+" "+base64.StdEncoding.EncodeToString([]byte(kv[i+1])))
	}
	return strings.Join(parts, ",")
}

// create posts a new upload of length bytes and returns the response,
// its body and the upload's path (from Location).
func (c *tusClient) create(meta string, length int64) (*http.Response, []byte, string) {
	c.t.Helper()
	h := http.Header{"Upload-Length": {strconv.FormatInt(length, 10)}, "Upload-Metadata": {meta}}
	resp, body, err := c.do(http.MethodPost, tusBase, h, nil, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	loc := resp.Header.Get("Location")
	if i := strings.Index(loc, tusBase); i >= 0 {
		loc = loc[i:]
	}
	return resp, body, loc
}

// mustCreate creates an upload of length bytes as name in root's top
// folder and returns its path.
func (c *tusClient) mustCreate(root uint64, name string, length int64) string {
	c.t.Helper()
	resp, body, loc := c.create(tusMeta("root_id", fmt.Sprint(root), "filename", name), length)
	if resp.StatusCode != http.StatusCreated || loc == "" {
		c.t.Fatalf("create: %d %s (Location %q)", resp.StatusCode, body, loc)
	}
	if _, err := http.ParseTime(resp.Header.Get("Upload-Expires")); err != nil {
		c.t.Errorf("create: Upload-Expires %q: %v", resp.Header.Get("Upload-Expires"), err)
	}
	return loc
}

// offset asks for the upload's offset (HEAD).
func (c *tusClient) offset(path string) (int, int64) {
	c.t.Helper()
	resp, _, err := c.do(http.MethodHead, path, nil, nil, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	n, _ := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	return resp.StatusCode, n
}

// patch sends body as the piece at offset; h adds headers.
func (c *tusClient) patch(path string, offset int64, body io.Reader, length int64, h http.Header) (*http.Response, []byte, error) {
	if h == nil {
		h = http.Header{}
	}
	h.Set("Upload-Offset", strconv.FormatInt(offset, 10))
	h.Set("Content-Type", "application/offset+octet-stream")
	return c.do(http.MethodPatch, path, h, body, length)
}

// cutReader yields r's bytes up to cut, then fails, as a dropped
// connection does.
type cutReader struct {
	r    io.Reader
	left int64
}

var errCut = errors.New("connection dropped")

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errCut
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// resume sends data from the upload's offset on, cut after each of cuts
// bytes of the file, asking for the offset after every break, and
// returns the answer of the last PATCH.
func (c *tusClient) resume(path string, data []byte, cuts []int64) (*http.Response, []byte) {
	c.t.Helper()
	for _, cut := range cuts {
		_, off := c.offset(path)
		if cut <= off {
			continue
		}
		body := &cutReader{r: bytes.NewReader(data[off:]), left: cut - off}
		if resp, b, err := c.patch(path, off, body, int64(len(data))-off, nil); err == nil {
			c.t.Fatalf("a PATCH cut at %d: %d %s, want a broken request", cut, resp.StatusCode, b)
		}
		st, got := c.offset(path)
		if st != http.StatusOK || got > cut || got < off {
			c.t.Fatalf("after a cut at %d: HEAD %d offset %d (was %d)", cut, st, got, off)
		}
		c.t.Logf("cut at %d: the server kept %d", cut, got)
	}
	_, off := c.offset(path)
	resp, b, err := c.patch(path, off, bytes.NewReader(data[off:]), int64(len(data))-off, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, b
}

// lookupFile finds name in the root's top folder and returns its contents.
func (f *fixture) fileBytes(t *testing.T, root vfs.Root, name string) []byte {
	t.Helper()
	n, err := f.fs.Lookup(context.Background(), root.ID, "/"+name)
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	r, err := f.fs.Open(context.Background(), root.ID, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomData(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTusResume uploads a file cut off at several points, resuming each
// time from HEAD's Upload-Offset, and checks the file is byte for byte
// what was sent.
func TestTusResume(t *testing.T) {
	f := newFixture(t)
	data := randomData(t, 9<<20+777)
	cases := []struct {
		name string
		cuts []int64
	}{
		{"whole", nil},
		{"cut once", []int64{3 << 20}},
		{"cut at the start, in the middle and near the end", []int64{100, 4<<20 + 1, int64(len(data)) - 10}},
		{"cut at the same point twice", []int64{2 << 20, 2 << 20, 6 << 20}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := f.tus(t, f.token)
			name := fmt.Sprintf("f%d.bin", i)
			path := tc.mustCreate(f.root.ID, name, int64(len(data)))
			resp, body := tc.resume(path, data, c.cuts)
			if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != strconv.Itoa(len(data)) {
				t.Fatalf("last PATCH: %d %s, offset %s", resp.StatusCode, body, resp.Header.Get("Upload-Offset"))
			}
			if !bytes.Equal(f.fileBytes(t, f.root, name), data) {
				t.Fatal("the file differs from what was sent")
			}
			// Finished: its offset is its length, which a client whose
			// last answer was lost takes for success (TestTusFinishedHead).
			if st, off := tc.offset(path); st != http.StatusOK || off != int64(len(data)) {
				t.Fatalf("HEAD of a finished upload: %d offset %d, want 200 %d", st, off, len(data))
			}
		})
	}
}

// TestTusRestart stops the service half way (a new vfs over the same
// Badger and chunk store, a new handler) and resumes there.
func TestTusRestart(t *testing.T) {
	f := newFixture(t)
	data := randomData(t, 5<<20+3)
	tc := f.tus(t, f.token)
	path := tc.mustCreate(f.root.ID, "r.bin", int64(len(data)))
	if _, _, err := tc.patch(path, 0, &cutReader{r: bytes.NewReader(data), left: 2 << 20}, int64(len(data)), nil); err == nil {
		t.Fatal("the cut PATCH succeeded")
	}
	_, kept := tc.offset(path)
	f.srv.Close()
	if err := f.fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs2, err := vfs.Open(context.Background(), f.db, f.chunks, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(New(Options{FS: fs2, Accounts: f.accounts}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tc = &tusClient{t: t, base: srv.URL, client: srv.Client(), token: f.token}
	if st, off := tc.offset(path); st != http.StatusOK || off != kept {
		t.Fatalf("after the restart: HEAD %d offset %d, want 200 %d", st, off, kept)
	}
	resp, body := tc.resume(path, data, []int64{4 << 20})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("last PATCH: %d %s", resp.StatusCode, body)
	}
	f.fs = fs2
	if !bytes.Equal(f.fileBytes(t, f.root, "r.bin"), data) {
		t.Fatal("the file differs from what was sent")
	}
}

// TestTusCommitsAsItGoes: a long PATCH's bytes are committed every
// TusCommitEvery bytes while its body arrives, so a crash of berth
// during it keeps them; one under Upload-Checksum is kept whole or not at
// all, and commits at its end. Before, every PATCH committed at its end
// alone: tus-js-client sends a whole file as one PATCH, and berth killed
// at 9 GiB of 10 answered offset 0 after its restart.
func TestTusCommitsAsItGoes(t *testing.T) {
	data := randomData(t, 3<<20)
	for _, c := range []struct {
		name     string
		checksum bool
		kept     int64 // committed while the body waits after 2.5 MiB
	}{
		{"a body of known length", false, 2 << 20},
		{"under Upload-Checksum", true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			srv := httptest.NewUnstartedServer(New(Options{FS: f.fs, Accounts: f.accounts, TusCommitEvery: 1 << 20}))
			srv.StartTLS()
			defer srv.Close()
			tc := &tusClient{t: t, base: srv.URL, client: srv.Client(), token: f.token}
			path := tc.mustCreate(f.root.ID, "long.bin", int64(len(data)))
			h := http.Header{}
			if c.checksum {
				sum := sha1.Sum(data)
				h.Set("Upload-Checksum", "sha1 "+base64.StdEncoding.EncodeToString(sum[:]))
			}
			pr, pw := io.Pipe()
			defer pw.CloseWithError(errCut) // a failed test ends the PATCH before the server closes
			answered := make(chan int, 1)
			go func() {
				resp, _, err := tc.patch(path, 0, pr, int64(len(data)), h)
				if err != nil {
					answered <- 0
					return
				}
				answered <- resp.StatusCode
			}()
			if _, err := pw.Write(data[:5<<19]); err != nil {
				t.Fatal(err)
			}
			id := uploadID(t, path)
			deadline := time.Now().Add(20 * time.Second)
			for {
				st, err := f.fs.StagedInfo(ctx0, id)
				if err != nil {
					t.Fatal(err)
				}
				if st.Offset > c.kept {
					t.Fatalf("committed %d bytes while the PATCH waits, want %d", st.Offset, c.kept)
				}
				if st.Offset == c.kept && (c.kept > 0 || time.Until(deadline) < 19*time.Second) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("committed %d bytes while the PATCH waits after 2.5 MiB, want %d", st.Offset, c.kept)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := pw.Write(data[5<<19:]); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			if st := <-answered; st != http.StatusNoContent {
				t.Fatalf("the PATCH: %d, want 204", st)
			}
			if got := f.fileBytes(t, f.root, "long.bin"); !bytes.Equal(got, data) {
				t.Fatal("the file differs from what was sent")
			}
		})
	}
}

// TestTusRefusals checks what berth refuses, each in the error table's
// form: the policy and the quota against the declared length at
// creation, a wrong offset, a bad checksum, a bad request.
func TestTusRefusals(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.SpaceQuota = strconv.Itoa(4 << 20)
	pol.MaxFileSize = 3 << 20
	pol.ExcludedExtensions = ".exe"
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	tc := f.tus(t, f.token)
	root := fmt.Sprint(f.root.ID)
	data := randomData(t, 1<<20)
	sum := sha1.Sum(data)
	good := "sha1 " + base64.StdEncoding.EncodeToString(sum[:])
	sum[0] ^= 1
	bad := "sha1 " + base64.StdEncoding.EncodeToString(sum[:])

	create := func(meta string, length int64) func(t *testing.T) (int, []byte) {
		return func(t *testing.T) (int, []byte) {
			resp, body, _ := tc.create(meta, length)
			return resp.StatusCode, body
		}
	}
	patch := func(h http.Header, offset int64, n int) func(t *testing.T) (int, []byte) {
		return func(t *testing.T) (int, []byte) {
			path := tc.mustCreate(f.root.ID, "p.bin", int64(len(data)))
			defer tc.do(http.MethodDelete, path, nil, nil, 0)
			if offset > 0 {
				if resp, b, err := tc.patch(path, 0, bytes.NewReader(data[:offset]), offset, nil); err != nil || resp.StatusCode != http.StatusNoContent {
					t.Fatalf("first piece: %v %s", err, b)
				}
			}
			resp, body, err := tc.patch(path, int64(n), bytes.NewReader(data[n:]), int64(len(data)-n), h)
			if err != nil {
				t.Fatal(err)
			}
			if st, off := tc.offset(path); st != http.StatusOK || off != offset {
				t.Errorf("after the refusal: HEAD %d offset %d, want %d", st, off, offset)
			}
			return resp.StatusCode, body
		}
	}
	cases := []struct {
		name   string
		run    func(t *testing.T) (int, []byte)
		status int
		code   string
	}{
		{"over max_file_size", create(tusMeta("root_id", root, "filename", "big"), 3<<20+1), 409, "policy_error"},
		{"over the quota", create(tusMeta("root_id", root, "filename", "big"), 5<<20), 409, "policy_error"},
		{"a length whose sum with a reservation passes int64", func(t *testing.T) (int, []byte) {
			// The quota's sum wrapped below it, and every write after
			// passed the quota. No max_file_size, which would refuse
			// the length first.
			pol := account.DefaultPolicy()
			pol.SpaceQuota = strconv.Itoa(4 << 20)
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			tc := f.tus(t, f.token)
			tc.mustCreate(f.root.ID, "one.bin", 1)
			resp, body, _ := tc.create(tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", "huge"), math.MaxInt64)
			if st, b := f.uploadAs(f.token, f.root.ID, "over.bin", 5<<20); st == http.StatusOK {
				t.Errorf("an upload past the quota: %d %s", st, b)
			}
			return resp.StatusCode, body
		}, 409, "policy_error"},
		{"excluded extension", create(tusMeta("root_id", root, "filename", "a.exe"), 1), 409, "policy_error"},
		{"more uploads in progress than one person may have", func(t *testing.T) (int, []byte) {
			// Each upload left unsent kept its record (and 4 KiB of
			// metadata) for a day, read by every listing of the uploads,
			// scrape of the gauges and quota's room-making, whoever
			// asked: one client staged them without end.
			f := newFixtureWith(t, fixtureOptions{TusMaxUploads: 2})
			tc := f.tus(t, f.token)
			sent := tc.mustCreate(f.root.ID, "sent.bin", 2)
			given := tc.mustCreate(f.root.ID, "given-up.bin", 1)
			resp, body, loc := tc.create(tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", "third.bin"), 1)
			if loc != "" {
				t.Errorf("the refused upload has a Location %q", loc)
			}
			// Another person's uploads are theirs to count.
			_, bobRoot, bobToken := f.addPerson("bob")
			f.tus(t, bobToken).mustCreate(bobRoot.ID, "bob.bin", 1)
			// A finished upload, and one ended, leave room for another.
			if r, b, err := tc.patch(sent, 0, strings.NewReader("ab"), 2, nil); err != nil || r.StatusCode != http.StatusNoContent {
				t.Fatalf("the last piece: %v %s", err, b)
			}
			tc.mustCreate(f.root.ID, "after-finish.bin", 1)
			if r, b, err := tc.do(http.MethodDelete, given, nil, nil, 0); err != nil || r.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE: %v %s", err, b)
			}
			tc.mustCreate(f.root.ID, "after-delete.bin", 1)
			if r, _, _ := tc.create(tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", "again.bin"), 1); r.StatusCode != http.StatusBadRequest {
				t.Errorf("a third upload in progress again: %d, want 400", r.StatusCode)
			}
			return resp.StatusCode, body
		}, 400, "invalid_request"},
		{"no root_id", create(tusMeta("filename", "a"), 1), 400, "invalid_request"},
		{"no filename", create(tusMeta("root_id", root), 1), 400, "invalid_name"},
		{"bad filename", create(tusMeta("root_id", root, "filename", "a/b"), 1), 400, "invalid_name"},
		{"no Upload-Length", func(t *testing.T) (int, []byte) {
			resp, body, err := tc.do(http.MethodPost, tusBase, http.Header{"Upload-Metadata": {tusMeta("root_id", root, "filename", "a")}}, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, body
		}, 400, "invalid_request"},
		{"metadata too long", create(tusMeta("root_id", root, "filename", "a", "note", strings.Repeat("n", 4<<10)), 1), 400, "invalid_request"},
		{"no such folder", create(tusMeta("root_id", root, "folder_id", "999999", "filename", "a"), 1), 404, "not_found"},
		{"X-HTTP-Method-Override", func(t *testing.T) (int, []byte) {
			// tusd takes the header's method for a POST's: OPTIONS made
			// it answer 200 without a Location, and the upload stayed
			// staged, holding its length against the quota, until it
			// expired.
			h := http.Header{"Upload-Length": {strconv.Itoa(3 << 20)}, "Upload-Metadata": {tusMeta("root_id", root, "filename", "m.bin")},
				"X-HTTP-Method-Override": {"OPTIONS"}}
			resp, body, err := tc.do(http.MethodPost, tusBase, h, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, body
		}, 400, "invalid_request"},
		{"no Tus-Resumable", func(t *testing.T) (int, []byte) {
			st, body := f.readAll(f.request(http.MethodPost, tusBase, f.token, nil, http.Header{"Upload-Length": {"1"}}))
			return st, body
		}, 412, "invalid_request"},
		{"wrong offset", patch(nil, 1000, 999), 409, "offset_mismatch"},
		{"checksum mismatch", patch(http.Header{"Upload-Checksum": {bad}}, 1000, 1000), 460, "checksum_mismatch"},
		{"checksum mismatch with the creation", func(t *testing.T) (int, []byte) {
			// The piece sent with the creation is a PATCH's (tus,
			// creation-with-upload): its checksum holds too.
			h := http.Header{"Upload-Length": {strconv.Itoa(len(data))}, "Upload-Metadata": {tusMeta("root_id", root, "filename", "c.bin")},
				"Content-Type": {"application/offset+octet-stream"}, "Upload-Checksum": {bad}}
			resp, body, err := tc.do(http.MethodPost, tusBase, h, bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.fs.Lookup(context.Background(), f.root.ID, "/c.bin"); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("the piece that failed its checksum made the file (%v)", err)
			}
			return resp.StatusCode, body
		}, 460, "checksum_mismatch"},
		{"a PATCH without Content-Type", func(t *testing.T) (int, []byte) {
			// tusd's own checks answered in text/plain (ERR_…).
			path := tc.mustCreate(f.root.ID, "ct.bin", 2)
			defer tc.do(http.MethodDelete, path, nil, nil, 0)
			resp, body, err := tc.do(http.MethodPatch, path, http.Header{"Upload-Offset": {"0"}}, strings.NewReader("ab"), 2)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, body
		}, 400, "invalid_request"},
		{"Upload-Length on a PATCH", patch(http.Header{"Upload-Length": {strconv.Itoa(len(data))}}, 0, 0), 400, "invalid_request"},
		{"an offset another PATCH moved meanwhile", func(t *testing.T) (int, []byte) {
			// A resuming client's PATCH passes berth's offset check while
			// its older, half-dead PATCH still runs; tusd stops that one,
			// whose bytes are kept, and finds the offset moved. Both
			// answers were tusd's text/plain.
			f := newFixture(t)
			tc := f.tus(t, f.token)
			big := randomData(t, 8<<20)
			path := tc.mustCreate(f.root.ID, "race.bin", int64(len(big)))
			pr, pw := io.Pipe()
			older := make(chan error, 1)
			go func() {
				resp, body, err := tc.patch(path, 0, pr, int64(len(big)), nil)
				if err == nil && resp.StatusCode != http.StatusNoContent {
					var e errorBody
					if json.Unmarshal(body, &e) != nil || e.Error == "" {
						err = fmt.Errorf("the stopped PATCH: %d %q is not the spec's form", resp.StatusCode, body)
					}
				}
				older <- err
			}()
			// Once the pipe took 6 MiB, the server has read some of it:
			// HTTP/2 lets a stream run at most its window ahead.
			if _, err := pw.Write(big[:6<<20]); err != nil {
				t.Fatal(err)
			}
			resp, body, err := tc.patch(path, 0, bytes.NewReader(big), int64(len(big)), nil)
			pw.CloseWithError(errCut)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-older; err != nil && !errors.Is(err, errCut) {
				t.Error(err)
			}
			if st, off := tc.offset(path); st != http.StatusOK || off == 0 {
				t.Errorf("after the race: HEAD %d offset %d, want the older PATCH's bytes kept", st, off)
			}
			return resp.StatusCode, body
		}, 409, "offset_mismatch"},
		{"unknown checksum algorithm", patch(http.Header{"Upload-Checksum": {"crc32 AAAAAA=="}}, 0, 0), 400, "invalid_request"},
		{"no such upload", func(t *testing.T) (int, []byte) {
			resp, body, err := tc.patch(tusBase+"12345", 0, strings.NewReader("x"), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, body
		}, 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, body := c.run(t)
			wantError(t, st, body, c.status, c.code)
		})
	}
	// A good checksum stores the piece; the quota left is the file's.
	path := tc.mustCreate(f.root.ID, "ok.bin", int64(len(data)))
	if resp, b, err := tc.patch(path, 0, bytes.NewReader(data), int64(len(data)), http.Header{"Upload-Checksum": {good}}); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a PATCH with the right checksum: %v %s", err, b)
	}
	if !bytes.Equal(f.fileBytes(t, f.root, "ok.bin"), data) {
		t.Fatal("the file differs from what was sent")
	}
}

// TestTusOverrun sends a body of unknown length (chunked) that runs past
// the upload's length, with the creation and with a PATCH: 413, as for a
// Content-Length too large, and nothing of it stored. tusd reads such a
// body up to the length and hands the store its end as the body's: the
// first bytes made the file, under a 413.
func TestTusOverrun(t *testing.T) {
	f := newFixture(t)
	tc := f.tus(t, f.token)
	data := []byte("0123456789abcdefghij")
	create := func(length string) func(name string) (*http.Response, []byte, string) {
		return func(name string) (*http.Response, []byte, string) {
			h := http.Header{"Upload-Length": {length}, "Upload-Metadata": {tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", name)},
				"Content-Type": {"application/offset+octet-stream"}}
			resp, body, err := tc.do(http.MethodPost, tusBase, h, io.MultiReader(bytes.NewReader(data)), -1)
			if err != nil {
				t.Fatal(err)
			}
			return resp, body, ""
		}
	}
	cases := []struct {
		name string
		send func(name string) (*http.Response, []byte, string)
	}{
		{"with the creation", create("10")},
		{"with the creation of an empty file", create("0")},
		{"in a PATCH", func(name string) (*http.Response, []byte, string) {
			path := tc.mustCreate(f.root.ID, name, 10)
			if resp, b, err := tc.patch(path, 0, bytes.NewReader(data[:4]), 4, nil); err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("first piece: %v %s", err, b)
			}
			resp, body, err := tc.patch(path, 4, io.MultiReader(bytes.NewReader(data[4:])), -1, nil)
			if err != nil {
				t.Fatal(err)
			}
			return resp, body, path
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("o%d.bin", i)
			resp, body, path := c.send(name)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("%d %s, want 413", resp.StatusCode, body)
			}
			wantError(t, resp.StatusCode, body, http.StatusRequestEntityTooLarge, "invalid_request")
			if _, err := f.fs.Lookup(context.Background(), f.root.ID, "/"+name); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("the refused body made the file (%v): %q", err, f.fileBytes(t, f.root, name))
			}
			if path != "" {
				if st, off := tc.offset(path); st != http.StatusOK || off != 4 {
					t.Errorf("after the refusal: HEAD %d offset %d, want 200 4", st, off)
				}
			}
		})
	}
}

// TestTusCreationCut cuts off the piece sent with a creation: no
// Location reached the client, so nobody can go on with the upload, and
// berth ends it at once, giving back the length it reserved.
func TestTusCreationCut(t *testing.T) {
	f := newFixture(t)
	tc := f.tus(t, f.token)
	ctx := context.Background()
	held := func() int64 {
		left, _, err := f.fs.QuotaLeft(ctx, f.root.ID, vfs.WriteOptions{SpaceQuota: 1 << 50})
		if err != nil {
			t.Fatal(err)
		}
		return 1<<50 - left
	}
	before := held()
	data := randomData(t, 4<<20)
	h := http.Header{"Upload-Length": {strconv.Itoa(len(data))}, "Upload-Metadata": {tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", "cut.bin")},
		"Content-Type": {"application/offset+octet-stream"}}
	if resp, body, err := tc.do(http.MethodPost, tusBase, h, &cutReader{r: bytes.NewReader(data), left: 1 << 20}, int64(len(data))); err == nil {
		t.Fatalf("a creation cut off: %d %s, want a broken request", resp.StatusCode, body)
	}
	// The server ends the upload once its handler sees the break, which
	// may be after the client has.
	for deadline := time.Now().Add(20 * time.Second); held() != before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes held after the cut creation, %d before: the upload was left staged", held(), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTusUnfinished stores every byte of an upload whose file cannot be
// made at the last PATCH (a folder took its name meanwhile): a client
// then retries (tus-js-client retries a 409) by asking for the offset,
// and takes one equal to the length for a finished upload, reporting
// success. HEAD must not say so while there is no file: it makes the
// file, or answers why it cannot.
func TestTusUnfinished(t *testing.T) {
	f := newFixture(t)
	tc := f.tus(t, f.token)
	ctx := context.Background()
	data := []byte("0123456789")
	path := tc.mustCreate(f.root.ID, "u.bin", int64(len(data)))
	dir, err := f.fs.Mkdir(ctx, f.root.ID, f.root.FolderID, "u.bin", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, body, err := tc.patch(path, 0, bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, resp.StatusCode, body, http.StatusConflict, "name_conflict")
	if st, off := tc.offset(path); st == http.StatusOK && off == int64(len(data)) {
		t.Fatalf("HEAD while the folder holds the name: 200 with the whole length, and no file")
	} else if st != http.StatusConflict {
		t.Errorf("HEAD while the folder holds the name: %d, want 409", st)
	}
	if err := f.fs.Delete(ctx, f.root.ID, dir.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, off := tc.offset(path); st != http.StatusOK || off != int64(len(data)) {
		t.Fatalf("HEAD once the name is free: %d offset %d, want 200 %d", st, off, len(data))
	}
	if got := f.fileBytes(t, f.root, "u.bin"); !bytes.Equal(got, data) {
		t.Fatalf("the file holds %q", got)
	}
	if st, off := tc.offset(path); st != http.StatusOK || off != int64(len(data)) {
		t.Fatalf("HEAD of the finished upload: %d offset %d, want 200 %d (TestTusFinishedHead)", st, off, len(data))
	}
}

// TestTusEmpty creates an empty file: the creation itself makes it.
func TestTusEmpty(t *testing.T) {
	f := newFixture(t)
	tc := f.tus(t, f.token)
	path := tc.mustCreate(f.root.ID, "empty.txt", 0)
	if got := f.fileBytes(t, f.root, "empty.txt"); len(got) != 0 {
		t.Fatalf("the empty file holds %d bytes", len(got))
	}
	if st, off := tc.offset(path); st != http.StatusOK || off != 0 {
		t.Fatalf("HEAD of the finished upload: %d offset %d, want 200 0 (TestTusFinishedHead)", st, off)
	}
}

// TestTusExpiry leaves an upload half done past its expiry: it stops
// answering, and the sweep gives back its reservation and its chunks.
// vfs's clock is moved past the expiry, not waited for: with a lifetime
// of seconds, a loaded machine (the race detector) let the upload expire
// before its first PATCH was through.
func TestTusExpiry(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.SpaceQuota = strconv.Itoa(6 << 20)
	var skew atomic.Int64 // how far vfs's clock is ahead of the wall's
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	f := newFixtureWith(t, fixtureOptions{Policy: &pol, Now: now})
	srv := httptest.NewUnstartedServer(New(Options{FS: f.fs, Accounts: f.accounts, TusExpiry: time.Hour}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tc := &tusClient{t: t, base: srv.URL, client: srv.Client(), token: f.token}
	data := randomData(t, 4<<20)
	path := tc.mustCreate(f.root.ID, "e.bin", int64(len(data)))
	if resp, b, err := tc.patch(path, 0, bytes.NewReader(data[:3<<20]), 3<<20, nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH: %v %s", err, b)
	}
	// The reservation holds the quota: another 4 MiB does not fit.
	resp, body, _ := tc.create(tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", "g.bin"), 4<<20)
	wantError(t, resp.StatusCode, body, http.StatusConflict, "policy_error")
	if st, _ := tc.offset(path); st != http.StatusOK {
		t.Fatalf("HEAD of the upload before its expiry: %d, want 200", st)
	}
	skew.Store(int64(time.Hour + time.Second))
	if st, _ := tc.offset(path); st != http.StatusNotFound {
		t.Fatalf("HEAD of an expired upload: %d, want 404", st)
	}
	if n, err := f.fs.ExpireStaged(context.Background()); n != 1 || err != nil {
		t.Fatalf("ExpireStaged: %d, %v", n, err)
	}
	if _, err := f.fs.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := f.chunks.Size(context.Background()); err != nil || n != 0 {
		t.Fatalf("the chunk store holds %d bytes after the expiry (%v)", n, err)
	}
	tc.mustCreate(f.root.ID, "g.bin", 4<<20)
}

// TestTusTermination ends an upload with DELETE: it is gone, and its
// space is free again.
func TestTusTermination(t *testing.T) {
	f := newFixture(t)
	tc := f.tus(t, f.token)
	data := randomData(t, 2<<20)
	path := tc.mustCreate(f.root.ID, "t.bin", int64(len(data)))
	if resp, b, err := tc.patch(path, 0, bytes.NewReader(data[:1<<20]), 1<<20, nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH: %v %s", err, b)
	}
	resp, body, err := tc.do(http.MethodDelete, path, nil, nil, 0)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %d %s", err, resp.StatusCode, body)
	}
	if st, _ := tc.offset(path); st != http.StatusNotFound {
		t.Fatalf("HEAD after DELETE: %d", st)
	}
	if _, err := f.fs.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.chunks.Size(context.Background()); n != 0 {
		t.Fatalf("%d bytes of chunks left", n)
	}
	if _, err := f.fs.Lookup(context.Background(), f.root.ID, "/t.bin"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("a terminated upload made a file: %v", err)
	}
}

// TestTusOptions checks the discovery answer.
// TestTusLocation: an upload's Location is under public_url when it is
// set, whatever Host the request names (a reverse proxy that does not
// pass the client's on), and the client goes on at it; without it, the
// request's host, as share links take it.
func TestTusLocation(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, public, host, want string
		endpoint                 string // "": tusBase
	}{
		{"public_url", "https://files.example.com", "127.0.0.1:9", "https://files.example.com" + tusBase, ""},
		{"public_url with a slash", "https://files.example.com/", "127.0.0.1:9", "https://files.example.com" + tusBase, ""},
		{"none: the request's host", "", "files.example.org", "https://files.example.org" + tusBase, ""},
		// Clients are as often configured without the slash; the mux
		// answered 307, which tus-js-client under Node does not follow.
		{"the endpoint without its slash", "", "files.example.org", "https://files.example.org" + tusBase, "/api/2/tus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(New(Options{FS: f.fs, Accounts: f.accounts, PublicURL: tc.public}))
			srv.StartTLS()
			defer srv.Close()
			endpoint := tc.endpoint
			if endpoint == "" {
				endpoint = tusBase
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL+endpoint, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			req.Header.Set("Tus-Resumable", "1.0.0")
			req.Header.Set("Upload-Length", "3")
			req.Header.Set("Upload-Metadata", tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", tc.name+".txt"))
			req.Header.Set("Authorization", "Bearer "+f.token)
			resp, err := noRedirects(srv.Client()).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(loc, tc.want) {
				t.Fatalf("create: %d, Location %q, want %s<id>", resp.StatusCode, loc, tc.want)
			}
			c := &tusClient{t: t, base: srv.URL, client: srv.Client(), token: f.token}
			path := loc[strings.Index(loc, tusBase):]
			h := http.Header{"Upload-Offset": {"0"}, "Content-Type": {"application/offset+octet-stream"}}
			if resp, body, err := c.do(http.MethodPatch, path, h, strings.NewReader("abc"), 3); err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("PATCH at the Location: %v %v %s", err, resp, body)
			}
		})
	}
}

func TestTusOptions(t *testing.T) {
	f := newFixture(t)
	// The endpoint with its slash and without (which the mux answered
	// 307).
	for _, path := range []string{tusBase, "/api/2/tus"} {
		req, err := http.NewRequest(http.MethodOptions, f.url(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noRedirects(f.client).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ext := strings.Split(resp.Header.Get("Tus-Extension"), ",")
		sort.Strings(ext)
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Tus-Version") != "1.0.0" ||
			strings.Join(ext, ",") != "checksum,creation,creation-with-upload,expiration,termination" ||
			!strings.Contains(resp.Header.Get("Tus-Checksum-Algorithm"), "sha1") ||
			resp.Header.Get("Tus-Max-Size") != strconv.FormatInt(vfs.MaxStagedLength, 10) {
			t.Fatalf("OPTIONS %s: %d %v", path, resp.StatusCode, resp.Header)
		}
	}
}

// TestTusAccess walks the tus routes as each kind of caller: anyone
// but the owner of an upload gets 404, a person without write access to
// the target 403, no token 401; but an administrator of the organization
// the upload's root is in ends it (DELETE 204), where before only its
// owner could, and only by taking the owner's write access away.
func TestTusAccess(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, _, plain := f.addPerson("bob")
	root, err := f.fs.CreateRoot(ctx, "carol", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	adminP, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: f.org.ID, Username: "carol",
		Email: "carol@example.com", Password: fixturePassword, Admin: true, RootID: root.ID})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(ctx, adminP.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	admin := toks.AccessToken
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	root, err = f.fs.CreateRoot(ctx, "dave", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	tenant := f.personToken(account.PersonInput{OrganizationID: other.ID, Username: "dave",
		Email: "dave@example.com", Password: fixturePassword, Admin: true, RootID: root.ID})
	// An organization share where bob is a viewer: he reaches it but may
	// not write to it.
	shares := share.New(share.Options{FS: f.fs, Accounts: f.accounts})
	ac, err := f.accounts.Caller(ctx, adminP.ID)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shares.CreateOrgShare(ctx, ac, f.org.ID, "Shared")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := f.accounts.PersonByLogin(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shares.SetSubscribers(ctx, ac, f.org.ID, sh.ID, share.Subscribers{Persons: []share.Entry{{ID: bob.ID, Channel: share.ChannelWeb, Role: share.RoleViewer}}}); err != nil {
		t.Fatal(err)
	}

	owner := f.tus(t, f.token)
	path := owner.mustCreate(f.root.ID, "mine.bin", 10)
	callers := []struct {
		name, token string
		create      int // creating in the owner's root
		upload      int // HEAD, PATCH of the owner's upload
		del         int // DELETE of another upload of the owner's
	}{
		{"anonymous", "", 401, 401, 401},
		{"a bad token", "not-a-token", 401, 401, 401},
		{"another organization's administrator", tenant, 404, 404, 404},
		{"a plain person of the organization", plain, 404, 404, 404},
		{"the organization's administrator", admin, 404, 404, 204},
	}
	for i, c := range callers {
		tc := f.tus(t, c.token)
		resp, body, _ := tc.create(tusMeta("root_id", fmt.Sprint(f.root.ID), "filename", "x"), 1)
		if resp.StatusCode != c.create {
			t.Errorf("create as %s: %d %s, want %d", c.name, resp.StatusCode, body, c.create)
		}
		if st, _ := tc.offset(path); st != c.upload {
			t.Errorf("HEAD as %s: %d, want %d", c.name, st, c.upload)
		}
		resp, body, _ = tc.patch(path, 0, strings.NewReader("0123456789"), 10, nil)
		if resp.StatusCode != c.upload {
			t.Errorf("PATCH as %s: %d %s, want %d", c.name, resp.StatusCode, body, c.upload)
		}
		victim := owner.mustCreate(f.root.ID, fmt.Sprintf("victim%d.bin", i), 10)
		resp, body, _ = tc.do(http.MethodDelete, victim, nil, nil, 0)
		if resp.StatusCode != c.del {
			t.Errorf("DELETE as %s: %d %s, want %d", c.name, resp.StatusCode, body, c.del)
		}
		if st, _ := owner.offset(victim); (st == http.StatusNotFound) != (c.del == http.StatusNoContent) {
			t.Errorf("HEAD as the owner after a DELETE as %s: %d", c.name, st)
		}
	}
	// The viewer reaches the share but may not upload to it.
	resp, body, _ := f.tus(t, plain).create(tusMeta("root_id", fmt.Sprint(sh.ID), "filename", "x"), 1)
	wantError(t, resp.StatusCode, body, http.StatusForbidden, "forbidden")
	// The owner, last, so the others saw the upload as it was.
	if resp, b, err := owner.patch(path, 0, strings.NewReader("0123456789"), 10, nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH as the owner: %v %s", err, b)
	}
	if got := f.fileBytes(t, f.root, "mine.bin"); string(got) != "0123456789" {
		t.Fatalf("the owner's file holds %q", got)
	}
}

// tusIsoRows are the tus routes in the isolation walk: the listings
// (everyone's own uploads; an organization's to its administrators and
// those above), creating in the
// child's plain person's root is theirs (and refused to administrators
// with admin_browse_files, who only read), an upload is its creator's
// alone but for the administrators of its root's organization and those
// above, who end it (with admin_browse_files or without: ending an upload
// reads nothing), and discovery is anyone's.
func tusIsoRows() []isoRow {
	target := func(q isoReq) url.Values {
		return url.Values{"root_id": {fmt.Sprint(q.c.root)}, "filename": {q.k.next() + ".bin"}}
	}
	upload := func(q isoReq) any { return q.k.tusUpload(q.c) }
	rows := []isoRow{
		{pattern: "OPTIONS /api/2/tus/{$}", name: "discovery", method: "OPTIONS", path: pf("/api/2/tus/"),
			want: "none=204 OP=204 OA=204 PP=204 CG=204 CP=204 CA=204 PA=204"},
		{pattern: "OPTIONS /api/2/tus", name: "discovery without the slash", method: "OPTIONS", path: pf("/api/2/tus"),
			want: "none=204 OP=204 OA=204 PP=204 CG=204 CP=204 CA=204 PA=204"},
		// The listings: everyone's own; an organization's for its
		// administrators and those above (TestTusUploadList checks
		// what each lists).
		{pattern: "GET /api/2/tus/{$}", name: "the caller's own uploads", path: pf("/api/2/tus/"),
			want: "OP=200 OA=200 PP=200 CG=200 CP=200 CA=200 PA=200"},
		{pattern: "GET /api/2/organization/{org}/uploads", name: "the child's", path: pf("/api/2/organization/%d/uploads", cOrg),
			want: "CG=403 CP=403 CA=200 PA=200"},
		{pattern: "GET /api/2/organization/{org}/uploads", name: "the parent's", path: pf("/api/2/organization/%d/uploads", pOrg),
			want: "PP=403 CP=404 CA=404 PA=200"},
	}
	for _, tenant := range []string{"", "browse"} {
		create := "CP=201 CA=404 PA=404"
		if tenant == "browse" {
			create = "CP=201 CA=403 PA=403"
		}
		rows = append(rows,
			isoRow{pattern: "POST /api/2/tus/{$}", name: "in the child's plain person's root " + tenant, method: "TUSCREATE",
				path: pf("/api/2/tus/"), form: target, want: create, tenant: tenant},
			isoRow{pattern: "POST /api/2/tus", name: "in the child's plain person's root, without the slash " + tenant, method: "TUSCREATE",
				path: pf("/api/2/tus"), form: target, want: create, tenant: tenant},
			isoRow{pattern: "HEAD /api/2/tus/{upload_id}", name: "the child's plain person's upload " + tenant, method: "TUSHEAD",
				path: pf("/api/2/tus/%d", upload), want: "CP=200 CA=404 PA=404", tenant: tenant},
			isoRow{pattern: "PATCH /api/2/tus/{upload_id}", name: "the child's plain person's upload " + tenant, method: "TUSPATCH",
				path: pf("/api/2/tus/%d", upload), want: "CP=204 CA=404 PA=404", tenant: tenant},
			isoRow{pattern: "DELETE /api/2/tus/{upload_id}", name: "the child's plain person's upload " + tenant, method: "TUSDELETE",
				path: pf("/api/2/tus/%d", upload), want: "CP=204 CA=204 PA=204", tenant: tenant},
		)
	}
	return rows
}

// tusUpload creates a two-byte upload in n's plain person's root, as
// them, and returns its id.
func (k *isoCast) tusUpload(n *isoTenant) uint64 {
	k.t.Helper()
	h := http.Header{"Tus-Resumable": {"1.0.0"}, "Upload-Length": {"2"},
		"Upload-Metadata": {tusMeta("root_id", fmt.Sprint(n.root), "filename", k.next()+".bin")}}
	resp := k.f.request(http.MethodPost, tusBase, n.plnTok, nil, h)
	resp.Body.Close()
	id, err := strconv.ParseUint(resp.Header.Get("Location")[strings.LastIndex(resp.Header.Get("Location"), "/")+1:], 10, 64)
	if resp.StatusCode != http.StatusCreated || err != nil {
		k.t.Fatalf("tus upload: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return id
}

// sendTus makes one tus request of the walk: TUSCREATE with form as
// Upload-Metadata, TUSHEAD, TUSPATCH of two bytes at 0, TUSDELETE.
func (k *isoCast) sendTus(method, path, token string, form url.Values) (int, []byte) {
	k.t.Helper()
	h := http.Header{"Tus-Resumable": {"1.0.0"}}
	var body io.Reader
	switch method {
	case "TUSCREATE":
		var kv []string
		for key, v := range form {
			kv = append(kv, key, v[0])
		}
		h.Set("Upload-Length", "2")
		h.Set("Upload-Metadata", tusMeta(kv...))
		method = http.MethodPost
	case "TUSHEAD":
		method = http.MethodHead
	case "TUSPATCH":
		h.Set("Upload-Offset", "0")
		h.Set("Content-Type", "application/offset+octet-stream")
		body = strings.NewReader("up")
		method = http.MethodPatch
	case "TUSDELETE":
		method = http.MethodDelete
	}
	return k.f.readAll(k.f.request(method, path, token, body, h))
}

// TestTusLostAccess: an upload whose creator may no longer write its root
// gives back its reservation as soon as a write there is refused for want
// of room, or at the next sweep, before its expiry; one whose creator
// still may keeps it. Before, a member of a share could reserve its whole
// quota and keep it for good with a PATCH a day, and after losing access
// too, while nobody else could see or end the upload.
func TestTusLostAccess(t *testing.T) {
	const quota = 6 << 20
	cases := []struct {
		name string
		lose func(t *testing.T, w *tusLostWorld)
		// sweep ends the upload through the sweep, not through a
		// refused write.
		sweep bool
		kept  bool
	}{
		{"still a collaborator", func(*testing.T, *tusLostWorld) {}, false, true},
		{"still a collaborator, swept", func(*testing.T, *tusLostWorld) {}, true, true},
		{"removed from the share", func(t *testing.T, w *tusLostWorld) { w.subscribe(t, nil, nil) }, false, false},
		{"made a viewer", func(t *testing.T, w *tusLostWorld) {
			w.subscribe(t, []share.Entry{{ID: w.bob.ID, Channel: share.ChannelWeb, Role: share.RoleViewer}}, nil)
		}, false, false},
		{"removed from the share's group", func(t *testing.T, w *tusLostWorld) {
			g := w.groupAccess(t)
			if _, err := w.f.accounts.UpdateMembers(ctx0, g.ID, account.MembersChange{RemovePersons: []uint64{w.bob.ID}}); err != nil {
				t.Fatal(err)
			}
		}, false, false},
		// A group record that does not read is a fault, not lost
		// access: taken for none, it ended the upload for good, where a
		// request only failed until the record read again.
		{"the group that gives access does not read", func(t *testing.T, w *tusLostWorld) {
			g := w.groupAccess(t)
			if err := w.f.db.Update(ctx0, func(tx kv.Txn) error {
				return tx.Set(kv.Key(kv.AccountGroup, g.ID), []byte{0xff, 0xff})
			}); err != nil {
				t.Fatal(err)
			}
		}, false, true},
		{"deactivated", func(t *testing.T, w *tusLostWorld) {
			if _, err := w.f.accounts.UpdatePerson(ctx0, w.bob.ID, func(p *account.Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, false, false},
		{"deactivated, swept", func(t *testing.T, w *tusLostWorld) {
			if _, err := w.f.accounts.UpdatePerson(ctx0, w.bob.ID, func(p *account.Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, true, false},
		{"deleted", func(t *testing.T, w *tusLostWorld) {
			if err := w.f.accounts.DeletePerson(ctx0, w.bob.ID); err != nil {
				t.Fatal(err)
			}
		}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.SpaceQuota = strconv.Itoa(quota)
			w := newTusLostWorld(t, &pol)
			// bob, a collaborator, reserves the whole quota.
			w.subscribe(t, []share.Entry{{ID: w.bob.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator}}, nil)
			bob := w.client(t, w.bobToken)
			path := bob.mustCreate(w.sh.ID, "hog.bin", quota)
			if resp, b, err := bob.patch(path, 0, strings.NewReader("x"), 1, nil); err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("PATCH as bob: %v %s", err, b)
			}
			c.lose(t, w)
			if c.sweep {
				n, err := w.fs.ExpireStaged(ctx0)
				if err != nil || n != map[bool]int{true: 0, false: 1}[c.kept] {
					t.Fatalf("the sweep ended %d uploads (%v)", n, err)
				}
			}
			// The share's administrator uploads a MiB more than bob's
			// upload leaves: it reserves half the quota, bob's fair
			// share, and the rest only while he may go on.
			admin := w.client(t, w.adminToken)
			resp, body, _ := admin.create(tusMeta("root_id", fmt.Sprint(w.sh.ID), "filename", "a.bin"), quota/2+1<<20)
			if c.kept {
				wantError(t, resp.StatusCode, body, http.StatusConflict, "policy_error")
			} else if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create as the admin once bob lost access: %d %s, want 201", resp.StatusCode, body)
			}
			_, err := w.fs.StagedInfo(ctx0, uploadID(t, path))
			if gone := errors.Is(err, vfs.ErrNotExist); gone == c.kept {
				t.Fatalf("bob's upload: %v, kept %v", err, c.kept)
			}
		})
	}
}

var ctx0 = context.Background()

// tusLostWorld is an organization share, its administrator, and bob, whom
// the test subscribes, over a file system whose Holder is TusHolder, as
// the daemon wires it.
type tusLostWorld struct {
	f                    *fixture
	fs                   *vfs.FS
	shares               *share.Service
	srv                  *httptest.Server
	admin, bob           account.Person
	adminToken, bobToken string
	sh                   vfs.Root
}

// groupAccess makes bob a collaborator of the share through a group of
// his alone, in place of his own entry, and returns the group.
func (w *tusLostWorld) groupAccess(t *testing.T) account.Group {
	t.Helper()
	g, err := w.f.accounts.CreateGroup(ctx0, account.GroupInput{OrganizationID: w.f.org.ID, Name: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.accounts.UpdateMembers(ctx0, g.ID, account.MembersChange{AddPersons: []uint64{w.bob.ID}}); err != nil {
		t.Fatal(err)
	}
	w.subscribe(t, nil, []share.Entry{{ID: g.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator}})
	return g
}

func newTusLostWorld(t *testing.T, pol *account.Policy) *tusLostWorld {
	w := &tusLostWorld{f: newFixtureWith(t, fixtureOptions{Policy: pol})}
	h := &lateHolder{}
	fs, err := vfs.Open(ctx0, w.f.db, w.f.chunks, vfs.Options{Holder: h})
	if err != nil {
		t.Fatal(err)
	}
	w.fs = fs
	w.shares = share.New(share.Options{FS: fs, Accounts: w.f.accounts})
	h.h = TusHolder(w.f.accounts, w.shares)
	w.srv = httptest.NewUnstartedServer(New(Options{FS: fs, Accounts: w.f.accounts, Share: w.shares}))
	w.srv.StartTLS()
	t.Cleanup(w.srv.Close)
	root, err := fs.CreateRoot(ctx0, "carol", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	if w.admin, err = w.f.accounts.CreatePerson(ctx0, account.PersonInput{OrganizationID: w.f.org.ID, Username: "carol",
		Email: "carol@example.com", Password: fixturePassword, Admin: true, RootID: root.ID}); err != nil {
		t.Fatal(err)
	}
	toks, err := w.f.accounts.IssueTokens(ctx0, w.admin.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.adminToken = toks.AccessToken
	w.bob, _, w.bobToken = w.f.addPerson("bob")
	ac, err := w.f.accounts.Caller(ctx0, w.admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w.sh, err = w.shares.CreateOrgShare(ctx0, ac, w.f.org.ID, "Shared"); err != nil {
		t.Fatal(err)
	}
	return w
}

// subscribe makes persons and groups the share's subscribers.
func (w *tusLostWorld) subscribe(t *testing.T, persons, groups []share.Entry) {
	t.Helper()
	ac, err := w.f.accounts.Caller(ctx0, w.admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.shares.SetSubscribers(ctx0, ac, w.f.org.ID, w.sh.ID, share.Subscribers{Persons: persons, Groups: groups}); err != nil {
		t.Fatal(err)
	}
}

func (w *tusLostWorld) client(t *testing.T, token string) *tusClient {
	return &tusClient{t: t, base: w.srv.URL, client: w.srv.Client(), token: token}
}

// lateHolder is the daemon's uploadHolder: the file system needs it before
// the shares it asks exist.
type lateHolder struct{ h vfs.StagedHolder }

func (l *lateHolder) HoldsStaged(ctx context.Context, s vfs.Staged) (bool, error) {
	return l.h.HoldsStaged(ctx, s)
}

// uploadID is the id at the end of an upload's path.
func uploadID(t *testing.T, path string) uint64 {
	t.Helper()
	id, err := strconv.ParseUint(path[strings.LastIndexByte(path, '/')+1:], 10, 64)
	if err != nil {
		t.Fatalf("upload path %q: %v", path, err)
	}
	return id
}

// TestTusFinishRace: the file is made once, and the request that sent the
// last piece learns that it was, whichever of it and a HEAD (which makes
// the file of an upload whose bytes are all stored) finishes the upload
// first. A HEAD between the last piece's commit and its request's finish
// made the file, and that request was answered 404 for an upload that
// succeeded. The store is driven as tusd drives it in a PATCH: WriteChunk,
// then FinishUpload.
func TestTusFinishRace(t *testing.T) {
	data := []byte("0123456789")
	for _, c := range []struct {
		name      string
		headFirst bool
		head      int // the status of the HEAD
	}{
		{"HEAD between the last piece and its finish", true, http.StatusOK},
		{"HEAD after the finish", false, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			tc := f.tus(t, f.token)
			path := tc.mustCreate(f.root.ID, "r.bin", int64(len(data)))
			u := &tusUpload{s: newServer(Options{FS: f.fs, Accounts: f.accounts}), id: uploadID(t, path)}
			if n, err := u.WriteChunk(ctx0, 0, bytes.NewReader(data)); err != nil || n != int64(len(data)) {
				t.Fatalf("WriteChunk: %d, %v", n, err)
			}
			head := func() {
				if st, off := tc.offset(path); st != c.head || (st == http.StatusOK && off != int64(len(data))) {
					t.Errorf("HEAD: %d offset %d, want %d", st, off, c.head)
				}
			}
			if c.headFirst {
				head()
			}
			if err := u.FinishUpload(ctx0); err != nil {
				t.Fatalf("the finish of the request that sent the last piece: %v", err)
			}
			if !c.headFirst {
				head()
			}
			if got := f.fileBytes(t, f.root, "r.bin"); !bytes.Equal(got, data) {
				t.Fatalf("the file holds %q", got)
			}
			list, _, err := f.fs.List(ctx0, f.root.ID, f.root.FolderID)
			if err != nil || len(list) != 1 {
				t.Fatalf("the folder holds %d items (%v), want the one file", len(list), err)
			}
		})
	}
}

// noRedirects is c following no redirect, as tus-js-client under Node
// (and curl without -L) does: a 307 is its answer.
func noRedirects(c *http.Client) *http.Client {
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// TestTusFinishedHead: a HEAD of an upload finished a moment ago answers
// its offset as its length to its creator, as tus clients expect of a
// finished upload, and changes nothing. tus-js-client whose last PATCH's
// answer was lost (the connection broke after the commit) asks for the
// offset before it goes on; berth answered 404, and the client created a
// new upload and sent the whole file again. Past the grace in which vfs
// keeps the finished record, and to anyone else, it is 404.
func TestTusFinishedHead(t *testing.T) {
	data := []byte("the whole file, stored")
	for _, c := range []struct {
		name   string
		who    string        // "alice" (the creator) or "bob"
		after  time.Duration // how long after the finish the HEAD comes
		method string
		want   int
	}{
		{"the creator's HEAD right after the finish", "alice", 0, http.MethodHead, http.StatusOK},
		{"the creator's HEAD nine minutes after", "alice", 9 * time.Minute, http.MethodHead, http.StatusOK},
		{"the creator's HEAD past the grace", "alice", 11 * time.Minute, http.MethodHead, http.StatusNotFound},
		{"another person's HEAD", "bob", 0, http.MethodHead, http.StatusNotFound},
		{"the creator's DELETE", "alice", 0, http.MethodDelete, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			var skew atomic.Int64
			now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			f := newFixtureWith(t, fixtureOptions{Now: now})
			tc := f.tus(t, f.token)
			path := tc.mustCreate(f.root.ID, "done.bin", int64(len(data)))
			if resp, b, err := tc.patch(path, 0, bytes.NewReader(data), int64(len(data)), nil); err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("the last PATCH: %v %s", err, b)
			}
			before, err := f.fs.Lookup(ctx0, f.root.ID, "/done.bin")
			if err != nil {
				t.Fatal(err)
			}
			skew.Store(int64(c.after))
			if c.who == "bob" {
				_, _, tc.token = f.addPerson("bob")
			}
			resp, b, err := tc.do(c.method, path, nil, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.want {
				t.Fatalf("%s: %d %s, want %d", c.method, resp.StatusCode, b, c.want)
			}
			if c.want == http.StatusOK {
				n := strconv.Itoa(len(data))
				if got := resp.Header.Get("Upload-Offset"); got != n || resp.Header.Get("Upload-Length") != n {
					t.Errorf("Upload-Offset %q, Upload-Length %q, want both %s", got, resp.Header.Get("Upload-Length"), n)
				}
				if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
					t.Errorf("Cache-Control %q, want no-store (tus)", cc)
				}
			}
			after, err := f.fs.Lookup(ctx0, f.root.ID, "/done.bin")
			if err != nil || after.RevisionID != before.RevisionID {
				t.Fatalf("the file is at revision %d (%v), was %d: made again", after.RevisionID, err, before.RevisionID)
			}
			if got := f.fileBytes(t, f.root, "done.bin"); !bytes.Equal(got, data) {
				t.Fatalf("the file holds %q", got)
			}
		})
	}
}

// TestTusFairShare: one person's uploads in progress reserve at most half
// of what the organization's quota leaves free beside the others'; the
// rest of a declared length is checked at the creation and again by the
// last PATCH, and an administrator of the organization ends an upload.
// Before, alice's upload of the whole room, with nothing sent, had bob's
// creations and plain uploads refused (409 policy_error) for as long as a
// PATCH a day kept it, and nobody but alice could end it.
func TestTusFairShare(t *testing.T) {
	const q = 4 << 20
	type step struct {
		who, op string // op: create (tus), put (REST upload), send (every byte of who's last upload), delete (alice's last upload)
		n       int64
		want    int
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a person alone uploads the whole room", []step{{"alice", "create", q, 201}, {"alice", "send", 0, 204}}},
		{"another's upload within the fair share", []step{{"alice", "create", q, 201}, {"bob", "create", q / 2, 201}, {"bob", "send", 0, 204}}},
		{"another's plain upload within the fair share", []step{{"alice", "create", q, 201}, {"bob", "put", q / 2, 200}}},
		{"another's upload and plain upload within the fair share", []step{
			{"alice", "create", q, 201}, {"bob", "create", q / 4, 201}, {"bob", "put", q / 4, 200}}},
		{"another's upload past what is free", []step{{"alice", "create", q, 201}, {"bob", "create", q/2 + 1, 409}}},
		{"the last PATCH meets the room another took", []step{
			{"alice", "create", q, 201}, {"bob", "put", q / 2, 200}, {"alice", "send", 0, 409}}},
		{"an administrator of the organization ends an upload", []step{
			{"alice", "create", q, 201}, {"admin", "delete", 0, 204}, {"bob", "create", q, 201}}},
		{"a plain person does not end another's upload", []step{
			{"alice", "create", q, 201}, {"bob", "delete", 0, 404}, {"bob", "create", q/2 + 1, 409}}},
		{"an administrator of another organization does not", []step{
			{"alice", "create", q, 201}, {"stranger", "delete", 0, 404}}},
		{"nor does anyone without a token", []step{{"alice", "create", q, 201}, {"anonymous", "delete", 0, 401}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.SpaceQuota = strconv.Itoa(q)
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			_, bobTok, bobRoot := f.member(f.org.ID, "bob", false)
			_, adminTok, _ := f.member(f.org.ID, "carol", true)
			other, err := f.accounts.CreateOrganization(context.Background(), account.OrganizationInput{Name: "Globex"})
			if err != nil {
				t.Fatal(err)
			}
			_, strangerTok, _ := f.member(other.ID, "dave", true)
			tokens := map[string]string{"alice": f.token, "bob": bobTok, "admin": adminTok, "stranger": strangerTok, "anonymous": ""}
			roots := map[string]vfs.Root{"alice": f.root, "bob": bobRoot}
			last := map[string]string{}   // who's last upload's path
			lengths := map[string]int64{} // and its length
			for i, s := range c.steps {
				tc := f.tus(t, tokens[s.who])
				var status int
				var body []byte
				switch s.op {
				case "create":
					var resp *http.Response
					resp, body, last[s.who] = tc.create(tusMeta("root_id", fmt.Sprint(roots[s.who].ID), "filename", fmt.Sprintf("%s%d.bin", s.who, i)), s.n)
					status, lengths[s.who] = resp.StatusCode, s.n
				case "send":
					resp, b, err := tc.patch(last[s.who], 0, bytes.NewReader(make([]byte, lengths[s.who])), lengths[s.who], nil)
					if err != nil {
						t.Fatal(err)
					}
					status, body = resp.StatusCode, b
				case "put":
					mp, ct := multipartBody(fmt.Sprintf("put%d.bin", i), bytes.NewReader(make([]byte, s.n)))
					status, body = f.readAll(f.request(http.MethodPost, fmt.Sprintf("/api/2/files/%d/upload", roots[s.who].ID), tokens[s.who], mp, http.Header{"Content-Type": {ct}}))
				case "delete":
					resp, b, err := tc.do(http.MethodDelete, last["alice"], nil, nil, 0)
					if err != nil {
						t.Fatal(err)
					}
					status, body = resp.StatusCode, b
				}
				if status != s.want {
					t.Fatalf("step %d, %s by %s (%d bytes): %d %s, want %d", i, s.op, s.who, s.n, status, body, s.want)
				}
				if s.want == http.StatusConflict {
					wantError(t, status, body, http.StatusConflict, "policy_error")
				}
			}
		})
	}
}

// TestTusUploadList: GET /api/2/tus/ lists the caller's own uploads in
// progress, GET /api/2/organization/{id}/uploads those into the roots of
// the organization and below, for its administrators and those above;
// nobody else sees an upload there, and a finished or terminated one is
// no longer listed. Before, no route listed them: an administrator found
// an upload's id only in the logs.
func TestTusUploadList(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, plainTok, _ := f.member(f.org.ID, "bob", false)
	_, adminTok, _ := f.member(f.org.ID, "carol", true)
	child, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: f.org.ID, Name: "Sub"})
	if err != nil {
		t.Fatal(err)
	}
	erin, erinTok, erinRoot := f.member(child.ID, "erin", false)
	_, childAdminTok, _ := f.member(child.ID, "frank", true)
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	_, strangerTok, _ := f.member(other.ID, "dave", true)
	carol, err := f.accounts.PersonByLogin(ctx, "carol")
	if err != nil {
		t.Fatal(err)
	}
	guest, err := f.accounts.CreateGuest(ctx, account.GuestInput{CreatorID: carol.ID, OrganizationID: f.org.ID, Email: "gus@example.com", Password: fixturePassword})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(ctx, guest.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	guestTok := toks.AccessToken

	alice := f.tus(t, f.token)
	mine := alice.mustCreate(f.root.ID, "mine.bin", 10)
	if resp, b, err := alice.patch(mine, 0, strings.NewReader("0123"), 4, nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH: %v %s", err, b)
	}
	theirs := f.tus(t, erinTok).mustCreate(erinRoot.ID, "theirs.bin", 7)
	gone := alice.mustCreate(f.root.ID, "gone.bin", 3)
	if resp, b, err := alice.do(http.MethodDelete, gone, nil, nil, 0); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %s", err, b)
	}
	done := alice.mustCreate(f.root.ID, "done.bin", 2)
	if resp, b, err := alice.patch(done, 0, strings.NewReader("ok"), 2, nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH: %v %s", err, b)
	}
	m, e := uploadID(t, mine), uploadID(t, theirs)

	own := "/api/2/tus/"
	org, sub := orgPath(f.org.ID, "/uploads"), orgPath(child.ID, "/uploads")
	type listCase struct {
		name, token, path string
		status            int
		ids               []uint64 // the page's uploads, in order
		total             int
		// named: the file names show; an administrator who may not
		// read the roots (admin_browse_files off, the default) sees
		// null (the rows after the table turn it on).
		named bool
	}
	cases := []listCase{
		{"the creator, their own", f.token, own, 200, []uint64{m}, 1, true},
		{"another creator, their own", erinTok, own, 200, []uint64{e}, 1, true},
		{"a plain person of the organization, none their own", plainTok, own, 200, nil, 0, true},
		{"the organization's administrator, none their own", adminTok, own, 200, nil, 0, true},
		{"a guest, none their own", guestTok, own, 200, nil, 0, true},
		{"another tenant's administrator, none their own", strangerTok, own, 200, nil, 0, true},
		{"anonymous, own", "", own, 401, nil, 0, true},
		{"a bad token, own", "not-a-token", own, 401, nil, 0, true},
		{"the organization's administrator, the organization and below", adminTok, org, 200, []uint64{m, e}, 2, false},
		{"the organization's administrator, a page", adminTok, org + "?offset=1&limit=1", 200, []uint64{e}, 2, false},
		{"the organization's administrator, a page past the end", adminTok, org + "?offset=5", 200, nil, 2, false},
		{"the organization's administrator, a bad limit", adminTok, org + "?limit=101", 400, nil, 0, false},
		{"the organization's administrator, the child below", adminTok, sub, 200, []uint64{e}, 1, false},
		{"the child's administrator, the child", childAdminTok, sub, 200, []uint64{e}, 1, false},
		{"the child's administrator, the parent above", childAdminTok, org, 404, nil, 0, false},
		{"a plain person of the organization", plainTok, org, 403, nil, 0, false},
		{"a plain person of the child, who created one there", erinTok, sub, 403, nil, 0, false},
		{"a guest of the organization", guestTok, org, 403, nil, 0, false},
		{"another tenant's administrator", strangerTok, org, 404, nil, 0, false},
		{"another tenant's administrator, the child", strangerTok, sub, 404, nil, 0, false},
		{"anonymous, the organization", "", org, 401, nil, 0, false},
	}
	check := func(t *testing.T, c listCase) {
		t.Helper()
		{
			st, body := f.send(http.MethodGet, c.path, c.token, nil)
			if st != c.status {
				t.Fatalf("%d %s, want %d", st, body, c.status)
			}
			if st != http.StatusOK {
				wantError(t, st, body, st, map[int]string{400: "invalid_request", 401: "access_denied", 403: "forbidden", 404: "not_found"}[st])
				return
			}
			var got struct {
				Offset  int             `json:"offset"`
				Results []tusUploadJSON `json:"results"`
				Total   int             `json:"total"`
			}
			if err := json.Unmarshal(body, &got); err != nil || got.Results == nil {
				t.Fatalf("not a paged list: %v %s", err, body)
			}
			var ids []uint64
			for _, u := range got.Results {
				ids = append(ids, u.UploadID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.ids) || got.Total != c.total {
				t.Fatalf("uploads %v of %d, want %v of %d: %s", ids, got.Total, c.ids, c.total, body)
			}
			for _, u := range got.Results {
				want := tusUploadJSON{UploadID: m, RootID: f.root.ID, FolderID: f.root.FolderID, Name: new("mine.bin"),
					Length: 10, Offset: 4, Reserved: 10, CreatorID: f.person.ID}
				if u.UploadID == e {
					want = tusUploadJSON{UploadID: e, RootID: erinRoot.ID, FolderID: erinRoot.FolderID, Name: new("theirs.bin"),
						Length: 7, Reserved: 7, CreatorID: erin.ID}
				}
				created, cerr := parseDateTime(u.Created)
				expires, eerr := parseDateTime(u.Expires)
				if cerr != nil || eerr != nil || !expires.After(created) || time.Since(created) > time.Hour {
					t.Errorf("upload %d: created %q, expires %q", u.UploadID, u.Created, u.Expires)
				}
				want.Created, want.Expires = u.Created, u.Expires
				if !c.named {
					want.Name = nil
				}
				if (u.Name == nil) != (want.Name == nil) || u.Name != nil && *u.Name != *want.Name {
					t.Errorf("upload %d: name %v, want %v", u.UploadID, u.Name, want.Name)
				}
				u.Name, want.Name = nil, nil
				if u != want {
					t.Errorf("upload %+v, want %+v", u, want)
				}
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { check(t, c) })
	}
	// With admin_browse_files on in both organizations, their
	// administrators read the roots, and the names show.
	for _, id := range []uint64{f.org.ID, child.ID} {
		if _, err := f.accounts.UpdatePolicy(ctx, id, func(p *account.Policy) error { p.AdminBrowseFiles = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("admin_browse_files on, the organization's administrator", func(t *testing.T) {
		check(t, listCase{"", adminTok, org, 200, []uint64{m, e}, 2, true})
	})
}
