package rest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"berth/account"
	"berth/kv"
	"berth/share"
)

// The share-link permission walk (issue 13, "Done when"): every sharing
// route, asked by every kind of caller, for links with login_required on
// and off, anon_edit on and off and the link's own read and write access
// on and off. What each caller gets is computed by walkExpect from the
// model of docs/api.md ("Share links"), never typed per cell, and a
// refusal is checked to have changed nothing: the shared folder's tree,
// the link's record, its counters.
//
// Cells the model left open, decided from docs/api.md and written there:
// a subscriber let in for who they are (by id, or on a login_required
// link) has their own entry's access, never the link's; a hash usable
// without login gives its own flags to whoever holds it, token or not;
// a token of someone neither creator nor subscriber (an administrator of
// the organization included) counts for nothing, so on a login_required
// link it is 401 access_denied as documented, and by id 404.

// walkFlags are read, write and delete access.
type walkFlags struct{ read, write, del bool }

func (f walkFlags) perm() share.Perm {
	p := share.View
	if f.read {
		p |= share.Read
	}
	if f.write {
		p |= share.Write
	}
	if f.del {
		p |= share.Delete
	}
	return p
}

// walkSubs are the subscribers of every walked link: a person of the
// creator's organization for each combination of read, write and delete
// (named s<r><w><d>), and a guest of that organization with read and write.
var walkSubs = func() []string {
	var out []string
	for i := range 8 {
		out = append(out, fmt.Sprintf("s%d%d%d", i>>2&1, i>>1&1, i&1))
	}
	return append(out, "gsub")
}()

// subFlags are subscriber name's access flags.
func subFlags(name string) walkFlags {
	if name == "gsub" {
		return walkFlags{read: true, write: true}
	}
	return walkFlags{read: name[1] == '1', write: name[2] == '1', del: name[3] == '1'}
}

// walkCaller is one way of asking: whose token (who; "" none) and which
// reference to the link (ref: id, link (its hash), own (the caller's
// subscriber hash, or hashOf's), wrong (a hash of no link)).
type walkCaller struct {
	who, ref string
	hashOf   string // for a caller with no token and ref own: whose hash
}

func (c walkCaller) String() string {
	who := cmp.Or(c.who, "anonymous")
	if c.hashOf != "" {
		return who + "/" + c.hashOf + "'s hash"
	}
	return who + "/" + c.ref
}

// walkCallers: every subscriber with its token by its own hash, the id
// and the link's hash, and its own hash without a token; the creator;
// a person of the same organization who is not subscribed, an
// administrator of it (not subscribed either), one of another
// organization, a guest who is not subscribed and a person whose
// subscription was removed (sgone, also by the hash it had), by hash, by
// id and by a wrong hash; anyone with no token by the link's hash, a
// wrong hash and the id.
// The creator asks last, so that what it may delete is there for the
// others to be refused first.
func walkCallers() []walkCaller {
	var out []walkCaller
	for _, s := range walkSubs {
		out = append(out, walkCaller{who: s, ref: "own"}, walkCaller{who: s, ref: "id"},
			walkCaller{who: s, ref: "link"}, walkCaller{ref: "own", hashOf: s})
	}
	for _, who := range []string{"same", "admin", "other", "gnot", "sgone"} {
		out = append(out, walkCaller{who: who, ref: "link"}, walkCaller{who: who, ref: "id"}, walkCaller{who: who, ref: "wrong"})
	}
	out = append(out, walkCaller{who: "sgone", ref: "own"}, walkCaller{ref: "own", hashOf: "sgone"})
	out = append(out, walkCaller{ref: "link"}, walkCaller{ref: "wrong"}, walkCaller{ref: "id"})
	return append(out, walkCaller{who: "creator", ref: "wrong"}, walkCaller{who: "creator", ref: "link"}, walkCaller{who: "creator", ref: "id"})
}

// walkLinkCase is how a walked link is set.
type walkLinkCase struct {
	folder, login, anon bool
	flags               walkFlags // the link's own read and write access
	expired             bool      // expires is a day gone by
}

func (lc walkLinkCase) String() string {
	kind := "file"
	if lc.folder {
		kind = "folder"
	}
	return fmt.Sprintf("%s login=%t anon_edit=%t read=%t write=%t expired=%t", kind, lc.login, lc.anon, lc.flags.read, lc.flags.write, lc.expired)
}

// Route kinds, by what the model asks of the caller.
const (
	kManage   = iota // the creator's alone (authed: no token 401)
	kGet             // GET of the link: the creator's view, or a user's
	kList            // a use that needs the link opened (View)
	kRead            // a use that needs read access
	kWrite           // a write: write access, and a member or anon_edit
	kNotFound        // a use the link has no such item for: 404 once opened
)

// walkRoute is one sharing route as the walk asks it.
type walkRoute struct {
	name   string
	kind   int
	method string                               // GET, POST, PUT, DELETE, UPLOAD
	path   func(w *walkLink, ref string) string // ref is the id or hash asked with
	form   func(k *walkCast) url.Values
	counts string // download or view: what an allowed use counts
	// gone: an allowed call removes what the path names (DELETE); the
	// walk remakes it for the next caller.
	gone bool
	// lacks: a name the answer must not carry (an item outside the
	// request's reach).
	lacks func(w *walkLink) string
}

