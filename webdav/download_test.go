package webdav_test

import (
	"berth/httpserve"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"berth/berthtest"
	"berth/vfs"
	"berth/webdav"
)

// TestDownload: what GET, HEAD (and POST, which x/net/webdav answers as a
// GET) send. A row per case, each on a fresh server; byte ranges are the
// table of TestRange, a trailing slash on a file is in paths_test.go, and
// a read error after the first byte is TestGetFailsLoudly below.
func TestDownload(t *testing.T) {
	runCases(t, []davCase{
		// A GET's Content-Type is the getcontenttype PROPFIND reports, from
		// the name's extension; the contents are never sniffed (an HTML body
		// in a file of unknown type is not served as text/html), and the
		// answer says nosniff. A POST, which x/net/webdav answers as a GET, is
		// held to the same: a cross-site form can send one. Formerly
		// TestGetContentTypeByName (gettype_test.go).
		{"Content-Type from the name, never sniffed", func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			for name, body := range map[string]string{
				"page.unknownext": "<html><script>alert(1)</script></html>",
				"notes":           "plain words, no extension",
				"a.PDF":           "%PDF-1.4 not really",
				"b.txt":           "<html>text file</html>",
				"page.html":       "<html><script>alert(document.domain)</script></html>",
			} {
				if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, name, bytes.NewReader([]byte(body)), vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				st, _, prop := f.do("PROPFIND", "/"+name, nil, "Depth", "0")
				want(t, "PROPFIND "+name, st, http.StatusMultiStatus, prop)
				m := regexp.MustCompile(`<D:getcontenttype>([^<]*)</D:getcontenttype>`).FindStringSubmatch(prop)
				if m == nil {
					t.Fatalf("%s: no getcontenttype in %s", name, prop)
				}
				for _, method := range []string{"GET", "HEAD", "POST"} {
					st, h, got := f.do(method, "/"+name, nil)
					want(t, method+" "+name, st, http.StatusOK, got)
					if ct := h.Get("Content-Type"); ct != m[1] || h.Get("X-Content-Type-Options") != "nosniff" {
						t.Errorf("%s %s: Content-Type %q (nosniff %q), getcontenttype %q", method, name, ct, h.Get("X-Content-Type-Options"), m[1])
					}
					// A browser opening the file over the mount runs
					// nothing of it on berth's origin.
					if csp := h.Get("Content-Security-Policy"); csp != httpserve.DownloadCSP {
						t.Errorf("%s %s: Content-Security-Policy %q", method, name, csp)
					}
					// Revalidated before reuse, never reused on a
					// guess from Last-Modified (RFC 9111 4.2.2).
					if cc := h.Get("Cache-Control"); cc != httpserve.DownloadCacheControl {
						t.Errorf("%s %s: Cache-Control %q", method, name, cc)
					}
				}
			}
			// A collection's GET stays an error answer in plain text.
			st, h, body := f.do("GET", "/", nil)
			if st < 400 || h.Get("Content-Type") == "application/octet-stream" {
				t.Errorf("GET of a collection: %d %q %q", st, h.Get("Content-Type"), body)
			}
		}},
		// A page of another site that loads a file as its own subresource
		// (<script src>, <link rel=stylesheet>, <img>) with the Basic
		// credentials a browser keeps for berth ran a .js file's code,
		// applied a .css file and measured an image in that page (no
		// CORS needed: such loads are no-cors); with the answer marked
		// same-origin the browser refuses them, whichever path answers
		// (whole, ranged, conditional, HEAD, POST).
		{"a file is no other site's subresource", func(t *testing.T) {
			f := newFixture(t)
			if _, err := f.fs.WriteFile(context.Background(), f.root.ID, f.root.FolderID, "secret.js", bytes.NewReader([]byte(`window.leak = "secret";`)), vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, req := range [][]string{{"GET"}, {"HEAD"}, {"POST"}, {"GET", "Range", "bytes=0-3"}, {"GET", "If-None-Match", `"other"`}} {
				st, h, body := f.do(req[0], "/secret.js", nil, req[1:]...)
				if st >= 300 {
					t.Fatalf("%v: %d %s", req, st, body)
				}
				if got := h.Get("Cross-Origin-Resource-Policy"); got != "same-origin" {
					t.Errorf("%v: Cross-Origin-Resource-Policy %q, want same-origin", req, got)
				}
			}
		}},
		// A GET or HEAD of a whole file is answered without x/net/webdav
		// (Handler.sendWhole); the answer is the library's all the same:
		// the same status, headers and body as a request the library
		// answers (an If-Range without a Range, which it ignores), for a
		// small file kept inline and a file of several chunks.
		{"a whole file answered as the library answers it", func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			big := make([]byte, 3<<20)
			rand.Read(big)
			for name, body := range map[string][]byte{"small.txt": []byte("hello world"), "big.bin": big} {
				if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, name, bytes.NewReader(body), vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				for _, method := range []string{"GET", "HEAD"} {
					st, h, got := f.do(method, "/"+name, nil)
					lst, lh, lgot := f.do(method, "/"+name, nil, "If-Range", `"other"`)
					want(t, method+" "+name, st, http.StatusOK, "")
					h.Del("Date")
					lh.Del("Date")
					if st != lst || got != lgot || fmt.Sprint(h) != fmt.Sprint(lh) {
						t.Errorf("%s %s: %d %v (%d bytes)\nthe library's %d %v (%d bytes)", method, name, st, h, len(got), lst, lh, len(lgot))
					}
					if method == "GET" && got != string(body) {
						t.Errorf("GET %s: %d bytes, not the file's %d", name, len(got), len(body))
					}
				}
			}
		}},
	})
}

