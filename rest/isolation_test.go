package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"berth/account"
	"berth/activity"
	"berth/kv"
	"berth/share"
	"berth/vfs"
)

// The isolation walk (issue 12, "Done when"): every route of the API, as
// no token, a person and an administrator of another organization, a
// plain person of the parent organization, a guest, a plain person and
// an administrator of a child organization, and an administrator of the
// parent. Each gets what docs/api.md "Who may do what" says, and no
// response ever carries a marker of a tenant the caller may not see.
//
// Every name and address of the cast carries a marker zq<tag>-<kind>:
// tag names the tenant (o, p, c1, b, or a fresh child), kind the thing
// (org, admin, plain, file, folder, guest, group, note). Things the walk
// creates have no marker.

// isoTenant is one organization of the cast with its administrator, a
// plain person with a sync root holding a file and a folder, a guest, a
// group and an activity record about the plain person.
type isoTenant struct {
	tag              string
	org              account.Organization
	admin, plain     account.Person
	adminTok, plnTok string
	root             uint64 // the plain person's sync root
	file, folder     uint64
	guest            account.Person
	guestTok         string
	group            account.Group
	note             activity.Record
	fileRec, dirRec  uint64 // the log's records of the plain person's upload and folder rename
	key              string // license key, read on first use
}

// isoCast is the whole cast over one server.
type isoCast struct {
	t      *testing.T
	f      *fixture
	log    *activity.Log
	shares *share.Service
	o, p   *isoTenant
	seq    int
}

// next returns a fresh name with no marker.
func (k *isoCast) next() string {
	k.seq++
	return fmt.Sprintf("n%d", k.seq)
}

// isoJournal records account changes in the activity log as the daemon
// does (daemon/activity.go accountJournal, which rest cannot import), so
// that what the walk changes shows in the activity it reads. log is set
// once the fixture's database is open; until then nothing is recorded.
type isoJournal struct{ log *activity.Log }

func (j *isoJournal) Record(tx kv.Txn, c account.Change) error {
	if j.log == nil {
		return nil
	}
	typ, ok := j.log.Type(c.Activity)
	if !ok {
		return fmt.Errorf("no activity type for the account change %q", c.Activity)
	}
	a := c.Actor
	r := activity.Record{ActorType: a.Type, ActorText: a.Text, ActorCompanyID: a.CompanyID, ActorMachineID: a.MachineID,
		Processed: true, ActivityTypeID: typ.ID, Created: c.Time, ActedOnType: c.OnType, ActedOnText: c.OnText,
		ActedOnCompanyID: c.OnCompanyID, ActedOnGroupID: c.OnGroupID, ActedOnGuestID: c.OnGuestID,
		ActedOnMachineID: c.OnMachineID, ActedOnPersonID: c.OnPersonID, ActedOnRootID: c.OnRootID,
		ActionText: c.Action, DataText: c.Data}
	if a.Type == "guest" {
		r.ActorGuestID = a.PersonID
	} else {
		r.ActorPersonID = a.PersonID
	}
	_, err := j.log.Append(context.Background(), tx, r)
	return err
}

