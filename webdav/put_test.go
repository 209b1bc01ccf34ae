package webdav_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/vfs"
)

// TestPut: what a PUT stores, and what it refuses whole. A row per case,
// each on a fresh server; conditional PUTs are in if_test.go, a full disk
// in space_test.go.
func TestPut(t *testing.T) {
	runCases(t, []davCase{
		// A 9 MiB upload without Content-Length (chunked, as macOS Finder
		// sends) reads back identical through vfs, and a range of it over GET.
		// Formerly TestWriteReadBackByteIdentical (webdav_test.go).
		{"a chunked upload reads back byte for byte", func(t *testing.T) {
			f := newFixture(t)
			data := make([]byte, 9<<20+12345)
			rand.Read(data)
			req, _ := http.NewRequest("PUT", f.url("/blob.bin"), io.MultiReader(bytes.NewReader(data)))
			req.SetBasicAuth("alice", password)
			req.ContentLength = -1 // chunked, as macOS Finder sends
			st, _, body := f.send(req)
			want(t, "PUT", st, http.StatusCreated, body)
			got, err := f.read("/blob.bin")
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("vfs read back %d bytes (%v), want the %d written", len(got), err, len(data))
			}
			st, h, body := f.do("GET", "/blob.bin", nil, "Range", "bytes=100-199")
			want(t, "GET range", st, http.StatusPartialContent, "")
			if body != string(data[100:200]) || h.Get("ETag") == "" {
				t.Fatal("range GET returned the wrong bytes or no ETag")
			}
		}},

		// Small PUTs, each one transaction that looks its folder up
		// and checks it (plainPut), see the folder as the request
		// before them left it: a lock taken on it, then its move and its
		// delete, each between two PUTs.
		{"small PUTs see what the request before changed", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/d/a.txt", strings.NewReader("a"))
			want(t, "PUT", st, http.StatusCreated, body)
			st, h, body := f.do("LOCK", "/d", strings.NewReader(lockExclusive), "Depth", "infinity")
			want(t, "LOCK /d", st, http.StatusOK, body)
			tok := h.Get("Lock-Token")
			st, _, body = f.do("PUT", "/d/b.txt", strings.NewReader("b"))
			want(t, "PUT below a lock taken since, without its token", st, http.StatusLocked, body)
			st, _, body = f.do("PUT", "/d/a.txt", strings.NewReader("a2"))
			want(t, "PUT over a file below a lock taken since", st, http.StatusLocked, body)
			st, _, body = f.do("UNLOCK", "/d", nil, "Lock-Token", tok)
			want(t, "UNLOCK /d", st, http.StatusNoContent, body)
			st, _, body = f.do("PUT", "/d/b.txt", strings.NewReader("b"))
			want(t, "PUT after the UNLOCK", st, http.StatusCreated, body)
			st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"))
			want(t, "MOVE /d /e", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/d/c.txt", strings.NewReader("c"))
			want(t, "PUT into the folder moved away", st, http.StatusConflict, body)
			st, _, body = f.do("PUT", "/e/c.txt", strings.NewReader("c"))
			want(t, "PUT into the folder where it moved", st, http.StatusCreated, body)
			if n, err := f.lookup("/e/c.txt"); err != nil || n.Path != "/e/c.txt" {
				t.Fatalf("c.txt after the move: %+v %v", n, err)
			}
			st, _, body = f.do("DELETE", "/e", nil)
			want(t, "DELETE /e", st, http.StatusNoContent, body)
			st, _, body = f.do("PUT", "/e/d.txt", strings.NewReader("d"))
			want(t, "PUT into the folder deleted", st, http.StatusConflict, body)
			if _, err := f.lookup("/d/c.txt"); err == nil {
				t.Fatal("a PUT into the moved folder's old path stored a file")
			}
		}},

		// Where several refusals apply, the one that answers: a URL
		// that ends in / (409) before the share's role (403), which
		// comes before what the name holds; then a collection there
		// (405), a missing parent (409), the If headers (412),
		// locked_extensions (403) and a lock (423).
		{"which refusal comes first", func(t *testing.T) {
			f := newRefusalWorld(t)
			noMatch := []string{"If-Match", `"nope"`}
			f.checkRefusals(t, []refusal{
				{"PUT", "/Team/a.txt/", nil, http.StatusConflict},
				{"PUT", "/Team/new.txt/", nil, http.StatusConflict},
				{"PUT", "/Team/a.txt", nil, http.StatusForbidden},
				{"PUT", "/Team/dir", nil, http.StatusForbidden},
				{"PUT", "/Team/missing/x.txt", nil, http.StatusForbidden},
				{"PUT", "/alice/f.txt/", noMatch, http.StatusConflict},
				{"PUT", "/alice/locked.txt/", nil, http.StatusConflict},
				{"PUT", "/alice/", nil, http.StatusMethodNotAllowed},
				{"PUT", "/alice/d/", nil, http.StatusMethodNotAllowed},
				{"PUT", "/alice/d", noMatch, http.StatusMethodNotAllowed},
				{"PUT", "/alice/ld", nil, http.StatusMethodNotAllowed},
				{"PUT", "/alice/missing/x.txt", []string{"If-None-Match", "*"}, http.StatusConflict},
				{"PUT", "/alice/f.txt/x.txt", nil, http.StatusConflict},
				{"PUT", "/alice/ld/missing/x.txt", nil, http.StatusConflict},
				{"PUT", "/noroot/x.txt", nil, http.StatusConflict},
				{"PUT", "/new.txt", nil, http.StatusForbidden},
				{"PUT", "/alice/r.lck", noMatch, http.StatusPreconditionFailed},
				{"PUT", "/alice/r.lck", nil, http.StatusForbidden},
				{"PUT", "/alice/lr.lck", nil, http.StatusForbidden},
				{"PUT", "/alice/locked.txt", nil, http.StatusLocked},
				{"PUT", "/alice/ld/y.txt", nil, http.StatusLocked},
				{"PUT", "/alice/ld/new.txt", nil, http.StatusLocked},
			})
		}},

		// A PUT with Content-Range carries part of a file; storing it as the
		// whole file would cut the file to that part. It is refused with 400
		// (RFC 9110 14.5) and the file stays as it was. Formerly
		// TestPartialPutRefused (partialput_test.go).
		{"a PUT with Content-Range is refused", func(t *testing.T) {
			f := newFixture(t)
			whole := strings.Repeat("x", 1000)
			st, _, body := f.do("PUT", "/a.txt", strings.NewReader(whole))
			want(t, "PUT", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/a.txt", strings.NewReader("yyyy"), "Content-Range", "bytes 100-103/1000")
			want(t, "PUT with Content-Range", st, http.StatusBadRequest, body)
			if got, err := f.read("/a.txt"); err != nil || string(got) != whole {
				t.Fatalf("a.txt after a partial PUT: %d bytes, %v", len(got), err)
			}
			st, _, body = f.do("PUT", "/new.txt", strings.NewReader("yyyy"), "Content-Range", "bytes 0-3/1000")
			want(t, "PUT of a new file with Content-Range", st, http.StatusBadRequest, body)
			if _, err := f.lookup("/new.txt"); err == nil {
				t.Fatal("a partial PUT created new.txt")
			}
		}},

		// An excluded extension (403), a file over the maximum size (413) and
		// the space quota (507), declared up front or crossed midway through a
		// chunked body, store nothing; the quota properties count what was
		// stored. Formerly TestPolicyRefusalsStoreNothing (webdav_test.go).
		{"policy refusals store nothing", func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.ExcludedExtensions = ".exe"
			pol.MaxFileSize = 4096
			pol.SpaceQuota = "10000"
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			gone := func(p string) {
				t.Helper()
				if _, err := f.fs.Lookup(context.Background(), f.root.ID, p); !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("%s was stored: %v", p, err)
				}
			}
			st, _, body := f.do("PUT", "/tool.exe", strings.NewReader("MZ"))
			want(t, "excluded extension", st, http.StatusForbidden, body)
			gone("/tool.exe")
			st, _, body = f.do("PUT", "/big.bin", bytes.NewReader(make([]byte, 5000)))
			want(t, "over the maximum file size", st, http.StatusRequestEntityTooLarge, body)
			gone("/big.bin")

			for i := range 2 {
				st, _, body = f.do("PUT", "/f"+strconv.Itoa(i), bytes.NewReader(make([]byte, 4000)))
				want(t, "within quota", st, http.StatusCreated, body)
			}
			st, _, body = f.do("PUT", "/f2", bytes.NewReader(make([]byte, 4000)))
			want(t, "over quota (declared)", st, http.StatusInsufficientStorage, body)
			gone("/f2")
			// Chunked, no Content-Length: the quota is only crossed midway.
			req, _ := http.NewRequest("PUT", f.url("/f3"), io.MultiReader(bytes.NewReader(make([]byte, 2000)), bytes.NewReader(make([]byte, 2000))))
			req.SetBasicAuth("alice", password)
			req.ContentLength = -1
			st, _, body = f.send(req)
			want(t, "over quota midway", st, http.StatusInsufficientStorage, body)
			gone("/f3")
			st, _, body = f.do("PROPFIND", "/", strings.NewReader(`<D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/><D:quota-used-bytes/></D:prop></D:propfind>`), "Depth", "0")
			want(t, "quota PROPFIND", st, http.StatusMultiStatus, body)
			contains(t, body, "<D:quota-used-bytes>8000</D:quota-used-bytes>", "<D:quota-available-bytes>2000</D:quota-available-bytes>")
		}},
	})
}