// TestRange runs the Range table (berthtest.RangeCases, which rest's
// TestDownloadRanges runs too) over WebDAV GET and HEAD: each row's common
// answer, and WebDAV's own, a 416 in plain text and nosniff on every
// answer (newGetWriter). A chunked upload's range read back is a row of
// TestPut. Formerly this table held 9 rows of its own over an 11-byte
// f.txt, from TestGetZeroSuffixRange (emptyrange_test.go) and
// TestGetMultiRangeWithZeroSuffix (multirange_test.go); they are rows of
// the shared table now.
func TestRange(t *testing.T) {
	f := newFixture(t)
	for _, rf := range berthtest.RangeFiles() {
		if _, err := f.fs.WriteFile(context.Background(), f.root.ID, f.root.FolderID, rf.Name, bytes.NewReader(rf.Data()), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range berthtest.RangeCases() {
		t.Run(c.Name, func(t *testing.T) {
			var hdr []string
			for k, v := range c.Header() {
				hdr = append(hdr, k, v[0])
			}
			st, h, body := f.do(c.RangeMethod(), "/"+c.File.Name, nil, hdr...)
			berthtest.CheckRange(t, c, st, h, []byte(body))
			if ct := h.Get("Content-Type"); st == http.StatusRequestedRangeNotSatisfiable && !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("416 with Content-Type %q, want plain text", ct)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", h.Get("X-Content-Type-Options"))
			}
		})
	}
}

// TestGetFailsLoudly: a GET whose contents are lost under the metadata (the
// chunk files removed), or changed on the disk since they were last read
// (one byte of the last chunk flipped, after a GET that verified it and
// let later reads check it by its XXH3 alone), must reach the client as a
// broken transfer, never as a short file or other bytes with status 200,
// and be logged and counted (berth_http_aborted_streams_total) as REST
// downloads are. What the client received before the break is the file's
// start. Before httpserve, x/net/webdav's http.ServeContent dropped the
// read error: the WebDAV side neither logged nor counted it.
func TestGetFailsLoudly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plain bool // HTTP/1.1 without TLS; else HTTP/2 over TLS
		spoil func(t *testing.T, f *fixture)
	}{
		{"lost/HTTP/1.1", true, loseChunks},
		{"lost/HTTP/2", false, loseChunks},
		{"changed/HTTP/1.1", true, changeLastChunk},
		{"changed/HTTP/2", false, changeLastChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			data := make([]byte, 6<<20)
			rand.Read(data)
			st, _, body := f.do("PUT", "/lost.bin", bytes.NewReader(data))
			want(t, "PUT", st, http.StatusCreated, body)
			st, _, body = f.do("GET", "/lost.bin", nil)
			want(t, "GET before", st, http.StatusOK, "")
			if body != string(data) {
				t.Fatal("the GET before differs from what was PUT")
			}
			tc.spoil(t, f)

			// A handler of its own, to read its registry and log.
			logs := &berthtest.LogBuffer{}
			reg := prometheus.NewRegistry()
			h := webdav.New(webdav.Options{
				Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				FS:         f.fs,
				Accounts:   f.accounts,
				Registerer: reg,
			})
			srv := httptest.NewUnstartedServer(h)
			if tc.plain {
				srv.Start()
			} else {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			}
			defer srv.Close()

			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/webdav/alice/lost.bin", nil)
			req.SetBasicAuth("alice", password)
			resp, err := srv.Client().Do(req)
			if err == nil {
				var got []byte
				got, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == http.StatusOK {
					t.Fatalf("a GET whose contents are spoiled looked complete: %d bytes of %d", len(got), len(data))
				}
				if !bytes.Equal(got, data[:min(len(got), len(data))]) {
					t.Fatalf("the client received %d bytes that are not the file's start", len(got))
				}
				if err == nil {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			t.Logf("the client saw: %v", err)
			if resp != nil && resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want a broken 200 (the failure comes after the first byte)", resp.StatusCode)
			}

			if n := gatheredCounter(t, reg, "berth_http_aborted_streams_total"); n != 1 {
				t.Errorf("berth_http_aborted_streams_total = %v, want 1", n)
			}
			if !strings.Contains(logs.String(), "download failed after the response started") {
				t.Errorf("the failure was not logged:\n%s", logs)
			}
			// The server is still up.
			st, _, body = f.do("PROPFIND", "/lost.bin", nil, "Depth", "0")
			want(t, "PROPFIND after the abort", st, http.StatusMultiStatus, body)
		})
	}
}

