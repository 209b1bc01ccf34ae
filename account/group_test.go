package account

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"
)

// changeLog is a Journal that keeps what it is given.
type changeLog struct {
	mu      sync.Mutex
	changes []Change
	// hook, when set, sees each change as it is recorded.
	hook func(Change)
}

func (l *changeLog) Record(_ kv.Txn, c Change) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, c)
	if l.hook != nil {
		l.hook(c)
	}
	return nil
}

// since returns the changes recorded after the first n.
func (l *changeLog) since(n int) []Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Change{}, l.changes[n:]...)
}

func (l *changeLog) activities() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.changes {
		out = append(out, c.Activity)
	}
	return out
}

// groupWorld is an organization Acme with a child Acme/Sales, an
// unrelated tenant Globex, persons in each and a guest in Acme.
type groupWorld struct {
	s                       *Service
	acme, sales, globex     Organization
	alice, bob, carol, dave Person // alice, bob: Acme; carol: Sales; dave: Globex
	guest                   Person // of Acme
	log                     *changeLog
}

func newGroupWorld(t testing.TB) *groupWorld { return newGroupWorldMem(t, 0) }

// smallMemtable is the least memory.kv_memtable takes: a transaction
// there holds fewer than membershipBatch memberships.
const smallMemtable = 1 << 20

