package webdav_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"berth/httpserve"
	"berth/webdav"
)

// TestCoalescedGet: over HTTP/1.1 on a connection whose records are
// coalesced (httpserve.CoalesceListener, as the daemon serves), every
// GET and HEAD of the mount (whole, one range, several, a folder, a file
// that is not there) has the status, headers and body it has on a plain
// connection.
func TestCoalescedGet(t *testing.T) {
	f := newFixture(t)
	content := make([]byte, 3<<20+5)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(content)
	code, _, body := f.do(http.MethodPut, "/big.bin", bytes.NewReader(content))
	want(t, "PUT", code, http.StatusCreated, body)
	h := webdav.New(webdav.Options{FS: f.fs, Accounts: f.accounts})
	servers := map[bool]*httptest.Server{}
	for _, coalesce := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(h)
		if coalesce {
			srv.Listener = httpserve.CoalesceListener(srv.Listener)
			srv.Config.ConnContext = httpserve.ConnContext
		}
		srv.StartTLS() // HTTP/1.1: only there are records held
		t.Cleanup(srv.Close)
		servers[coalesce] = srv
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
	}{
		{"whole", "GET", "/big.bin", nil},
		{"head", "HEAD", "/big.bin", nil},
		{"range", "GET", "/big.bin", []string{"Range", "bytes=100-2000000"}},
		{"ranges", "GET", "/big.bin", []string{"Range", "bytes=0-9,3000000-"}},
		{"not modified", "GET", "/big.bin", []string{"If-None-Match", "*"}},
		{"unsatisfiable", "GET", "/big.bin", []string{"Range", "bytes=9000000-"}},
		{"folder", "GET", "/", nil},
		{"missing", "GET", "/nothing.bin", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]struct {
				code int
				hdr  http.Header
				body []byte
			}
			for i, coalesce := range []bool{false, true} {
				srv := servers[coalesce]
				req, _ := http.NewRequest(tc.method, srv.URL+"/webdav/alice"+tc.path, nil)
				req.SetBasicAuth("alice", password)
				for j := 0; j+1 < len(tc.hdr); j += 2 {
					req.Header.Set(tc.hdr[j], tc.hdr[j+1])
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if resp.ProtoMajor != 1 {
					t.Fatalf("served over %s", resp.Proto)
				}
				delete(resp.Header, "Date")
				got[i].code, got[i].hdr, got[i].body = resp.StatusCode, resp.Header, b
			}
			plain, held := got[0], got[1]
			// A multi-range answer's boundary is random.
			if ct := plain.hdr.Get("Content-Type"); len(ct) > 9 && ct[:9] == "multipart" {
				plain.hdr.Del("Content-Type")
				held.hdr.Del("Content-Type")
				plain.hdr.Del("Content-Length")
				held.hdr.Del("Content-Length")
				plain.body, held.body = bytes.ReplaceAll(plain.body, boundary(plain.body), nil), bytes.ReplaceAll(held.body, boundary(held.body), nil)
			}
			if plain.code != held.code || !bytes.Equal(plain.body, held.body) {
				t.Errorf("coalesced: %d, %d bytes; plain: %d, %d bytes", held.code, len(held.body), plain.code, len(plain.body))
			}
			if len(plain.hdr) != len(held.hdr) {
				t.Errorf("headers\n%v\nplain\n%v", held.hdr, plain.hdr)
			}
			for k, v := range plain.hdr {
				if held.hdr.Get(k) != v[0] {
					t.Errorf("%s: %q, plain %q", k, held.hdr.Get(k), v[0])
				}
			}
		})
	}
}

// boundary is the first line of a multipart body: its boundary.
func boundary(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i > 0 {
		return bytes.TrimSpace(b[:i])
	}
	return nil
}
