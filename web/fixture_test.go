package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/share"
	"berth/vfs"
	"berth/web"
)

// site is a berth stack with alice's files shared through links, and the
// pages served by an httptest server.
type site struct {
	st     *berthtest.Stack
	shares *share.Service
	alice  account.Caller
	root   vfs.Root
	srv    *httptest.Server
	// file is report.pdf (fileBody), docs a folder holding notes.txt,
	// page.html (with a script) and sub/, sub holding deep.txt.
	file, docs, sub, notes, deep, html vfs.Node
}

const fileBody = "%PDF-1.4 not really a pdf, 48 bytes of content.\n"

func newSite(t testing.TB) *site { return newSiteWith(t, berthtest.Options{}) }

// newSiteWith is newSite over a stack built with o.
func newSiteWith(t testing.TB, o berthtest.Options) *site {
	t.Helper()
	ctx := context.Background()
	st := berthtest.New(t, o)
	p, root, _ := st.AddPerson(t, "alice", "correct horse battery")
	c, err := st.Accounts.Caller(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := &site{st: st, alice: c, root: root,
		shares: share.New(share.Options{FS: st.FS, Accounts: st.Accounts, Store: st.DB})}
	wo := share.WriteOptions(c)
	must := func(n vfs.Node, err error) vfs.Node {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	s.file = must(st.FS.WriteFile(ctx, root.ID, root.FolderID, "report.pdf", strings.NewReader(fileBody), wo))
	s.docs = must(st.FS.Mkdir(ctx, root.ID, root.FolderID, "docs", wo))
	s.notes = must(st.FS.WriteFile(ctx, root.ID, s.docs.ID, "notes.txt", strings.NewReader("<script>alert(1)</script>"), wo))
	s.html = must(st.FS.WriteFile(ctx, root.ID, s.docs.ID, "page.html", strings.NewReader("<html><script>alert(document.cookie)</script></html>"), wo))
	s.sub = must(st.FS.Mkdir(ctx, root.ID, s.docs.ID, "sub", wo))
	s.deep = must(st.FS.WriteFile(ctx, root.ID, s.sub.ID, "deep.txt", strings.NewReader("deep down"), wo))
	s.srv = httptest.NewServer(web.New(web.Options{Share: s.shares, FS: st.FS, Accounts: st.Accounts}))
	t.Cleanup(s.srv.Close)
	return s
}

// link shares item (a folder when dir) with set, and returns its page URL.
func (s *site) link(t testing.TB, item vfs.Node, set share.LinkSettings) (share.Link, string) {
	t.Helper()
	l, err := s.shares.CreateLink(context.Background(), s.alice, s.root.ID, item.ID, item.Dir, set)
	if err != nil {
		t.Fatal(err)
	}
	return l, s.srv.URL + web.Prefix + l.Hash
}

// mkfiles writes n empty files into a new folder and returns it.
func (s *site) mkfiles(t testing.TB, name string, n int) vfs.Node {
	t.Helper()
	ctx := context.Background()
	wo := share.WriteOptions(s.alice)
	d, err := s.st.FS.Mkdir(ctx, s.root.ID, s.root.FolderID, name, wo)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.st.FS.WriteFile(ctx, s.root.ID, d.ID, fmt.Sprintf("f%03d.txt", i), strings.NewReader("x"), wo); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

// getWith is get with the request headers given.
func getWith(t *testing.T, url string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkBody fails t for each of want that body lacks and each of absent
// that it holds.
func checkBody(t *testing.T, body string, want, absent []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("body lacks %q:\n%.600s", w, body)
		}
	}
	for _, w := range absent {
		if strings.Contains(body, w) {
			t.Errorf("body has %q:\n%.600s", w, body)
		}
	}
}