// walkExpect is the answer the model gives caller c on route r of link
// lc: a status and, for a refusal, the error code; perm is the access
// the caller uses the link with.
func walkExpect(lc walkLinkCase, r walkRoute, c walkCaller) (status int, code string, perm share.Perm) {
	if r.kind == kManage {
		switch {
		case c.who == "":
			return 401, "access_denied", 0
		case c.who != "creator" || c.ref == "wrong":
			return 404, "not_found", 0
		}
		return 200, "", 0
	}
	if r.kind == kGet && c.who == "creator" && c.ref != "wrong" {
		return 200, "", lc.flags.perm()
	}
	// share.OpenLink: who is the creator or a subscriber (a member)?
	member := c.who == "creator" || c.who != "" && slices.Contains(walkSubs, c.who)
	switch {
	case c.ref == "wrong", c.ref == "own" && cmp.Or(c.hashOf, c.who) == "sgone":
		return 404, "not_found", 0 // no such hash (any more)
	case c.ref == "id" && !member:
		return 404, "not_found", 0 // an id is guessable: members only
	case lc.login && !member:
		return 401, "access_denied", 0
	case lc.expired:
		return 410, "link_expired", 0
	}
	// The access: a hash anyone may hold (login_required off) gives its
	// own flags, the link's or its subscriber's. Where the link is reached
	// by who the caller is (an id, or login_required), a subscriber has
	// their own entry's flags and the creator the link's.
	flags := lc.flags
	switch {
	case c.who != "creator" && member && (c.ref == "id" || lc.login):
		flags = subFlags(c.who)
	case c.ref == "own":
		flags = subFlags(cmp.Or(c.hashOf, c.who))
	}
	perm = flags.perm()
	switch r.kind {
	case kNotFound:
		return 404, "not_found", perm
	case kRead:
		if !perm.Has(share.Read) {
			return 403, "forbidden", perm
		}
	case kWrite:
		if !perm.Has(share.Write) || !member && !lc.anon {
			return 403, "forbidden", perm
		}
	}
	return 200, "", perm
}

// walkCast is the walk's server and people.
type walkCast struct {
	t       *testing.T
	f       *fixture
	shares  *share.Service
	creator account.Caller
	tokens  map[string]string         // who: access token
	people  map[string]account.Person // who: person or guest
	seq     int
}

func (k *walkCast) next() string {
	k.seq++
	return fmt.Sprintf("w%d", k.seq)
}

func newWalkCast(t *testing.T) *walkCast {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t)
	k := &walkCast{t: t, f: f, shares: share.New(share.Options{FS: f.fs, Accounts: f.accounts, Store: f.db}),
		tokens: map[string]string{"creator": f.token}, people: map[string]account.Person{"creator": f.person}}
	srv := httptest.NewUnstartedServer(New(Options{FS: f.fs, Accounts: f.accounts, Share: k.shares}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.srv, f.client = srv, srv.Client()
	var err error
	if k.creator, err = f.accounts.Caller(ctx, f.person.ID); err != nil {
		t.Fatal(err)
	}
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	add := func(who string, p account.Person, err error) {
		if err != nil {
			t.Fatal(err)
		}
		toks, err := f.accounts.IssueTokens(ctx, p.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		k.tokens[who], k.people[who] = toks.AccessToken, p
	}
	person := func(who string, org uint64) {
		p, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org, Username: who,
			Email: who + "@example.com", Password: fixturePassword})
		add(who, p, err)
	}
	for _, s := range walkSubs[:8] {
		person(s, f.org.ID)
	}
	person("same", f.org.ID)
	person("sgone", f.org.ID)
	person("other", other.ID)
	p, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: f.org.ID, Username: "admin",
		Email: "admin@example.com", Password: fixturePassword, Admin: true})
	add("admin", p, err)
	for _, g := range []string{"gsub", "gnot"} {
		p, err := f.accounts.CreateGuest(ctx, account.GuestInput{CreatorID: f.person.ID, OrganizationID: f.org.ID,
			Email: g + "@example.com", FirstName: g})
		add(g, p, err)
	}
	return k
}

// walkLink is a walked link: for a folder link, the folder with a file
// (inner) and a subfolder (sub) holding another; for a file link, the
// file. outside is a file of the same root outside the share.
type walkLink struct {
	lc                    walkLinkCase
	link                  share.Link
	hashes                map[string]string // subscriber name: hash
	victim                uint64            // an email subscriber for the subscriber routes to change
	item, inner, sub      uint64
	outside, top          uint64 // top: the root's top folder, outside the share
	parent                uint64 // a file link's: the file's folder
	innerName, outsideNam string
}

func (k *walkCast) mkdir(parent uint64, name string) uint64 {
	k.t.Helper()
	st, b := k.f.postForm(k.f.at("/api/2/files/%d/folder/%d/create_folder", parent), url.Values{"name": {name}})
	return k.id(st, b)
}

func (k *walkCast) put(parent uint64, name string) uint64 {
	k.t.Helper()
	st, b := k.f.upload(k.f.at("/api/2/files/%d/folder/%d/upload", parent), name, strings.NewReader("walk "+name))
	return k.id(st, b)
}

func (k *walkCast) id(st int, b []byte) uint64 {
	k.t.Helper()
	if st != 200 {
		k.t.Fatalf("%d %s", st, b)
	}
	var v struct {
		ID uint64 `json:"id"`
	}
	decode(k.t, b, &v)
	return v.ID
}

