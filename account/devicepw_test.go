package account

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"berth/kv"
)

// TestDevicePasswordLifecycle: a device password is made with a machine of
// its own, shown once, listed without its secret, accepted for its
// person's logins only, and refused from the revocation on, with a
// description and without a lockout count.
func TestDevicePasswordLifecycle(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: 2, Window: time.Minute, Duration: time.Minute}
	j := &txJournal{changes: map[string]Change{}}
	o.Journal = j
	s := newService(t, o)
	org, alice := fixture(t, s)
	bob, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}

	dp, secret, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "laptop", Machine: MachineInput{DNSName: "laptop.local", OSType: "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	if !devicePasswordShape(secret) || len(secret) != 32 {
		t.Fatalf("secret %q is not 32 characters of base32", secret)
	}
	m, err := s.Machine(ctx, dp.MachineID)
	if err != nil || m.PersonID != alice.ID || m.DNSName != "laptop.local" || m.OSType != "linux" || m.GUID == "" {
		t.Fatalf("machine %+v, %v", m, err)
	}
	list, err := s.DevicePasswords(ctx, alice.ID)
	if err != nil || len(list) != 1 || list[0] != dp {
		t.Fatalf("list %+v, %v; want [%+v]", list, err, dp)
	}
	if countKeys(t, s, pfxDevicePasswordHash) != 1 {
		t.Fatal("the hash index should hold one entry")
	}

	// A second one, on the same machine.
	dp2, secret2, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "phone", MachineID: dp.MachineID})
	if err != nil || dp2.MachineID != dp.MachineID || secret2 == secret {
		t.Fatalf("second: %+v %v", dp2, err)
	}

	for _, tc := range []struct {
		name, login, password string
		ok                    bool
	}{
		{"the username", "alice", secret, true},
		{"the e-mail address, another case", "ALICE@acme.example", secret, true},
		{"the second", "alice", secret2, true},
		{"another person's login", "bob", secret, false},
		{"an unknown login", "nobody", secret, false},
		{"the main password", "alice", pw, false},
		{"a password of the shape, unknown", "alice", strings.Repeat("a", 32), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok, err := s.DeviceCallerRef(ctx, tc.login, tc.password)
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v, err %v; want ok %v", ok, err, tc.ok)
			}
			if ok && (c.Person.ID != alice.ID || c.MachineID != dp.MachineID || c.Organization.ID != org.ID) {
				t.Fatalf("caller %+v", c.Principal)
			}
		})
	}

	// Only the owner revokes it through RevokeDevicePassword.
	if err := s.RevokeDevicePassword(ctx, bob.ID, dp.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke as another person: %v", err)
	}
	if err := s.RevokeDevicePassword(ctx, alice.ID, dp.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeDevicePassword(ctx, alice.ID, dp.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
	// Revoked: refused, described, and many times without locking alice.
	for range 5 {
		_, ok, err := s.DeviceCallerRef(ctx, "alice", secret)
		var d interface{ Description() string }
		if ok || !errors.Is(err, ErrInvalidCredentials) || !errors.As(err, &d) || !strings.Contains(d.Description(), "revoked") {
			t.Fatalf("revoked: ok %v, %v", ok, err)
		}
	}
	if _, ok, err := s.DeviceCallerRef(ctx, "alice", secret2); !ok || err != nil {
		t.Fatalf("the other device password after revoking one: %v %v", ok, err)
	}
	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Fatalf("revoked device passwords must not lock the person: %v", err)
	}
	list, _ = s.DevicePasswords(ctx, alice.ID)
	if len(list) != 1 || list[0].ID != dp2.ID {
		t.Fatalf("after revoking: %+v", list)
	}
	if _, err := s.Machine(ctx, dp.MachineID); err != nil {
		t.Fatalf("the machine stays after a revocation: %v", err)
	}
	on := fmt.Sprintf("person %d/%d", org.ID, alice.ID)
	want := []string{"device_password_created by system on " + on, "device_password_created by system on " + on, "device_password_revoked by system on " + on}
	var got []string
	for _, c := range j.committed(t, s.db) {
		if strings.HasPrefix(c, "device_password") {
			got = append(got, strings.TrimSpace(c))
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("journal %q, want %q", got, want)
	}
}

// TestCreateDevicePasswordRefuses: bad inputs, a machine that is not the
// person's, an unknown person and the limit.
func TestCreateDevicePasswordRefuses(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	bob, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := s.UpsertMachine(ctx, bob.ID, MachineInput{DNSName: "bob-pc"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		person uint64
		in     DevicePasswordInput
		want   error
		field  string
	}{
		{"no name", alice.ID, DevicePasswordInput{}, ErrInvalid, "name"},
		{"a blank name", alice.ID, DevicePasswordInput{Name: "   "}, ErrInvalid, "name"},
		{"a long name", alice.ID, DevicePasswordInput{Name: strings.Repeat("x", 101)}, ErrInvalid, "name"},
		{"a control character", alice.ID, DevicePasswordInput{Name: "a\nb"}, ErrInvalid, "name"},
		{"a long dns_name", alice.ID, DevicePasswordInput{Name: "x", Machine: MachineInput{DNSName: strings.Repeat("x", 256)}}, ErrInvalid, "dns_name"},
		{"another person's machine", alice.ID, DevicePasswordInput{Name: "x", MachineID: bobs.ID}, ErrNotFound, ""},
		{"an unknown machine", alice.ID, DevicePasswordInput{Name: "x", MachineID: 9999}, ErrNotFound, ""},
		{"an unknown person", 9999, DevicePasswordInput{Name: "x"}, ErrNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CreateDevicePassword(ctx, tc.person, tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			var fe *FieldError
			if tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
				t.Fatalf("%v does not name %s", err, tc.field)
			}
		})
	}
	if n := countKeys(t, s, pfxDevicePassword); n != 0 {
		t.Fatalf("refusals left %d device passwords", n)
	}
	machines, _ := s.Machines(ctx, alice.ID)
	if len(machines) != 0 {
		t.Fatalf("refusals left machines: %+v", machines)
	}
	t.Run("the limit", func(t *testing.T) {
		m, err := s.UpsertMachine(ctx, alice.ID, MachineInput{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range MaxDevicePasswords {
			if _, _, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: fmt.Sprint(i), MachineID: m.ID}); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "one more", MachineID: m.ID}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("past the limit: %v", err)
		}
	})
}

