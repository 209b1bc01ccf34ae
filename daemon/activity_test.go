package daemon

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/activity"
	"berth/berthtest"
	"berth/config"
	"berth/vfs"
	"context"
)

// activityRec is the part of an activity object the tests check.
type activityRec struct {
	ID             uint64  `json:"id"`
	TypeID         uint64  `json:"activity_type_id"`
	ActorType      string  `json:"actor_type"`
	ActorPersonID  *uint64 `json:"actor_person_id"`
	ActorCompanyID *uint64 `json:"actor_company_id"`
	ActedOnRootID  *uint64 `json:"acted_on_root_id"`
	ActedOnPerson  *uint64 `json:"acted_on_person_id"`
	ActedOnText    string  `json:"acted_on_text"`
	ActorText      string  `json:"actor_text"`
	DataText       *string `json:"data_text"`
}

// personActivity returns the whole activity of person id, oldest first.
func (lc *lcClient) personActivity(id uint64) []activityRec {
	lc.t.Helper()
	var all []activityRec
	for offset := 0; ; offset += 100 {
		st, body := lc.do(http.MethodGet, fmt.Sprintf("/api/2/person/%d/activity?offset=%d", id, offset), nil, "")
		var page struct {
			Total   int           `json:"total"`
			Results []activityRec `json:"results"`
		}
		if st != 200 || json.Unmarshal(body, &page) != nil {
			lc.t.Fatalf("activity: %d %s", st, body)
		}
		all = append(all, page.Results...)
		if len(page.Results) == 0 || len(all) >= page.Total {
			break
		}
	}
	slices.Reverse(all)
	return all
}