// newLink makes the items and the link of lc, with every walk
// subscriber and a victim.
func (k *walkCast) newLink(lc walkLinkCase) *walkLink {
	k.t.Helper()
	ctx := context.Background()
	top := k.f.root.FolderID
	w := &walkLink{lc: lc, hashes: map[string]string{}, outsideNam: k.next() + "-outside.txt", top: top}
	w.outside = k.put(top, w.outsideNam)
	if lc.folder {
		w.item = k.mkdir(top, k.next())
		w.innerName = k.next() + "-inner.txt"
		w.inner = k.put(w.item, w.innerName)
		w.sub = k.mkdir(w.item, "sub")
		k.put(w.sub, "b.txt")
	} else {
		// The file alone in a folder of its own, which the walk lists.
		w.parent = k.mkdir(top, k.next())
		w.innerName = k.next() + "-file.txt"
		w.item = k.put(w.parent, w.innerName)
		w.inner = w.item
	}
	set := share.LinkSettings{LoginRequired: &lc.login, AnonEdit: &lc.anon, ReadAccess: &lc.flags.read, WriteAccess: &lc.flags.write}
	if lc.expired {
		day := "2000-01-01"
		set.Expires = &day
	}
	l, err := k.shares.CreateLink(ctx, k.creator, k.f.root.ID, w.item, lc.folder, set)
	if err != nil {
		k.t.Fatal(err)
	}
	w.link = l
	for _, s := range walkSubs {
		fl, kind := subFlags(s), "person"
		if s == "gsub" {
			kind = "guest"
		}
		sb, err := k.shares.AddSubscriber(ctx, k.creator, l.ID, share.Subscriber{Kind: kind, SubjectID: k.people[s].ID,
			ReadAccess: fl.read, WriteAccess: fl.write, DeleteAccess: fl.del})
		if err != nil {
			k.t.Fatal(err)
		}
		w.hashes[s] = sb.Hash
	}
	// sgone was a subscriber, with a hash, and is no more.
	gone, err := k.shares.AddSubscriber(ctx, k.creator, l.ID, share.Subscriber{Kind: "person", SubjectID: k.people["sgone"].ID, ReadAccess: true, WriteAccess: true})
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.shares.RemoveSubscriber(ctx, k.creator, l.ID, gone.ID); err != nil {
		k.t.Fatal(err)
	}
	w.hashes["sgone"] = gone.Hash
	k.addVictim(w)
	w.link, _ = k.linkNow(w)
	return w
}

func (k *walkCast) addVictim(w *walkLink) {
	k.t.Helper()
	sb, err := k.shares.AddSubscriber(context.Background(), k.creator, w.link.ID, share.Subscriber{Kind: "email", Email: k.next() + "@example.org"})
	if err != nil {
		k.t.Fatal(err)
	}
	w.victim = sb.ID
}

// linkNow reads w's link as stored (ok false: it is gone).
func (k *walkCast) linkNow(w *walkLink) (share.Link, bool) {
	k.t.Helper()
	l, err := k.shares.ManagedLink(context.Background(), k.creator, strconv.FormatUint(w.link.ID, 10))
	if errors.Is(err, share.ErrNotFound) {
		return l, false
	}
	if err != nil {
		k.t.Fatal(err)
	}
	return l, true
}

// tree lists what is under w's shared folder (or in a file link's
// file's folder), names and revisions, to show that a refused write
// changed nothing.
func (k *walkCast) tree(w *walkLink) string {
	k.t.Helper()
	ctx := context.Background()
	var b strings.Builder
	var walk func(id uint64, indent string)
	walk = func(id uint64, indent string) {
		kids, _, err := k.f.fs.List(ctx, k.f.root.ID, id)
		if err != nil {
			k.t.Fatal(err)
		}
		for _, n := range kids {
			fmt.Fprintf(&b, "%s%s %d\n", indent, n.Name, n.RevisionID)
			if n.Dir {
				walk(n.ID, indent+"  ")
			}
		}
	}
	top := w.item
	if !w.lc.folder {
		top = w.parent
	}
	walk(top, "")
	return b.String()
}

// ref is the reference c asks w's link by.
func (w *walkLink) ref(c walkCaller) string {
	switch c.ref {
	case "id":
		return strconv.FormatUint(w.link.ID, 10)
	case "link":
		return w.link.Hash
	case "own":
		return w.hashes[cmp.Or(c.hashOf, c.who)]
	}
	return "wrongwrongwrongwrongwron"
}