// TestDevicePasswordEnds: a device password ends with its machine, with
// its person, and is refused while its person is locked or disabled.
func TestDevicePasswordEnds(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: 1, Window: time.Minute, Duration: time.Minute}
	s := newService(t, o)
	org, alice := fixture(t, s)
	mk := func(name string, machine uint64) (DevicePassword, string) {
		t.Helper()
		dp, secret, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: name, MachineID: machine})
		if err != nil {
			t.Fatal(err)
		}
		return dp, secret
	}
	works := func(secret string) error {
		t.Helper()
		_, ok, err := s.DeviceCallerRef(ctx, "alice", secret)
		if err == nil && !ok {
			err = errors.New("not a device password")
		}
		return err
	}

	t.Run("with its machine", func(t *testing.T) {
		a, sa := mk("a", 0)
		_, sb := mk("b", 0)
		toks, err := s.IssueTokens(ctx, alice.ID, a.MachineID)
		if err != nil {
			t.Fatal(err)
		}
		before, _, err := s.Counts(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Its mapping and backup go with it (before, their records
		// stayed, of a machine nobody could reach).
		if _, err := s.CreateMapping(ctx, MachineMapping{MachineID: a.MachineID, Path: "/home/a", PersonID: alice.ID, RootID: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateBackup(ctx, Backup{RootID: 2, MachineID: a.MachineID, Path: "/home/b"}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteMachine(ctx, a.MachineID); err != nil {
			t.Fatal(err)
		}
		if err := works(sa); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("a's password after its machine went: %v", err)
		}
		if err := works(sb); err != nil {
			t.Fatalf("b's password after a's machine went: %v", err)
		}
		if _, err := s.AccessCaller(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("a session of the deleted machine: %v", err)
		}
		if _, err := s.Machine(ctx, a.MachineID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("machine: %v", err)
		}
		if err := s.DeleteMachine(ctx, a.MachineID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		mms, err1 := s.Mappings(ctx, a.MachineID)
		bs, err2 := s.Backups(ctx, a.MachineID)
		if len(mms) != 0 || len(bs) != 0 || err1 != nil || err2 != nil {
			t.Fatalf("after the machine went: mappings %v (%v), backups %v (%v)", mms, err1, bs, err2)
		}
		if _, err := s.BackupOf(ctx, a.MachineID, 2); !errors.Is(err, ErrNotFound) {
			t.Fatalf("its backup: %v", err)
		}
		after, _, _ := s.Counts(ctx, org.ID)
		if after.Machines != before.Machines-1 {
			t.Fatalf("machine count %d, then %d", before.Machines, after.Machines)
		}
	})

	t.Run("while locked or disabled", func(t *testing.T) {
		_, secret := mk("c", 0)
		if _, err := s.Authenticate(ctx, "alice", "wrong"); !errors.Is(err, ErrAccountLocked) {
			t.Fatal(err)
		}
		if err := works(secret); !errors.Is(err, ErrAccountLocked) {
			t.Fatalf("locked: %v", err)
		}
		if err := s.Unlock(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		if err := works(secret); err != nil {
			t.Fatalf("unlocked: %v", err)
		}
		if _, err := s.UpdatePerson(ctx, alice.ID, func(p *Person) error { p.Active = false; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := works(secret); !errors.Is(err, ErrInactive) {
			t.Fatalf("disabled: %v", err)
		}
		if _, err := s.UpdatePerson(ctx, alice.ID, func(p *Person) error { p.Active = true; return nil }); err != nil {
			t.Fatal(err)
		}
	})

	// A lock strangers' wrong passwords brought does not refuse a
	// device password where its person is known (Authenticate), as it
	// refuses no token or remembered password there: else anyone who
	// knows the login keeps a two-step person's mount out, at the office
	// too, with one wrong password per lock.
	t.Run("locked by strangers, at a known address", func(t *testing.T) {
		_, secret := mk("g", 0)
		s.opts.Lockout.KnownAddressTTL = time.Hour
		defer func() { s.opts.Lockout.KnownAddressTTL = 0 }()
		home := WithClientAddr(ctx, netip.MustParseAddr("198.51.100.4"))
		stranger := WithClientAddr(ctx, netip.MustParseAddr("203.0.113.9"))
		if _, err := s.Authenticate(home, "alice", pw); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(stranger, "alice", "wrong"); !errors.Is(err, ErrAccountLocked) {
			t.Fatal(err)
		}
		for _, at := range []struct {
			name string
			ctx  context.Context
			want error
		}{
			{"home", home, nil},
			{"stranger's address", stranger, ErrAccountLocked},
			{"home again", home, nil},
		} {
			_, ok, err := s.DeviceCallerRef(at.ctx, "alice", secret)
			if !errors.Is(err, at.want) || (at.want == nil && !ok) {
				t.Errorf("%s: %v, %v; want %v", at.name, ok, err, at.want)
			}
		}
		if err := s.Unlock(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("with a password reset, not a change", func(t *testing.T) {
		_, secret := mk("e", 0)
		self := WithActor(ctx, Actor{Type: "person", PersonID: alice.ID})
		if err := s.SetPassword(self, alice.ID, "changed by alice"); err != nil {
			t.Fatal(err)
		}
		if err := works(secret); err != nil {
			t.Fatalf("after alice changed her password: %v", err)
		}
		// The token route's new_password: a sign-in, with no actor yet,
		// by the person who gives the current password.
		if _, err := s.SignInWithNewPassword(ctx, "alice", "changed by alice", "changed at sign-in"); err != nil {
			t.Fatal(err)
		}
		if err := works(secret); err != nil {
			t.Fatalf("after alice changed her password signing in: %v", err)
		}
		admin := WithActor(ctx, Actor{Type: "person", PersonID: alice.ID + 1000})
		if err := s.SetPassword(admin, alice.ID, "reset by an admin"); err != nil {
			t.Fatal(err)
		}
		if err := works(secret); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("after an administrator reset the password: %v", err)
		}
		_, secret = mk("f", 0)
		if _, err := s.ResetPassword(ctx, "alice", "reset by the operator"); err != nil {
			t.Fatal(err)
		}
		if err := works(secret); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("after berth reset-password: %v", err)
		}
		if dps, err := s.DevicePasswords(ctx, alice.ID); err != nil || len(dps) != 0 {
			t.Fatalf("device passwords left: %v, %v", dps, err)
		}
	})

	t.Run("with its person", func(t *testing.T) {
		_, secret := mk("d", 0)
		if err := s.DeletePerson(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		if err := works(secret); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("after the person went: %v", err)
		}
		if ms, _, err := s.OrganizationMachines(ctx, org.ID, 0, 100); err != nil || len(ms) != 0 {
			t.Errorf("the organization's machines after its person went: %v, %v", ms, err)
		}
		for _, p := range []string{pfxDevicePassword, pfxPersonDevicePassword} {
			if n := countKeys(t, s, p); n != 0 {
				t.Errorf("%d keys left under %s", n, p)
			}
		}
	})
}

// TestNeedsDevicePassword: the organization's require_two_step_auth
// makes a device password necessary over Basic; without it and without
// enrollment (TwoStepMode ""), the main password serves.
func TestNeedsDevicePassword(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	for _, require := range []bool{false, true, false} {
		if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.RequireTwoStepAuth = require; return nil }); err != nil {
			t.Fatal(err)
		}
		c, err := s.Caller(ctx, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.NeedsDevicePassword(ctx, &c); err != nil || got != require {
			t.Fatalf("require_two_step_auth %v: %v, %v", require, got, err)
		}
	}
}

// BenchmarkDeviceCaller measures the per-request device password check
// of WebDAV Basic: "cached" between two commits, "after a commit" with
// the read a commit costs it.
func BenchmarkDeviceCaller(b *testing.B) {
	ctx := context.Background()
	s := newService(b, testOptions())
	_, alice := fixture(b, s)
	_, secret, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "laptop"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := s.DeviceCallerRef(ctx, "alice", secret); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("after a commit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			if err := s.db.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("zbench"), nil) }); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, ok, err := s.DeviceCallerRef(ctx, "alice", secret); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

// A child of a machine made while the machine's deletion runs (a device
// password, a mapping, a backup, a session signed in from it) goes with
// the machine: each such insert writes the machine's record back, which
// the deletion reads, so the two conflict. Before, the deletion's scans
// of the machine's children missed one committed after they began and
// the deletion committed over it: a device password or a session that
// still signed in as a machine that was gone, a mapping or a backup of
// it nobody could reach.
func TestMachineDeleteDuringChild(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		// make makes a child of machine m of alice's; left reports
		// whether it outlived the machine's deletion.
		make func(t *testing.T, s *Service, alice Person, m uint64) (left func() bool)
	}{
		{"device password", func(t *testing.T, s *Service, alice Person, m uint64) func() bool {
			_, secret, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "late", MachineID: m})
			if err != nil {
				t.Errorf("the password alongside: %v", err)
			}
			return func() bool {
				_, ok, err := s.DeviceCallerRef(ctx, "alice", secret)
				return ok || err == nil && countKeys(t, s, string(key(pfxPersonDevicePassword, alice.ID))) > 0
			}
		}},
		{"mapping", func(t *testing.T, s *Service, alice Person, m uint64) func() bool {
			if _, err := s.CreateMapping(ctx, MachineMapping{MachineID: m, Path: "/home/a", PersonID: alice.ID, RootID: 1}); err != nil {
				t.Errorf("the mapping alongside: %v", err)
			}
			return func() bool { return countKeys(t, s, string(key(pfxMachineMapping, m))) > 0 }
		}},
		{"backup", func(t *testing.T, s *Service, alice Person, m uint64) func() bool {
			if _, err := s.CreateBackup(ctx, Backup{RootID: 2, MachineID: m, Path: "/home/b"}); err != nil {
				t.Errorf("the backup alongside: %v", err)
			}
			return func() bool { return countKeys(t, s, string(key(pfxMachineBackup, m))) > 0 }
		}},
		{"session", func(t *testing.T, s *Service, alice Person, m uint64) func() bool {
			toks, err := s.IssueTokens(ctx, alice.ID, m)
			if err != nil {
				t.Errorf("the sign-in alongside: %v", err)
			}
			return func() bool {
				c, err := s.AccessCaller(ctx, toks.AccessToken)
				return err == nil && c.MachineID == m
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newService(t, testOptions())
			_, alice := fixture(t, s)
			m, err := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "laptop"})
			if err != nil {
				t.Fatal(err)
			}
			var left func() bool
			s.db = &alongside{Store: s.db, during: func() { left = tt.make(t, s, alice, m.ID) }}
			if err := s.DeleteMachine(ctx, m.ID); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := s.Machine(ctx, m.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the machine after its deletion: %v", err)
			}
			if left == nil {
				t.Fatal("nothing ran alongside the deletion")
			}
			if left() {
				t.Errorf("the machine is gone, but its %s made alongside stays", tt.name)
			}
		})
	}
}

// Two mappings (or backups) of one machine made at once are checked
// against each other: each writes the machine's record back (touch), so
// the later to commit conflicts and, tried again, finds the other.
// Before, each one's scan of the machine's others missed the other's,
// and both were kept: two mappings of one root, or of folders one
// inside the other.
func TestMachineSetupAlongside(t *testing.T) {
	ctx := context.Background()
	// mapping and backup make one of the machine's set-up, of root at path.
	mapping := func(path string, root uint64) func(s *Service, m Machine) error {
		return func(s *Service, m Machine) error {
			_, err := s.CreateMapping(ctx, MachineMapping{MachineID: m.ID, Path: path, PersonID: m.PersonID, RootID: root})
			return err
		}
	}
	backup := func(path string, root uint64) func(s *Service, m Machine) error {
		return func(s *Service, m Machine) error {
			_, err := s.CreateBackup(ctx, Backup{RootID: root, MachineID: m.ID, Path: path})
			return err
		}
	}
	for _, tt := range []struct {
		name          string
		first, second func(s *Service, m Machine) error
		prefix        string // the machine's index of what they make
	}{
		{"mappings of one root", mapping("/home/a", 1), mapping("/srv/b", 1), pfxMachineMapping},
		{"mappings one inside the other", mapping("/home/a", 1), mapping("/home/a/b", 2), pfxMachineMapping},
		{"backups one inside the other", backup("/home/a", 1), backup("/home/a/b", 2), pfxMachineBackup},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newService(t, testOptions())
			_, alice := fixture(t, s)
			m, err := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "laptop"})
			if err != nil {
				t.Fatal(err)
			}
			var secondErr error
			s.db = &alongside{Store: s.db, during: func() { secondErr = tt.second(s, m) }}
			firstErr := tt.first(s, m)
			if secondErr != nil {
				t.Fatalf("the one alongside: %v", secondErr)
			}
			if !errors.Is(firstErr, ErrExists) {
				t.Errorf("the first, after the one alongside committed: %v, want ErrExists", firstErr)
			}
			if n := countKeys(t, s, string(key(tt.prefix, m.ID))); n != 1 {
				t.Errorf("the machine holds %d, want 1", n)
			}
		})
	}
}

// Two device passwords made at once, for two machines, when the person
// has room for one: one is refused. Each writes the person's record back
// (touch), so the later to commit conflicts and, tried again, counts the
// other. Before, each count of the person's passwords was a scan that
// missed the other's, and the person held MaxDevicePasswords+1.
func TestDevicePasswordBoundAlongside(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	_, alice := fixture(t, s)
	first, _, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "p0"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < MaxDevicePasswords-1; i++ {
		if _, _, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: fmt.Sprint("p", i), MachineID: first.MachineID}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "desktop"})
	if err != nil {
		t.Fatal(err)
	}
	var innerErr error
	s.db = &alongside{Store: s.db, during: func() {
		_, _, innerErr = s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "inner", MachineID: other.ID})
	}}
	_, _, outerErr := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "outer", MachineID: first.MachineID})
	if innerErr != nil {
		t.Fatalf("the one alongside: %v", innerErr)
	}
	if !errors.Is(outerErr, ErrInvalid) {
		t.Errorf("the last one, over the bound: %v, want ErrInvalid", outerErr)
	}
	if n := countKeys(t, s, string(key(pfxPersonDevicePassword, alice.ID))); n != MaxDevicePasswords {
		t.Errorf("alice holds %d device passwords, want %d", n, MaxDevicePasswords)
	}
}