// TestPutExpectContinue: a PUT sent with Expect: 100-continue that berth
// refuses gets its refusal without a 100 Continue, so the client never
// sends the body (net/http sends 100 Continue at the body's first read).
// Small bodies (vfs.InlineMax or less) were read first and refused in
// their commit. Each row speaks HTTP/1.1 over real TLS: headers first,
// then what comes back, then the body only if told to go on.
func TestPutExpectContinue(t *testing.T) {
	small, large := 5, vfs.InlineMax+1
	rows := []struct {
		name   string
		before func(t *testing.T, f *fixture) // nil: none
		path   string
		size   int
		hdr    []string // further headers, name then value
		status int      // the answer; 201 after a 100 Continue
	}{
		{"no parent folder", nil, "/missing/f.txt", small, nil, http.StatusConflict},
		{"no parent folder, large", nil, "/missing/f.txt", large, nil, http.StatusConflict},
		{"locked file", lockAt("/doc.txt"), "/doc.txt", small, nil, http.StatusLocked},
		{"locked folder, new file", lockAt("/d"), "/d/new.txt", small, nil, http.StatusLocked},
		{"locked file, If-Match", lockAt("/doc.txt"), "/doc.txt", small, []string{"If-Match", "*"}, http.StatusLocked},
		{"locked file, large", lockAt("/doc.txt"), "/doc.txt", large, nil, http.StatusLocked},
		{"stored", nil, "/new.txt", small, nil, http.StatusCreated},
		{"stored, large", nil, "/new.txt", large, nil, http.StatusCreated},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			f := newFixture(t)
			if st, _, body := f.do("MKCOL", "/d", nil); st != http.StatusCreated {
				t.Fatalf("MKCOL: %d %q", st, body)
			}
			if st, _, body := f.do("PUT", "/doc.txt", strings.NewReader("doc")); st != http.StatusCreated {
				t.Fatalf("PUT: %d %q", st, body)
			}
			if row.before != nil {
				row.before(t, f)
			}
			conn := rawPut(t, f, row.path, int64(row.size), row.hdr, "Expect", "100-continue")
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusContinue {
				if row.status != http.StatusCreated {
					t.Fatalf("100 Continue before the refusal (%d): the body was asked for", row.status)
				}
				if _, err := conn.Write(bytes.Repeat([]byte("x"), row.size)); err != nil {
					t.Fatal(err)
				}
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			} else if row.status == http.StatusCreated {
				t.Fatalf("status %d before the body, want 100 Continue", resp.StatusCode)
			}
			body, _ := io.ReadAll(resp.Body)
			want(t, "PUT", resp.StatusCode, row.status, string(body))
		})
	}
}