// walkRoutes are the routes of a folder link (folder) or a file link.
func walkRoutes(folder bool) []walkRoute {
	base := func(suffix string) func(*walkLink, string) string {
		return func(w *walkLink, ref string) string { return "/api/2/sharelinks/" + ref + suffix }
	}
	withID := func(format string, which func(*walkLink) uint64) func(*walkLink, string) string {
		return func(w *walkLink, ref string) string {
			return "/api/2/sharelinks/" + ref + fmt.Sprintf(format, which(w))
		}
	}
	inner := func(w *walkLink) uint64 { return w.inner }
	outside := func(w *walkLink) uint64 { return w.outside }
	sub := func(w *walkLink) uint64 { return w.sub }
	victim := func(w *walkLink) uint64 { return w.victim }
	named := func(k *walkCast) url.Values { return url.Values{"name": {k.next()}} }
	outsideName := func(w *walkLink) string { return w.outsideNam }
	rs := []walkRoute{
		{name: "GET link", kind: kGet, method: "GET", path: base(""), counts: "view"},
		{name: "files", kind: kList, method: "GET", path: base("/files")},
		{name: "files/<inner>", kind: kList, method: "GET", path: withID("/files/%d", inner)},
		{name: "files/<outside>", kind: kNotFound, method: "GET", path: withID("/files/%d", outside)},
		{name: "files/<inner>/download", kind: kRead, method: "GET", path: withID("/files/%d/download", inner), counts: "download"},
		{name: "files/<inner>/view", kind: kRead, method: "GET", path: withID("/files/%d/view", inner), counts: "view"},
		{name: "files/<outside>/download", kind: kNotFound, method: "GET", path: withID("/files/%d/download", outside)},
		{name: "PUT link", kind: kManage, method: "PUT", path: base(""), form: func(*walkCast) url.Values { return url.Values{"download_notify": {"false"}} }},
		{name: "POST subscribers", kind: kManage, method: "POST", path: base("/subscribers"),
			form: func(k *walkCast) url.Values {
				return url.Values{"subscriber_type": {"email"}, "email": {k.next() + "@example.net"}}
			}},
		{name: "PUT subscribers/<id>", kind: kManage, method: "PUT", path: withID("/subscribers/%d", victim),
			form: func(*walkCast) url.Values { return url.Values{"read_access": {"true"}} }},
		{name: "DELETE subscribers/<id>", kind: kManage, method: "DELETE", path: withID("/subscribers/%d", victim), gone: true},
	}
	if folder {
		rs = append(rs,
			walkRoute{name: "files?include_children", kind: kList, method: "GET", path: base("/files?include_children=true"), lacks: outsideName},
			walkRoute{name: "files/children", kind: kList, method: "GET", path: base("/files/children"), lacks: outsideName},
			walkRoute{name: "files/folder/<sub>", kind: kList, method: "GET", path: withID("/files/folder/%d", sub)},
			walkRoute{name: "files/folder/<sub>/children", kind: kList, method: "GET", path: withID("/files/folder/%d/children", sub)},
			walkRoute{name: "files/folder/<outside>/children", kind: kNotFound, method: "GET", path: func(w *walkLink, ref string) string {
				return fmt.Sprintf("/api/2/sharelinks/%s/files/folder/%d/children", ref, w.top)
			}},
			walkRoute{name: "download (zip)", kind: kRead, method: "GET", path: base("/download"), counts: "download", lacks: outsideName},
			walkRoute{name: "download?file_ids=<inner>,<outside>", kind: kRead, method: "GET", counts: "download", lacks: outsideName,
				path: func(w *walkLink, ref string) string {
					return fmt.Sprintf("/api/2/sharelinks/%s/download?file_ids=%d,%d&folder_ids=%d", ref, w.inner, w.outside, w.sub)
				}},
			walkRoute{name: "files/folder/<sub>/download", kind: kRead, method: "GET", path: withID("/files/folder/%d/download", sub), counts: "download"},
			walkRoute{name: "view (a folder)", kind: kNotFound, method: "GET", path: base("/view")},
			walkRoute{name: "files/create_folder", kind: kWrite, method: "POST", path: base("/files/create_folder"), form: named},
			walkRoute{name: "files/folder/<sub>/create_folder", kind: kWrite, method: "POST", path: withID("/files/folder/%d/create_folder", sub), form: named},
			walkRoute{name: "files/upload", kind: kWrite, method: "UPLOAD", path: base("/files/upload")},
			walkRoute{name: "files/folder/<sub>/upload", kind: kWrite, method: "UPLOAD", path: withID("/files/folder/%d/upload", sub)},
			walkRoute{name: "files/folder/<outside>/upload", kind: kNotFound, method: "UPLOAD", path: func(w *walkLink, ref string) string {
				return fmt.Sprintf("/api/2/sharelinks/%s/files/folder/%d/upload", ref, w.outside)
			}},
		)
	} else {
		rs = append(rs,
			walkRoute{name: "download", kind: kRead, method: "GET", path: base("/download"), counts: "download"},
			walkRoute{name: "view", kind: kRead, method: "GET", path: base("/view"), counts: "view"},
			walkRoute{name: "files/children (a file link)", kind: kNotFound, method: "GET", path: base("/files/children")},
			walkRoute{name: "files/create_folder (a file link)", kind: kNotFound, method: "POST", path: base("/files/create_folder"), form: named},
			walkRoute{name: "files/upload (a file link)", kind: kNotFound, method: "UPLOAD", path: base("/files/upload")},
		)
	}
	return append(rs, walkRoute{name: "DELETE link", kind: kManage, method: "DELETE", path: base(""), gone: true})
}

