package web_test

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"berth/share"
	"berth/web"
)

// TestPageWalk is the share-link pages' share of the permission walk
// (rest/sharelink_walk_test.go walks the API): a folder link's page, its
// zip, a file's download and the upload, asked with no session and with
// the session of each subscriber (every combination of read, write and
// delete), of a person of the same organization who is not subscribed
// and of the creator, by the link's hash, a subscriber's hash, a wrong
// hash and the link's id, for login_required, anon_edit and the link's
// read and write access each on and off. What each gets is computed by
// pageExpect from docs/api.md ("Share links", "Share-link pages"); a
// refusal changes neither the folder nor the counters.
func TestPageWalk(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	subs := []string{"s000", "s001", "s010", "s011", "s100", "s101", "s110", "s111"}
	flags := func(name string) (read, write bool) { return name[1] == '1', name[2] == '1' }
	tokens := map[string]string{}
	ids := map[string]uint64{}
	for _, who := range append(slices.Clone(subs), "same", "creator") {
		id := s.alice.Person.ID
		if who != "creator" {
			p, _, _ := s.st.AddPerson(t, who, "correct horse battery")
			id = p.ID
		}
		toks, err := s.st.Accounts.IssueTokens(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		tokens[who], ids[who] = toks.AccessToken, id
	}
	type caller struct{ who, ref, hashOf string } // who "": no session
	var callers []caller
	for _, sb := range subs {
		callers = append(callers, caller{who: sb, ref: "own"}, caller{who: sb, ref: "link"}, caller{ref: "own", hashOf: sb})
	}
	callers = append(callers, caller{ref: "link"}, caller{ref: "wrong"}, caller{ref: "id"},
		caller{who: "same", ref: "link"}, caller{who: "creator", ref: "link"}, caller{who: "creator", ref: "id"})
	routes := []string{"page", "zip", "file", "upload"}

	// pageExpect is the model: no page by id or a wrong hash (404); a
	// login_required link only for a session of the creator or a
	// subscriber (401, the sign-in form); the flags of the hash used,
	// except a subscriber signed in to a login_required link, who has
	// their own; reading for the zip and the file, writing (and a member,
	// or anon_edit) for the upload, else 403.
	pageExpect := func(login, anon, read, write bool, route string, c caller) (int, bool, bool) {
		member := c.who != "" && c.who != "same"
		switch {
		case c.ref == "wrong", c.ref == "id":
			return 404, false, false
		case login && !member:
			return 401, false, false
		}
		switch {
		case login && c.who != "creator":
			read, write = flags(c.who)
		case c.ref == "own":
			read, write = flags(c.hashOf + c.who)
		}
		canWrite := write && (member || anon)
		switch {
		case route == "page":
			return 200, read, canWrite
		case route == "upload" && !canWrite, route != "upload" && !read:
			return 403, read, canWrite
		case route == "upload":
			return 303, read, canWrite
		}
		return 200, read, canWrite
	}

	tree := func(folder uint64) string {
		var b strings.Builder
		var walk func(id uint64)
		walk = func(id uint64) {
			kids, _, err := s.st.FS.List(ctx, s.root.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range kids {
				fmt.Fprintf(&b, "%s %d\n", n.Path, n.RevisionID)
				if n.Dir {
					walk(n.ID)
				}
			}
		}
		walk(folder)
		return b.String()
	}
	const csrf = "walkwalkwalkwalkwalkwalk"
	rows, seq := 0, 0
	for _, login := range []bool{false, true} {
		for _, anon := range []bool{false, true} {
			for _, on := range []bool{true, false} {
				wo := share.WriteOptions(s.alice)
				seq++
				dir, err := s.st.FS.Mkdir(ctx, s.root.ID, s.root.FolderID, fmt.Sprintf("walk%d", seq), wo)
				if err != nil {
					t.Fatal(err)
				}
				inner, err := s.st.FS.WriteFile(ctx, s.root.ID, dir.ID, "inner.txt", strings.NewReader("inner"), wo)
				if err != nil {
					t.Fatal(err)
				}
				l, _ := s.link(t, dir, share.LinkSettings{LoginRequired: &login, AnonEdit: &anon, ReadAccess: &on, WriteAccess: &on})
				hashes := map[string]string{}
				for _, sb := range subs {
					r, w := flags(sb)
					d := sb[3] == '1'
					got, err := s.shares.AddSubscriber(ctx, s.alice, l.ID, share.Subscriber{Kind: "person", SubjectID: ids[sb],
						ReadAccess: r, WriteAccess: w, DeleteAccess: d})
					if err != nil {
						t.Fatal(err)
					}
					hashes[sb] = got.Hash
				}
				counts := func() (int64, int64) {
					m, err := s.shares.ManagedLink(ctx, s.alice, strconv.FormatUint(l.ID, 10))
					if err != nil {
						t.Fatal(err)
					}
					return m.TimesDownloaded, m.TimesViewed
				}
				for _, route := range routes {
					for _, c := range callers {
						rows++
						ref := map[string]string{"link": l.Hash, "own": hashes[c.hashOf+c.who],
							"wrong": "wrongwrongwrongwrongwron", "id": strconv.FormatUint(l.ID, 10)}[c.ref]
						label := fmt.Sprintf("login=%t anon_edit=%t access=%t | %s | %s/%s%s", login, anon, on, route, c.who, c.ref, c.hashOf)
						status, read, canWrite := pageExpect(login, anon, on, on, route, c)
						base := s.srv.URL + web.Prefix + ref
						var req *http.Request
						switch route {
						case "page":
							req, _ = http.NewRequest(http.MethodGet, base, nil)
						case "zip":
							req, _ = http.NewRequest(http.MethodGet, base+"/download", nil)
						case "file":
							req, _ = http.NewRequest(http.MethodGet, base+"/file/"+strconv.FormatUint(inner.ID, 10), nil)
						case "upload":
							var b bytes.Buffer
							mw := multipart.NewWriter(&b)
							mw.WriteField("csrf", csrf)
							fw, _ := mw.CreateFormFile("file", fmt.Sprintf("up%d.txt", rows))
							fw.Write([]byte("up"))
							mw.Close()
							req, _ = http.NewRequest(http.MethodPost, base+"/upload", &b)
							req.Header.Set("Content-Type", mw.FormDataContentType())
						}
						req.AddCookie(&http.Cookie{Name: "berth_csrf", Value: csrf})
						if c.who != "" {
							req.AddCookie(&http.Cookie{Name: "berth_link", Value: tokens[c.who]})
						}
						before := tree(dir.ID)
						dl, vw := counts()
						resp, err := noRedirect.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						body := readAll(t, resp)
						if resp.StatusCode != status {
							t.Errorf("%s: %d, want %d: %.200s", label, resp.StatusCode, status, body)
							continue
						}
						dl2, vw2 := counts()
						wantDl, wantVw := int64(0), int64(0)
						switch {
						case status >= 400:
							if got := tree(dir.ID); got != before {
								t.Errorf("%s: refused, yet the folder changed:\n%s", label, got)
							}
						case route == "page":
							wantVw = 1
							if strings.Contains(body, `id="zip"`) != read || strings.Contains(body, `id="upload"`) != canWrite {
								t.Errorf("%s: the page offers zip %t and upload %t, want %t and %t", label,
									strings.Contains(body, `id="zip"`), strings.Contains(body, `id="upload"`), read, canWrite)
							}
						case route == "upload":
							if !strings.Contains(tree(dir.ID), fmt.Sprintf("up%d.txt", rows)) {
								t.Errorf("%s: %d, yet nothing was uploaded", label, status)
							}
						default:
							wantDl = 1
						}
						if dl2-dl != wantDl || vw2-vw != wantVw {
							t.Errorf("%s: counted %d downloads and %d views, want %d and %d", label, dl2-dl, vw2-vw, wantDl, wantVw)
						}
					}
				}
			}
		}
	}
	t.Logf("%d rows", rows)
}

// noRedirect shows a 303 as it is.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
