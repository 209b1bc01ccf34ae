package webdav_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/vfs"
)

const propfindAll = `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`

func TestGateRefusesEveryMethod(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.WebDAVEnabled = false
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	for _, m := range []string{"OPTIONS", "GET", "PROPFIND", "PUT", "LOCK"} {
		st, _, body := f.do(m, "/x", strings.NewReader(""), "Depth", "0")
		want(t, m, st, http.StatusForbidden, body)
		contains(t, body, "WebDAV access is disabled")
	}
}

func TestAuthBasicBearerAndLockout(t *testing.T) {
	f := newFixtureWith(t, fixtureOptions{Lockout: account.LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour}})
	req, _ := http.NewRequest("PROPFIND", f.url("/"), nil)
	req.Header.Set("Depth", "0")
	st, h, body := f.send(req)
	want(t, "no credentials", st, http.StatusUnauthorized, body)
	if !strings.HasPrefix(h.Get("WWW-Authenticate"), `Basic realm="berth"`) {
		t.Fatalf("WWW-Authenticate = %q", h.Get("WWW-Authenticate"))
	}

	req, _ = http.NewRequest("PROPFIND", f.url("/"), nil)
	req.Header.Set("Depth", "0")
	req.Header.Set("Authorization", "Bearer "+f.token)
	st, _, body = f.send(req)
	want(t, "bearer", st, http.StatusMultiStatus, body)

	// Failed Basic logins count toward the account's lockout.
	for i := range 3 {
		req, _ = http.NewRequest("PROPFIND", f.url("/"), nil)
		req.Header.Set("Depth", "0")
		req.SetBasicAuth("alice", "wrong password "+strconv.Itoa(i))
		st, _, body = f.send(req)
		if st != http.StatusUnauthorized && st != http.StatusForbidden {
			t.Fatalf("wrong password %d: status %d %q", i, st, body)
		}
	}
	st, _, body = f.do("PROPFIND", "/", nil, "Depth", "0")
	want(t, "right password after lockout", st, http.StatusForbidden, body)
	contains(t, body, "locked")
	// The same lock holds for the OAuth password grant (REST).
	if _, err := f.accounts.Authenticate(context.Background(), "alice", password); !errors.Is(err, account.ErrAccountLocked) {
		t.Fatalf("REST login after WebDAV lockout: %v, want ErrAccountLocked", err)
	}
}