// walkLinkCases: folder links with login_required, anon_edit and the
// link's read and write access each on and off; file links (which take
// no writes, so anon_edit is moot) with login_required and access; an
// expired folder link and an expired login_required file link.
func walkLinkCases() []walkLinkCase {
	var out []walkLinkCase
	for _, login := range []bool{false, true} {
		for _, on := range []bool{true, false} {
			fl := walkFlags{read: on, write: on}
			out = append(out, walkLinkCase{folder: true, login: login, flags: fl},
				walkLinkCase{folder: true, login: login, anon: true, flags: fl},
				walkLinkCase{login: login, flags: fl})
		}
	}
	return append(out, walkLinkCase{folder: true, anon: true, flags: walkFlags{read: true, write: true}, expired: true},
		walkLinkCase{login: true, flags: walkFlags{read: true}, expired: true})
}

// TestShareLinkWalk walks every share-link route as every caller.
func TestShareLinkWalk(t *testing.T) {
	k := newWalkCast(t)
	rows := 0
	for _, lc := range walkLinkCases() {
		w := k.newLink(lc)
		for _, r := range walkRoutes(lc.folder) {
			for _, c := range walkCallers() {
				rows++
				k.ask(w, r, c)
			}
		}
	}
	t.Logf("%d rows (link settings × route × caller)", rows)
}

// ask sends route r as caller c to w's link and checks the answer
// against walkExpect, and what changed against what the answer allows.
func (k *walkCast) ask(w *walkLink, r walkRoute, c walkCaller) {
	t := k.t
	t.Helper()
	ref := w.ref(c)
	path := r.path(w, ref)
	label := fmt.Sprintf("%s | %s %s | %s", w.lc, r.method, r.name, c)
	status, code, perm := walkExpect(w.lc, r, c)
	// Only a write could change the tree: the walk spares the listing
	// of the others (it is most of its time).
	writes := r.method != http.MethodGet && r.kind != kManage
	tree := ""
	if writes {
		tree = k.tree(w)
	}
	before, _ := k.linkNow(w)

	var form url.Values
	if r.form != nil {
		form = r.form(k)
	}
	name := ""
	if form != nil {
		name = form.Get("name")
	}
	h := http.Header{}
	var body io.Reader
	method := r.method
	switch {
	case method == "UPLOAD":
		name = k.next() + ".txt"
		var ct string
		body, ct = multipartBody(name, strings.NewReader("up"))
		h.Set("Content-Type", ct)
		method = http.MethodPost
	case form != nil:
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		body = strings.NewReader(form.Encode())
	}
	st, b := k.f.readAll(k.f.request(method, path, k.tokens[c.who], body, h))
	if st != status {
		t.Errorf("%s: %d %.200s, want %d %s", label, st, b, status, code)
		return
	}
	after, live := k.linkNow(w)
	if status != 200 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error != code {
			t.Errorf("%s: %d %.200s, want error %q", label, st, b, code)
		}
		if writes {
			if got := k.tree(w); got != tree {
				t.Errorf("%s: refused, yet the shared tree changed:\n%s\nwas\n%s", label, got, tree)
			}
		}
		if !live || !equalJSON(before, after) {
			t.Errorf("%s: refused, yet the link changed: %+v, was %+v", label, after, before)
		}
		return
	}
	if r.lacks != nil && strings.Contains(string(b), r.lacks(w)) {
		t.Errorf("%s: the answer carries %q, outside the share", label, r.lacks(w))
	}
	k.checkCounts(label, w, r, c, before, after)
	switch {
	case r.kind == kWrite:
		if !strings.Contains(k.tree(w), name) {
			t.Errorf("%s: %d, yet %q is not in the shared folder", label, st, name)
		}
	case r.kind == kGet && c.who != "creator":
		// A user sees no subscriber but the one they ask as.
		// The item's permissions are theirs, as on every file object.
		type item struct {
			Permissions []string `json:"permissions"`
		}
		var v struct {
			Subscribers []struct {
				Hash string `json:"hash"`
			} `json:"subscribers"`
			File, Folder *item
		}
		decode(t, b, &v)
		for _, sb := range v.Subscribers {
			if sb.Hash != ref && sb.Hash != w.hashes[c.who] {
				t.Errorf("%s: the answer shows another subscriber's entry (%s)", label, sb.Hash)
			}
		}
		it := v.File
		if it == nil {
			it = v.Folder
		}
		if want := permissions(perm); it == nil || !slices.Equal(it.Permissions, want) {
			t.Errorf("%s: the item's permissions %+v, want %v", label, it, want)
		}
	case r.kind == kList && r.name == "files":
		var v struct {
			Permissions []string `json:"permissions"`
		}
		decode(t, b, &v)
		if want := permissions(perm); !slices.Equal(v.Permissions, want) {
			t.Errorf("%s: permissions %v, want %v", label, v.Permissions, want)
		}
	}
	if r.gone {
		if strings.Contains(r.name, "subscribers") {
			k.addVictim(w)
		} else {
			*w = *k.newLink(w.lc)
		}
	}
}