func newIsoCast(t *testing.T) *isoCast {
	t.Helper()
	j := &isoJournal{}
	// The walk gives its persons a machine a row, set up as the row
	// needs: more than a person's bound of machines (MaxMachines), which
	// a real person would delete first.
	f := newFixtureWith(t, fixtureOptions{Accounts: account.Options{Journal: j, MaxMachines: 10_000}})
	k := &isoCast{t: t, f: f, log: activity.New(f.db, activity.Options{}),
		shares: share.New(share.Options{FS: f.fs, Accounts: f.accounts, Store: f.db})}
	j.log = k.log
	srv := httptest.NewUnstartedServer(New(Options{FS: f.fs, Accounts: f.accounts, Activity: k.log, Share: k.shares}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.srv, f.client = srv, srv.Client()
	k.o = k.tenant("o", 0, nil)
	k.p = k.tenant("p", 0, nil)
	return k
}

// tenant builds organization zq<tag>-org below parent (0: top level)
// with its people and things; policy, when set, changes its policy first.
func (k *isoCast) tenant(tag string, parent uint64, policy func(*account.Policy)) *isoTenant {
	t, f, ctx := k.t, k.f, context.Background()
	t.Helper()
	m := func(kind string) string { return "zq" + tag + "-" + kind }
	n := &isoTenant{tag: tag}
	var err error
	if n.org, err = f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: parent, Name: m("org")}); err != nil {
		t.Fatal(err)
	}
	if policy != nil {
		if n.org, err = f.accounts.UpdatePolicy(ctx, n.org.ID, func(p *account.Policy) error { policy(p); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	person := func(kind string, admin bool) (account.Person, string) {
		p, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: n.org.ID, Username: m(kind),
			Email: m(kind) + "@example.com", Password: fixturePassword, Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		toks, err := f.accounts.IssueTokens(ctx, p.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p, toks.AccessToken
	}
	n.admin, n.adminTok = person("admin", true)
	n.plain, n.plnTok = person("plain", false)
	root, err := k.shares.NewRoot(ctx, n.plain, n.plain.Username, vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	n.root = root.ID
	n.file = k.upload(n, fmt.Sprintf("/api/2/files/%d/upload", n.root), m("file")+".txt")
	n.folder = k.mkdir(n, fmt.Sprintf("/api/2/files/%d/create_folder", n.root), m("folder"))
	if n.guest, err = f.accounts.CreateGuest(ctx, account.GuestInput{CreatorID: n.admin.ID, OrganizationID: n.org.ID,
		Email: m("guest") + "@example.com", FirstName: m("guest"), Password: fixturePassword}); err != nil {
		t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(ctx, n.guest.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	n.guestTok = toks.AccessToken
	if n.group, err = f.accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: n.org.ID, Name: m("group")}); err != nil {
		t.Fatal(err)
	}
	note, _ := activity.TypeNamed(activity.Note)
	p := n.plain
	if n.note, err = k.log.Create(ctx, activity.Record{ActorType: "person", ActorText: p.Username,
		ActorCompanyID: p.OrganizationID, ActorPersonID: p.ID, ActedOnType: "person", ActedOnText: p.Username,
		ActedOnCompanyID: p.OrganizationID, ActedOnPersonID: p.ID, ActivityTypeID: note.ID, Processed: true,
		ActionText: m("note")}); err != nil {
		t.Fatal(err)
	}
	// The records the daemon's file journal makes of an upload and a
	// rename in the plain person's root (daemon/activity.go fileJournal):
	// the names are the person's, shown only to who may browse the root.
	for _, f := range []struct {
		op, typ, name, data string
		id                  *uint64
	}{{"write", "file", m("file") + ".txt", "12 bytes", &n.fileRec}, {"rename", "folder", m("folder"), m("folder"), &n.dirRec}} {
		typ, _ := activity.TypeNamed(f.op)
		r, err := k.log.Create(ctx, activity.Record{ActorType: "person", ActorText: p.Username,
			ActorCompanyID: p.OrganizationID, ActorPersonID: p.ID, ActedOnType: f.typ, ActedOnText: f.name,
			ActedOnCompanyID: p.OrganizationID, ActedOnPersonID: p.ID, ActedOnRootID: n.root, ActivityTypeID: typ.ID,
			Processed: true, DataText: f.data})
		if err != nil {
			t.Fatal(err)
		}
		*f.id = r.ID
	}
	return n
}

// noteBy records a note by actor about p and returns its id.
func (k *isoCast) noteBy(actor, p account.Person) uint64 {
	k.t.Helper()
	note, _ := activity.TypeNamed(activity.Note)
	r, err := k.log.Create(context.Background(), activity.Record{ActorType: "person", ActorText: actor.Username,
		ActorCompanyID: actor.OrganizationID, ActorPersonID: actor.ID, ActedOnType: "person", ActedOnText: p.Username,
		ActedOnCompanyID: p.OrganizationID, ActedOnPersonID: p.ID, ActivityTypeID: note.ID, Processed: true})
	if err != nil {
		k.t.Fatal(err)
	}
	return r.ID
}

// upload stores a small file named name as n's plain person and returns its id.
func (k *isoCast) upload(n *isoTenant, path, name string) uint64 {
	k.t.Helper()
	body, ct := multipartBody(name, strings.NewReader("contents of "+name))
	st, b := k.f.readAll(k.f.request(http.MethodPost, path, n.plnTok, body, http.Header{"Content-Type": {ct}}))
	return k.id(st, b)
}

// mkdir creates a folder named name as n's plain person and returns its id.
func (k *isoCast) mkdir(n *isoTenant, path, name string) uint64 {
	k.t.Helper()
	st, b := k.f.send(http.MethodPost, path, n.plnTok, url.Values{"name": {name}})
	return k.id(st, b)
}

func (k *isoCast) id(st int, b []byte) uint64 {
	k.t.Helper()
	if st != http.StatusOK {
		k.t.Fatalf("setup: %d %s", st, b)
	}
	var v struct {
		ID uint64 `json:"id"`
	}
	decode(k.t, b, &v)
	return v.ID
}

// person creates a person of n with no password and no root.
func (k *isoCast) person(n *isoTenant) account.Person {
	k.t.Helper()
	p, err := k.f.accounts.CreatePerson(context.Background(), account.PersonInput{OrganizationID: n.org.ID,
		Username: k.next(), Email: k.next() + "@example.com", NoPassword: true})
	if err != nil {
		k.t.Fatal(err)
	}
	return p
}

// personIn creates a person of organization org with no password and no root.
func (k *isoCast) personIn(org uint64) account.Person {
	k.t.Helper()
	p, err := k.f.accounts.CreatePerson(context.Background(), account.PersonInput{OrganizationID: org,
		Username: k.next(), Email: k.next() + "@example.com", NoPassword: true})
	if err != nil {
		k.t.Fatal(err)
	}
	return p
}

// guest creates a guest of n.
func (k *isoCast) guest(n *isoTenant) account.Person {
	k.t.Helper()
	g, err := k.f.accounts.CreateGuest(context.Background(), account.GuestInput{CreatorID: n.admin.ID,
		OrganizationID: n.org.ID, Email: k.next() + "@example.com"})
	if err != nil {
		k.t.Fatal(err)
	}
	return g
}

// group creates a group of n.
func (k *isoCast) group(n *isoTenant) account.Group {
	k.t.Helper()
	g, err := k.f.accounts.CreateGroup(context.Background(), account.GroupInput{OrganizationID: n.org.ID, Name: k.next()})
	if err != nil {
		k.t.Fatal(err)
	}
	return g
}

// licenseKey returns n's license key, read by the parent's administrator.
func (k *isoCast) licenseKey(n *isoTenant) string {
	k.t.Helper()
	if n.key == "" {
		st, b := k.f.send(http.MethodGet, fmt.Sprintf("/api/2/organization/%d/license_key", n.org.ID), k.p.adminTok, nil)
		if st != http.StatusOK {
			k.t.Fatalf("license key: %d %s", st, b)
		}
		var v struct {
			Key string `json:"license_key"`
		}
		decode(k.t, b, &v)
		n.key = v.Key
	}
	return n.key
}

// The callers of the walk, in the order they ask: those a row refuses
// first, so that the ones it lets act find the state the row assumes.
var isoCallers = []string{"none", "OP", "OA", "PP", "CG", "CP", "CA", "PA"}

// token returns caller's token; c is the child tenant of the row.
func (k *isoCast) token(caller string, c *isoTenant) string {
	switch caller {
	case "OP":
		return k.o.plnTok
	case "OA":
		return k.o.adminTok
	case "PP":
		return k.p.plnTok
	case "PA":
		return k.p.adminTok
	case "CP":
		return c.plnTok
	case "CG":
		return c.guestTok
	case "CA":
		return c.adminTok
	}
	return ""
}

// plainSees are the kinds of its own tenant a plain person sees: the
// organization, themself, their files, the record about them.
var plainSees = []string{"org", "plain", "file", "folder", "note"}

// sees reports whether caller may see marker zq<tag>-<kind>; c is the
// child tenant of the row (CP and CA are its people). In the activity
// log, a plain person also reads the name of their own organization's
// administrator, who acted on them.
func (k *isoCast) sees(caller string, c *isoTenant, tag, kind string, log bool) bool {
	if log && (kind == "file" || kind == "folder") {
		// The names of files and folders in the log: for their owner,
		// and for the administrators who may browse the root (those of
		// b, whose policy has admin_browse_files, and those above it).
		owner := caller == "CP" && tag == c.tag || caller == "PP" && tag == "p" || caller == "OP" && tag == "o"
		return owner || tag == "b" && (caller == "CA" && c.tag == "b" || caller == "PA")
	}
	if log && kind == "admin" && (caller == "CP" && tag == c.tag || caller == "PP" && tag == "p" || caller == "OP" && tag == "o") {
		return true
	}
	switch caller {
	case "OA":
		return tag == "o"
	case "OP":
		return tag == "o" && slices.Contains(plainSees, kind)
	case "PA":
		return tag != "o"
	case "PP":
		return tag == "p" && slices.Contains(plainSees, kind)
	case "CA":
		return tag == c.tag
	case "CP":
		return tag == c.tag && slices.Contains(plainSees, kind)
	case "CG":
		return tag == c.tag && (kind == "org" || kind == "guest")
	}
	return false
}

// isoReq is what one caller sends: k is the cast, c the child tenant.
type isoReq struct {
	k *isoCast
	c *isoTenant
}

// isoRow is one request of the walk, sent by every caller. path and form
// are built again for each caller, so a row that destroys what it names
// makes a fresh one each time.
type isoRow struct {
	pattern string // the route's pattern, as registered
	name    string // what the row is about
	method  string // UPLOAD: a POST of a small file
	path    func(q isoReq) string
	form    func(q isoReq) url.Values
	// want is "CALLER=status ...", a later one for the same caller
	// winning; a caller left out gets 401 (none) or 404 (OP, OA, PP, CG,
	// the child's guest, whom nothing is shared with); "-" skips the caller (the row would destroy what
	// the others need).
	want string
	// tenant picks the child tenant: "" the shared one (c1), "browse"
	// the one whose policy has admin_browse_files on and
	// admin_create_users off, "fresh" one built for this row.
	tenant string
}

func (r isoRow) wants() map[string]int {
	w := map[string]int{"none": 401, "OP": 404, "OA": 404, "PP": 404, "CG": 404}
	for f := range strings.FieldsSeq(r.want) {
		c, v, _ := strings.Cut(f, "=")
		if v == "-" {
			w[c] = -1
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			panic("bad want " + r.want)
		}
		w[c] = n
	}
	return w
}

// Helpers of the table.
func pf(format string, args ...func(q isoReq) any) func(q isoReq) string {
	return func(q isoReq) string {
		vals := make([]any, len(args))
		for i, a := range args {
			vals[i] = a(q)
		}
		return fmt.Sprintf(format, vals...)
	}
}

func cOrg(q isoReq) any    { return q.c.org.ID }
func pOrg(q isoReq) any    { return q.k.p.org.ID }
func cPlain(q isoReq) any  { return q.c.plain.ID }
func cAdmin(q isoReq) any  { return q.c.admin.ID }
func pPlain(q isoReq) any  { return q.k.p.plain.ID }
func pAdmin(q isoReq) any  { return q.k.p.admin.ID }
func cRoot(q isoReq) any   { return q.c.root }
func pRoot(q isoReq) any   { return q.k.p.root }
func cFile(q isoReq) any   { return q.c.file }
func cFolder(q isoReq) any { return q.c.folder }
func cGuest(q isoReq) any  { return q.c.guest.ID }
func cGroup(q isoReq) any  { return q.c.group.ID }
func pGroup(q isoReq) any  { return q.k.p.group.ID }
func newCPerson(q isoReq) any {
	return q.k.person(q.c).ID
}
func newPPerson(q isoReq) any { return q.k.person(q.k.p).ID }

// newMachine makes a fresh machine of the account whose id of returns.
func newMachine(of func(isoReq) any) func(isoReq) any {
	return func(q isoReq) any {
		m, err := q.k.f.accounts.UpsertMachine(context.Background(), of(q).(uint64), account.MachineInput{})
		if err != nil {
			q.k.t.Fatal(err)
		}
		return m.ID
	}
}

// isoMachine is a fresh machine of a person with its file server on, a
// mapping of /m/map to the person's root and a backup of /m/backup into
// a new backup root of theirs.
type isoMachine struct{ id, mapping, backup uint64 }

// machineSetUp makes an isoMachine of person p (whose sync root is
// root), as the machine routes would.
func (k *isoCast) machineSetUp(p account.Person, root uint64) isoMachine {
	k.t.Helper()
	ctx := context.Background()
	m, err := k.f.accounts.UpsertMachine(ctx, p.ID, account.MachineInput{})
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.f.accounts.SetFileServer(ctx, m.ID, true); err != nil {
		k.t.Fatal(err)
	}
	mm, err := k.f.accounts.CreateMapping(ctx, account.MachineMapping{MachineID: m.ID, Name: k.next(), Path: "/m/map", PersonID: p.ID, RootID: root})
	if err != nil {
		k.t.Fatal(err)
	}
	br, err := k.shares.NewRoot(ctx, p, k.next(), vfs.RootBackup)
	if err != nil {
		k.t.Fatal(err)
	}
	b, err := k.f.accounts.CreateBackup(ctx, account.Backup{RootID: br.ID, MachineID: m.ID, Path: "/m/backup"})
	if err != nil {
		k.t.Fatal(err)
	}
	return isoMachine{id: m.ID, mapping: mm.ID, backup: b.RootID}
}

// machinePath is a path of a fresh set-up machine of the child's plain
// person (parent: of the parent's plain person); format takes the
// machine's id and then what ids picks.
func machinePath(parent bool, format string, ids func(m isoMachine) []any) func(q isoReq) string {
	return func(q isoReq) string {
		t := q.c
		if parent {
			t = q.k.p
		}
		m := q.k.machineSetUp(t.plain, t.root)
		return fmt.Sprintf(format, append([]any{m.id}, ids(m)...)...)
	}
}

// grandchildMachinePath is a path of a fresh set-up machine of a person
// of a fresh grandchild below the child, whose own policy turns
// admin_browse_remote on; format takes the machine's id.
func grandchildMachinePath(format string) func(q isoReq) string {
	return func(q isoReq) string {
		ctx := context.Background()
		g, err := q.k.f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: q.c.org.ID, Name: q.k.next()})
		if err != nil {
			q.k.t.Fatal(err)
		}
		if _, err := q.k.f.accounts.UpdatePolicy(ctx, g.ID, func(p *account.Policy) error { p.AdminBrowseRemote = true; return nil }); err != nil {
			q.k.t.Fatal(err)
		}
		p := q.k.personIn(g.ID)
		root, err := q.k.shares.NewRoot(ctx, p, p.Username, vfs.RootSync)
		if err != nil {
			q.k.t.Fatal(err)
		}
		m := q.k.machineSetUp(p, root.ID)
		return fmt.Sprintf(format, m.id)
	}
}

// cShareMapForm maps /m/map to a fresh share of the child.
func cShareMapForm(q isoReq) url.Values {
	return url.Values{"path": {"/m/map"}, "root_id": {fmt.Sprint(newCShare(q))}}
}

// crossMachinePath names one fresh machine of the child's plain person
// in the path and another's mapping or backup id (second: the mapping's
// when mapping).
func crossMachinePath(format string, mapping bool) func(q isoReq) string {
	return func(q isoReq) string {
		a := q.k.machineSetUp(q.c.plain, q.c.root)
		b := q.k.machineSetUp(q.c.plain, q.c.root)
		id := b.backup
		if mapping {
			id = b.mapping
		}
		return fmt.Sprintf(format, a.id, id)
	}
}

// newServerMachine makes a fresh machine of the account whose id of
// returns, with its file server on.
func newServerMachine(of func(isoReq) any) func(isoReq) any {
	return func(q isoReq) any {
		id := newMachine(of)(q).(uint64)
		if _, err := q.k.f.accounts.SetFileServer(context.Background(), id, true); err != nil {
			q.k.t.Fatal(err)
		}
		return id
	}
}

func noIDs(isoMachine) []any       { return nil }
func mappingID(m isoMachine) []any { return []any{m.mapping} }
func backupID(m isoMachine) []any  { return []any{m.backup} }

// withPolicy is path, after setting the row's (fresh) child tenant's
// policy with set.
func withPolicy(set func(*account.Policy), path func(q isoReq) string) func(q isoReq) string {
	return func(q isoReq) string {
		if _, err := q.k.f.accounts.UpdatePolicy(context.Background(), q.c.org.ID, func(p *account.Policy) error { set(p); return nil }); err != nil {
			q.k.t.Fatal(err)
		}
		return path(q)
	}
}

// withFileServer is path, after setting file_server_enabled in the
// parent's policy to parent and in the row's (fresh) child tenant's to
// child. The parent's stays so for the rows after: only these read it.
func withFileServer(parent, child bool, path func(q isoReq) string) func(q isoReq) string {
	return func(q isoReq) string {
		for id, on := range map[uint64]bool{q.k.p.org.ID: parent, q.c.org.ID: child} {
			if _, err := q.k.f.accounts.UpdatePolicy(context.Background(), id, func(p *account.Policy) error { p.FileServerEnabled = on; return nil }); err != nil {
				q.k.t.Fatal(err)
			}
		}
		return path(q)
	}
}

// fileServerGrandchildPerson is a person of a fresh grandchild below the
// child whose own policy turns file_server_enabled on.
func fileServerGrandchildPerson(q isoReq) any {
	g := newGrandchild(q).(uint64)
	if _, err := q.k.f.accounts.UpdatePolicy(context.Background(), g, func(p *account.Policy) error { p.FileServerEnabled = true; return nil }); err != nil {
		q.k.t.Fatal(err)
	}
	return q.k.personIn(g).ID
}

// newDevicePassword makes a fresh device password of the account whose
// id of returns.
func newDevicePassword(of func(isoReq) any) func(isoReq) any {
	return func(q isoReq) any {
		dp, _, err := q.k.f.accounts.CreateDevicePassword(context.Background(), of(q).(uint64), account.DevicePasswordInput{Name: "laptop"})
		if err != nil {
			q.k.t.Fatal(err)
		}
		return dp.ID
	}
}

// newGrandchild is a fresh organization below the child, as its
// administrator would make one.
func newGrandchild(q isoReq) any {
	o, err := q.k.f.accounts.CreateOrganization(context.Background(), account.OrganizationInput{ParentID: q.c.org.ID, Name: q.k.next()})
	if err != nil {
		q.k.t.Fatal(err)
	}
	return o.ID
}
func newCGuest(q isoReq) any { return q.k.guest(q.c).ID }

// newCShare is a fresh organization share of the child, made by its
// administrator, with no subscribers; newPShare one of the parent.
func newCShare(q isoReq) any { return q.k.orgShare(q.c, nil) }
func newPShare(q isoReq) any { return q.k.orgShare(q.k.p, nil) }

// cViewerShare is a fresh share of the child whose plain person is a
// VIEWER on the web channel; deletedViewerShare one deleted since.
func cViewerShare(q isoReq) any {
	return q.k.orgShare(q.c, []share.Entry{{ID: q.c.plain.ID, Channel: share.ChannelWeb, Role: share.RoleViewer}})
}
func deletedViewerShare(q isoReq) any {
	id := cViewerShare(q).(uint64)
	if err := q.k.f.fs.DeleteRoot(context.Background(), id); err != nil {
		q.k.t.Fatal(err)
	}
	return id
}

// orgShare creates a share of n as its administrator, with subscribers subs.
func (k *isoCast) orgShare(n *isoTenant, subs []share.Entry) uint64 {
	k.t.Helper()
	ctx := context.Background()
	c, err := k.f.accounts.Caller(ctx, n.admin.ID)
	if err != nil {
		k.t.Fatal(err)
	}
	r, err := k.shares.CreateOrgShare(ctx, c, n.org.ID, k.next())
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.shares.SetSubscribers(ctx, c, n.org.ID, r.ID, share.Subscribers{Persons: subs}); err != nil {
		k.t.Fatal(err)
	}
	return r.ID
}

// fileServerOn turns file_server_enabled on, which mappings/create
// needs.
func fileServerOn(p *account.Policy) { p.FileServerEnabled = true }

// adminShareMapping is the form of a mapping of /m/share to a fresh
// organization share of the child that its plain person and its
// administrator (who made it) both edit.
func adminShareMapping(q isoReq) url.Values {
	id := q.k.orgShare(q.c, []share.Entry{{ID: q.c.plain.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator}})
	return url.Values{"path": {"/m/share"}, "root_id": {fmt.Sprint(id)}}
}

// Directory servers: adOn lets the parent and the child (and the other
// tenant) use them; cSource, pSource and oSource are fresh ones of the
// child, the parent and the other tenant, at a loopback port nobody
// answers at.
func adOn(q isoReq) {
	for _, id := range []uint64{q.k.p.org.ID, q.c.org.ID, q.k.o.org.ID} {
		if _, err := q.k.f.accounts.UpdatePolicy(context.Background(), id, func(p *account.Policy) error { p.ADEnabled = true; return nil }); err != nil {
			q.k.t.Fatal(err)
		}
	}
}
func sourceIn(q isoReq, org uint64) any {
	adOn(q)
	a, err := q.k.f.accounts.CreateAuthSource(context.Background(), account.AuthSourceInput{OrganizationID: org, Host: "127.0.0.1", Port: 1,
		Domain: "example.com", Login: "cn=reader,dc=example,dc=com", Password: "x"})
	if err != nil {
		q.k.t.Fatal(err)
	}
	return a.ID
}
func cSource(q isoReq) any { return sourceIn(q, q.c.org.ID) }
func pSource(q isoReq) any { return sourceIn(q, q.k.p.org.ID) }
func oSource(q isoReq) any { return sourceIn(q, q.k.o.org.ID) }
func sourceIsoForm(q isoReq) url.Values {
	adOn(q)
	return url.Values{"host": {"ldap.example.com"}, "domain": {"example.com"}, "login": {"cn=reader,dc=example,dc=com"}, "password": {"x"}}
}

func newCGroup(q isoReq) any { return q.k.group(q.c).ID }
func newCFile(q isoReq) any {
	return q.k.upload(q.c, fmt.Sprintf("/api/2/files/%d/upload", q.c.root), q.k.next()+".txt")
}
func newCFolder(q isoReq) any {
	return q.k.mkdir(q.c, fmt.Sprintf("/api/2/files/%d/create_folder", q.c.root), q.k.next())
}

func fields(kv ...string) func(q isoReq) url.Values {
	return func(isoReq) url.Values {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
}

// named returns the form kv... with name (or the field given) set to a
// fresh marker-free name, and company_id set to org.
func newNamed(field string, org func(isoReq) any, kv ...string) func(q isoReq) url.Values {
	return func(q isoReq) url.Values {
		v := fields(kv...)(q)
		switch field {
		case "email":
			v.Set(field, q.k.next()+"@example.com")
		case "":
		default:
			v.Set(field, q.k.next())
		}
		if org != nil {
			v.Set("company_id", fmt.Sprint(org(q)))
		}
		return v
	}
}

// newPersonForm is a person/create form of a fresh person of org.
func newPersonForm(org func(isoReq) any) func(q isoReq) url.Values {
	return func(q isoReq) url.Values {
		n := q.k.next()
		return url.Values{"username": {n}, "email": {n + "@example.com"}, "company_id": {fmt.Sprint(org(q))}}
	}
}

// isoRows is the table: requests at the child's things, then at the
// parent's (which CP and CA must not see), then the file system.
func isoRows() []isoRow {
	const (
		childAdmin   = "CG=403 CP=403 CA=200 PA=200" // administration of the child
		childRead    = "CP=200 CA=200 PA=200"        // also for the child's plain person
		childHidden  = "CP=404 CA=200 PA=200"        // another person's things
		childGovern  = "CG=403 CP=403 CA=403 PA=200" // the parent's over the child
		parentAdmin  = "PP=403 CP=404 CA=404 PA=200"
		parentHidden = "PP=404 CP=404 CA=404 PA=200"
		allRead      = "OP=200 OA=200 PP=200 CG=200 CP=200 CA=200 PA=200"
		fsOwner      = "CP=200 CA=404 PA=404" // a root without admin_browse_files
		fsBrowse     = "CP=200 CA=200 PA=200" // reads with admin_browse_files
		fsBrowseW    = "CP=200 CA=403 PA=403" // writes with admin_browse_files
	)
	byEmail := func(q isoReq) any { return url.PathEscape(q.c.plain.Email) }
	guestEmail := func(q isoReq) any { return url.PathEscape(q.c.guest.Email) }
	key := func(q isoReq) any { return q.k.licenseKey(q.c) }
	rows := []isoRow{
		// Persons (4.8).
		{pattern: "GET /api/2/person", name: "self", path: pf("/api/2/person"), want: allRead},
		{pattern: "GET /api/2/person/{ref}", name: "the child's plain person", path: pf("/api/2/person/%d", cPlain), want: childRead},
		{pattern: "GET /api/2/person/{ref}", name: "by e-mail", path: pf("/api/2/person/%s", byEmail), want: childRead},
		{pattern: "GET /api/2/person/{ref}", name: "the child's administrator", path: pf("/api/2/person/%d", cAdmin), want: childHidden},
		{pattern: "GET /api/2/person/{ref}", name: "a guest is no person", path: pf("/api/2/person/%d", cGuest), want: "CP=404 CA=404 PA=404"},
		{pattern: "GET /api/2/person/{ref}", name: "the parent's plain person", path: pf("/api/2/person/%d", pPlain), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/person/create", name: "in the child", method: "POST", path: pf("/api/2/person/create"),
			form: newPersonForm(cOrg), want: childAdmin},
		{pattern: "POST /api/2/person/create", name: "in the parent", method: "POST", path: pf("/api/2/person/create"),
			form: newPersonForm(pOrg), want: parentAdmin},
		{pattern: "POST /api/2/person/create", name: "admin_create_users off", method: "POST", path: pf("/api/2/person/create"),
			form: newPersonForm(cOrg), want: "CG=403 CP=403 CA=403 PA=200", tenant: "browse"},
		{pattern: "POST /api/2/person/{id}/update", name: "names", method: "POST", path: pf("/api/2/person/%d/update", cPlain),
			form: fields("first_name", "Frank"), want: childRead},
		{pattern: "POST /api/2/person/{id}/update", name: "quota", method: "POST", path: pf("/api/2/person/%d/update", cPlain),
			form: fields("space_quota", "0"), want: childAdmin + " CG=404"},
		// Escalation: a plain person making themselves an administrator
		// or lifting their quota; the child's administrator making the
		// parent's person one (the parent's administrator would succeed
		// and change the cast, so is left out).
		{pattern: "POST /api/2/person/{id}/update", name: "a plain person makes themselves an administrator", method: "POST", path: pf("/api/2/person/%d/update", cPlain),
			form: fields("admin", "true"), want: "CG=404 CP=403 CA=- PA=-"},
		{pattern: "POST /api/2/person/{id}/update", name: "a plain person sets their own password without the current one", method: "POST", path: pf("/api/2/person/%d/update", cPlain),
			form: fields("password", "another long password"), want: "CG=404 CP=400 CA=- PA=-"},
		{pattern: "POST /api/2/person/{id}/update", name: "the child's administrator makes the parent's person one", method: "POST", path: pf("/api/2/person/%d/update", pPlain),
			form: fields("admin", "true"), want: "PP=403 CP=404 CA=404 PA=-"},
		{pattern: "POST /api/2/person/{id}/update", name: "the child's administrator resets the parent's administrator's password", method: "POST",
			path: pf("/api/2/person/%d/update", func(q isoReq) any { return q.k.p.admin.ID }), form: fields("password", "another long password"), want: "PP=404 CP=404 CA=404 PA=-"},
		// The take-over of an account above, piece by piece: the
		// parent's administrator's e-mail (a login, and where sign-in
		// codes go), their active flag, their administrator flag, their
		// two-step state and the account itself are out of the child's
		// administrator's sight (the parent's administrator is not sent
		// these: they would end the cast's own).
		{pattern: "POST /api/2/person/{id}/update", name: "the child's administrator moves the parent's administrator's e-mail", method: "POST",
			path: pf("/api/2/person/%d/update", pAdmin), form: fields("email", "taken@example.com"), want: "PP=404 CP=404 CA=404 PA=-"},
		{pattern: "POST /api/2/person/{id}/update", name: "the child's administrator disables or demotes the parent's administrator", method: "POST",
			path: pf("/api/2/person/%d/update", pAdmin), form: func(isoReq) url.Values { return url.Values{"active": {"false"}, "admin": {"false"}} }, want: "PP=404 CP=404 CA=404 PA=-"},
		{pattern: "POST /api/2/person/{id}/two_step/reset", name: "the parent's administrator", method: "POST", path: pf("/api/2/person/%d/two_step/reset", pAdmin), want: "PP=404 CP=404 CA=404 PA=-"},
		{pattern: "POST /api/2/person/{id}/delete", name: "the parent's administrator", method: "POST", path: pf("/api/2/person/%d/delete", pAdmin), want: "PP=404 CP=404 CA=404 PA=-"},
		{pattern: "POST /api/2/guest/{id}/update", name: "a guest makes itself active", method: "POST", path: pf("/api/2/guest/%d/update", cGuest),
			form: fields("active", "true"), want: "CG=403 CP=404 CA=- PA=-"},
		{pattern: "POST /api/2/person/{id}/update", name: "another person of the child", method: "POST", path: pf("/api/2/person/%d/update", cAdmin),
			form: fields("first_name", "Erin"), want: childHidden},
		{pattern: "POST /api/2/person/{id}/update", name: "the parent's plain person", method: "POST", path: pf("/api/2/person/%d/update", pPlain),
			form: fields("first_name", "Bob"), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/person/{id}/delete", name: "a person of the child", method: "POST", path: pf("/api/2/person/%d/delete", newCPerson), want: childHidden},
		{pattern: "POST /api/2/person/{id}/delete", name: "oneself", method: "POST", path: pf("/api/2/person/%d/delete", cPlain), want: "CP=403 CA=- PA=-"},
		{pattern: "POST /api/2/person/{id}/delete", name: "a person of the parent", method: "POST", path: pf("/api/2/person/%d/delete", newPPerson), want: parentHidden},
		{pattern: "POST /api/2/person/{id}/delete", name: "admin_create_users off", method: "POST", path: pf("/api/2/person/%d/delete", newCPerson),
			want: "CP=404 CA=403 PA=200", tenant: "browse"},
		// admin_create_users off binds the child's administrators below
		// the child too: an organization of their own making is no way
		// around it (found in review).
		{pattern: "POST /api/2/person/create", name: "admin_create_users off, in a grandchild", method: "POST", path: pf("/api/2/person/create"),
			form: newPersonForm(newGrandchild), want: "CP=404 CA=403 PA=200", tenant: "browse"},
		{pattern: "POST /api/2/guest/create", name: "admin_create_users off, in a grandchild", method: "POST", path: pf("/api/2/guest/create"),
			form: newNamed("email", newGrandchild), want: "CP=404 CA=403 PA=200", tenant: "browse"},
		{pattern: "POST /api/2/person/{id}/delete", name: "admin_create_users off, in a grandchild", method: "POST",
			path: pf("/api/2/person/%d/delete", func(q isoReq) any { return q.k.personIn(newGrandchild(q).(uint64)).ID }), want: "CP=404 CA=403 PA=200", tenant: "browse"},
		{pattern: "POST /api/2/guest/{id}/convert", name: "admin_create_users off", method: "POST", path: pf("/api/2/guest/%d/convert", newCGuest),
			want: "CP=404 CA=403 PA=200", tenant: "browse"},
		{pattern: "POST /api/2/person/{id}/roots/create", name: "a person of the child", method: "POST", path: pf("/api/2/person/%d/roots/create", newCPerson), want: childHidden},
		{pattern: "POST /api/2/person/{id}/roots/create", name: "oneself (the root there)", method: "POST", path: pf("/api/2/person/%d/roots/create", cPlain), want: childRead},
		{pattern: "POST /api/2/person/{id}/roots/create", name: "a person of the parent", method: "POST", path: pf("/api/2/person/%d/roots/create", newPPerson), want: parentHidden},
		{pattern: "POST /api/2/person/{id}/unlock", method: "POST", path: pf("/api/2/person/%d/unlock", cPlain), want: childAdmin + " CG=404"},
		{pattern: "POST /api/2/person/{id}/unlock", name: "the parent's plain person", method: "POST", path: pf("/api/2/person/%d/unlock", pPlain), want: parentAdmin},
		// Device passwords (docs/api.md "Device passwords"): the account
		// makes them, its administrators list and revoke them.
		{pattern: "GET /api/2/person/{id}/device_passwords", path: pf("/api/2/person/%d/device_passwords", cPlain), want: childRead},
		{pattern: "GET /api/2/person/{id}/device_passwords", name: "the parent's plain person", path: pf("/api/2/person/%d/device_passwords", pPlain), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/person/{id}/device_passwords/create", method: "POST", path: pf("/api/2/person/%d/device_passwords/create", cPlain),
			form: fields("name", "laptop", "current_password", fixturePassword), want: "CP=200 CA=403 PA=403"},
		{pattern: "POST /api/2/person/{id}/device_passwords/create", name: "no name", method: "POST", path: pf("/api/2/person/%d/device_passwords/create", cPlain),
			form: fields("current_password", fixturePassword), want: "CP=400 CA=403 PA=403"},
		{pattern: "POST /api/2/person/{id}/device_passwords/create", name: "the guest, for itself", method: "POST", path: pf("/api/2/person/%d/device_passwords/create", cGuest),
			form: fields("name", "laptop", "current_password", fixturePassword), want: "CG=200 CP=404 CA=403 PA=403"},
		{pattern: "POST /api/2/person/{id}/device_passwords/create", name: "the parent's plain person", method: "POST", path: pf("/api/2/person/%d/device_passwords/create", pPlain),
			form: fields("name", "laptop", "current_password", fixturePassword), want: "PP=200 CP=404 CA=404 PA=403"},
		{pattern: "POST /api/2/person/{id}/device_password/{device_password_id}/delete", method: "POST",
			path: pf("/api/2/person/%d/device_password/%d/delete", cPlain, newDevicePassword(cPlain)), want: childRead},
		{pattern: "POST /api/2/person/{id}/device_password/{device_password_id}/delete", name: "the parent's plain person's", method: "POST",
			path: pf("/api/2/person/%d/device_password/%d/delete", pPlain, newDevicePassword(pPlain)), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/person/{id}/device_password/{device_password_id}/delete", name: "another person's, through the plain person", method: "POST",
			path: pf("/api/2/person/%d/device_password/%d/delete", cPlain, newDevicePassword(cAdmin)), want: "CP=404 CA=404 PA=404"},
		// Machines (4.11): the machine's person and those who
		// administer them; what needs the agent answers 503 while it is
		// offline.
		{pattern: "GET /api/2/machine/{machine_id}", path: pf("/api/2/machine/%d", newMachine(cPlain)), want: childRead},
		{pattern: "GET /api/2/machine/{machine_id}/status", name: "offline", path: pf("/api/2/machine/%d/status", newMachine(cPlain)), want: "CP=503 CA=503 PA=503"},
		{pattern: "POST /api/2/machine/{machine_id}/server/enable", name: "file_server_enabled off", method: "POST", path: pf("/api/2/machine/%d/server/enable", newMachine(cPlain)), want: "CP=403 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/server/disable", method: "POST", path: pf("/api/2/machine/%d/server/disable", newMachine(cPlain)), want: childRead},
		{pattern: "POST /api/2/machine/{machine_id}/ls", name: "no path", method: "POST", path: pf("/api/2/machine/%d/ls", newMachine(cPlain)), want: "CP=400 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/ls", name: "a folder neither mapped nor backed up", method: "POST", path: pf("/api/2/machine/%d/ls", newMachine(cPlain)),
			form: fields("path", "/etc"), want: "CP=403 CA=403 PA=403"},
		{pattern: "GET /api/2/machine/{machine_id}/mappings", path: pf("/api/2/machine/%d/mappings", newMachine(cPlain)), want: childRead},
		{pattern: "GET /api/2/machine/{machine_id}/mappings/active", path: pf("/api/2/machine/%d/mappings/active", newMachine(cPlain)), want: childRead},
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "file server off", method: "POST", path: pf("/api/2/machine/%d/mappings/create", newMachine(cPlain)),
			form: func(q isoReq) url.Values { return url.Values{"path": {"/home/x"}, "root_id": {fmt.Sprint(q.c.root)}} }, want: "CP=403 CA=403 PA=403"},
		{pattern: "GET /api/2/machine/{machine_id}/mapping/{mapping_id}", name: "none", path: pf("/api/2/machine/%d/mapping/999999", newMachine(cPlain)), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/mapping/{mapping_id}/delete", name: "none", method: "POST", path: pf("/api/2/machine/%d/mapping/999999/delete", newMachine(cPlain)), want: "CP=404 CA=404 PA=404"},
		{pattern: "GET /api/2/machine/{machine_id}/backups", path: pf("/api/2/machine/%d/backups", newMachine(cPlain)), want: childRead},
		{pattern: "POST /api/2/machine/{machine_id}/backups/create", method: "POST", path: pf("/api/2/machine/%d/backups/create", newMachine(cPlain)),
			form: fields("path", "/home/x"), want: childRead},
		{pattern: "GET /api/2/machine/{machine_id}/backup/{root_id}", name: "none", path: pf("/api/2/machine/%d/backup/999999", newMachine(cPlain)), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/restore", name: "none", method: "POST", path: pf("/api/2/machine/%d/backup/999999/restore", newMachine(cPlain)), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/delete", name: "none", method: "POST", path: pf("/api/2/machine/%d/backup/999999/delete", newMachine(cPlain)), want: "CP=404 CA=404 PA=404"},
		// Machines with a mapping and a backup: the existing ones are
		// the machine's person's and their administrators'; another
		// machine's id through this machine's path is 404 to everyone.
		{pattern: "GET /api/2/machine/{machine_id}", name: "the parent's plain person's", path: machinePath(true, "/api/2/machine/%d", noIDs), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/machine/{machine_id}/status", name: "the parent's plain person's, offline", path: machinePath(true, "/api/2/machine/%d/status", noIDs), want: "PP=503 CP=404 CA=404 PA=503"},
		{pattern: "POST /api/2/machine/{machine_id}/ls", name: "a mapped folder, offline", method: "POST", path: machinePath(false, "/api/2/machine/%d/ls", noIDs),
			form: fields("path", "/m/map/sub"), want: "CP=503 CA=403 PA=403"},
		// admin_browse_remote on (the browse tenant): the machine's
		// person's administrators may list it too.
		{pattern: "POST /api/2/machine/{machine_id}/ls", name: "a mapped folder, offline, admin_browse_remote on", method: "POST", path: machinePath(false, "/api/2/machine/%d/ls", noIDs),
			form: fields("path", "/m/map/sub"), want: "CP=503 CA=503 PA=503", tenant: "browse"},
		// admin_browse_remote withheld from the child's administrators
		// (c1's policy, set above them) binds them below the child too:
		// a grandchild of theirs that turns it on is no way around it,
		// and the parent's (top-level) administrators list it.
		{pattern: "POST /api/2/machine/{machine_id}/ls", name: "a grandchild's person's mapped folder, admin_browse_remote on there, offline", method: "POST", path: grandchildMachinePath("/api/2/machine/%d/ls"),
			form: fields("path", "/m/map/sub"), want: "CP=404 CA=403 PA=503"},
		// A mapping an administrator makes brings a folder of the
		// person's disk up into a root the administrator reads: it is
		// admin_browse_remote's, as ls is.
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "file server on, a share of the child, admin_browse_remote off", method: "POST", path: withFileServer(true, true, pf("/api/2/machine/%d/mappings/create", newServerMachine(cPlain))),
			form: cShareMapForm, want: "CP=404 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "file server on, a share of the child, admin_browse_remote on", method: "POST", path: withFileServer(true, true, pf("/api/2/machine/%d/mappings/create", newServerMachine(cPlain))),
			// A share the machine's person is not in: refused as one
			// their agent could not sync (the row of an organization
			// share both edit, below, is admin_browse_remote's 200).
			form: cShareMapForm, want: "CP=404 CA=403 PA=403", tenant: "browse"},
		{pattern: "POST /api/2/machine/{machine_id}/ls", name: "a backed-up folder of the parent's plain person, offline", method: "POST", path: machinePath(true, "/api/2/machine/%d/ls", noIDs),
			form: fields("path", "/m/backup"), want: "PP=503 CP=404 CA=404 PA=403"},
		{pattern: "GET /api/2/machine/{machine_id}/mappings", name: "the parent's plain person's", path: machinePath(true, "/api/2/machine/%d/mappings", noIDs), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/machine/{machine_id}/mappings/active", name: "the parent's plain person's", path: machinePath(true, "/api/2/machine/%d/mappings/active", noIDs), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/machine/{machine_id}/mappings/active", name: "the child's plain person's", path: machinePath(false, "/api/2/machine/%d/mappings/active", noIDs), want: childRead},
		{pattern: "GET /api/2/machine/{machine_id}/mapping/{mapping_id}", name: "an existing one", path: machinePath(false, "/api/2/machine/%d/mapping/%d", mappingID), want: childRead},
		{pattern: "GET /api/2/machine/{machine_id}/mapping/{mapping_id}", name: "the parent's plain person's", path: machinePath(true, "/api/2/machine/%d/mapping/%d", mappingID), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/machine/{machine_id}/mapping/{mapping_id}", name: "another machine's, through this one", path: crossMachinePath("/api/2/machine/%d/mapping/%d", true), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/mapping/{mapping_id}/delete", name: "an existing one", method: "POST", path: machinePath(false, "/api/2/machine/%d/mapping/%d/delete", mappingID), want: childRead},
		{pattern: "POST /api/2/machine/{machine_id}/mapping/{mapping_id}/delete", name: "the parent's plain person's", method: "POST", path: machinePath(true, "/api/2/machine/%d/mapping/%d/delete", mappingID), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/machine/{machine_id}/mapping/{mapping_id}/delete", name: "another machine's, through this one", method: "POST", path: crossMachinePath("/api/2/machine/%d/mapping/%d/delete", true), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "file server on, the person's root", method: "POST", tenant: "fresh",
			path: withFileServer(true, true, pf("/api/2/machine/%d/mappings/create", newServerMachine(cPlain))),
			form: func(q isoReq) url.Values { return url.Values{"path": {"/m/map"}, "root_id": {fmt.Sprint(q.c.root)}} }, want: "CP=200 CA=404 PA=404"},
		// file_server_enabled turned off after the machine's file server
		// was enabled: no new mapping (before, only server/enable read
		// the policy).
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "file server on, file_server_enabled off since", method: "POST", path: withFileServer(true, false, pf("/api/2/machine/%d/mappings/create", newServerMachine(cPlain))),
			form: func(q isoReq) url.Values { return url.Values{"path": {"/m/map"}, "root_id": {fmt.Sprint(q.c.root)}} }, want: "CP=403 CA=403 PA=403"},
		// An administrator's root mapped onto a person's machine (an
		// organization share both edit) would have the agent upload the
		// person's folder to it and write its files there: that is
		// admin_browse_remote's to allow, as ls is. So is a restore into
		// a folder outside the backup's. Before, both were open to the
		// administrators whatever the policy.
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "an organization share the administrators edit too", method: "POST", tenant: "fresh",
			path: withFileServer(true, true, pf("/api/2/machine/%d/mappings/create", newServerMachine(cPlain))), form: adminShareMapping, want: "CP=200 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "an organization share the administrators edit too, admin_browse_remote on", method: "POST", tenant: "browse",
			path: withFileServer(true, true, pf("/api/2/machine/%d/mappings/create", newServerMachine(cPlain))), form: adminShareMapping, want: "CP=200 CA=200 PA=200"},
		// A root the machine's person cannot read and write, mapped by
		// their administrator: the agent, syncing as the person, never
		// could (before, the mapping was made).
		{pattern: "POST /api/2/machine/{machine_id}/mappings/create", name: "an organization share the person is not in, admin_browse_remote on", method: "POST", tenant: "browse",
			path: withFileServer(true, true, pf("/api/2/machine/%d/mappings/create", newServerMachine(cPlain))),
			form: func(q isoReq) url.Values {
				return url.Values{"path": {"/m/share"}, "root_id": {fmt.Sprint(q.k.orgShare(q.c, nil))}}
			}, want: "CP=404 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/restore", name: "a target outside the backup's folder, offline", method: "POST", path: machinePath(false, "/api/2/machine/%d/backup/%d/restore", backupID),
			form: fields("target", "/home/p/.config/autostart"), want: "CP=503 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/restore", name: "a target inside the backup's folder, offline", method: "POST", path: machinePath(false, "/api/2/machine/%d/backup/%d/restore", backupID),
			form: fields("target", "/m/backup/sub"), want: "CP=503 CA=503 PA=503"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/restore", name: "a target outside the backup's folder, offline, admin_browse_remote on", method: "POST", path: machinePath(false, "/api/2/machine/%d/backup/%d/restore", backupID),
			form: fields("target", "/home/p/.config/autostart"), want: "CP=503 CA=503 PA=503", tenant: "browse"},
		{pattern: "GET /api/2/machine/{machine_id}/backups", name: "the parent's plain person's", path: machinePath(true, "/api/2/machine/%d/backups", noIDs), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/machine/{machine_id}/backup/{root_id}", name: "an existing one", path: machinePath(false, "/api/2/machine/%d/backup/%d", backupID), want: childRead},
		{pattern: "GET /api/2/machine/{machine_id}/backup/{root_id}", name: "the parent's plain person's", path: machinePath(true, "/api/2/machine/%d/backup/%d", backupID), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/machine/{machine_id}/backup/{root_id}", name: "another machine's, through this one", path: crossMachinePath("/api/2/machine/%d/backup/%d", false), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/restore", name: "an existing one, offline", method: "POST", path: machinePath(false, "/api/2/machine/%d/backup/%d/restore", backupID), want: "CP=503 CA=503 PA=503"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/restore", name: "another machine's, through this one", method: "POST", path: crossMachinePath("/api/2/machine/%d/backup/%d/restore", false), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/delete", name: "an existing one", method: "POST", path: machinePath(false, "/api/2/machine/%d/backup/%d/delete", backupID), want: childRead},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/delete", name: "the parent's plain person's", method: "POST", path: machinePath(true, "/api/2/machine/%d/backup/%d/delete", backupID), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/delete", name: "another machine's, through this one", method: "POST", path: crossMachinePath("/api/2/machine/%d/backup/%d/delete", false), want: "CP=404 CA=404 PA=404"},
		// The policy's gates, in a child tenant of its own.
		{pattern: "POST /api/2/machine/{machine_id}/backups/create", name: "backups_enabled off", method: "POST", tenant: "fresh",
			path: withPolicy(func(p *account.Policy) { p.BackupsEnabled = false }, pf("/api/2/machine/%d/backups/create", newMachine(cPlain))),
			form: fields("path", "/home/x"), want: "CP=403 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/backups/create", name: "user_create_backups off: administrators only", method: "POST", tenant: "fresh",
			path: withPolicy(func(p *account.Policy) { p.UserCreateBackups = false }, pf("/api/2/machine/%d/backups/create", newMachine(cPlain))),
			form: fields("path", "/home/x"), want: "CP=403 CA=200 PA=200"},
		// file_server_enabled grants something, so it is the owner's
		// organization's and every one's above it (as ad_enabled): a
		// parent without it, or a child without it above a grandchild
		// of its administrators' that turns it on, withholds it below.
		{pattern: "POST /api/2/machine/{machine_id}/server/enable", name: "file_server_enabled on, in the parent too", method: "POST", tenant: "fresh",
			path: withFileServer(true, true, pf("/api/2/machine/%d/server/enable", newMachine(cPlain))), want: childRead},
		{pattern: "POST /api/2/machine/{machine_id}/server/enable", name: "file_server_enabled on, off in the parent", method: "POST", tenant: "fresh",
			path: withFileServer(false, true, pf("/api/2/machine/%d/server/enable", newMachine(cPlain))), want: "CP=403 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/server/enable", name: "file_server_enabled on in a grandchild, off in the child", method: "POST", tenant: "fresh",
			path: withFileServer(true, false, pf("/api/2/machine/%d/server/enable", newMachine(fileServerGrandchildPerson))), want: "CP=404 CA=403 PA=403"},
		// backups_enabled turned off after a backup was set up: no run
		// starts and the agent's writes into its root are refused (before,
		// start reached the agent and the runs went on storing).
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/start", name: "backups_enabled off since the backup was set up", method: "POST", tenant: "fresh",
			path: withPolicy(func(p *account.Policy) { p.BackupsEnabled = false }, machinePath(false, "/api/2/machine/%d/backup/%d/start", backupID)), want: "CP=403 CA=403 PA=403"},
		{pattern: "POST /api/2/agent/files/{root_id}/write", name: "a backup root, backups_enabled off since it was set up", method: "POST", tenant: "fresh",
			path: withPolicy(func(p *account.Policy) { p.BackupsEnabled = false }, machinePath(false, "/api/2/agent/files/%[2]d/write", backupID)),
			form: fields("path", "/n"), want: "CP=403 CA=404 PA=404"},
		// berth's backup routes (docs/api.md "Agent writes"): a write
		// needs write access to the root; start needs the backup.
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/start", name: "none", method: "POST", path: pf("/api/2/machine/%d/backup/999999/start", newMachine(cPlain)), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/agent/files/{root_id}/write", name: "not multipart", method: "POST", path: pf("/api/2/agent/files/%d/write", cRoot), form: fields("path", "/n"), want: "CP=400 CA=404 PA=404"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/start", name: "an existing one, offline", method: "POST", path: machinePath(false, "/api/2/machine/%d/backup/%d/start", backupID), want: "CP=503 CA=503 PA=503"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/start", name: "the parent's plain person's, offline", method: "POST", path: machinePath(true, "/api/2/machine/%d/backup/%d/start", backupID), want: "PP=503 CP=404 CA=404 PA=503"},
		{pattern: "POST /api/2/machine/{machine_id}/backup/{root_id}/start", name: "another machine's, through this one", method: "POST", path: crossMachinePath("/api/2/machine/%d/backup/%d/start", false), want: "CP=404 CA=404 PA=404"},
		// The agent's channel (docs/agent.md): only a machine's own
		// token; the walk checks the anonymous caller (a stream that
		// stays open is the agent tests').
		{pattern: "GET /api/2/agent/channel", want: "OP=- OA=- PP=- CG=- CP=- CA=- PA=-", path: pf("/api/2/agent/channel")},
		{pattern: "POST /api/2/agent/reply/{call_id}", name: "a token issued to no machine", method: "POST", path: pf("/api/2/agent/reply/zz"), want: "OP=403 OA=403 PP=403 CG=403 CP=403 CA=403 PA=403"},
		// Another node's relayed call (agentrelay.go): the cluster secret
		// only; no token of anyone reaches it (TestRelayRouteRefusals
		// has the node that has a secret).
		{pattern: "POST /api/2/agent/relay/{machine_id}", name: "any token, no cluster secret", method: "POST", path: pf("/api/2/agent/relay/1"), want: "none=403 OP=403 OA=403 PP=403 CG=403 CP=403 CA=403 PA=403"},
		{pattern: "POST /api/2/machine/{machine_id}/delete", name: "the plain person's", method: "POST",
			path: pf("/api/2/machine/%d/delete", newMachine(cPlain)), want: childRead},
		{pattern: "POST /api/2/machine/{machine_id}/delete", name: "the parent's plain person's", method: "POST",
			path: pf("/api/2/machine/%d/delete", newMachine(pPlain)), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/machine/{machine_id}/delete", name: "the guest's", method: "POST",
			path: pf("/api/2/machine/%d/delete", newMachine(cGuest)), want: "CG=200 CP=404 CA=200 PA=200"},
		// Two-step verification (berth's routes): the person enrolls
		// themself; administrators above read and reset.
		{pattern: "GET /api/2/person/{id}/two_step", path: pf("/api/2/person/%d/two_step", cPlain), want: childRead},
		{pattern: "GET /api/2/person/{id}/two_step", name: "another person of the child", path: pf("/api/2/person/%d/two_step", cAdmin), want: childHidden},
		{pattern: "GET /api/2/person/{id}/two_step", name: "the parent's plain person", path: pf("/api/2/person/%d/two_step", pPlain), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/person/{id}/two_step/enroll", method: "POST", path: pf("/api/2/person/%d/two_step/enroll", cPlain),
			form: fields("mode", "authenticator", "current_password", fixturePassword), want: "CP=200 CA=403 PA=403"},
		{pattern: "POST /api/2/person/{id}/two_step/enroll", name: "the parent's plain person", method: "POST", path: pf("/api/2/person/%d/two_step/enroll", pPlain),
			form: fields("mode", "authenticator", "current_password", fixturePassword), want: "PP=200 CP=404 CA=404 PA=403"},
		{pattern: "POST /api/2/person/{id}/two_step/confirm", name: "a wrong code", method: "POST", path: pf("/api/2/person/%d/two_step/confirm", cPlain),
			form: fields("auth_code", "000000"), want: "CP=400 CA=403 PA=403"},
		{pattern: "POST /api/2/person/{id}/two_step/recovery_codes", name: "not enrolled", method: "POST", path: pf("/api/2/person/%d/two_step/recovery_codes", cPlain),
			form: fields("current_password", fixturePassword), want: "CP=400 CA=403 PA=403"},
		{pattern: "POST /api/2/person/{id}/two_step/disable", method: "POST", path: pf("/api/2/person/%d/two_step/disable", cPlain),
			form: fields("current_password", fixturePassword), want: "CP=200 CA=403 PA=403"},
		{pattern: "POST /api/2/person/{id}/two_step/reset", method: "POST", path: pf("/api/2/person/%d/two_step/reset", cPlain), want: childAdmin + " CG=404"},
		{pattern: "POST /api/2/person/{id}/two_step/reset", name: "another person of the child", method: "POST", path: pf("/api/2/person/%d/two_step/reset", cAdmin), want: childHidden},
		{pattern: "POST /api/2/person/{id}/two_step/reset", name: "the parent's plain person", method: "POST", path: pf("/api/2/person/%d/two_step/reset", pPlain), want: parentAdmin},
		{pattern: "GET /api/2/organization/{org}/persons", path: pf("/api/2/organization/%d/persons", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/persons", name: "the parent", path: pf("/api/2/organization/%d/persons", pOrg), want: parentAdmin},

		// Organizations (4.6).
		{pattern: "GET /api/2/organization/{org}", path: pf("/api/2/organization/%d", cOrg), want: childRead + " CG=200"},
		{pattern: "GET /api/2/organization/{org}", name: "by license key", path: pf("/api/2/organization/%s", key), want: childRead + " CG=200"},
		{pattern: "GET /api/2/organization/{org}", name: "the parent", path: pf("/api/2/organization/%d", pOrg), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/organization/{org}/license_key", path: pf("/api/2/organization/%d/license_key", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/license_key", name: "the parent", path: pf("/api/2/organization/%d/license_key", pOrg), want: parentAdmin},
		{pattern: "POST /api/2/organization/{org}/organizations/create", method: "POST", path: pf("/api/2/organization/%d/organizations/create", cOrg),
			form: newNamed("name", nil), want: childAdmin},
		{pattern: "POST /api/2/organization/{org}/organizations/create", name: "the parent", method: "POST", path: pf("/api/2/organization/%d/organizations/create", pOrg),
			form: newNamed("name", nil), want: parentAdmin},
		{pattern: "POST /api/2/organization/{org}/update", method: "POST", path: pf("/api/2/organization/%d/update", cOrg),
			form: fields("description", "d"), want: childAdmin},
		{pattern: "POST /api/2/organization/{org}/update", name: "the parent", method: "POST", path: pf("/api/2/organization/%d/update", pOrg),
			form: fields("description", "d"), want: parentAdmin},
		{pattern: "POST /api/2/organization/{org}/disable", method: "POST", path: pf("/api/2/organization/%d/disable", cOrg), want: childGovern, tenant: "fresh"},
		{pattern: "POST /api/2/organization/{org}/disable", name: "the top-level parent", method: "POST", path: pf("/api/2/organization/%d/disable", pOrg), want: "PP=403 CP=404 CA=404 PA=403"},
		{pattern: "POST /api/2/organization/{org}/enable", method: "POST", path: pf("/api/2/organization/%d/enable", cOrg), want: childGovern},
		{pattern: "POST /api/2/organization/{org}/enable", name: "the top-level parent", method: "POST", path: pf("/api/2/organization/%d/enable", pOrg), want: "PP=403 CP=404 CA=404 PA=403"},
		{pattern: "POST /api/2/organization/{org}/delete", method: "POST", path: pf("/api/2/organization/%d/delete", cOrg), want: childGovern, tenant: "fresh"},
		{pattern: "POST /api/2/organization/{org}/delete", name: "the top-level parent", method: "POST", path: pf("/api/2/organization/%d/delete", pOrg), want: "PP=403 CP=404 CA=404 PA=403"},
		{pattern: "POST /api/2/organization/{org}/policy/update", method: "POST", path: pf("/api/2/organization/%d/policy/update", cOrg),
			form: fields("user_create_shares", "true"), want: childGovern},
		{pattern: "POST /api/2/organization/{org}/policy/update", name: "the top-level parent", method: "POST", path: pf("/api/2/organization/%d/policy/update", pOrg),
			form: fields("user_create_shares", "true"), want: parentAdmin},
		{pattern: "GET /api/2/organization/{org}/organizations", path: pf("/api/2/organization/%d/organizations", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/organizations", name: "the parent", path: pf("/api/2/organization/%d/organizations", pOrg), want: parentAdmin},
		{pattern: "GET /api/2/organization/{org}/roots", path: pf("/api/2/organization/%d/roots", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/roots", name: "the parent", path: pf("/api/2/organization/%d/roots", pOrg), want: parentAdmin},
		{pattern: "GET /api/2/organization/{org}/root/{root_id}", path: pf("/api/2/organization/%d/root/%d", cOrg, cRoot), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/root/{root_id}", name: "the parent's root through the child", path: pf("/api/2/organization/%d/root/%d", cOrg, pRoot), want: "CG=403 CP=403 CA=404 PA=404"},
		{pattern: "GET /api/2/organization/{org}/root/{root_id}", name: "the child's root through the parent", path: pf("/api/2/organization/%d/root/%d", pOrg, cRoot), want: "PP=403 CP=404 CA=404 PA=404"},
		{pattern: "GET /api/2/organization/{org}/machines", path: pf("/api/2/organization/%d/machines", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/machines", name: "the parent", path: pf("/api/2/organization/%d/machines", pOrg), want: parentAdmin},
		{pattern: "GET /api/2/organization/{org}/metrics/usage", path: pf("/api/2/organization/%d/metrics/usage", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/metrics/usage", name: "the parent", path: pf("/api/2/organization/%d/metrics/usage", pOrg), want: parentAdmin},
		{pattern: "GET /api/2/organization/{org}/auth_sources", path: pf("/api/2/organization/%d/auth_sources", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/auth_sources", name: "the parent", path: pf("/api/2/organization/%d/auth_sources", pOrg), want: parentAdmin},
		{pattern: "GET /api/2/organization/{org}/auth_sources", name: "with a source", path: pf("/api/2/organization/%d/auth_sources?s=%d", cOrg, cSource), want: childAdmin},
		{pattern: "POST /api/2/organization/{org}/auth_sources/create", method: "POST", path: pf("/api/2/organization/%d/auth_sources/create", cOrg),
			form: sourceIsoForm, want: childAdmin},
		{pattern: "POST /api/2/organization/{org}/auth_sources/create", name: "the parent", method: "POST", path: pf("/api/2/organization/%d/auth_sources/create", pOrg),
			form: sourceIsoForm, want: parentAdmin},
		{pattern: "GET /api/2/auth_source/{id}", path: pf("/api/2/auth_source/%d", cSource), want: childAdmin},
		{pattern: "GET /api/2/auth_source/{id}", name: "the parent's", path: pf("/api/2/auth_source/%d", pSource), want: parentAdmin},
		{pattern: "POST /api/2/auth_source/{id}/update", method: "POST", path: pf("/api/2/auth_source/%d/update", cSource), form: fields("port", "10389"), want: childAdmin},
		{pattern: "POST /api/2/auth_source/{id}/update", name: "the parent's", method: "POST", path: pf("/api/2/auth_source/%d/update", pSource), form: fields("port", "10389"), want: parentAdmin},
		{pattern: "POST /api/2/auth_source/{id}/delete", method: "POST", path: pf("/api/2/auth_source/%d/delete", cSource), want: childAdmin},
		{pattern: "POST /api/2/auth_source/{id}/delete", name: "the parent's", method: "POST", path: pf("/api/2/auth_source/%d/delete", pSource), want: parentAdmin},
		{pattern: "POST /api/2/auth_source/{id}/import", name: "a server nobody answers at", method: "POST", path: pf("/api/2/auth_source/%d/import", cSource), want: "CG=403 CP=403 CA=502 PA=502"},
		{pattern: "POST /api/2/auth_source/{id}/import", name: "the parent's", method: "POST", path: pf("/api/2/auth_source/%d/import", pSource), want: "PP=403 CP=404 CA=404 PA=502"},
		{pattern: "GET /api/2/auth_source/{id}", name: "the other tenant's", path: pf("/api/2/auth_source/%d", oSource), want: "OP=403 OA=200 PP=404 CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/auth_source/{id}/delete", name: "the other tenant's", method: "POST", path: pf("/api/2/auth_source/%d/delete", oSource), want: "OP=403 OA=200 PP=404 CP=404 CA=404 PA=404"},

		// Guests (4.9).
		{pattern: "GET /api/2/guest/{ref}", path: pf("/api/2/guest/%d", cGuest), want: childHidden + " CG=200"},
		{pattern: "GET /api/2/guest/{ref}", name: "by e-mail", path: pf("/api/2/guest/%s", guestEmail), want: childHidden + " CG=200"},
		{pattern: "GET /api/2/guest/{ref}", name: "a person is no guest", path: pf("/api/2/guest/%d", cPlain), want: "CP=404 CA=404 PA=404"},
		{pattern: "POST /api/2/guest/create", name: "in the child (its persons share)", method: "POST", path: pf("/api/2/guest/create"),
			form: newNamed("email", cOrg), want: childRead + " CG=403"},
		{pattern: "POST /api/2/guest/create", name: "in the parent", method: "POST", path: pf("/api/2/guest/create"),
			form: newNamed("email", pOrg), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "POST /api/2/guest/{id}/update", method: "POST", path: pf("/api/2/guest/%d/update", cGuest), form: fields("first_name", "G"), want: childHidden + " CG=200"},
		{pattern: "POST /api/2/guest/{id}/delete", method: "POST", path: pf("/api/2/guest/%d/delete", newCGuest), want: childHidden},
		{pattern: "POST /api/2/guest/{id}/convert", method: "POST", path: pf("/api/2/guest/%d/convert", newCGuest), want: childHidden},
		{pattern: "GET /api/2/organization/{org}/guests", path: pf("/api/2/organization/%d/guests", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{org}/guests", name: "the parent", path: pf("/api/2/organization/%d/guests", pOrg), want: parentAdmin},

		// Groups (4.10).
		{pattern: "POST /api/2/group/create", method: "POST", path: pf("/api/2/group/create"), form: newNamed("name", cOrg), want: childAdmin},
		{pattern: "POST /api/2/group/create", name: "in the parent", method: "POST", path: pf("/api/2/group/create"), form: newNamed("name", pOrg), want: parentAdmin},
		{pattern: "GET /api/2/group/{group_id}", path: pf("/api/2/group/%d", cGroup), want: childAdmin},
		{pattern: "GET /api/2/group/{group_id}", name: "the parent's", path: pf("/api/2/group/%d", pGroup), want: parentAdmin},
		{pattern: "POST /api/2/group/{group_id}/update", method: "POST", path: pf("/api/2/group/%d/update", cGroup), form: newNamed("name", nil), want: childAdmin},
		{pattern: "POST /api/2/group/{group_id}/update", name: "the parent's", method: "POST", path: pf("/api/2/group/%d/update", pGroup), form: newNamed("name", nil), want: parentAdmin},
		{pattern: "GET /api/2/group/{group_id}/members", path: pf("/api/2/group/%d/members", cGroup), want: childAdmin},
		{pattern: "GET /api/2/group/{group_id}/members", name: "the parent's", path: pf("/api/2/group/%d/members", pGroup), want: parentAdmin},
		{pattern: "POST /api/2/group/{group_id}/members/update", method: "POST", path: pf("/api/2/group/%d/members/update", cGroup),
			form: func(q isoReq) url.Values { return url.Values{"add_members": {fmt.Sprint(newCPerson(q))}} }, want: childAdmin},
		{pattern: "POST /api/2/group/{group_id}/members/update", name: "adding another tenant's person", method: "POST", path: pf("/api/2/group/%d/members/update", cGroup),
			form: func(q isoReq) url.Values { return url.Values{"add_members": {fmt.Sprint(q.k.o.plain.ID)}} }, want: "CG=403 CP=403 CA=400 PA=400"},
		{pattern: "POST /api/2/group/{group_id}/members/update", name: "adding a person who does not exist", method: "POST", path: pf("/api/2/group/%d/members/update", cGroup),
			form: fields("add_members", "99999"), want: "CG=403 CP=403 CA=400 PA=400"},
		{pattern: "POST /api/2/group/{group_id}/members/update", name: "adding the parent's person to the child's group", method: "POST", path: pf("/api/2/group/%d/members/update", cGroup),
			form: func(q isoReq) url.Values { return url.Values{"add_members": {fmt.Sprint(q.k.p.plain.ID)}} }, want: "CG=403 CP=403 CA=400 PA=400"},
		{pattern: "POST /api/2/group/{group_id}/delete", method: "POST", path: pf("/api/2/group/%d/delete", newCGroup), want: childAdmin},
		{pattern: "GET /api/2/organization/{organization_id}/groups", path: pf("/api/2/organization/%d/groups", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{organization_id}/groups", name: "the parent", path: pf("/api/2/organization/%d/groups", pOrg), want: parentAdmin},

		// Activity (4.12). Notes are created last (below), so the reads
		// see only the cast's records.
		{pattern: "GET /api/2/activity/types", path: pf("/api/2/activity/types"), want: allRead},
		{pattern: "GET /api/2/activity/{activity_id}", path: pf("/api/2/activity/%d", func(q isoReq) any { return q.c.note.ID }), want: childRead},
		{pattern: "GET /api/2/activity/{activity_id}", name: "the parent's administrator's, about the child's plain person",
			path: pf("/api/2/activity/%d", func(q isoReq) any { return q.k.noteBy(q.k.p.admin, q.c.plain) }), want: childRead},
		{pattern: "GET /api/2/activity/{activity_id}", name: "the parent's", path: pf("/api/2/activity/%d", func(q isoReq) any { return q.k.p.note.ID }), want: "PP=200 CP=404 CA=404 PA=200"},
		{pattern: "GET /api/2/organization/{organization_id}/activity", path: pf("/api/2/organization/%d/activity", cOrg), want: childAdmin},
		{pattern: "GET /api/2/organization/{organization_id}/activity", name: "the parent", path: pf("/api/2/organization/%d/activity", pOrg), want: parentAdmin},
		{pattern: "GET /api/2/person/{person_id}/activity", path: pf("/api/2/person/%d/activity", cPlain), want: childRead},
		{pattern: "GET /api/2/activity/{activity_id}", name: "an upload in the child's plain person's root (file names hidden)",
			path: pf("/api/2/activity/%d", func(q isoReq) any { return q.c.fileRec }), want: childRead},
		{pattern: "GET /api/2/activity/{activity_id}", name: "a folder renamed in the child's plain person's root (names hidden)",
			path: pf("/api/2/activity/%d", func(q isoReq) any { return q.c.dirRec }), want: childRead},
		{pattern: "GET /api/2/activity/{activity_id}", name: "an upload, admin_browse_files (names shown)",
			path: pf("/api/2/activity/%d", func(q isoReq) any { return q.c.fileRec }), want: childRead, tenant: "browse"},
		{pattern: "GET /api/2/organization/{organization_id}/activity", name: "admin_browse_files", path: pf("/api/2/organization/%d/activity", cOrg), want: childAdmin, tenant: "browse"},
		{pattern: "GET /api/2/person/{person_id}/activity", name: "admin_browse_files", path: pf("/api/2/person/%d/activity", cPlain), want: childRead, tenant: "browse"},
		{pattern: "GET /api/2/person/{person_id}/activity", name: "the parent's plain person", path: pf("/api/2/person/%d/activity", pPlain), want: "PP=200 CP=404 CA=404 PA=200"},
	}

	// The file system (4.2 to 4.4), on the child's plain person's root:
	// theirs alone without admin_browse_files; readable, never writable,
	// by the administrators with it.
	fsRows := []isoRow{
		{pattern: "GET /api/2/files/{root_id}", path: pf("/api/2/files/%d", cRoot)},
		{pattern: "GET /api/2/files/{root_id}/search", path: pf("/api/2/files/%d/search?query=zq", cRoot)},
		{pattern: "GET /api/2/files/{root_id}/modified_since", path: pf("/api/2/files/%d/modified_since?since=2024-01-01T00:00:00", cRoot)},
		{pattern: "GET /api/2/files/{root_id}/{file_id}", path: pf("/api/2/files/%d/%d", cRoot, cFile)},
		{pattern: itemGetPattern, name: "a file's download", path: pf("/api/2/files/%d/%d/download", cRoot, cFile)},
		{pattern: itemGetPattern, name: "a folder", path: pf("/api/2/files/%d/folder/%d", cRoot, cFolder)},
		{pattern: "GET /api/2/files/{root_id}/folder/{folder_id}/download", path: pf("/api/2/files/%d/folder/%d/download", cRoot, cFolder)},
	}
	for i := range fsRows {
		fsRows[i].want = fsOwner
	}
	fsWrites := []isoRow{
		{pattern: "POST /api/2/files/{root_id}/upload", method: "UPLOAD", path: pf("/api/2/files/%d/upload", cRoot)},
		{pattern: "POST /api/2/files/{root_id}/create_folder", path: pf("/api/2/files/%d/create_folder", cRoot), form: newNamed("name", nil)},
		{pattern: "POST /api/2/files/{root_id}/lock", path: pf("/api/2/files/%d/lock", cRoot)},
		{pattern: "POST /api/2/files/{root_id}/unlock", path: pf("/api/2/files/%d/unlock", cRoot)},
		{pattern: "POST /api/2/files/{root_id}/{file_id}/rename", path: pf("/api/2/files/%d/%d/rename", cRoot, newCFile), form: newNamed("name", nil)},
		{pattern: "POST /api/2/files/{root_id}/{file_id}/move", path: pf("/api/2/files/%d/%d/move", cRoot, newCFile),
			form: func(q isoReq) url.Values { return url.Values{"folder_id": {fmt.Sprint(q.c.folder)}} }},
		{pattern: "POST /api/2/files/{root_id}/{file_id}/lock", path: pf("/api/2/files/%d/%d/lock", cRoot, cFile)},
		{pattern: "POST /api/2/files/{root_id}/{file_id}/unlock", path: pf("/api/2/files/%d/%d/unlock", cRoot, cFile)},
		{pattern: "POST /api/2/files/{root_id}/{file_id}/delete", path: pf("/api/2/files/%d/%d/delete", cRoot, newCFile)},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/upload", method: "UPLOAD", path: pf("/api/2/files/%d/folder/%d/upload", cRoot, newCFolder)},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/create_folder", path: pf("/api/2/files/%d/folder/%d/create_folder", cRoot, cFolder), form: newNamed("name", nil)},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/rename", path: pf("/api/2/files/%d/folder/%d/rename", cRoot, newCFolder), form: newNamed("name", nil)},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/move", path: pf("/api/2/files/%d/folder/%d/move", cRoot, newCFolder),
			form: newNamed("name", nil, "folder_id", "0")},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/lock", path: pf("/api/2/files/%d/folder/%d/lock", cRoot, cFolder)},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/unlock", path: pf("/api/2/files/%d/folder/%d/unlock", cRoot, cFolder)},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/delete", path: pf("/api/2/files/%d/folder/%d/delete", cRoot, newCFolder)},
	}
	for i := range fsWrites {
		if fsWrites[i].method == "" {
			fsWrites[i].method = "POST"
		}
		fsWrites[i].want = fsOwner
	}
	for _, r := range fsRows {
		rows = append(rows, r)
		r.name, r.tenant, r.want = strings.TrimSpace(r.name+" admin_browse_files"), "browse", fsBrowse
		rows = append(rows, r)
	}
	for _, r := range fsWrites {
		rows = append(rows, r)
		r.name, r.tenant, r.want = strings.TrimSpace(r.name+" admin_browse_files"), "browse", fsBrowseW
		rows = append(rows, r)
	}
	// The other tenant's own lists, to its administrator: none of the
	// parent's or the child's things are in them.
	oOrg := func(q isoReq) any { return q.k.o.org.ID }
	for _, l := range []string{"persons", "guests", "groups", "roots", "organizations", "machines", "auth_sources", "activity"} {
		pattern := "GET /api/2/organization/{org}/" + l
		if l == "groups" || l == "activity" {
			pattern = "GET /api/2/organization/{organization_id}/" + l
		}
		rows = append(rows, isoRow{pattern: pattern, name: "the other tenant's, to its own", path: pf("/api/2/organization/%d/"+l, oOrg),
			want: "OP=403 OA=200 PP=404 CP=404 CA=404 PA=404"})
	}
	rows = append(rows, isoRow{pattern: "GET /api/2/organization/{org}", name: "the other tenant's, to its own", path: pf("/api/2/organization/%d", oOrg),
		want: "OP=200 OA=200 PP=404 CP=404 CA=404 PA=404"})

	// Another tenant's things named in a form or a path next to the
	// child's: never reached, and no different from what does not exist.
	oOwn := "OP=403 OA=200 PP=404 CP=404 CA=404 PA=404"
	rows = append(rows,
		isoRow{pattern: "GET /api/2/person/{ref}", name: "the other tenant's plain person by e-mail",
			path: pf("/api/2/person/%s", func(q isoReq) any { return url.PathEscape(q.k.o.plain.Email) }), want: "OP=200 OA=200 PP=404 CP=404 CA=404 PA=404"},
		isoRow{pattern: "POST /api/2/person/create", name: "in the other tenant", method: "POST", path: pf("/api/2/person/create"),
			form: newPersonForm(oOrg), want: oOwn},
		isoRow{pattern: "POST /api/2/group/create", name: "in the other tenant", method: "POST", path: pf("/api/2/group/create"),
			form: newNamed("name", oOrg), want: oOwn},
		isoRow{pattern: "POST /api/2/guest/create", name: "in the other tenant", method: "POST", path: pf("/api/2/guest/create"),
			form: newNamed("email", oOrg), want: "OP=200 OA=200 PP=404 CP=404 CA=404 PA=404"},
		isoRow{pattern: "POST /api/2/group/{group_id}/members/update", name: "adding another tenant's group", method: "POST", path: pf("/api/2/group/%d/members/update", cGroup),
			form: func(q isoReq) url.Values { return url.Values{"add_groups": {fmt.Sprint(q.k.o.group.ID)}} }, want: "CG=403 CP=403 CA=400 PA=400"},
		isoRow{pattern: "POST /api/2/files/{root_id}/{file_id}/move", name: "into another tenant's folder", method: "POST", path: pf("/api/2/files/%d/%d/move", cRoot, cFile),
			form: func(q isoReq) url.Values { return url.Values{"folder_id": {fmt.Sprint(q.k.o.folder)}} }, want: "CP=404 CA=404 PA=404"},
		isoRow{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/move", name: "into another tenant's folder", method: "POST", path: pf("/api/2/files/%d/folder/%d/move", cRoot, cFolder),
			form: func(q isoReq) url.Values { return url.Values{"folder_id": {fmt.Sprint(q.k.o.folder)}} }, want: "CP=404 CA=404 PA=404"},
		isoRow{pattern: "GET /api/2/files/{root_id}/{file_id}", name: "another tenant's file through the child's root", path: pf("/api/2/files/%d/%d", cRoot, func(q isoReq) any { return q.k.o.file }),
			want: "CP=404 CA=404 PA=404"},
		isoRow{pattern: itemGetPattern, name: "another tenant's folder through the child's root", path: pf("/api/2/files/%d/folder/%d", cRoot, func(q isoReq) any { return q.k.o.folder }),
			want: "CP=404 CA=404 PA=404"},
	)

	// Organization shares (4.7): the organization's administrators
	// manage them; a subscriber reaches the share's files with their
	// role's permissions, a non-subscriber of the same organization not
	// at all (CG, the child's guest, is subscribed to nothing).
	subsForm := func(q isoReq) url.Values {
		return url.Values{"subscribers": {fmt.Sprintf(`[[%d, "web", "VIEWER"]]`, q.c.plain.ID)}, "external_subscribers": {`["x@example.com"]`}}
	}
	rows = append(rows,
		isoRow{pattern: "GET /api/2/organization/{org}/shares", path: pf("/api/2/organization/%d/shares", cOrg), want: childAdmin},
		isoRow{pattern: "GET /api/2/organization/{org}/shares", name: "the parent", path: pf("/api/2/organization/%d/shares", pOrg), want: parentAdmin},
		isoRow{pattern: "POST /api/2/organization/{org}/shares/create", method: "POST", path: pf("/api/2/organization/%d/shares/create", cOrg),
			form: newNamed("name", nil), want: childAdmin},
		isoRow{pattern: "POST /api/2/organization/{org}/shares/create", name: "the parent", method: "POST", path: pf("/api/2/organization/%d/shares/create", pOrg),
			form: newNamed("name", nil), want: parentAdmin},
		isoRow{pattern: "POST /api/2/organization/{org}/shares/create", name: "no name", method: "POST", path: pf("/api/2/organization/%d/shares/create", cOrg),
			want: "CG=403 CP=403 CA=400 PA=400"},
		isoRow{pattern: "GET /api/2/organization/{org}/share/{root_id}", path: pf("/api/2/organization/%d/share/%d", cOrg, newCShare), want: childAdmin},
		isoRow{pattern: "GET /api/2/organization/{org}/share/{root_id}", name: "the parent's share through the child",
			path: pf("/api/2/organization/%d/share/%d", cOrg, newPShare), want: "CG=403 CP=403 CA=404 PA=404"},
		isoRow{pattern: "GET /api/2/organization/{org}/share/{root_id}", name: "a sync root is no share",
			path: pf("/api/2/organization/%d/share/%d", cOrg, cRoot), want: "CG=403 CP=403 CA=404 PA=404"},
		isoRow{pattern: "POST /api/2/organization/{org}/share/{root_id}/update", method: "POST", path: pf("/api/2/organization/%d/share/%d/update", cOrg, newCShare),
			form: newNamed("name", nil), want: childAdmin},
		isoRow{pattern: "GET /api/2/organization/{org}/share/{root_id}/subscribers", path: pf("/api/2/organization/%d/share/%d/subscribers", cOrg, cViewerShare), want: childAdmin},
		isoRow{pattern: "POST /api/2/organization/{org}/share/{root_id}/subscribers/update", method: "POST",
			path: pf("/api/2/organization/%d/share/%d/subscribers/update", cOrg, newCShare), form: subsForm, want: childAdmin},
		isoRow{pattern: "POST /api/2/organization/{org}/share/{root_id}/subscribers/update", name: "not JSON", method: "POST",
			path: pf("/api/2/organization/%d/share/%d/subscribers/update", cOrg, newCShare), form: fields("subscribers", "12:web:VIEWER"), want: "CG=403 CP=403 CA=400 PA=400"},
		isoRow{pattern: "POST /api/2/organization/{org}/share/{root_id}/subscribers/update", name: "the parent's person into the child's share", method: "POST",
			path: pf("/api/2/organization/%d/share/%d/subscribers/update", cOrg, newCShare),
			form: func(q isoReq) url.Values {
				return url.Values{"subscribers": {fmt.Sprintf(`[[%d, "web", "VIEWER"]]`, q.k.p.plain.ID)}}
			}, want: "CG=403 CP=403 CA=400 PA=400"},
		isoRow{pattern: "POST /api/2/organization/{org}/share/{root_id}/subscribers/update", name: "another tenant's group", method: "POST",
			path: pf("/api/2/organization/%d/share/%d/subscribers/update", cOrg, newCShare),
			form: func(q isoReq) url.Values {
				return url.Values{"group_subscribers": {fmt.Sprintf(`[[%d, "web", "VIEWER"]]`, q.k.o.group.ID)}}
			}, want: "CG=403 CP=403 CA=400 PA=400"},
		isoRow{pattern: "POST /api/2/organization/{org}/share/{root_id}/delete", method: "POST", path: pf("/api/2/organization/%d/share/%d/delete", cOrg, newCShare), want: childAdmin},
		// The share's files: the plain person is its VIEWER.
		isoRow{pattern: "GET /api/2/files/{root_id}", name: "a share, the plain person its viewer", path: pf("/api/2/files/%d", cViewerShare), want: "CP=200 CA=200 PA=200"},
		isoRow{pattern: "POST /api/2/files/{root_id}/upload", name: "a share, the plain person its viewer", method: "UPLOAD",
			path: pf("/api/2/files/%d/upload", cViewerShare), want: "CP=403 CA=200 PA=200"},
		isoRow{pattern: "GET /api/2/files/{root_id}", name: "a share, the plain person not subscribed", path: pf("/api/2/files/%d", newCShare), want: "CP=404 CA=200 PA=200"},
		isoRow{pattern: "GET /api/2/files/{root_id}", name: "a deleted share, the plain person its viewer", path: pf("/api/2/files/%d", deletedViewerShare), want: "CP=410 CA=410 PA=410"},
	)

	// The parent's plain person's root, to the child's people.
	rows = append(rows, isoRow{pattern: "GET /api/2/files/{root_id}", name: "the parent's plain person's root",
		path: pf("/api/2/files/%d", pRoot), want: "PP=200 CP=404 CA=404 PA=404"})

	rows = append(rows, linkIsoRows()...)
	rows = append(rows, tusIsoRows()...)

	// Notes last: the records they make are about the people they name.
	rows = append(rows,
		isoRow{pattern: "POST /api/2/activity/create", name: "about oneself", method: "POST", path: pf("/api/2/activity/create"),
			form: fields("action_text", "a note"), want: allRead},
		isoRow{pattern: "POST /api/2/activity/create", name: "about the child's plain person", method: "POST", path: pf("/api/2/activity/create"),
			form: func(q isoReq) url.Values { return url.Values{"acted_on_person_id": {fmt.Sprint(q.c.plain.ID)}} }, want: childRead},
		isoRow{pattern: "POST /api/2/activity/create", name: "about the child", method: "POST", path: pf("/api/2/activity/create"),
			form: func(q isoReq) url.Values { return url.Values{"acted_on_company_id": {fmt.Sprint(q.c.org.ID)}} }, want: childRead + " CG=200"},
		isoRow{pattern: "POST /api/2/activity/create", name: "about the parent's plain person", method: "POST", path: pf("/api/2/activity/create"),
			form: func(q isoReq) url.Values { return url.Values{"acted_on_person_id": {fmt.Sprint(q.k.p.plain.ID)}} }, want: "PP=200 CP=404 CA=404 PA=200"},
		isoRow{pattern: "POST /api/2/activity/create", name: "about the child's guest", method: "POST", path: pf("/api/2/activity/create"),
			form: func(q isoReq) url.Values { return url.Values{"acted_on_guest_id": {fmt.Sprint(q.c.guest.ID)}} }, want: childHidden + " CG=200"},
		isoRow{pattern: "POST /api/2/activity/create", name: "about the parent", method: "POST", path: pf("/api/2/activity/create"),
			form: func(q isoReq) url.Values { return url.Values{"acted_on_company_id": {fmt.Sprint(q.k.p.org.ID)}} }, want: "PP=200 CP=404 CA=404 PA=200"},
		isoRow{pattern: "POST /api/2/activity/create", name: "about the other tenant", method: "POST", path: pf("/api/2/activity/create"),
			form: func(q isoReq) url.Values { return url.Values{"acted_on_company_id": {fmt.Sprint(q.k.o.org.ID)}} }, want: "OP=200 OA=200 PP=404 CP=404 CA=404 PA=404"},
		isoRow{pattern: "POST /api/2/activity/create", name: "about the child's root", method: "POST", path: pf("/api/2/activity/create"),
			form: func(q isoReq) url.Values { return url.Values{"acted_on_root_id": {fmt.Sprint(q.c.root)}} }, want: fsOwner},
	)
	return rows
}

// isoExempt are the routes that take no token: nothing of a tenant's is
// behind them.
var isoExempt = map[string]string{
	"GET /api/2/version": "public: the API version",
	"POST /oauth/token":  "public: the login itself (oauth_test.go covers refusals)",
	"POST /oauth/revoke": "public: revokes the token it is given, nothing else",
	"/":                  "the catch-all: unknown paths (unrouted_test and rest_test cover its 401 and 404)",
}

// TestIsolationCoversEveryRoute fails for a route the walk leaves out.
func TestIsolationCoversEveryRoute(t *testing.T) {
	f := newFixture(t)
	s := newServer(Options{FS: f.fs, Accounts: f.accounts})
	walked := map[string]bool{}
	for _, r := range isoRows() {
		walked[r.pattern] = true
	}
	registered := map[string]bool{}
	var missing []string
	for _, p := range s.patterns {
		registered[p] = true
		if !walked[p] && isoExempt[p] == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("routes with no row in the isolation walk (isoRows) nor in isoExempt:\n%s", strings.Join(missing, "\n"))
	}
	for p := range walked {
		if !registered[p] {
			t.Errorf("row pattern %q is no registered route", p)
		}
	}
}

var isoMarker = regexp.MustCompile(`zq([a-z0-9]+)-([a-z]+)`)

// TestIsolation walks every route as every caller.
func TestIsolation(t *testing.T) {
	k := newIsoCast(t)
	shared := k.tenant("c1", k.p.org.ID, nil)
	browse := k.tenant("b", k.p.org.ID, func(p *account.Policy) {
		p.AdminBrowseFiles, p.AdminCreateUsers, p.AdminBrowseRemote = true, false, true
	})
	rows := isoRows()
	fresh, requests, markers := 0, 0, 0
	for _, r := range rows {
		c := shared
		switch r.tenant {
		case "browse":
			c = browse
		case "fresh":
			fresh++
			c = k.tenant(fmt.Sprintf("f%d", fresh), k.p.org.ID, nil)
		}
		want := r.wants()
		order := slices.Clone(isoCallers)
		slices.SortStableFunc(order, func(a, b string) int {
			ok := func(c string) int {
				if want[c] < 300 {
					return 1
				}
				return 0
			}
			return ok(a) - ok(b)
		})
		for _, caller := range order {
			w, set := want[caller]
			if !set {
				t.Fatalf("%s %s: no status for %s", r.pattern, r.name, caller)
			}
			if w < 0 {
				continue
			}
			q := isoReq{k: k, c: c}
			path := r.path(q)
			var form url.Values
			if r.form != nil {
				form = r.form(q)
			}
			method := r.method
			if method == "" {
				method = http.MethodGet
			}
			st, body := k.send(method, path, k.token(caller, c), form)
			requests++
			label := fmt.Sprintf("%s (%s) %s %s as %s", r.pattern, r.name, method, path, caller)
			if st != w {
				t.Errorf("%s: %d %.300s, want %d", label, st, body, w)
			}
			if st >= 400 && method != "TUSHEAD" { // a HEAD's answer has no body
				checkRefusal(t, label, st, body)
			}
			found := isoMarker.FindAllSubmatch(body, -1)
			markers += len(found)
			for _, m := range found {
				if !k.sees(caller, c, string(m[1]), string(m[2]), strings.Contains(path, "/activity")) {
					t.Errorf("%s: the answer (%d) carries %s: %.300s", label, st, m[0], body)
					break
				}
			}
		}
	}
	t.Logf("%d rows, %d requests, %d markers in the answers, each one the caller's to see", len(rows), requests, markers)
}

// send is fixture.send with a unique file name for UPLOAD.
func (k *isoCast) send(method, path, token string, form url.Values) (int, []byte) {
	k.t.Helper()
	if strings.HasPrefix(method, "TUS") {
		return k.sendTus(method, path, token, form)
	}
	if method != "UPLOAD" {
		return k.f.send(method, path, token, form)
	}
	body, ct := multipartBody(k.next()+".txt", strings.NewReader("up"))
	return k.f.readAll(k.f.request(http.MethodPost, path, token, body, http.Header{"Content-Type": {ct}}))
}

// checkRefusal checks that a refusal is the error body alone, with the
// code of its status.
func checkRefusal(t *testing.T, label string, st int, body []byte) {
	t.Helper()
	var e map[string]json.RawMessage
	if err := json.Unmarshal(body, &e); err != nil {
		t.Errorf("%s: %d body %.300q is not JSON", label, st, body)
		return
	}
	for name := range e {
		if name != "error" && name != "error_description" {
			t.Errorf("%s: the refusal carries %q: %s", label, name, body)
		}
	}
	code := map[int]string{401: "access_denied", 403: "forbidden", 404: "not_found"}[st]
	if code != "" && string(e["error"]) != strconv.Quote(code) {
		t.Errorf("%s: error %s, want %q", label, e["error"], code)
	}
}