func TestRESTAndWebDAVShareOneLock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st, _, body := f.do("PUT", "/doc.txt", strings.NewReader("v1"))
	want(t, "PUT", st, http.StatusCreated, body)
	n, err := f.lookup("/doc.txt")
	if err != nil {
		t.Fatal(err)
	}
	// A lock taken the way REST takes it (someone else's) refuses WebDAV writes.
	lk, err := f.fs.Lock(ctx, f.root.ID, n.ID, vfs.LockRequest{Owner: "person:999", Holder: "person:999", Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("v2"))
	want(t, "PUT over a REST lock", st, http.StatusLocked, body)
	st, _, body = f.do("DELETE", "/doc.txt", nil)
	want(t, "DELETE over a REST lock", st, http.StatusLocked, body)
	st, _, body = f.do("PROPFIND", "/doc.txt", strings.NewReader(propfindAll), "Depth", "0")
	want(t, "PROPFIND", st, http.StatusMultiStatus, body)
	contains(t, body, "<D:lockdiscovery><D:activelock>", lk.Token)
	if err := f.fs.Unlock(ctx, f.root.ID, n.ID, lk.Token); err != nil {
		t.Fatal(err)
	}

	// A WebDAV lock shows as locked to REST and refuses writes without its token.
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>`
	st, h, body := f.do("LOCK", "/doc.txt", strings.NewReader(lockBody), "Timeout", "Second-600")
	want(t, "LOCK", st, http.StatusOK, body)
	tok := h.Get("Lock-Token")
	if !strings.HasPrefix(tok, "<urn:uuid:") {
		t.Fatalf("Lock-Token %q is not a urn:uuid URI", tok)
	}
	if n, _ = f.fs.Stat(ctx, f.root.ID, n.ID); !n.Locked() {
		t.Fatal("WebDAV LOCK does not show in vfs (REST's is_locked)")
	}
	if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "doc.txt", strings.NewReader("rest"), vfs.WriteOptions{Principal: "person:" + strconv.FormatUint(f.person.ID, 10)}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("REST-style write over a WebDAV lock: %v, want ErrLocked", err)
	}
	st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("no token"))
	want(t, "PUT without the token", st, http.StatusLocked, body)
	st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("v3"), "If", "("+tok+")")
	want(t, "PUT with the token", st, http.StatusNoContent, body)
	st, _, body = f.do("UNLOCK", "/doc.txt", nil, "Lock-Token", tok)
	want(t, "UNLOCK", st, http.StatusNoContent, body)
	if n, _ = f.fs.Stat(ctx, f.root.ID, n.ID); n.Locked() {
		t.Fatal("still locked after UNLOCK")
	}
}

func TestPolicyRefusalsStoreNothing(t *testing.T) {
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
}

func TestIfMatchAndIfNoneMatch(t *testing.T) {
	f := newFixture(t)
	st, h, body := f.do("PUT", "/a.txt", strings.NewReader("one"))
	want(t, "create", st, http.StatusCreated, body)
	etag := h.Get("ETag")
	n, _ := f.lookup("/a.txt")
	if etag != n.ETag() {
		t.Fatalf("PUT ETag %q, vfs (REST) ETag %q", etag, n.ETag())
	}
	st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-Match", `"r999"`)
	want(t, "PUT If-Match stale", st, http.StatusPreconditionFailed, body)
	st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-None-Match", "*")
	want(t, "PUT If-None-Match *", st, http.StatusPreconditionFailed, body)
	st, _, body = f.do("DELETE", "/a.txt", nil, "If-Match", `"r999"`)
	want(t, "DELETE If-Match stale", st, http.StatusPreconditionFailed, body)
	st, _, body = f.do("MOVE", "/a.txt", nil, "If-Match", `"r999"`, "Destination", f.url("/b.txt"))
	want(t, "MOVE If-Match stale", st, http.StatusPreconditionFailed, body)
	st, _, body = f.do("COPY", "/a.txt", nil, "If-Match", `"r999"`, "Destination", f.url("/b.txt"))
	want(t, "COPY If-Match stale", st, http.StatusPreconditionFailed, body)
	if b, _ := f.read("/a.txt"); string(b) != "one" {
		t.Fatalf("contents changed to %q", b)
	}
	st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-Match", etag)
	want(t, "PUT If-Match current (overwrite)", st, http.StatusNoContent, body)
	st, _, body = f.do("PUT", "/new.txt", strings.NewReader("x"), "If-None-Match", "*")
	want(t, "PUT If-None-Match * on a new name", st, http.StatusCreated, body)
}

func TestNonASCIIAndSpaceNames(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("MKCOL", "/dir%20with%20space", nil)
	want(t, "MKCOL", st, http.StatusCreated, body)
	name := "/dir%20with%20space/na%C3%AFve%20%E2%82%AC%20%F0%9F%98%80.txt"
	st, _, body = f.do("PUT", name, strings.NewReader("unicode"))
	want(t, "PUT", st, http.StatusCreated, body)
	if b, err := f.read("/dir with space/naïve € 😀.txt"); err != nil || string(b) != "unicode" {
		t.Fatalf("vfs read: %q, %v", b, err)
	}
	st, _, body = f.do("PROPFIND", "/dir%20with%20space/", nil, "Depth", "1")
	want(t, "PROPFIND", st, http.StatusMultiStatus, body)
	contains(t, body, "<D:href>/webdav/alice"+name+"</D:href>", "<D:displayname>naïve € 😀.txt</D:displayname>")
	st, _, body = f.do("GET", name, nil)
	want(t, "GET", st, http.StatusOK, body)
	st, _, body = f.do("MOVE", name, nil, "Destination", f.url("/%C3%A9t%C3%A9.txt"))
	want(t, "MOVE", st, http.StatusCreated, body)
	if b, err := f.read("/été.txt"); err != nil || string(b) != "unicode" {
		t.Fatalf("after MOVE: %q, %v", b, err)
	}
}

func TestMalformedRequestsChangeNothing(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/p.txt", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)
	set := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:color>red</Z:color></D:prop></D:set></D:propertyupdate>`
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(set))
	want(t, "PROPPATCH", st, http.StatusMultiStatus, body)
	bad := map[string]string{
		"not XML":            `<D:propertyupdate xmlns:D="DAV:"><D:set>`,
		"empty prefix":       `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:color xmlns:Z="">blue</Z:color></D:prop></D:set></D:propertyupdate>`,
		"undeclared prefix":  `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Q:color>blue</Q:color></D:prop></D:set></D:propertyupdate>`,
		"wrong root element": `<D:propfind xmlns:D="DAV:"/>`,
	}
	for what, b := range bad {
		st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(b))
		want(t, "PROPPATCH "+what, st, http.StatusBadRequest, body)
		st, _, body = f.do("PROPFIND", "/p.txt", strings.NewReader(strings.Replace(b, "propertyupdate", "propfind", -1)), "Depth", "0")
		want(t, "PROPFIND "+what, st, http.StatusBadRequest, body)
	}
	n, _ := f.lookup("/p.txt")
	props, err := f.fs.Props(context.Background(), f.root.ID, n.ID)
	if err != nil || len(props) != 1 || string(props["{urn:z}color"]) != "red" {
		t.Fatalf("props after malformed requests: %q, %v", props, err)
	}
	for _, p := range []string{"/a%2Fb", "/x/../p.txt", "/./p.txt"} {
		st, _, body = f.do("GET", p, nil)
		want(t, "path "+p, st, http.StatusBadRequest, body)
	}
	st, _, body = f.do("COPY", "/p.txt", nil, "Destination", f.srv.URL+"/webdav/alice/d%2Fq.txt")
	want(t, "Destination with %2F", st, http.StatusBadRequest, body)
	st, _, body = f.do("MOVE", "/p.txt", nil, "Destination", f.srv.URL+"/webdav/alice/x/../q.txt")
	want(t, "Destination with ..", st, http.StatusBadRequest, body)
}