// checkCounts checks that an allowed use moved the link's counters by
// exactly what it counts, and the subscriber's whose hash (or, reached by
// who they are, whose own entry) it was asked by.
func (k *walkCast) checkCounts(label string, w *walkLink, r walkRoute, c walkCaller, before, after share.Link) {
	if r.kind == kManage {
		return
	}
	counts := r.counts
	if r.kind == kGet && c.who == "creator" {
		counts = "" // the creator's view of their own link
	}
	dl, vw := 0, 0
	switch counts {
	case "download":
		dl = 1
	case "view":
		vw = 1
	}
	if after.TimesDownloaded-before.TimesDownloaded != int64(dl) || after.TimesViewed-before.TimesViewed != int64(vw) {
		k.t.Errorf("%s: counted %d downloads and %d views, want %d and %d", label,
			after.TimesDownloaded-before.TimesDownloaded, after.TimesViewed-before.TimesViewed, dl, vw)
	}
	// Whose subscriber counters move.
	counted := ""
	switch {
	case c.ref == "own":
		counted = cmp.Or(c.hashOf, c.who)
	case c.who != "creator" && c.who != "" && slices.Contains(walkSubs, c.who) && (c.ref == "id" || w.lc.login):
		counted = c.who
	}
	for i, sb := range after.Subscribers {
		if i >= len(before.Subscribers) || before.Subscribers[i].ID != sb.ID {
			break
		}
		d := sb.TimesDownloaded - before.Subscribers[i].TimesDownloaded
		v := sb.TimesViewed - before.Subscribers[i].TimesViewed
		wd, wv := int64(0), int64(0)
		if counted != "" && sb.Hash == w.hashes[counted] {
			wd, wv = int64(dl), int64(vw)
		}
		if d != wd || v != wv {
			k.t.Errorf("%s: subscriber %d counted %d downloads and %d views, want %d and %d", label, sb.ID, d, v, wd, wv)
		}
	}
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// TestShareLinkWalkCreateAndGuest walks the sharing routes outside
// /sharelinks as the walk's callers: creating a file or folder link (4.2
// and 4.3 share: the root's owner only; an administrator without
// admin_browse_files does not reach the root, 404) and a guest's shares
// (4.9: the guest and its organization's administrators; the guest sees
// its own subscriber hashes, never the link's). A refused creation makes
// no link.
func TestShareLinkWalkCreateAndGuest(t *testing.T) {
	k := newWalkCast(t)
	w := k.newLink(walkLinkCase{folder: true, flags: walkFlags{read: true}})
	file := k.put(k.f.root.FolderID, k.next()+".txt")
	folder := k.mkdir(k.f.root.FolderID, k.next())
	callers := []string{"", "s000", "s111", "gsub", "gnot", "same", "admin", "other", "sgone", "creator"}
	type route struct {
		name, path string
		owner      string // who the route is about: the root's owner, or the guest
	}
	routes := []route{
		{"POST files/<file>/share", k.f.at("/api/2/files/%d/%d/share", file), "creator"},
		{"POST files/folder/<folder>/share", k.f.at("/api/2/files/%d/folder/%d/share", folder), "creator"},
		{"GET guest/<gsub>/shares", fmt.Sprintf("/api/2/guest/%d/shares", k.people["gsub"].ID), "gsub"},
		{"GET guest/<gnot>/shares", fmt.Sprintf("/api/2/guest/%d/shares", k.people["gnot"].ID), "gnot"},
	}
	// expect is the model: no token 401; the owner (the root's, the
	// guest itself) 200; the organization's administrator reads a guest
	// (200) and, without admin_browse_files, does not reach a person's
	// root (404); anyone else 404, as for what does not exist.
	expect := func(r route, who string) (int, string) {
		switch {
		case who == "":
			return 401, "access_denied"
		case who == r.owner, who == "admin" && r.owner != "creator":
			return 200, ""
		}
		return 404, "not_found"
	}
	for _, r := range routes {
		for _, who := range callers {
			label := r.name + " | " + cmp.Or(who, "anonymous")
			status, code := expect(r, who)
			before := k.linkCount()
			method := http.MethodPost
			if strings.HasPrefix(r.name, "GET") {
				method = http.MethodGet
			}
			st, b := k.f.send(method, r.path, k.tokens[who], nil)
			if st != status {
				t.Errorf("%s: %d %.200s, want %d %s", label, st, b, status, code)
				continue
			}
			made := k.linkCount() - before
			switch {
			case status != 200:
				wantError(t, st, b, status, code)
				if made != 0 {
					t.Errorf("%s: refused, yet %d links were made", label, made)
				}
			case method == http.MethodPost:
				if made != 1 {
					t.Errorf("%s: %d links made, want 1", label, made)
				}
			default:
				var v struct {
					Results []struct {
						Hash string `json:"hash"`
					} `json:"results"`
				}
				decode(t, b, &v)
				var got []string
				for _, e := range v.Results {
					got = append(got, e.Hash)
				}
				var want []string
				if h, ok := w.hashes[r.owner]; ok {
					want = []string{h}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: hashes %v, want the guest's own %v", label, got, want)
				}
			}
		}
	}
}

// TestShareLinkWalkSubscribe: the creator subscribes only persons,
// guests and groups of their own organization, each by its own kind
// (else 404, as for an id that does not exist, so that ids of others
// cannot be probed); anyone else is subscribed by e-mail. A refusal adds
// no subscriber.
func TestShareLinkWalkSubscribe(t *testing.T) {
	k := newWalkCast(t)
	w := k.newLink(walkLinkCase{folder: true, flags: walkFlags{read: true}})
	path := fmt.Sprintf("/api/2/sharelinks/%d/subscribers", w.link.ID)
	for _, tc := range []struct {
		kind, who string
		status    int
	}{
		{"person", "other", 404},
		{"person", "gnot", 404}, // a guest as a person
		{"guest", "same", 404},  // a person as a guest
		{"guest", "gnot", 200},
		{"person", "same", 200},
		{"email", "", 200},
	} {
		before, _ := k.linkNow(w)
		form := url.Values{"subscriber_type": {tc.kind}}
		if tc.who != "" {
			form.Set("subscriber_id", strconv.FormatUint(k.people[tc.who].ID, 10))
		} else {
			form.Set("email", k.next()+"@example.com")
		}
		st, b := k.f.send(http.MethodPost, path, k.f.token, form)
		after, _ := k.linkNow(w)
		label := tc.kind + " " + tc.who
		switch {
		case st != tc.status:
			t.Errorf("%s: %d %.200s, want %d", label, st, b, tc.status)
		case st != 200:
			wantError(t, st, b, tc.status, "not_found")
			if len(after.Subscribers) != len(before.Subscribers) {
				t.Errorf("%s: refused, yet a subscriber was added", label)
			}
		case len(after.Subscribers) != len(before.Subscribers)+1:
			t.Errorf("%s: %d subscribers after, want %d", label, len(after.Subscribers), len(before.Subscribers)+1)
		}
	}
}

// linkCount is how many links there are.
func (k *walkCast) linkCount() int {
	k.t.Helper()
	n := 0
	err := k.f.db.View(context.Background(), func(tx kv.Txn) error {
		return tx.Scan([]byte(kv.ShareLink), nil, func(_, _ []byte) error { n++; return nil })
	})
	if err != nil {
		k.t.Fatal(err)
	}
	return n
}

// TestShareLinkWalkOrgShare is the walk's smaller part for organization
// shares (4.7): their file routes and link creation (4.2, 4.3 share) as
// subscribers of each role, a subscribed guest, a person of the same
// organization and a guest who are not subscribed, the organization's
// and its parent's administrators, another tenant's and no one. What each
// may is the role's permissions (docs/api.md "Organization shares":
// VIEWER sees and reads, COLLABORATOR also changes and deletes, MANAGER
// and the administrators also share onward); a refusal changes nothing
// and makes no link. Then a link its MANAGER made stops answering once
// its creator may no longer share the item.
func TestShareLinkWalkOrgShare(t *testing.T) {
	w := newOrgWorld(t)
	ctx := context.Background()
	tokens := map[string]string{"cadmin": w.childAdmin, "padmin": w.parentAdmin, "oadmin": w.otherAdmin}
	ids := map[string]uint64{}
	for _, who := range []string{"viewer", "collab", "manager", "plain"} {
		p, tok, _ := w.member(w.child.ID, who, false)
		tokens[who], ids[who] = tok, p.ID
	}
	for _, who := range []string{"gview", "gnot"} {
		g, err := w.accounts.CreateGuest(ctx, account.GuestInput{CreatorID: w.childAdminUser.ID, OrganizationID: w.child.ID,
			Email: who + "@example.com", Password: fixturePassword})
		if err != nil {
			t.Fatal(err)
		}
		toks, err := w.accounts.IssueTokens(ctx, g.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		tokens[who], ids[who] = toks.AccessToken, g.ID
	}
	st, b := w.postAs(w.childAdmin, orgPath(w.child.ID, "/shares/create"), url.Values{"name": {"Walk"}})
	if st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	var root rootJSON
	decode(t, b, &root)
	sharePath := orgPath(w.child.ID, fmt.Sprintf("/share/%d", root.ID))
	subscribe := func(managerRole string) {
		t.Helper()
		subs := fmt.Sprintf(`[[%d,"web","VIEWER"],[%d,"web","COLLABORATOR"],[%d,"web","VIEWER"]`, ids["viewer"], ids["collab"], ids["gview"])
		if managerRole != "" {
			subs += fmt.Sprintf(`,[%d,"web",%q]`, ids["manager"], managerRole)
		}
		if st, b := w.postAs(w.childAdmin, sharePath+"/subscribers/update", url.Values{"subscribers": {subs + "]"}}); st != 200 {
			t.Fatalf("subscribers: %d %s", st, b)
		}
	}
	subscribe("MANAGER")
	k := &walkCast{t: t, f: w.fixture}
	fresh := func() uint64 {
		st, b := w.uploadAs(w.childAdmin, root.ID, k.next()+".txt", 3)
		return k.id(st, b)
	}
	seed := fresh()
	st, b = w.postAs(w.childAdmin, fmt.Sprintf("/api/2/files/%d/create_folder", root.ID), url.Values{"name": {"dir"}})
	dir := k.id(st, b)

	roles := map[string]share.Perm{"viewer": share.RolePerms(share.RoleViewer), "gview": share.RolePerms(share.RoleViewer),
		"collab": share.RolePerms(share.RoleCollaborator), "manager": share.RolePerms(share.RoleManager),
		"cadmin": share.Owner, "padmin": share.Owner}
	// expect: no token 401; someone the share is not for 404, as for a
	// root that does not exist; a subscriber or administrator without the
	// permission the route needs 403.
	expect := func(who string, need share.Perm) (int, string) {
		perm, ok := roles[who]
		switch {
		case who == "":
			return 401, "access_denied"
		case !ok:
			return 404, "not_found"
		case !perm.Has(need):
			return 403, "forbidden"
		}
		return 200, ""
	}
	type route struct {
		name, method string
		need         share.Perm
		path         func() string
	}
	fixed := func(format string, args ...any) func() string {
		return func() string { return fmt.Sprintf(format, args...) }
	}
	routes := []route{
		{"GET root", "GET", share.View, fixed("/api/2/files/%d", root.ID)},
		{"download", "GET", share.Read, fixed("/api/2/files/%d/%d/download", root.ID, seed)},
		{"upload", "UPLOAD", share.Write, fixed("/api/2/files/%d/upload", root.ID)},
		{"create_folder", "POST", share.Write, fixed("/api/2/files/%d/create_folder", root.ID)},
		{"rename", "POST", share.Write, func() string { return fmt.Sprintf("/api/2/files/%d/%d/rename", root.ID, fresh()) }},
		{"delete", "POST", share.Delete, func() string { return fmt.Sprintf("/api/2/files/%d/%d/delete", root.ID, fresh()) }},
		{"file share", "POST", share.Reshare, fixed("/api/2/files/%d/%d/share", root.ID, seed)},
		{"folder share", "POST", share.Reshare, fixed("/api/2/files/%d/folder/%d/share", root.ID, dir)},
	}
	tree := func() string {
		var sb strings.Builder
		var walk func(id uint64)
		walk = func(id uint64) {
			kids, _, err := w.fs.List(ctx, root.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range kids {
				fmt.Fprintf(&sb, "%s %d %t\n", n.Path, n.RevisionID, n.Deleted)
				if n.Dir {
					walk(n.ID)
				}
			}
		}
		r, err := w.fs.Root(ctx, root.ID)
		if err != nil {
			t.Fatal(err)
		}
		walk(r.FolderID)
		return sb.String()
	}
	rows := 0
	for _, r := range routes {
		for _, who := range []string{"", "plain", "gnot", "oadmin", "viewer", "gview", "collab", "manager", "cadmin", "padmin"} {
			rows++
			label := r.name + " | " + cmp.Or(who, "anonymous")
			status, code := expect(who, r.need)
			path := r.path()
			before, links := tree(), k.linkCount()
			form := url.Values{"name": {k.next()}}
			if r.name == "file share" || r.name == "folder share" {
				form = nil
			}
			st, b := w.send(r.method, path, tokens[who], form)
			if st != status {
				t.Errorf("%s: %d %.200s, want %d %s", label, st, b, status, code)
				continue
			}
			if status != 200 {
				wantError(t, st, b, status, code)
				if tree() != before || k.linkCount() != links {
					t.Errorf("%s: refused, yet the share or its links changed", label)
				}
			}
		}
	}
	t.Logf("%d rows", rows)

	// A MANAGER's link answers while its creator may share the item;
	// unsubscribed, or only a VIEWER, the link is as gone (404), and
	// answers again once they are MANAGER again.
	st, b = w.postAs(tokens["manager"], fmt.Sprintf("/api/2/files/%d/%d/share", root.ID, seed), nil)
	if st != 200 {
		t.Fatalf("manager's link: %d %s", st, b)
	}
	var l linkJSON
	decode(t, b, &l)
	for _, tc := range []struct {
		role   string // the manager's role now; "" unsubscribed
		status int
	}{{"MANAGER", 200}, {"", 404}, {"VIEWER", 404}, {"COLLABORATOR", 404}, {"MANAGER", 200}} {
		subscribe(tc.role)
		st, b := w.readAll(w.request(http.MethodGet, "/api/2/sharelinks/"+l.Hash+"/download", "", nil, nil))
		if st != tc.status {
			t.Errorf("link of a manager now %q: %d %.200s, want %d", tc.role, st, b, tc.status)
		}
	}

	// A write through a link is the creator's write into the share: held
	// to the share's organization's policy, as the creator's own upload
	// is, never to the creator's own organization's (here the parent's,
	// which excludes nothing).
	if _, err := w.accounts.UpdatePolicy(ctx, w.child.ID, func(p *account.Policy) error { p.ExcludedExtensions = ".exe"; return nil }); err != nil {
		t.Fatal(err)
	}
	st, b = w.postAs(w.parentAdmin, fmt.Sprintf("/api/2/files/%d/folder/%d/share", root.ID, dir),
		url.Values{"write_access": {"true"}, "anon_edit": {"true"}})
	if st != 200 {
		t.Fatalf("parent administrator's link: %d %s", st, b)
	}
	decode(t, b, &l)
	body, ct := multipartBody("direct.exe", strings.NewReader("MZ"))
	wantSt, wantB := w.readAll(w.request(http.MethodPost, fmt.Sprintf("/api/2/files/%d/folder/%d/upload", root.ID, dir), w.parentAdmin, body, http.Header{"Content-Type": {ct}}))
	if wantSt == 200 {
		t.Fatalf("the administrator's own upload of an excluded extension: %d %s", wantSt, wantB)
	}
	var want struct {
		Error string `json:"error"`
	}
	decode(t, wantB, &want)
	before := tree()
	body, ct = multipartBody("link.exe", strings.NewReader("MZ"))
	st, b = w.readAll(w.request(http.MethodPost, "/api/2/sharelinks/"+l.Hash+"/files/upload", "", body, http.Header{"Content-Type": {ct}}))
	wantError(t, st, b, wantSt, want.Error)
	if tree() != before {
		t.Errorf("a refused upload through the link changed the share")
	}
}