// TestActivityOfEveryChange: every change to files over REST and WebDAV
// is one record naming its actor and the root; a login, a failed login
// and a lockout are recorded; the records of acknowledged changes are
// there after a SIGKILL.
func TestActivityOfEveryChange(t *testing.T) {
	bin, data, p, lc := runningDaemon(t, "--lockout-max-failures", "2", "--lockout-duration", "2s")
	var me struct {
		ID        uint64 `json:"id"`
		CompanyID uint64 `json:"company_id"`
	}
	if st, body := lc.do(http.MethodGet, "/api/2/person", nil, ""); st != 200 || json.Unmarshal(body, &me) != nil {
		t.Fatalf("person: %d %s", st, body)
	}
	form := func(path string, v url.Values) {
		t.Helper()
		if st, body := lc.do(http.MethodPost, path, strings.NewReader(v.Encode()), "application/x-www-form-urlencoded"); st != 200 {
			t.Fatalf("POST %s: %d %s", path, st, body)
		}
	}
	dav := func(method, path string, body string, want int, headers ...string) []byte {
		t.Helper()
		st, b, err := lc.dav(method, path, strings.NewReader(body), headers...)
		if err != nil || st != want {
			t.Fatalf("%s %s: %d %s %v, want %d", method, path, st, b, err, want)
		}
		return b
	}
	upload := func(name string, dav bool) {
		t.Helper()
		if st, err := lc.upload(name, []byte("contents of "+name), dav); err != nil || st/100 != 2 {
			t.Fatalf("upload %s: %d %v", name, st, err)
		}
	}
	root := lc.root
	// REST.
	form(fmt.Sprintf("/api/2/files/%d/create_folder", root), url.Values{"name": {"D"}})
	upload("a.txt", false)
	upload("a.txt", false)
	a := lc.fileID("a.txt")
	d := lc.fileID("D")
	form(fmt.Sprintf("/api/2/files/%d/%d/rename", root, a), url.Values{"name": {"b.txt"}})
	form(fmt.Sprintf("/api/2/files/%d/%d/move", root, a), url.Values{"folder_id": {fmt.Sprint(d)}})
	form(fmt.Sprintf("/api/2/files/%d/%d/lock", root, a), nil)
	form(fmt.Sprintf("/api/2/files/%d/%d/unlock", root, a), nil)
	form(fmt.Sprintf("/api/2/files/%d/%d/delete", root, a), nil)
	// WebDAV.
	dav("MKCOL", "W", "", 201)
	upload("w.txt", true)
	upload("w.txt", true)
	dav("MOVE", "w.txt", "", 201, "Destination", lc.base+"/webdav/admin/x.txt")
	dav("MOVE", "x.txt", "", 201, "Destination", lc.base+"/webdav/admin/W/x.txt")
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	st, _, err := lc.dav("LOCK", "W/x.txt", strings.NewReader(lockBody), "Timeout", "Second-60")
	if err != nil || st != 200 {
		t.Fatalf("LOCK: %d %v", st, err)
	}
	// The lock's token, from lockdiscovery.
	pf := dav("PROPFIND", "W/x.txt", `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>`, 207, "Depth", "0")
	token := lockToken(t, pf)
	dav("UNLOCK", "W/x.txt", "", 204, "Lock-Token", "<"+token+">")
	dav("DELETE", "W/x.txt", "", 204)

	// Acknowledged, so recorded: kill without a chance to flush anything.
	p.kill(t)
	p = startDaemon(t, bin, data, "--lockout-max-failures", "2", "--lockout-duration", "2s")
	lc = newLCClient(t, p, data)

	fileOps := map[uint64]string{}
	for _, op := range []vfs.Op{vfs.OpMkdir, vfs.OpWrite, vfs.OpRename, vfs.OpMove, vfs.OpDelete, vfs.OpLock, vfs.OpUnlock, vfs.OpCopy, vfs.OpPurge} {
		typ, _ := activity.TypeNamed(string(op))
		fileOps[typ.ID] = string(op)
	}
	var got []string
	logins := 0
	for _, r := range lc.personActivity(me.ID) {
		if typ, _ := activity.TypeNamed(account.ActLogin); r.TypeID == typ.ID {
			logins++
			continue
		}
		op, ok := fileOps[r.TypeID]
		if !ok {
			continue
		}
		got = append(got, op)
		if r.ActorType != "person" || r.ActorPersonID == nil || *r.ActorPersonID != me.ID || r.ActorCompanyID == nil || *r.ActorCompanyID != me.CompanyID ||
			r.ActedOnRootID == nil || *r.ActedOnRootID != uint64(root) || r.ActedOnPerson == nil || *r.ActedOnPerson != me.ID {
			t.Errorf("%s record %+v: want actor person %d of %d on root %d of person %d", op, r, me.ID, me.CompanyID, root, me.ID)
		}
	}
	want := []string{
		"mkdir", "write", "write", "rename", "move", "lock", "unlock", "delete", // REST
		"mkdir", "write", "write", "move", "move", "lock", "unlock", "delete", // WebDAV
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("file records:\n got %v\nwant %v", got, want)
	}
	// The first run's, this test's two and WebDAV's Basic sign-in (its
	// credentials are then remembered).
	if logins < 3 {
		t.Errorf("%d login records, want at least 3", logins)
	}

	// Failed logins, then the lockout; read once the lock is over.
	for range 2 {
		resp, err := lc.c.PostForm(lc.base+"/oauth/token", url.Values{"grant_type": {"password"}, "client_id": {"anchor"},
			"username": {"admin"}, "password": {"wrong"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	time.Sleep(2500 * time.Millisecond)
	counts := map[string]int{}
	for _, r := range lc.personActivity(me.ID) {
		for _, name := range []string{account.ActLoginFailed, account.ActAccountLocked} {
			if typ, _ := activity.TypeNamed(name); typ.ID == r.TypeID {
				counts[name]++
			}
		}
	}
	if counts[account.ActLoginFailed] != 2 || counts[account.ActAccountLocked] != 1 {
		t.Errorf("failed logins and lockouts recorded: %v, want 2 and 1", counts)
	}
}

// TestActivityWhoAndWhat: a record names who made the change and the
// item as it was. A rename or move was recorded with the new name as both
// acted_on_text and data_text, so the log never said which item was
// renamed; a write through a share link was recorded as its creator's,
// whoever wrote, so an anonymous upload read as the creator's own.
func TestActivityWhoAndWhat(t *testing.T) {
	_, _, _, lc := runningDaemon(t)
	var me struct {
		ID        uint64 `json:"id"`
		CompanyID uint64 `json:"company_id"`
	}
	if st, body := lc.do(http.MethodGet, "/api/2/person", nil, ""); st != 200 || json.Unmarshal(body, &me) != nil {
		t.Fatalf("person: %d %s", st, body)
	}
	root := lc.root
	ok := func(st int, b []byte) []byte {
		t.Helper()
		if st/100 != 2 {
			t.Fatalf("%d %s", st, b)
		}
		return b
	}
	multipartFile := func(name string) (io.Reader, string) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", name)
		fw.Write([]byte("contents of " + name))
		mw.Close()
		return &body, mw.FormDataContentType()
	}
	ok(lc.form(http.MethodPost, fmt.Sprintf("/api/2/files/%d/create_folder", root), url.Values{"name": {"Drop"}}))
	if st, err := lc.upload("before.txt", []byte("x"), false); err != nil || st != 200 {
		t.Fatalf("upload: %d %v", st, err)
	}
	ok(lc.form(http.MethodPost, fmt.Sprintf("/api/2/files/%d/%d/rename", root, lc.fileID("before.txt")), url.Values{"name": {"after.txt"}}))
	if st, b, err := lc.dav("MOVE", "after.txt", nil, "Destination", lc.base+"/webdav/admin/Drop/moved.txt"); err != nil || st != 201 {
		t.Fatalf("MOVE: %d %s %v", st, b, err)
	}
	var link struct {
		Hash string `json:"hash"`
	}
	b := ok(lc.form(http.MethodPost, fmt.Sprintf("/api/2/files/%d/folder/%d/share", root, lc.fileID("Drop")),
		url.Values{"write_access": {"true"}, "anon_edit": {"true"}}))
	if json.Unmarshal(b, &link) != nil || link.Hash == "" {
		t.Fatalf("share: %s", b)
	}
	body, ct := multipartFile("anon.txt")
	ok(lc.send(http.MethodPost, "/api/2/sharelinks/"+link.Hash+"/files/upload", body, "Content-Type", ct))
	body, ct = multipartFile("mine.txt")
	ok(lc.send(http.MethodPost, "/api/2/sharelinks/"+link.Hash+"/files/upload", body, "Content-Type", ct, "Authorization", "Bearer "+lc.token))
	// A person of another organization, signed in, who is no
	// subscriber: a visitor, named, but not indexed under their
	// organization, which has no part in the root.
	var child struct {
		ID int `json:"id"`
	}
	b = ok(lc.form(http.MethodPost, fmt.Sprintf("/api/2/organization/%d/organizations/create", me.CompanyID), url.Values{"name": {"Elsewhere"}}))
	if json.Unmarshal(b, &child) != nil || child.ID == 0 {
		t.Fatalf("organization: %s", b)
	}
	bob := lc.newUser("bob", child.ID, nil)
	bobToken, st, msg := lc.tokenFor(bob.login, bob.password)
	if st != 200 {
		t.Fatalf("bob's token: %d %s", st, msg)
	}
	body, ct = multipartFile("bobs.txt")
	ok(lc.send(http.MethodPost, "/api/2/sharelinks/"+link.Hash+"/files/upload", body, "Content-Type", ct, "Authorization", "Bearer "+bobToken))
	for _, r := range lc.personActivity(uint64(bob.id)) {
		if r.ActedOnText == "bobs.txt" {
			t.Errorf("bob's upload through the link is in his own list: %+v", r)
		}
	}

	byText := map[string]activityRec{}
	for _, r := range lc.personActivity(me.ID) {
		byText[fmt.Sprint(r.TypeID, " ", r.ActedOnText)] = r
	}
	type want struct {
		op, actedOn, data string
		actorType         string
		byMe              bool
		actorText         string // "": not checked
	}
	for _, w := range []want{
		{"rename", "before.txt", "after.txt", "person", true, ""},
		{"move", "after.txt", "from /after.txt to /Drop/moved.txt", "person", true, ""},
		{"write", "anon.txt", "20 bytes", "sharelink", false, "a visitor of share link 1"},
		{"write", "mine.txt", "20 bytes", "person", true, ""},
		{"write", "bobs.txt", "20 bytes", "sharelink", false, "bob, a visitor of share link 1"},
	} {
		typ, _ := activity.TypeNamed(w.op)
		r, found := byText[fmt.Sprint(typ.ID, " ", w.actedOn)]
		if !found {
			t.Errorf("no %s record of %q among %v", w.op, w.actedOn, slices.Collect(maps.Keys(byText)))
			continue
		}
		if r.DataText == nil || *r.DataText != w.data {
			t.Errorf("%s of %q: data_text %q, want %q", w.op, w.actedOn, *cmp.Or(r.DataText, new(string)), w.data)
		}
		if w.actorText != "" && r.ActorText != w.actorText {
			t.Errorf("%s of %q: actor_text %q, want %q", w.op, w.actedOn, r.ActorText, w.actorText)
		}
		byMe := r.ActorPersonID != nil && *r.ActorPersonID == me.ID
		if r.ActorType != w.actorType || byMe != w.byMe || r.ActorCompanyID == nil || *r.ActorCompanyID != me.CompanyID {
			t.Errorf("%s of %q: actor %s person %v of %v, want %s (by the creator: %v) of %d",
				w.op, w.actedOn, r.ActorType, r.ActorPersonID, r.ActorCompanyID, w.actorType, w.byMe, me.CompanyID)
		}
	}

	// A change of one's own password alone is one record: it was two,
	// a person_updated that changed nothing before the password_changed.
	newPassword := lc.password + "-new"
	ok(lc.form(http.MethodPost, fmt.Sprintf("/api/2/person/%d/update", me.ID), url.Values{"password": {newPassword}, "current_password": {lc.password}}))
	lc.password = newPassword
	lc.token = lc.login()
	counts := map[uint64]int{}
	for _, r := range lc.personActivity(me.ID) {
		counts[r.TypeID]++
	}
	changed, _ := activity.TypeNamed(account.ActPasswordChanged)
	updated, _ := activity.TypeNamed(account.ActPersonUpdated)
	if counts[changed.ID] != 1 || counts[updated.ID] != 0 {
		t.Errorf("a password change: %d password_changed, %d person_updated records; want 1 and 0", counts[changed.ID], counts[updated.ID])
	}
}

// TestActivityTypesCoverChanges: every account change name (account's
// Act constants) and every vfs operation that changes something has an
// activity type, or the change would fail at its record. Read from the
// source, so a name added in either package fails here first.
func TestActivityTypesCoverChanges(t *testing.T) {
	root := berthtest.ModuleRoot(t)
	for _, c := range []struct{ dir, prefix string }{{"account", "Act"}, {"vfs", "Op"}} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, c.dir), func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pkg := range pkgs {
			for _, f := range pkg.Files {
				for _, d := range f.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok || g.Tok != token.CONST {
						continue
					}
					for _, s := range g.Specs {
						vs := s.(*ast.ValueSpec)
						for i, id := range vs.Names {
							if !strings.HasPrefix(id.Name, c.prefix) || !id.IsExported() || i >= len(vs.Values) {
								continue
							}
							lit, ok := vs.Values[i].(*ast.BasicLit)
							if !ok || lit.Kind != token.STRING || id.Name == "OpRead" {
								continue
							}
							n++
							name, _ := strconv.Unquote(lit.Value)
							if _, ok := activity.TypeNamed(name); !ok {
								t.Errorf("%s.%s (%q) has no activity type (activity/types.go)", c.dir, id.Name, name)
							}
						}
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("found no %s constants in %s", c.prefix, c.dir)
		}
	}
}

// TestJournalRootOwners: the file journal's roots' owners are kept
// (account.Service.RootOwnerOf) only while no commit outside Content came
// between. A root's change made before its owner was recorded names
// none, every change after names the owner, the first read and the next
// kept, and an owner recorded after a change that found none is seen at
// the next.
func TestJournalRootOwners(t *testing.T) {
	ctx := context.Background()
	_, log, st, root := openSpaceStores(t) // the root has no owner yet
	defer func() { st.close(log) }()
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	org, err := accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "O"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org.ID, Username: "alice",
		Email: "alice@example.com", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		t.Helper()
		if _, err := st.files.WriteFile(ctx, root.ID, root.FolderID, name, strings.NewReader(name), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	named := func() []string {
		t.Helper()
		recs, _, err := st.activity.Person(ctx, p.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			if r.ActedOnType == "file" {
				if r.ActedOnCompanyID != org.ID {
					t.Errorf("%s names organization %d, want %d", r.ActedOnText, r.ActedOnCompanyID, org.ID)
				}
				out = append(out, r.ActedOnText)
			}
		}
		slices.Sort(out)
		return out
	}
	write("before.txt")
	write("before2.txt")
	if _, err := accounts.AddRoot(ctx, account.RootOwner{RootID: root.ID, PersonID: p.ID, Type: "sync"}); err != nil {
		t.Fatal(err)
	}
	write("first.txt")
	write("second.txt")
	write("third.txt")
	if got, want := named(), []string{"first.txt", "second.txt", "third.txt"}; !slices.Equal(got, want) {
		t.Fatalf("changes naming the owner: %q, want %q", got, want)
	}
}

// TestLockBreakActivity: a forced unlock is recorded as an unlock by its
// actor with "forced unlock" and, for each lock it ended (the item's and
// a folder's deep lock above it), who held it: it was recorded as a plain
// unlock by the caller, who never held the lock.
func TestLockBreakActivity(t *testing.T) {
	ctx := context.Background()
	_, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	org, err := accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "O"})
	if err != nil {
		t.Fatal(err)
	}
	person := func(name string) account.Person {
		t.Helper()
		p, err := accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org.ID, Username: name, DisplayName: strings.ToUpper(name),
			Email: name + "@example.com", Password: "correct horse battery"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	alice, bob, carol := person("alice"), person("bob"), person("carol")
	if _, err := accounts.AddRoot(ctx, account.RootOwner{RootID: root.ID, PersonID: alice.ID, Type: "sync"}); err != nil {
		t.Fatal(err)
	}
	d, err := st.files.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := st.files.WriteFile(ctx, root.ID, d.ID, "f.txt", strings.NewReader("f"), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		id  uint64
		who account.Person
		dav bool
	}{{d.ID, bob, true}, {f.ID, carol, false}} {
		if _, err := st.files.Lock(ctx, root.ID, l.id, vfs.LockRequest{Holder: l.who.Principal(), Shared: true, Deep: true, TokenRequired: l.dav}); err != nil {
			t.Fatal(err)
		}
	}
	ac, err := accounts.Caller(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.files.ForceUnlock(account.WithActor(ctx, ac.Actor()), root.ID, f.ID); err != nil {
		t.Fatal(err)
	}
	got := activityOf(t, st, alice.ID, vfs.OpUnlock, func(r activity.Record) string {
		if r.ActorPersonID != alice.ID {
			t.Errorf("%+v: want alice's", r)
		}
		return r.ActedOnText + ": " + r.ActionText + ", " + r.DataText
	})
	want := []string{"d: forced unlock, held by BOB (bob), over WebDAV", "f.txt: forced unlock, held by CAROL (carol)"}
	if !slices.Equal(got, want) {
		t.Errorf("unlock records:\n got %q\nwant %q", got, want)
	}
}

// activityOf is each of person's activity records of op as text says
// it, sorted.
func activityOf(t *testing.T, st *stores, person uint64, op vfs.Op, text func(activity.Record) string) []string {
	t.Helper()
	recs, _, err := st.activity.Person(context.Background(), person, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	typ, _ := activity.TypeNamed(string(op))
	var got []string
	for _, r := range recs {
		if r.ActivityTypeID == typ.ID {
			got = append(got, text(r))
		}
	}
	slices.Sort(got)
	return got
}

// TestPurgeActivity: the purge of a deleted item is recorded by the
// system with the item's name and kind: it read "file <id>" for a file
// and a folder alike, so the log never said what was purged.
func TestPurgeActivity(t *testing.T) {
	ctx := context.Background()
	_, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	org, err := accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "O"})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org.ID, Username: "alice",
		Email: "alice@example.com", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.AddRoot(ctx, account.RootOwner{RootID: root.ID, PersonID: alice.ID, Type: "sync"}); err != nil {
		t.Fatal(err)
	}
	d, err := st.files.Mkdir(ctx, root.ID, root.FolderID, "Reports", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.files.WriteFile(ctx, root.ID, d.ID, "inside.txt", strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "salary.xlsx", strings.NewReader("x"), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{d.ID, f.ID} {
		if err := st.files.Delete(ctx, root.ID, id, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.files.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := activityOf(t, st, alice.ID, vfs.OpPurge, func(r activity.Record) string {
		return r.ActorType + " purged " + r.ActedOnType + " " + r.ActedOnText
	})
	want := []string{"system purged file salary.xlsx", "system purged folder Reports"}
	if !slices.Equal(got, want) {
		t.Errorf("purge records:\n got %q\nwant %q", got, want)
	}
}

// TestPruneActivityAtStart: the daemon's activity job removes, as it
// starts, the records older than an activity.retention lowered since
// they were written (here from forever to an hour), and keeps the newer
// ones: the TTL of each was set when it was written, none for these.
func TestPruneActivityAtStart(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Storage.Reserve = 0
	cfg.Activity.Retention = 0
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	note, _ := activity.TypeNamed(activity.Note)
	for _, age := range []time.Duration{72 * time.Hour, 2 * time.Hour, time.Minute} {
		if _, err := st.activity.Create(ctx, activity.Record{ActorType: "system", ActedOnType: "organization", ActedOnCompanyID: 1,
			ActivityTypeID: note.ID, Created: time.Now().Add(-age)}); err != nil {
			t.Fatal(err)
		}
	}
	st.close(log)

	cfg.Activity.Retention = time.Hour
	if st, err = openStores(ctx, cfg, log, nil); err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	jctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); pruneActivity(jctx, time.Hour, st, log) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, total, err := st.activity.Organization(ctx, 1, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if total == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records after the start's prune, want the one within the hour", total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}