func TestPropfindDepth(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/a.txt", "/b.txt"} {
		st, _, body := f.do("PUT", p, strings.NewReader("x"))
		want(t, "PUT", st, http.StatusCreated, body)
	}
	st, _, body := f.do("PROPFIND", "/", nil, "Depth", "0")
	want(t, "Depth 0", st, http.StatusMultiStatus, body)
	if c := strings.Count(body, "<D:response>"); c != 1 {
		t.Fatalf("Depth 0: %d responses", c)
	}
	contains(t, body, "<D:resourcetype><D:collection/></D:resourcetype>", "<D:creationdate>")
	st, _, body = f.do("PROPFIND", "/", nil, "Depth", "1")
	want(t, "Depth 1", st, http.StatusMultiStatus, body)
	if c := strings.Count(body, "<D:response>"); c != 3 {
		t.Fatalf("Depth 1: %d responses", c)
	}
	contains(t, body, "<D:getcontenttype>text/plain; charset=utf-8</D:getcontenttype>", "<D:getcontentlength>1</D:getcontentlength>")
	st, _, body = f.do("PROPFIND", "/", nil, "Depth", "infinity")
	want(t, "Depth infinity refused", st, http.StatusForbidden, body)
	contains(t, body, "propfind-finite-depth")

	// The top of the mount lists the roots.
	req, _ := http.NewRequest("PROPFIND", f.srv.URL+"/webdav/", nil)
	req.SetBasicAuth("alice", password)
	req.Header.Set("Depth", "1")
	st, _, body = f.send(req)
	want(t, "roots", st, http.StatusMultiStatus, body)
	contains(t, body, "<D:href>/webdav/</D:href>", "<D:href>/webdav/alice/</D:href>")

	g := newFixtureWith(t, fixtureOptions{InfiniteDepth: true})
	st, _, body = g.do("PROPFIND", "/", nil, "Depth", "infinity")
	want(t, "Depth infinity allowed", st, http.StatusMultiStatus, body)
}

func TestDeadPropsFollowCopyAndMove(t *testing.T) {
	f := newFixture(t)
	f.do("MKCOL", "/d", nil)
	f.do("PUT", "/d/f.txt", strings.NewReader("x"))
	set := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><tag xmlns="urn:t">blue <b xmlns="urn:b">bold</b></tag></D:prop></D:set></D:propertyupdate>`
	st, _, body := f.do("PROPPATCH", "/d/f.txt", strings.NewReader(set))
	want(t, "PROPPATCH", st, http.StatusMultiStatus, body)
	contains(t, body, "HTTP/1.1 200 OK")
	st, _, body = f.do("COPY", "/d", nil, "Destination", f.url("/e"))
	want(t, "COPY", st, http.StatusCreated, body)
	st, _, body = f.do("MOVE", "/e/f.txt", nil, "Destination", f.url("/g.txt"))
	want(t, "MOVE", st, http.StatusCreated, body)
	get := `<D:propfind xmlns:D="DAV:"><D:prop><tag xmlns="urn:t"/><missing xmlns="urn:t"/></D:prop></D:propfind>`
	for _, p := range []string{"/d/f.txt", "/g.txt"} {
		st, _, body = f.do("PROPFIND", p, strings.NewReader(get), "Depth", "0")
		want(t, "PROPFIND "+p, st, http.StatusMultiStatus, body)
		contains(t, body, `<tag xmlns="urn:t">blue <b xmlns="urn:b">bold</b></tag>`, "HTTP/1.1 404 Not Found")
	}
}

func TestWriteReadBackByteIdentical(t *testing.T) {
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
}