// loseChunks removes every chunk file under the metadata.
func loseChunks(t *testing.T, f *fixture) { berthtest.LoseChunks(t, f.dir) }

// changeLastChunk flips one byte in the middle of the stored blob of
// /lost.bin's last chunk, as a disk that rots would.
func changeLastChunk(t *testing.T, f *fixture) {
	t.Helper()
	_, file, err := f.fs.OpenPath(context.Background(), f.root.ID, "/lost.bin")
	if err != nil {
		t.Fatal(err)
	}
	file.Close()
	refs := file.Revision.Chunks
	if len(refs) < 2 {
		t.Fatalf("want a file of several chunks, got %d", len(refs))
	}
	p := f.stack.Chunks.Path(refs[len(refs)-1].ID)
	blob, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	blob[len(blob)/2] ^= 1
	if err := os.WriteFile(p, blob, 0o640); err != nil {
		t.Fatal(err)
	}
}

// gatheredCounter sums the samples of the metric family name in reg (0 when the
// family is not there).
func gatheredCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// TestResumeByDate: a GET resumed with an If-Range of its Last-Modified
// date, after a PUT of a new revision within the same second (the date's
// resolution), is sent whole, 200, never the rest of the new revision
// after the start of the old one (httpserve.ServableRange). The ETag
// still resumes.
func TestResumeByDate(t *testing.T) {
	f := newFixture(t)
	old, neu := strings.Repeat("a", 20), strings.Repeat("b", 20)
	for try := 0; ; try++ {
		f.do("PUT", "/r.bin", strings.NewReader(old))
		_, h, _ := f.do("GET", "/r.bin", nil, "Range", "bytes=0-9")
		lm := h.Get("Last-Modified")
		f.do("PUT", "/r.bin", strings.NewReader(neu))
		st, h, body := f.do("GET", "/r.bin", nil, "Range", "bytes=10-", "If-Range", lm)
		if h.Get("Last-Modified") != lm {
			if try < 20 {
				continue // the second turned between the revisions
			}
			t.Skip("no two revisions within one second")
		}
		if st != http.StatusOK || body != neu {
			t.Fatalf("resumed by date over a new revision of the same second: %d %q, want 200 and the whole new revision", st, body)
		}
		st, _, body = f.do("GET", "/r.bin", nil, "Range", "bytes=10-", "If-Range", h.Get("Etag"))
		if st != http.StatusPartialContent || body != neu[10:] {
			t.Fatalf("resumed by ETag: %d %q", st, body)
		}
		return
	}
}