// lockAt locks p with an exclusive write lock whose token the PUT will
// not present.
func lockAt(p string) func(*testing.T, *fixture) {
	return func(t *testing.T, f *fixture) {
		t.Helper()
		st, _, body := f.do("LOCK", p, strings.NewReader(lockExclusiveOwned))
		want(t, "LOCK "+p, st, http.StatusOK, body)
	}
}

// TestPutCutOff: a PUT whose connection dies partway through its body
// (fewer bytes than its Content-Length) stores nothing: the file keeps
// its revision and contents, a new name stays absent, and the usage and
// fsck are as before. A row per way a PUT is stored: small bodies in one
// commit (plainPut), large ones streamed into chunks, conditional ones
// over the revision they named.
func TestPutCutOff(t *testing.T) {
	small, large := vfs.InlineMax/2, 3<<20
	rows := []struct {
		name       string
		path       string
		size, sent int      // declared, and sent before the connection closes
		hdr        []string // further headers, name then value
	}{
		{"small, new revision", "/keep.bin", small, small / 2, nil},
		{"small, new file", "/new.bin", small, small / 2, nil},
		{"small, headers only", "/keep.bin", small, 0, nil},
		{"small, all but the last byte", "/keep.bin", small, small - 1, nil},
		{"large, new revision", "/keep.bin", large, large / 2, nil},
		{"large, new file", "/new.bin", large, large / 2, nil},
		{"large, all but the last byte", "/keep.bin", large, large - 1, nil},
		{"large, conditional", "/keep.bin", large, large / 2, []string{"If-Match", "*"}},
		{"small, conditional", "/keep.bin", small, small / 2, []string{"If-Match", "*"}},
	}
	orig := make([]byte, 2<<20)
	if _, err := rand.Read(orig); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if st, _, body := f.do("PUT", "/keep.bin", bytes.NewReader(orig)); st != http.StatusCreated {
				t.Fatalf("PUT: %d %q", st, body)
			}
			kept, err := f.lookup("/keep.bin")
			if err != nil {
				t.Fatal(err)
			}
			before, _ := f.fs.Usage(ctx, f.root.ID)

			conn := rawPut(t, f, row.path, int64(row.size), row.hdr)
			if _, err := conn.Write(bytes.Repeat([]byte("x"), row.sent)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the body reaches the handler
			conn.Close()

			// The handler sees the body end early; wait until it is done
			// (a bounded wait: the answer goes nowhere).
			deadline := time.Now().Add(10 * time.Second)
			for {
				got, err := f.read("/keep.bin")
				n, lerr := f.lookup("/keep.bin")
				_, nerr := f.lookup("/new.bin")
				if err != nil || lerr != nil || n.RevisionID != kept.RevisionID || !bytes.Equal(got, orig) {
					t.Fatalf("keep.bin after the cut PUT: revision %d (was %d), %d bytes, equal %v, %v %v",
						n.RevisionID, kept.RevisionID, len(got), bytes.Equal(got, orig), err, lerr)
				}
				if !errors.Is(nerr, vfs.ErrNotExist) {
					t.Fatalf("new.bin after the cut PUT: %v", nerr)
				}
				after, _ := f.fs.Usage(ctx, f.root.ID)
				if after == before {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("usage after the cut PUT: %+v, was %+v", after, before)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if st, _, body := f.do("GET", "/keep.bin", nil); st != http.StatusOK || body != string(orig) {
				t.Fatalf("GET keep.bin: %d, %d bytes", st, len(body))
			}
			time.Sleep(100 * time.Millisecond) // a write still going would show in fsck
			if _, err := f.fs.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if rep, err := f.fs.Fsck(ctx, true); err != nil || !rep.OK() {
				t.Fatalf("fsck: %v %v", rep, err)
			}
		})
	}
}

// rawPut opens a TLS connection to f's server and writes the head of a
// PUT of size bytes to alice's path with hdr (name, value pairs) and
// extra, for a test that sends the body, or not, itself.
func rawPut(t *testing.T, f *fixture, path string, size int64, hdr []string, extra ...string) *tls.Conn {
	t.Helper()
	tr := f.client.Transport.(*http.Transport)
	conn, err := tls.Dial("tcp", f.srv.Listener.Addr().String(), &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	var req strings.Builder
	fmt.Fprintf(&req, "PUT /webdav/alice%s HTTP/1.1\r\nHost: berth\r\nAuthorization: Basic %s\r\nContent-Length: %d\r\n",
		path, base64.StdEncoding.EncodeToString([]byte("alice:"+password)), size)
	for _, h := range [][]string{hdr, extra} {
		for i := 0; i+1 < len(h); i += 2 {
			fmt.Fprintf(&req, "%s: %s\r\n", h[i], h[i+1])
		}
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	return conn
}