// newGroupWorldMem is newGroupWorld over a store with memtables of
// memtable bytes (0: the default).
func newGroupWorldMem(t testing.TB, memtable int64) *groupWorld {
	t.Helper()
	db, err := badger.Open(badger.Options{Dir: t.TempDir(), MemTableSize: memtable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newGroupWorldOn(t, db)
}

// newGroupWorldOn is newGroupWorld over db.
func newGroupWorldOn(t testing.TB, db kv.Store) *groupWorld {
	t.Helper()
	ctx := context.Background()
	w := &groupWorld{log: &changeLog{}}
	o := testOptions()
	o.Journal = w.log
	var err error
	w.s = New(db, o)
	mustOrg := func(in OrganizationInput) Organization {
		org, err := w.s.CreateOrganization(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return org
	}
	w.acme = mustOrg(OrganizationInput{Name: "Acme"})
	w.sales = mustOrg(OrganizationInput{Name: "Sales", ParentID: w.acme.ID})
	w.globex = mustOrg(OrganizationInput{Name: "Globex"})
	mustPerson := func(org uint64, name string) Person {
		p, err := w.s.CreatePerson(ctx, PersonInput{OrganizationID: org, Username: name, Email: name + "@example.com", Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	w.alice = mustPerson(w.acme.ID, "alice")
	w.bob = mustPerson(w.acme.ID, "bob")
	w.carol = mustPerson(w.sales.ID, "carol")
	w.dave = mustPerson(w.globex.ID, "dave")
	if w.guest, err = w.s.CreateGuest(ctx, GuestInput{CreatorID: w.alice.ID, OrganizationID: w.acme.ID, Email: "gus@example.com", Password: pw}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *groupWorld) group(t *testing.T, org uint64, name string) Group {
	t.Helper()
	g, err := w.s.CreateGroup(context.Background(), GroupInput{OrganizationID: org, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (w *groupWorld) members(t *testing.T, g uint64, ch MembersChange) Group {
	t.Helper()
	out, err := w.s.UpdateMembers(context.Background(), g, ch)
	if err != nil {
		t.Fatalf("UpdateMembers(%d, %+v): %v", g, ch, err)
	}
	return out
}

func TestCreateGroup(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	deleted, err := w.s.CreateOrganization(ctx, OrganizationInput{Name: "Gone", ParentID: w.acme.ID})
	if err != nil {
		t.Fatal(err)
	}
	err = w.s.db.Update(ctx, func(tx kv.Txn) error {
		deleted.Deleted = true
		return w.s.put(tx, key(pfxOrg, deleted.ID), &deleted)
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		in        GroupInput
		wantName  string
		wantField string // "" means success
	}{
		{"plain", GroupInput{OrganizationID: w.acme.ID, Name: "Engineering"}, "Engineering", ""},
		{"trimmed", GroupInput{OrganizationID: w.sales.ID, Name: "  Field sales \t"}, "Field sales", ""},
		{"same name twice is fine", GroupInput{OrganizationID: w.acme.ID, Name: "Engineering"}, "Engineering", ""},
		{"empty name", GroupInput{OrganizationID: w.acme.ID, Name: ""}, "", "name"},
		{"blank name", GroupInput{OrganizationID: w.acme.ID, Name: "   "}, "", "name"},
		{"long name", GroupInput{OrganizationID: w.acme.ID, Name: strings.Repeat("x", 256)}, "", "name"},
		{"control characters", GroupInput{OrganizationID: w.acme.ID, Name: "a\x00b"}, "", "name"},
		{"no organization", GroupInput{Name: "x"}, "", "company_id"},
		{"unknown organization", GroupInput{OrganizationID: 999, Name: "x"}, "", "company_id"},
		{"deleted organization", GroupInput{OrganizationID: deleted.ID, Name: "x"}, "", "company_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := w.s.CreateGroup(ctx, tt.in)
			if tt.wantField != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantField || !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want a FieldError for %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.ID == 0 || g.Name != tt.wantName || !g.Active || g.OrganizationID != tt.in.OrganizationID || g.Created.IsZero() {
				t.Fatalf("created %+v", g)
			}
			got, err := w.s.Group(ctx, g.ID)
			if err != nil || !reflect.DeepEqual(got, g) {
				t.Fatalf("Group(%d) = %+v, %v; want %+v", g.ID, got, err, g)
			}
		})
	}
	// Counts: two in Acme itself, one in Sales, three in Acme's subtree.
	for _, c := range []struct {
		org             uint64
		direct, subtree int64
	}{{w.acme.ID, 2, 3}, {w.sales.ID, 1, 1}, {w.globex.ID, 0, 0}} {
		d, s, err := w.s.Counts(ctx, c.org)
		if err != nil || d.Groups != c.direct || s.Groups != c.subtree {
			t.Errorf("organization %d counts groups %d/%d (%v), want %d/%d", c.org, d.Groups, s.Groups, err, c.direct, c.subtree)
		}
	}
	if _, err := w.s.Group(ctx, 12345); !errors.Is(err, ErrNotFound) {
		t.Errorf("Group(unknown) = %v, want ErrNotFound", err)
	}
}

func TestUpdateGroup(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	g := w.group(t, w.acme.ID, "Eng")
	str := func(s string) *string { return &s }
	no := false
	tests := []struct {
		name       string
		id         uint64
		u          GroupUpdate
		wantName   string
		wantActive bool
		wantErr    error
	}{
		{"nothing", g.ID, GroupUpdate{}, "Eng", true, nil},
		{"rename", g.ID, GroupUpdate{Name: str(" Engineering ")}, "Engineering", true, nil},
		{"disable", g.ID, GroupUpdate{Active: &no}, "Engineering", false, nil},
		{"empty name", g.ID, GroupUpdate{Name: str("")}, "", false, ErrInvalid},
		{"unknown group", 999, GroupUpdate{Name: str("x")}, "", false, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := w.s.UpdateGroup(ctx, tt.id, tt.u)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Name != tt.wantName || got.Active != tt.wantActive {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
	// Only the two real changes are recorded.
	want := []string{ActGroupCreated, ActGroupUpdated, ActGroupUpdated}
	if got := w.log.activities()[len(w.log.activities())-3:]; !reflect.DeepEqual(got, want) {
		t.Errorf("journal %v, want %v at its end", got, want)
	}
}

func TestUpdateMembersRefused(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	a := w.group(t, w.acme.ID, "A")
	b := w.group(t, w.acme.ID, "B")
	c := w.group(t, w.acme.ID, "C")
	inSales := w.group(t, w.sales.ID, "Sales team")
	other := w.group(t, w.globex.ID, "Globex")
	w.members(t, a.ID, MembersChange{AddGroups: []uint64{b.ID}})
	w.members(t, b.ID, MembersChange{AddGroups: []uint64{c.ID}})

	tests := []struct {
		name      string
		group     uint64
		ch        MembersChange
		wantErr   error
		wantField string   // for ErrInvalid
		wantCycle []uint64 // for ErrGroupCycle
	}{
		{"unknown group", 999, MembersChange{AddPersons: []uint64{w.alice.ID}}, ErrNotFound, "", nil},
		{"unknown person", a.ID, MembersChange{AddPersons: []uint64{999}}, ErrInvalid, "add_members", nil},
		{"person of another tenant", a.ID, MembersChange{AddPersons: []uint64{w.dave.ID}}, ErrInvalid, "add_members", nil},
		{"person of the parent organization", inSales.ID, MembersChange{AddPersons: []uint64{w.alice.ID}}, ErrInvalid, "add_members", nil},
		{"guest", a.ID, MembersChange{AddPersons: []uint64{w.guest.ID}}, ErrInvalid, "add_members", nil},
		{"unknown member group", a.ID, MembersChange{AddGroups: []uint64{999}}, ErrInvalid, "add_groups", nil},
		{"group of another tenant", a.ID, MembersChange{AddGroups: []uint64{other.ID}}, ErrInvalid, "add_groups", nil},
		{"group of the parent organization", inSales.ID, MembersChange{AddGroups: []uint64{a.ID}}, ErrInvalid, "add_groups", nil},
		{"person added and removed", a.ID, MembersChange{AddPersons: []uint64{w.bob.ID}, RemovePersons: []uint64{w.bob.ID}}, ErrInvalid, "add_members", nil},
		{"group added and removed", a.ID, MembersChange{AddGroups: []uint64{c.ID}, RemoveGroups: []uint64{c.ID}}, ErrInvalid, "add_groups", nil},
		{"itself", a.ID, MembersChange{AddGroups: []uint64{a.ID}}, ErrGroupCycle, "", []uint64{a.ID, a.ID}},
		{"direct cycle", b.ID, MembersChange{AddGroups: []uint64{a.ID}}, ErrGroupCycle, "", []uint64{b.ID, a.ID, b.ID}},
		{"indirect cycle", c.ID, MembersChange{AddGroups: []uint64{a.ID}}, ErrGroupCycle, "", []uint64{c.ID, a.ID, b.ID, c.ID}},
		{"a valid change before the refused one stores nothing", a.ID, MembersChange{AddPersons: []uint64{w.alice.ID, w.dave.ID}}, ErrInvalid, "add_members", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := w.s.UpdateMembers(ctx, tt.group, tt.ch)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			var fe *FieldError
			if tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField) {
				t.Fatalf("err = %v, want a FieldError for %s", err, tt.wantField)
			}
			var ce *GroupCycleError
			if tt.wantCycle != nil {
				if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Path, tt.wantCycle) {
					t.Fatalf("err = %#v, want the cycle %v", err, tt.wantCycle)
				}
				for _, id := range tt.wantCycle {
					if !strings.Contains(ce.Description(), fmt.Sprint(id)) {
						t.Errorf("description %q does not name group %d", ce.Description(), id)
					}
				}
			}
		})
	}
	m, err := w.s.Members(ctx, a.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	want := Members{Persons: []uint64{}, PersonsFromGroups: []uint64{}, Groups: []uint64{b.ID}, GroupsFromGroups: []uint64{c.ID}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("after refusals, members of A = %+v, want %+v", m, want)
	}
}

func TestMembers(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	// A holds alice and B; B holds bob, C and D; C (in Sales) holds
	// carol; D holds alice again and C, so C is reached twice from A.
	a := w.group(t, w.acme.ID, "A")
	b := w.group(t, w.acme.ID, "B")
	c := w.group(t, w.sales.ID, "C")
	d := w.group(t, w.acme.ID, "D")
	w.members(t, c.ID, MembersChange{AddPersons: []uint64{w.carol.ID}})
	w.members(t, d.ID, MembersChange{AddPersons: []uint64{w.alice.ID}, AddGroups: []uint64{c.ID}})
	w.members(t, b.ID, MembersChange{AddPersons: []uint64{w.bob.ID}, AddGroups: []uint64{c.ID, d.ID}})
	got := w.members(t, a.ID, MembersChange{AddPersons: []uint64{w.alice.ID}, AddGroups: []uint64{b.ID}})
	if got.Persons != 1 || got.Groups != 1 {
		t.Errorf("A counts %d persons, %d groups; want 1, 1", got.Persons, got.Groups)
	}
	// Adding again changes nothing.
	if again := w.members(t, a.ID, MembersChange{AddPersons: []uint64{w.alice.ID}, AddGroups: []uint64{b.ID}}); again != got {
		t.Errorf("adding members again changed A: %+v to %+v", got, again)
	}
	e := []uint64{}
	tests := []struct {
		name       string
		group      uint64
		fromGroups bool
		want       Members
	}{
		{"A direct", a.ID, false, Members{[]uint64{w.alice.ID}, e, []uint64{b.ID}, e}},
		{"A with nested", a.ID, true, Members{[]uint64{w.alice.ID}, []uint64{w.bob.ID, w.carol.ID}, []uint64{b.ID}, []uint64{c.ID, d.ID}}},
		{"B with nested", b.ID, true, Members{[]uint64{w.bob.ID}, []uint64{w.alice.ID, w.carol.ID}, []uint64{c.ID, d.ID}, e}},
		{"C with nested", c.ID, true, Members{[]uint64{w.carol.ID}, e, e, e}},
		{"D with nested", d.ID, true, Members{[]uint64{w.alice.ID}, []uint64{w.carol.ID}, []uint64{c.ID}, e}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := w.s.Members(ctx, tt.group, tt.fromGroups)
			if err != nil || !reflect.DeepEqual(m, tt.want) {
				t.Fatalf("Members = %+v, %v; want %+v", m, err, tt.want)
			}
		})
	}
	if _, err := w.s.Members(ctx, 999, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("Members(unknown) = %v, want ErrNotFound", err)
	}

	groupsOf := []struct {
		person Person
		want   []uint64
	}{
		{w.alice, []uint64{a.ID, b.ID, d.ID}},
		{w.bob, []uint64{a.ID, b.ID}},
		{w.carol, []uint64{a.ID, b.ID, c.ID, d.ID}},
		{w.dave, []uint64{}},
	}
	for _, g := range groupsOf {
		got, err := w.s.PersonGroups(ctx, g.person.ID)
		if err != nil || !reflect.DeepEqual(got, g.want) {
			t.Errorf("PersonGroups(%s) = %v, %v; want %v", g.person.Username, got, err, g.want)
		}
		for _, grp := range []uint64{a.ID, b.ID, c.ID, d.ID} {
			in, err := w.s.InGroup(ctx, grp, g.person.ID)
			if want := contains(g.want, grp); err != nil || in != want {
				t.Errorf("InGroup(%d, %s) = %v, %v; want %v", grp, g.person.Username, in, err, want)
			}
		}
	}

	// Removing: bob leaves B, C leaves B (still reached through D).
	got = w.members(t, b.ID, MembersChange{RemovePersons: []uint64{w.bob.ID, w.dave.ID}, RemoveGroups: []uint64{c.ID}})
	if got.Persons != 0 || got.Groups != 1 {
		t.Errorf("B counts %d persons, %d groups; want 0, 1", got.Persons, got.Groups)
	}
	m, err := w.s.Members(ctx, a.ID, true)
	want := Members{[]uint64{w.alice.ID}, []uint64{w.carol.ID}, []uint64{b.ID}, []uint64{c.ID, d.ID}}
	if err != nil || !reflect.DeepEqual(m, want) {
		t.Errorf("after removals, A = %+v, %v; want %+v", m, err, want)
	}
	if acts := w.log.activities(); acts[len(acts)-1] != ActGroupMembersUpdated {
		t.Errorf("journal ends with %v", acts)
	}
	w.log.mu.Lock()
	last := w.log.changes[len(w.log.changes)-1]
	w.log.mu.Unlock()
	if last.OnGroupID != b.ID || last.OnType != "group" || last.Data != fmt.Sprintf("removed person %d, removed group %d", w.bob.ID, c.ID) {
		t.Errorf("last change %+v", last)
	}
}

func contains(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestMaxGroupMembers(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	a := w.group(t, w.acme.ID, "A")
	b := w.group(t, w.acme.ID, "B")
	// Set the count near the bound rather than creating 10,000 persons.
	err := w.s.db.Update(ctx, func(tx kv.Txn) error { return w.s.adjustGroup(tx, a.ID, MaxGroupMembers-1, 0) })
	if err != nil {
		t.Fatal(err)
	}
	w.members(t, a.ID, MembersChange{AddPersons: []uint64{w.alice.ID}})
	if _, err := w.s.UpdateMembers(ctx, a.ID, MembersChange{AddGroups: []uint64{b.ID}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("member %d: %v, want ErrInvalid", MaxGroupMembers+1, err)
	}
}

func TestDeleteGroup(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	a := w.group(t, w.acme.ID, "A")
	b := w.group(t, w.acme.ID, "B")
	c := w.group(t, w.sales.ID, "C")
	w.members(t, c.ID, MembersChange{AddPersons: []uint64{w.carol.ID}})
	w.members(t, b.ID, MembersChange{AddPersons: []uint64{w.alice.ID, w.bob.ID}, AddGroups: []uint64{c.ID}})
	w.members(t, a.ID, MembersChange{AddGroups: []uint64{b.ID}})

	if err := w.s.DeleteGroup(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Group(ctx, b.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted group: %v", err)
	}
	if err := w.s.DeleteGroup(ctx, b.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting again: %v", err)
	}
	ga, _ := w.s.Group(ctx, a.ID)
	if ga.Groups != 0 {
		t.Errorf("A still counts %d member groups", ga.Groups)
	}
	m, err := w.s.Members(ctx, a.ID, true)
	if e := []uint64{}; err != nil || !reflect.DeepEqual(m, Members{e, e, e, e}) {
		t.Errorf("A = %+v, %v; want empty", m, err)
	}
	m, err = w.s.Members(ctx, c.ID, true)
	if err != nil || !reflect.DeepEqual(m.Persons, []uint64{w.carol.ID}) {
		t.Errorf("C = %+v, %v; want carol still", m, err)
	}
	if g, _ := w.s.PersonGroups(ctx, w.alice.ID); len(g) != 0 {
		t.Errorf("alice still in %v", g)
	}
	if g, _ := w.s.PersonGroups(ctx, w.carol.ID); !reflect.DeepEqual(g, []uint64{c.ID}) {
		t.Errorf("carol in %v, want only C", g)
	}
	for _, p := range []string{pfxGroupPerson, pfxPersonGroup, pfxGroupGroup, pfxGroupParent} {
		want := 0
		if p == pfxGroupPerson || p == pfxPersonGroup {
			want = 1 // carol in C
		}
		if n := countKeys(t, w.s, p); n != want {
			t.Errorf("%s holds %d keys, want %d", p, n, want)
		}
	}
	if d, _, _ := w.s.Counts(ctx, w.acme.ID); d.Groups != 1 {
		t.Errorf("Acme counts %d groups, want 1", d.Groups)
	}
	if acts := w.log.activities(); acts[len(acts)-1] != ActGroupDeleted {
		t.Errorf("journal ends with %v", acts)
	}
}

func TestDropMemberships(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	a := w.group(t, w.acme.ID, "A")
	b := w.group(t, w.acme.ID, "B")
	w.members(t, a.ID, MembersChange{AddPersons: []uint64{w.alice.ID, w.bob.ID}})
	w.members(t, b.ID, MembersChange{AddPersons: []uint64{w.alice.ID}})
	if err := w.s.db.Update(ctx, func(tx kv.Txn) error { return w.s.dropMemberships(tx, w.alice.ID) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		g    Group
		want []uint64
	}{{a, []uint64{w.bob.ID}}, {b, []uint64{}}} {
		m, err := w.s.Members(ctx, c.g.ID, false)
		g, _ := w.s.Group(ctx, c.g.ID)
		if err != nil || !reflect.DeepEqual(m.Persons, c.want) || g.Persons != int64(len(c.want)) {
			t.Errorf("group %s: %v (count %d), %v; want %v", c.g.Name, m.Persons, g.Persons, err, c.want)
		}
	}
	if g, _ := w.s.PersonGroups(ctx, w.alice.ID); len(g) != 0 {
		t.Errorf("alice still in %v", g)
	}
}

func TestGroupsPaged(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	var ids []uint64
	for i := range 5 {
		ids = append(ids, w.group(t, w.acme.ID, fmt.Sprint("G", i)).ID)
	}
	w.group(t, w.sales.ID, "not Acme's own")
	tests := []struct {
		offset, limit int
		want          []uint64
	}{
		{0, 100, ids},
		{0, 2, ids[:2]},
		{2, 2, ids[2:4]},
		{4, 2, ids[4:]},
		{5, 2, nil},
		{50, 2, nil},
	}
	for _, tt := range tests {
		got, total, err := w.s.Groups(ctx, w.acme.ID, tt.offset, tt.limit)
		var gotIDs []uint64
		for _, g := range got {
			gotIDs = append(gotIDs, g.ID)
		}
		if err != nil || total != 5 || !reflect.DeepEqual(gotIDs, tt.want) {
			t.Errorf("Groups(%d, %d) = %v, %d, %v; want %v, 5", tt.offset, tt.limit, gotIDs, total, err, tt.want)
		}
	}
	if _, _, err := w.s.Groups(ctx, 999, 0, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("Groups(unknown organization) = %v", err)
	}
}

// TestConcurrentCycle: two changes that would close a cycle only
// between them, made at the same time, never both succeed.
func TestConcurrentCycle(t *testing.T) {
	w := newGroupWorld(t)
	ctx := context.Background()
	for i := range 20 {
		// A ⊃ X, and concurrently X gets B and B gets A: with both,
		// A ⊃ X ⊃ B ⊃ A.
		a := w.group(t, w.acme.ID, "A")
		x := w.group(t, w.acme.ID, "X")
		b := w.group(t, w.acme.ID, "B")
		w.members(t, a.ID, MembersChange{AddGroups: []uint64{x.ID}})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, ch := range []struct{ g, m uint64 }{{x.ID, b.ID}, {b.ID, a.ID}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = w.s.UpdateMembers(ctx, ch.g, MembersChange{AddGroups: []uint64{ch.m}})
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrGroupCycle), errors.Is(err, kv.ErrConflict):
			default:
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d of the two changes succeeded (%v)", i, ok, errs)
		}
	}
}

// TestConcurrentMemberDeletion: a membership added while its member's
// deletion runs, after that transaction began and before it read the
// member's memberships, is either seen by the deletion or refused: no
// membership outlives its group or person, and no group counts a member
// that is gone. The store detects a conflict on the keys a transaction
// read, not on the ranges it scanned, so the addition must write a key
// the deletion reads.
func TestConcurrentMemberDeletion(t *testing.T) {
	for _, c := range []struct {
		name string
		// add adds the member to group in; del deletes the member in tx.
		add func(w *groupWorld, in, member uint64) error
		del func(w *groupWorld, tx kv.Txn, member uint64) error
		// member makes the member to add and delete.
		member func(t *testing.T, w *groupWorld) uint64
	}{
		{"a group added to another while DeleteGroup's last transaction runs",
			func(w *groupWorld, in, member uint64) error {
				_, err := w.s.UpdateMembers(context.Background(), in, MembersChange{AddGroups: []uint64{member}})
				return err
			},
			func(w *groupWorld, tx kv.Txn, member uint64) error {
				return w.s.deleteGroup(context.Background(), tx, member)
			},
			func(t *testing.T, w *groupWorld) uint64 { return w.group(t, w.acme.ID, "G").ID }},
		{"a person added to a group while DeletePerson runs",
			func(w *groupWorld, in, member uint64) error {
				_, err := w.s.UpdateMembers(context.Background(), in, MembersChange{AddPersons: []uint64{member}})
				return err
			},
			func(w *groupWorld, tx kv.Txn, member uint64) error {
				// deleteAccount's reads and membership removal.
				var p Person
				if err := w.s.get(tx, key(pfxPerson, member), &p, ErrNotFound); err != nil {
					return err
				}
				if err := w.s.dropMemberships(tx, member); err != nil {
					return err
				}
				return tx.Delete(key(pfxPerson, member))
			},
			func(t *testing.T, w *groupWorld) uint64 { return w.bob.ID }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newGroupWorld(t)
			ctx := context.Background()
			parent := w.group(t, w.acme.ID, "P")
			member := c.member(t, w)
			first := true
			err := w.s.db.Update(ctx, func(tx kv.Txn) error {
				if first {
					first = false
					// The addition commits after this transaction's
					// snapshot, before it reads anything.
					done := make(chan error)
					go func() { done <- c.add(w, parent.ID, member) }()
					if err := <-done; err != nil {
						return err
					}
				}
				return c.del(w, tx, member)
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{pfxGroupPerson, pfxPersonGroup, pfxGroupGroup, pfxGroupParent} {
				if n := countKeys(t, w.s, p); n != 0 {
					t.Errorf("%s holds %d keys after the member went, want 0", p, n)
				}
			}
			if g, err := w.s.Group(ctx, parent.ID); err != nil || g.Persons != 0 || g.Groups != 0 {
				t.Errorf("P counts %d persons and %d groups (%v), want none", g.Persons, g.Groups, err)
			}
		})
	}
}

// fillGroup gives group id n member persons with ids from first on,
// writing the membership keys directly: the persons need not exist for
// what reads and deletes memberships, and creating thousands would cost
// thousands of password hashes.
func fillGroup(t testing.TB, s *Service, id, first uint64, n int) {
	t.Helper()
	for done := 0; done < n; {
		err := s.db.Update(context.Background(), func(tx kv.Txn) error {
			for i := done; i < min(n, done+250); i++ {
				p := first + uint64(i)
				if err := tx.Set(key(pfxGroupPerson, id, p), nil); err != nil {
					return err
				}
				if err := tx.Set(key(pfxPersonGroup, p, id), nil); err != nil {
					return err
				}
			}
			return s.adjustGroup(tx, id, int64(min(n, done+250)-done), 0)
		})
		if err != nil {
			t.Fatal(err)
		}
		done = min(n, done+250)
	}
}

// TestDeleteFullGroup: a group with MaxGroupMembers members of one kind
// is deleted whole, though its memberships are more than one metadata
// transaction holds with the default memtable, and with the least
// memtable memory.kv_memtable takes (1 MiB), where not even a batch of
// membershipBatch fits. Its deletion leaves in the activity journal the
// one record a small group's leaves, after an interruption too. A bug
// found later becomes a row here.
func TestDeleteFullGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		memtable int64
		fill     func(t *testing.T, s *Service, id uint64)
		// interrupt stops the first DeleteGroup after its first batch
		// (as a crash would), and a second call completes it, or
		// FinishGroupDeletions when finish is set.
		interrupt, finish bool
	}{
		{"a few persons, one transaction", 0, func(t *testing.T, s *Service, id uint64) { fillGroup(t, s, id, 1000, 3) }, false, false},
		{"persons", 0, func(t *testing.T, s *Service, id uint64) { fillGroup(t, s, id, 1000, MaxGroupMembers) }, false, false},
		// Deleting a group full of groups failed on every try: only
		// person memberships were removed in batches.
		{"groups", 0, func(t *testing.T, s *Service, id uint64) { fillGroupGroups(t, s, id, 1<<40, MaxGroupMembers) }, false, false},
		// With a 1 MiB memtable a batch of 2,000 failed with
		// kv.ErrTxnTooBig on every try.
		{"persons, 1 MiB memtable", smallMemtable, func(t *testing.T, s *Service, id uint64) { fillGroup(t, s, id, 1000, MaxGroupMembers) }, false, false},
		{"groups, 1 MiB memtable", smallMemtable, func(t *testing.T, s *Service, id uint64) { fillGroupGroups(t, s, id, 1<<40, MaxGroupMembers) }, false, false},
		{"in groups, 1 MiB memtable", smallMemtable, func(t *testing.T, s *Service, id uint64) { fillParentGroups(t, s, id, 1<<40, MaxGroupMembers) }, false, false},
		// The batches recorded nothing: a deletion cut short left
		// memberships removed without a record.
		{"interrupted and sent again", smallMemtable, func(t *testing.T, s *Service, id uint64) { fillGroup(t, s, id, 1000, MaxGroupMembers) }, true, false},
		// A deletion cut short stayed, half done, until someone
		// deleted the group again.
		{"interrupted and finished at the next start", smallMemtable, func(t *testing.T, s *Service, id uint64) { fillGroup(t, s, id, 1000, MaxGroupMembers) }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newGroupWorldMem(t, tc.memtable)
			ctx := context.Background()
			a := w.group(t, w.acme.ID, "A")
			tc.fill(t, w.s, a.ID)
			// Another group, not being deleted, which
			// FinishGroupDeletions leaves.
			other := w.group(t, w.acme.ID, "B")
			before := len(w.log.activities())
			if tc.interrupt {
				cut, cancel := context.WithCancel(ctx)
				w.log.hook = func(Change) { cancel() }
				err := w.s.DeleteGroup(cut, a.ID)
				w.log.hook = nil
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("interrupted DeleteGroup: %v, want context.Canceled", err)
				}
				g, err := w.s.Group(ctx, a.ID)
				if err != nil || !g.Deleting || g.Persons == 0 || g.Persons == MaxGroupMembers {
					t.Fatalf("after the first batch: %+v, %v; want the group marked Deleting, with part of its members", g, err)
				}
				if n := countKeys(t, w.s, string(key(pfxGroupPerson, a.ID))); int64(n) != g.Persons {
					t.Fatalf("%d membership keys left, the group counts %d", n, g.Persons)
				}
			}
			if tc.finish {
				if n, err := w.s.FinishGroupDeletions(ctx); err != nil || n != 1 {
					t.Fatalf("FinishGroupDeletions: %d, %v; want 1", n, err)
				}
			} else if err := w.s.DeleteGroup(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := w.s.Group(ctx, a.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("deleted group: %v", err)
			}
			if _, err := w.s.Group(ctx, other.ID); err != nil {
				t.Errorf("the group not deleted: %v", err)
			}
			for _, p := range []string{pfxPersonGroup, pfxGroupPerson, pfxGroupGroup, pfxGroupParent} {
				if n := countKeys(t, w.s, p); n != 0 {
					t.Errorf("%d keys of %s left", n, p)
				}
			}
			want := []Change{groupChange(ActGroupDeleted, a)}
			got := w.log.since(before)
			for i := range got {
				got[i].Actor, got[i].Time = Actor{}, time.Time{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("journal records %+v, want %+v", got, want)
			}
		})
	}
}

// TestBatchRemembered: on the least memtable (1 MiB), where the store
// refuses membershipBatch memberships in one transaction, a large member
// change or group deletion starts at the batch the last one found to
// fit, instead of halving down to it again, and the one after, which
// doubles it, spends one refusal. Every change is still made whole.
// Each row makes three large changes of one shape: with the fixed
// starting batch, each spent as many refusals as the first.
func TestBatchRemembered(t *testing.T) {
	const size = 3000 // ids a change names: more than membershipBatch
	ctx := context.Background()
	rows := []struct {
		name string
		hint func(*Service) *batchHint
		// change makes the i-th change (0, 1, 2) and checks it whole.
		change func(t *testing.T, w *groupWorld, i int)
		// whole: refusals every change spends however its batches
		// start (DeleteGroup first tries the group in one transaction).
		whole int64
	}{
		{"persons added to a group", func(s *Service) *batchHint { return &s.memberBatches }, func(t *testing.T, w *groupWorld, i int) {
			g := w.group(t, w.acme.ID, fmt.Sprint("G", i))
			ids := addPersons(t, w.s, w.acme.ID, uint64(1_000_000*(i+1)), size)
			before := len(w.log.activities())
			got, err := w.s.UpdateMembers(ctx, g.ID, MembersChange{AddPersons: ids})
			if err != nil || got.Persons != size {
				t.Fatalf("change %d: %+v, %v; want %d persons", i, got, err, size)
			}
			if n := countKeys(t, w.s, string(key(pfxGroupPerson, g.ID))); n != size {
				t.Fatalf("change %d: %d membership keys, want %d", i, n, size)
			}
			if n := len(w.log.activities()) - before; n < 2 {
				t.Fatalf("change %d: %d journal records, want one a part", i, n)
			}
		}, 0},
		{"a group deleted", func(s *Service) *batchHint { return &s.deleteBatches }, func(t *testing.T, w *groupWorld, i int) {
			g := w.group(t, w.acme.ID, fmt.Sprint("G", i))
			fillGroup(t, w.s, g.ID, uint64(1_000_000*(i+1)), size)
			before := len(w.log.activities())
			if err := w.s.DeleteGroup(ctx, g.ID); err != nil {
				t.Fatalf("change %d: %v", i, err)
			}
			if _, err := w.s.Group(ctx, g.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("change %d: the deleted group: %v", i, err)
			}
			if n := countKeys(t, w.s, string(key(pfxGroupPerson, g.ID))); n != 0 {
				t.Fatalf("change %d: %d membership keys left", i, n)
			}
			if got := w.log.since(before); len(got) != 1 || got[0].Activity != ActGroupDeleted {
				t.Fatalf("change %d: journal records %+v, want one %s", i, got, ActGroupDeleted)
			}
		}, 1},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			db, err := badger.Open(badger.Options{Dir: t.TempDir(), MemTableSize: smallMemtable})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			store := &refusalCounter{Store: db}
			w := newGroupWorldOn(t, store)
			hint := row.hint(w.s)
			change := func(i int) (refused int64, start int) {
				t.Helper()
				store.refused.Store(0)
				row.change(t, w, i)
				return store.refused.Load(), int(hint.n.Load())
			}
			first, fits := change(0)
			t.Logf("first change: %d refusals before %d fit", first, fits)
			if first <= row.whole || fits >= membershipBatch || fits < 1 {
				t.Fatalf("first change: %d refusals, remembers %d; want more than %d refusals and less than %d", first, fits, row.whole, membershipBatch)
			}
			if refused, next := change(1); refused != row.whole || next != min(2*fits, membershipBatch) {
				t.Fatalf("second change: %d refusals, remembers %d; want %d (it starts at %d) and %d", refused, next, row.whole, fits, min(2*fits, membershipBatch))
			}
			if refused, next := change(2); refused != row.whole+1 || next != fits {
				t.Fatalf("third change: %d refusals, remembers %d; want %d (%d, twice what fit, is refused once) and %d", refused, next, row.whole+1, 2*fits, fits)
			}
		})
	}
}

// refusalCounter is a store that counts the transactions it refuses as
// too big (kv.ErrTxnTooBig): the real store, watched from outside.
type refusalCounter struct {
	kv.Store
	refused atomic.Int64
}

func (c *refusalCounter) Update(ctx context.Context, fn func(kv.Txn) error) error {
	err := c.Store.Update(ctx, fn)
	if errors.Is(err, kv.ErrTxnTooBig) {
		c.refused.Add(1)
	}
	return err
}

// fillParentGroups makes group id a member of n groups of ids from first
// (records holding that one member, no indexes), as fillGroup does with
// persons.
func fillParentGroups(t testing.TB, s *Service, id, first uint64, n int) {
	t.Helper()
	for done := 0; done < n; done += 250 {
		err := s.db.Update(context.Background(), func(tx kv.Txn) error {
			for i := done; i < min(n, done+250); i++ {
				p := Group{ID: first + uint64(i), OrganizationID: 1, Name: "P", Active: true, Groups: 1}
				if err := s.put(tx, key(pfxGroup, p.ID), &p); err != nil {
					return err
				}
				if err := tx.Set(key(pfxGroupGroup, p.ID, id), nil); err != nil {
					return err
				}
				if err := tx.Set(key(pfxGroupParent, id, p.ID), nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// fillGroupGroups makes n groups of ids from first (no records of their
// own: only the memberships count) members of group id, as fillGroup does
// with persons.
func fillGroupGroups(t testing.TB, s *Service, id, first uint64, n int) {
	t.Helper()
	for done := 0; done < n; {
		err := s.db.Update(context.Background(), func(tx kv.Txn) error {
			for i := done; i < min(n, done+250); i++ {
				m := first + uint64(i)
				if err := tx.Set(key(pfxGroupGroup, id, m), nil); err != nil {
					return err
				}
				if err := tx.Set(key(pfxGroupParent, m, id), nil); err != nil {
					return err
				}
			}
			return s.adjustGroup(tx, id, 0, int64(min(n, done+250)-done))
		})
		if err != nil {
			t.Fatal(err)
		}
		done = min(n, done+250)
	}
}

// BenchmarkMembers: GET members with include_from_group of a group
// over a chain of 100 nested groups of 100 persons each (10,000 persons
// reached), and the cycle check that refuses closing that chain.
func BenchmarkMembers(b *testing.B) {
	w := newGroupWorld(b)
	ctx := context.Background()
	var ids []uint64
	for i := range 100 {
		g, err := w.s.CreateGroup(ctx, GroupInput{OrganizationID: w.acme.ID, Name: fmt.Sprint("G", i)})
		if err != nil {
			b.Fatal(err)
		}
		fillGroup(b, w.s, g.ID, uint64(1000+100*i), 100)
		if i > 0 {
			if _, err := w.s.UpdateMembers(ctx, ids[i-1], MembersChange{AddGroups: []uint64{g.ID}}); err != nil {
				b.Fatal(err)
			}
		}
		ids = append(ids, g.ID)
	}
	b.Run("include_from_group", func(b *testing.B) {
		for b.Loop() {
			m, err := w.s.Members(ctx, ids[0], true)
			if err != nil || len(m.PersonsFromGroups) != 9900 {
				b.Fatal(len(m.PersonsFromGroups), err)
			}
		}
	})
	b.Run("cycle refused", func(b *testing.B) {
		for b.Loop() {
			_, err := w.s.UpdateMembers(ctx, ids[99], MembersChange{AddGroups: []uint64{ids[0]}})
			if !errors.Is(err, ErrGroupCycle) {
				b.Fatal(err)
			}
		}
	})
}

// addPersons stores n persons of organization org with ids from first
// on, as records only (no password hash, no indexes): what UpdateMembers
// reads of a person it adds.
func addPersons(t testing.TB, s *Service, org, first uint64, n int) []uint64 {
	t.Helper()
	var ids []uint64
	for done := 0; done < n; done += 250 {
		err := s.db.Update(context.Background(), func(tx kv.Txn) error {
			for i := done; i < min(n, done+250); i++ {
				p := Person{ID: first + uint64(i), OrganizationID: org}
				if err := s.put(tx, key(pfxPerson, p.ID), &p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		ids = append(ids, first+uint64(i))
	}
	return ids
}

// TestLargeMembersChange: a change of MaxGroupMembers persons at once,
// 20,000 keys, more than one transaction of the default 8 MiB memtable
// holds (about 13,000), is written in parts; one that is invalid
// anywhere writes nothing; the same request sent again changes nothing.
// With the least memtable memory.kv_memtable takes (1 MiB), where not
// even a part of membershipBatch ids fits, the parts are smaller and
// the same holds: a change of membershipBatch ids failed there on every
// try with kv.ErrTxnTooBig.
func TestLargeMembersChange(t *testing.T) {
	for _, mem := range []struct {
		name     string
		memtable int64
	}{{"default memtable", 0}, {"1 MiB memtable", smallMemtable}} {
		t.Run(mem.name, func(t *testing.T) { testLargeMembersChange(t, mem.memtable) })
	}
}

func testLargeMembersChange(t *testing.T, memtable int64) {
	w := newGroupWorldMem(t, memtable)
	ctx := context.Background()
	a := w.group(t, w.acme.ID, "A")
	b := w.group(t, w.acme.ID, "B")
	many := addPersons(t, w.s, w.acme.ID, 1_000_000, MaxGroupMembers)
	with := func(ids []uint64, more ...uint64) []uint64 { return append(append([]uint64{}, ids...), more...) }

	rows := []struct {
		name    string
		ch      MembersChange
		want    error
		persons int64 // A's direct persons after the change
		groups  int64
		parts   int // journal records the change adds with the default memtable; at least as many, or none, with less
	}{
		{"an unknown person last writes nothing", MembersChange{AddPersons: with(many[:MaxGroupMembers-1], 999)}, ErrInvalid, 0, 0, 0},
		{"an unknown person last of one part writes nothing", MembersChange{AddPersons: with(many[:membershipBatch-1], 999)}, ErrInvalid, 0, 0, 0},
		{"a guest last writes nothing", MembersChange{AddPersons: with(many[:MaxGroupMembers-1], w.guest.ID)}, ErrInvalid, 0, 0, 0},
		{"a cycle last writes nothing", MembersChange{AddPersons: many[:3000], AddGroups: []uint64{a.ID}}, ErrGroupCycle, 0, 0, 0},
		{"one more than the bound writes nothing", MembersChange{AddPersons: with(many[:MaxGroupMembers-1], w.alice.ID), AddGroups: []uint64{b.ID}}, ErrInvalid, 0, 0, 0},
		{"one part", MembersChange{AddPersons: many[:membershipBatch]}, nil, membershipBatch, 0, 1},
		{"part of it already applied", MembersChange{AddPersons: many[:2500]}, nil, 2500, 0, 1},
		{"all of them", MembersChange{AddPersons: many}, nil, MaxGroupMembers, 0, 4},
		{"sent again", MembersChange{AddPersons: many}, nil, MaxGroupMembers, 0, 0},
		{"removals before additions, past the bound in one request", MembersChange{RemovePersons: many[:5000], AddPersons: []uint64{w.alice.ID, w.bob.ID}, AddGroups: []uint64{b.ID}}, nil, MaxGroupMembers - 5000 + 2, 1, 3},
		{"every one removed", MembersChange{RemovePersons: with(many, w.alice.ID, w.bob.ID), RemoveGroups: []uint64{b.ID}}, nil, 0, 0, 4}, // the first 5,000 are gone: two parts change nothing
	}
	for _, r := range rows {
		before := len(w.log.activities())
		g, err := w.s.UpdateMembers(ctx, a.ID, r.ch)
		if !errors.Is(err, r.want) {
			t.Errorf("%s: %v, want %v", r.name, err, r.want)
		}
		if err == nil && (g.Persons != r.persons || g.Groups != r.groups) {
			t.Errorf("%s: answered %d persons, %d groups; want %d, %d", r.name, g.Persons, g.Groups, r.persons, r.groups)
		}
		got, err := w.s.Group(ctx, a.ID)
		if err != nil || got.Persons != r.persons || got.Groups != r.groups {
			t.Errorf("%s: A holds %d persons, %d groups (%v); want %d, %d", r.name, got.Persons, got.Groups, err, r.persons, r.groups)
		}
		if n := countKeys(t, w.s, string(key(pfxGroupPerson, a.ID))); n != int(r.persons) {
			t.Errorf("%s: %d membership keys, want %d", r.name, n, r.persons)
		}
		n := len(w.log.activities()) - before
		if memtable == 0 && n != r.parts || memtable != 0 && (r.parts == 0) != (n == 0) || n < r.parts {
			t.Errorf("%s: %d journal records, want %d (more with a small memtable)", r.name, n, r.parts)
		}
	}
}
