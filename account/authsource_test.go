package account

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/account/directorytest"
	"berth/kv"
	"berth/kv/kvtest"
)

// adOrg creates a top-level organization whose policy enables directory servers.
func adOrg(t *testing.T, s *Service, name string) Organization {
	t.Helper()
	ctx := context.Background()
	o, err := s.CreateOrganization(ctx, OrganizationInput{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if o, err = s.UpdatePolicy(ctx, o.ID, func(p *Policy) error { p.ADEnabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return o
}

func validSource(org uint64) AuthSourceInput {
	return AuthSourceInput{OrganizationID: org, Host: "ldap.example.com", Domain: "example.com",
		Login: "cn=reader,dc=example,dc=com", Password: "secret"}
}

// Every setting is checked for form when a source is created or changed,
// and the error names the field.
func TestAuthSourceValidation(t *testing.T) {
	s := newService(t, testOptions())
	o := adOrg(t, s, "Acme")
	for _, tc := range []struct {
		name  string
		edit  func(*AuthSourceInput)
		field string
	}{
		{"no host", func(in *AuthSourceInput) { in.Host = "" }, "host"},
		{"a URL for a host", func(in *AuthSourceInput) { in.Host = "ldap://ldap.example.com" }, "host"},
		{"a host with a port", func(in *AuthSourceInput) { in.Host = "ldap.example.com:389" }, "host"},
		{"a host with spaces", func(in *AuthSourceInput) { in.Host = "ldap example" }, "host"},
		{"a negative port", func(in *AuthSourceInput) { in.Port = -1 }, "port"},
		{"a port too large", func(in *AuthSourceInput) { in.Port = 65536 }, "port"},
		{"no domain nor base", func(in *AuthSourceInput) { in.Domain = "" }, "domain"},
		{"a domain with an empty label", func(in *AuthSourceInput) { in.Domain = "example..com" }, "domain"},
		{"a domain with a slash", func(in *AuthSourceInput) { in.Domain = "example.com/x" }, "domain"},
		{"no login", func(in *AuthSourceInput) { in.Login = "" }, "login"},
		{"a login that is no DN", func(in *AuthSourceInput) { in.Login = "reader" }, "login"},
		{"a base that is no DN", func(in *AuthSourceInput) { in.BaseDN = "people" }, "base_dn"},
		{"a filter that does not parse", func(in *AuthSourceInput) { in.Filter = "(uid=*" }, "filter"},
		{"no organization", func(in *AuthSourceInput) { in.OrganizationID = 0 }, "company_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := validSource(o.ID)
			tc.edit(&in)
			_, err := s.CreateAuthSource(context.Background(), in)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("got %v, want an invalid %s", err, tc.field)
			}
		})
	}
	a, err := s.CreateAuthSource(context.Background(), validSource(o.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateAuthSource(context.Background(), a.ID, func(a *AuthSource) error { a.Port = 70000; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("update to port 70000: %v", err)
	}
	if a.SearchBase() != "dc=example,dc=com" || a.URL() != "ldap://ldap.example.com:389" || a.SearchFilter() != DefaultDirectoryFilter {
		t.Errorf("derived base %q, URL %q, filter %q", a.SearchBase(), a.URL(), a.SearchFilter())
	}
}

// ad_enabled gates adding, changing and importing: the organization's
// own and every one above it. Listing and deleting stay open.
func TestAuthSourcePolicyGate(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	parent, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Parent"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Child", ParentID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	setAD := func(id uint64, on bool) {
		t.Helper()
		if _, err := s.UpdatePolicy(ctx, id, func(p *Policy) error { p.ADEnabled = on; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateAuthSource(ctx, validSource(child.ID)); !errors.Is(err, ErrDirectoryDisabled) {
		t.Fatalf("ad_enabled off: %v", err)
	}
	setAD(child.ID, true)
	if _, err := s.CreateAuthSource(ctx, validSource(child.ID)); !errors.Is(err, ErrDirectoryDisabled) {
		t.Fatalf("on in the child, off in the parent: %v", err)
	}
	setAD(parent.ID, true)
	a, err := s.CreateAuthSource(ctx, validSource(child.ID))
	if err != nil {
		t.Fatal(err)
	}
	setAD(parent.ID, false)
	if _, err := s.UpdateAuthSource(ctx, a.ID, func(a *AuthSource) error { a.Port = 10389; return nil }); !errors.Is(err, ErrDirectoryDisabled) {
		t.Fatalf("update once turned off: %v", err)
	}
	if _, err := s.ImportAuthSource(ctx, a.ID); !errors.Is(err, ErrDirectoryDisabled) {
		t.Fatalf("import once turned off: %v", err)
	}
	list, total, err := s.AuthSources(ctx, child.ID, 0, 100)
	if err != nil || total != 1 || len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("list: %v %d %v", list, total, err)
	}
	if err := s.DeleteAuthSource(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthSource(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// directoryService is a Service trusting srv's CA, with an organization
// that may use directories and a source of srv over LDAP or LDAPS.
func directoryService(t *testing.T, srv *directorytest.Server, ssl bool) (*Service, *journal, Organization, AuthSource) {
	t.Helper()
	o := testOptions()
	j := &journal{}
	o.Journal = j
	o.Directory.RootCAs = srv.RootCAs
	s := newService(t, o)
	org := adOrg(t, s, "Acme")
	port := srv.Port
	if ssl {
		port = srv.TLSPort
	}
	a, err := s.CreateAuthSource(context.Background(), AuthSourceInput{OrganizationID: org.ID, Host: directorytest.Host,
		Domain: directorytest.Domain, Login: directorytest.AdminDN, Password: directorytest.AdminPassword, Port: port, SSL: ssl})
	if err != nil {
		t.Fatal(err)
	}
	return s, j, org, a
}

// The whole life of imported persons against a real slapd, over LDAP and
// LDAPS: import, sign-in by bind, names and e-mail following the
// directory, disabled when gone and enabled when back (unless an
// administrator disabled them), and let go with the source.
func TestAuthSourceImport(t *testing.T) {
	for _, ssl := range []bool{false, true} {
		name := "ldap"
		if ssl {
			name = "ldaps"
		}
		t.Run(name, func(t *testing.T) {
			srv := directorytest.Start(t)
			for _, u := range []directorytest.User{
				{UID: "alice", GivenName: "Alice", SN: "Liddell", Mail: "alice@example.com", Password: "wonderland-1"},
				{UID: "bob", GivenName: "Bob", SN: "Builder", Password: "can-we-fix-it"}, // no mail: bob@example.com
				{UID: "carol", GivenName: "Carol", SN: "Danvers", Mail: "carol@example.com", Password: "higher-further"},
			} {
				srv.Add(u)
			}
			ctx := context.Background()
			s, j, org, a := directoryService(t, srv, ssl)
			imp := func() ImportReport {
				t.Helper()
				rep, err := s.ImportAuthSource(ctx, a.ID)
				if err != nil {
					t.Fatalf("import: %v", err)
				}
				return rep
			}
			rep := imp()
			if rep.Entries != 3 || len(rep.Created) != 3 || len(rep.Skipped) != 0 {
				t.Fatalf("first import: %s %v", rep, rep.Skipped)
			}
			bob, err := s.PersonByLogin(ctx, "bob@example.com")
			if err != nil || bob.AuthSourceID != a.ID || bob.PasswordHash != "" || bob.DisplayName != "Bob Builder" || bob.OrganizationID != org.ID {
				t.Fatalf("bob: %+v %v", bob, err)
			}
			if rep := imp(); rep.Unchanged != 3 || len(rep.Created)+rep.Updated+rep.Disabled+rep.Enabled != 0 {
				t.Fatalf("second import changed something: %s", rep)
			}
			// Sign-in binds as the entry.
			for _, tc := range []struct {
				login, password string
				want            error
			}{
				{"alice", "wonderland-1", nil},
				{"alice@example.com", "wonderland-1", nil},
				{"alice", "wrong", ErrInvalidCredentials},
				{"alice", "", ErrInvalidCredentials},
				{"bob", "can-we-fix-it", nil},
			} {
				if _, err := s.Authenticate(ctx, tc.login, tc.password); !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
					t.Errorf("sign-in %s/%q: %v, want %v", tc.login, tc.password, err, tc.want)
				}
			}
			// Their password is the directory's: berth's
			// change_password_frequency does not expire it.
			if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error {
				hour := "1h"
				p.ChangePasswordFrequency = &hour
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Authenticate(ctx, "alice", "wonderland-1"); err != nil {
				t.Errorf("sign-in under change_password_frequency: %v", err)
			}
			// A changed name and e-mail follow at the next import.
			srv.Replace("alice", map[string]string{"sn": "Hargreaves", "mail": "alice.h@example.com", "cn": "Alice Hargreaves"})
			j.acts()
			if rep := imp(); rep.Updated != 1 {
				t.Fatalf("after a change: %s", rep)
			}
			alice, err := s.PersonByLogin(ctx, "alice")
			if err != nil || alice.LastName != "Hargreaves" || alice.Email != "alice.h@example.com" || alice.DisplayName != "Alice Hargreaves" {
				t.Fatalf("alice after the change: %+v %v", alice, err)
			}
			if acts := j.acts(); !slices.Contains(acts, ActPersonUpdated) || !slices.Contains(acts, ActAuthSourceImported) {
				t.Errorf("records of the import: %v", acts)
			}
			// Gone from the directory: disabled, and no sign-in.
			srv.Delete("bob")
			if rep := imp(); rep.Disabled != 1 {
				t.Fatalf("after a delete: %s", rep)
			}
			if bob, _ = s.Person(ctx, bob.ID); bob.Active {
				t.Fatal("bob is still active")
			}
			if _, err := s.Authenticate(ctx, "bob", "can-we-fix-it"); err == nil {
				t.Fatal("bob signed in after leaving the directory")
			}
			// Back again: enabled again, as the import disabled him.
			srv.Add(directorytest.User{UID: "bob", GivenName: "Bob", SN: "Builder", Password: "can-we-fix-it"})
			if rep := imp(); rep.Enabled != 1 {
				t.Fatalf("after coming back: %s", rep)
			}
			if bob, _ = s.Person(ctx, bob.ID); !bob.Active {
				t.Fatal("bob was not enabled again")
			}
			if _, err := s.Authenticate(ctx, "bob", "can-we-fix-it"); err != nil {
				t.Fatalf("bob back: %v", err)
			}
			// One an administrator disabled stays disabled, gone and back.
			carol, _ := s.PersonByLogin(ctx, "carol")
			if _, err := s.UpdatePerson(ctx, carol.ID, func(p *Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
			srv.Delete("carol")
			imp()
			srv.Add(directorytest.User{UID: "carol", GivenName: "Carol", SN: "Danvers", Mail: "carol@example.com", Password: "higher-further"})
			if rep := imp(); rep.Enabled != 0 {
				t.Fatalf("carol was enabled by the import: %s", rep)
			}
			if carol, _ = s.Person(ctx, carol.ID); carol.Active {
				t.Fatal("carol, disabled by an administrator, is active again")
			}
			// Deleting the source lets its persons go: they stay,
			// without a password, their sessions and device
			// passwords ended, as a password reset ends them.
			toks, err := s.IssueTokens(ctx, alice.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, device, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "laptop"})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteAuthSource(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AccessCaller(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("alice's token after the source was deleted: %v", err)
			}
			if _, ok, err := s.DeviceCallerRef(ctx, "alice", device); ok || !errors.Is(err, ErrInvalidCredentials) {
				t.Errorf("alice's device password after the source was deleted: %v, %v", ok, err)
			}
			alice, _ = s.Person(ctx, alice.ID)
			if alice.AuthSourceID != 0 || alice.PasswordHash != detachedHash {
				t.Fatalf("alice still names the deleted source: %+v", alice)
			}
			if _, err := s.Authenticate(ctx, "alice", "wonderland-1"); !errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("alice after the source was deleted: %v", err)
			}
			if n := countKeys(t, s, pfxAuthSourcePerson); n != 0 {
				t.Errorf("%d links left", n)
			}
		})
	}
}

// Entries that cannot become persons are skipped with a reason: a login
// taken by a local person, the organization's num_users_maximum.
func TestAuthSourceImportSkips(t *testing.T) {
	srv := directorytest.Start(t)
	for _, uid := range []string{"dave", "erin", "frank", "grace"} {
		srv.Add(directorytest.User{UID: uid, SN: strings.ToUpper(uid), Password: "pw-" + uid})
	}
	ctx := context.Background()
	s, _, org, a := directoryService(t, srv, false)
	if _, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "dave", Email: "dave@local.example", Password: pw}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.NumUsersMaximum = 3; return nil }); err != nil {
		t.Fatal(err)
	}
	rep, err := s.ImportAuthSource(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Created) != 2 || len(rep.Skipped) != 2 {
		t.Fatalf("report %s %q", rep, rep.Skipped)
	}
	if !strings.Contains(strings.Join(rep.Skipped, "\n"), "num_users_maximum") || !strings.Contains(rep.Skipped[0], "another person's") {
		t.Errorf("reasons %q", rep.Skipped)
	}
	// The local dave keeps his own password.
	if _, err := s.Authenticate(ctx, "dave", pw); err != nil {
		t.Fatalf("local dave: %v", err)
	}
}

// A server that cannot be reached, refuses berth's login or shows a
// certificate that does not verify fails the import with a
// *DirectoryError that says so; the source keeps the error.
func TestAuthSourceImportErrors(t *testing.T) {
	srv := directorytest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		edit func(*AuthSource)
		op   string
		text string
		// allowed is DirectoryOptions.AllowedNetworks, spaced, "" for any.
		allowed string
	}{
		{"nobody listening", func(a *AuthSource) { a.Port = 1 }, "connect", "could not be reached", ""},
		// Any organization's administrators set a host and port: on a
		// server that names its directories' networks, any other is
		// refused before a connection is made (before, berth connected
		// to whatever it reached, loopback included).
		{"a network the configuration does not allow", func(*AuthSource) {}, "connect", "directory.allowed_networks", "10.0.0.0/8 192.168.1.7/32"},
		{"an IPv6 network only", func(*AuthSource) {}, "connect", "directory.allowed_networks", "::1/128"},
		{"a wrong password", func(a *AuthSource) { a.Password = "wrong" }, "bind", "login or password", ""},
		{"a host the certificate does not name", func(a *AuthSource) { a.Host, a.Port, a.SSL = "localhost", srv.TLSPort, true }, "connect", "certificate", ""},
		{"a base that does not exist", func(a *AuthSource) { a.BaseDN = "ou=nowhere,dc=example,dc=com" }, "search", "No Such Object", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _, a := directoryService(t, srv, false)
			for _, p := range strings.Fields(tc.allowed) {
				s.dir.opts.AllowedNetworks = append(s.dir.opts.AllowedNetworks, netip.MustParsePrefix(p))
			}
			if _, err := s.UpdateAuthSource(ctx, a.ID, func(a *AuthSource) error { tc.edit(a); return nil }); err != nil {
				t.Fatal(err)
			}
			_, err := s.ImportAuthSource(ctx, a.ID)
			var de *DirectoryError
			if !errors.As(err, &de) || !errors.Is(err, ErrDirectory) || de.Op != tc.op || !strings.Contains(de.Description(), tc.text) {
				t.Fatalf("got %v (%T), want a %s error saying %q", err, err, tc.op, tc.text)
			}
			if a, _ = s.AuthSource(ctx, a.ID); a.LastError == "" || a.LastImport.IsZero() {
				t.Errorf("the source does not keep the failure: %+v", a)
			}
		})
	}
	// A network the configuration names is reached as any.
	s, _, _, a := directoryService(t, srv, false)
	s.dir.opts.AllowedNetworks = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/8")}
	if _, err := s.ImportAuthSource(ctx, a.ID); err != nil {
		t.Fatalf("a server in an allowed network: %v", err)
	}
	// The system pool does not know the test CA.
	s, _, _, a = directoryService(t, srv, true)
	s.dir.opts.RootCAs = nil
	if _, err := s.ImportAuthSource(ctx, a.ID); !errors.Is(err, ErrDirectory) {
		t.Fatalf("an untrusted CA: %v", err)
	}
}

// TestAuthSourceRefresh: the refresh grant of an imported person asks
// the directory whether it still holds them (their uid, under the
// source's base and filter), without waiting for the next import. Gone
// or left out by the filter, the refresh is refused as disabled, and the
// person is disabled as the import would (their sessions ended, enabled
// again by an import that finds them back); a directory that does not
// answer refuses nothing, the last import's word standing.
func TestAuthSourceRefresh(t *testing.T) {
	ctx := context.Background()
	user := directorytest.User{UID: "alice", GivenName: "Alice", SN: "Liddell", Mail: "alice@example.com", Password: "wonderland-1"}
	rows := []struct {
		name   string
		change func(t *testing.T, srv *directorytest.Server, s *Service, a AuthSource)
		want   error
		back   func(srv *directorytest.Server) // alice back in the directory
	}{
		{"still in the directory", func(*testing.T, *directorytest.Server, *Service, AuthSource) {}, nil, nil},
		{"deleted from the directory", func(_ *testing.T, srv *directorytest.Server, _ *Service, _ AuthSource) {
			srv.Delete("alice")
		}, ErrInactive, func(srv *directorytest.Server) { srv.Add(user) }},
		{"left out by the source's filter", func(_ *testing.T, srv *directorytest.Server, _ *Service, _ AuthSource) {
			srv.Replace("alice", map[string]string{"description": "disabled"})
		}, ErrInactive, func(srv *directorytest.Server) { srv.Replace("alice", map[string]string{"description": "back"}) }},
		{"the directory does not answer", func(t *testing.T, srv *directorytest.Server, s *Service, a AuthSource) {
			srv.Delete("alice")
			if _, err := s.UpdateAuthSource(ctx, a.ID, func(a *AuthSource) error { a.Port = 1; return nil }); err != nil {
				t.Fatal(err)
			}
		}, nil, nil},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			srv := directorytest.Start(t)
			srv.Add(user)
			s, _, _, a := directoryService(t, srv, false)
			a, err := s.UpdateAuthSource(ctx, a.ID, func(a *AuthSource) error {
				a.Filter = "(&(objectClass=inetOrgPerson)(uid=*)(!(description=disabled)))"
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ImportAuthSource(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			alice, err := s.Authenticate(ctx, "alice", "wonderland-1")
			if err != nil {
				t.Fatal(err)
			}
			toks, err := s.IssueLoginTokens(ctx, alice, 0)
			if err != nil {
				t.Fatal(err)
			}
			other, err := s.IssueLoginTokens(ctx, alice, 0)
			if err != nil {
				t.Fatal(err)
			}
			row.change(t, srv, s, a)
			_, _, err = s.Refresh(ctx, toks.RefreshToken)
			if (err == nil) != (row.want == nil) || !errors.Is(err, row.want) {
				t.Fatalf("refresh: %v, want %v", err, row.want)
			}
			p, _ := s.Person(ctx, alice.ID)
			_, oerr := s.AccessCaller(ctx, other.AccessToken)
			if row.want == nil {
				if !p.Active || oerr != nil {
					t.Fatalf("let in, yet alice is active %v, her other session %v", p.Active, oerr)
				}
				return
			}
			if p.Active || oerr == nil {
				t.Fatalf("refused, yet alice is active %v, her other session %v", p.Active, oerr)
			}
			// Back in the directory, the next import enables her again.
			row.back(srv)
			if _, err := s.ImportAuthSource(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			if p, _ = s.Person(ctx, alice.ID); !p.Active {
				t.Fatal("alice, back in the directory, was not enabled again")
			}
		})
	}
}

// TestAuthSourceRefreshSilent: a directory that takes connections and
// never answers holds a refresh for directory.timeout at most, the wait
// for a slot of MaxBinds included, and refuses nothing; once it did not
// answer it is not asked again for as long, so refreshes arriving at once
// while it hangs neither queue behind each other nor hold their requests.
func TestAuthSourceRefreshSilent(t *testing.T) {
	ctx := context.Background()
	srv := directorytest.Start(t)
	srv.Add(directorytest.User{UID: "alice", GivenName: "Alice", SN: "Liddell", Mail: "alice@example.com", Password: "wonderland-1"})
	s, _, _, a := directoryService(t, srv, false)
	const timeout = 300 * time.Millisecond
	s.dir = newDirectoryState(DirectoryOptions{RootCAs: srv.RootCAs, Timeout: timeout, MaxBinds: 1})
	if _, err := s.ImportAuthSource(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	alice, err := s.Authenticate(ctx, "alice", "wonderland-1")
	if err != nil {
		t.Fatal(err)
	}
	refresh := make([]string, 8) // eight times the slots
	for i := range refresh {
		toks, err := s.IssueLoginTokens(ctx, alice, 0)
		if err != nil {
			t.Fatal(err)
		}
		refresh[i] = toks.RefreshToken
	}

	// The directory hangs: it accepts and then says nothing.
	ln, err := net.Listen("tcp", directorytest.Host+":0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	if _, err := s.UpdateAuthSource(ctx, a.ID, func(a *AuthSource) error {
		a.Port = ln.Addr().(*net.TCPAddr).Port
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	type result struct {
		took time.Duration
		err  error
		next string
	}
	results := make([]result, len(refresh))
	var wg sync.WaitGroup
	for i, tok := range refresh {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			toks, _, err := s.Refresh(ctx, tok)
			results[i] = result{time.Since(start), err, toks.RefreshToken}
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil || r.took > 3*timeout {
			t.Errorf("refresh %d while the directory hangs: %v after %v, want nil within %v", i, r.err, r.took, 3*timeout)
		}
	}
	// Still hanging, and it did not answer: not asked again at once.
	start := time.Now()
	if _, _, err := s.Refresh(ctx, results[0].next); err != nil || time.Since(start) > timeout/2 {
		t.Errorf("refresh just after the directory did not answer: %v after %v, want nil at once", err, time.Since(start))
	}
}

// TestImportReportSkipped: a report keeps the reasons of the first
// maxSkipped entries it skipped and counts them all, where its summary
// (the log's, the activity record's) said 100 of however many.
func TestImportReportSkipped(t *testing.T) {
	var r ImportReport
	for i := range maxSkipped + 50 {
		r.skip("entry %d: no uid", i)
	}
	if len(r.Skipped) != maxSkipped || r.SkippedTotal != maxSkipped+50 || !strings.HasSuffix(r.String(), fmt.Sprintf("%d skipped", maxSkipped+50)) {
		t.Fatalf("%d reasons, %d counted, %q", len(r.Skipped), r.SkippedTotal, r.String())
	}
}

// A deletion of a source that fails between its transactions leaves
// either the source, which a second deletion finishes, or no source and
// none of its persons' sessions: never a source gone while persons it
// let go still sign in with the sessions it had. Before, the source went
// in its first transaction and its persons in later ones, so a failure
// between left their sessions and device passwords working, linked to a
// source no request could name again.
func TestAuthSourceDeleteSteps(t *testing.T) {
	srv := directorytest.Start(t)
	for _, u := range []string{"ann", "ben", "cat"} {
		srv.Add(directorytest.User{UID: u, GivenName: u, SN: "Doe", Password: u + "-password-1"})
	}
	defer func(n int) { authSourceDetachBatch = n }(authSourceDetachBatch)
	rows := []struct {
		name  string
		batch int // persons let go per transaction
		fail  int // Updates let through before the one that fails
	}{
		{"the only transaction fails", 100, 0},
		{"a failure after one person's transaction", 1, 1},
		{"a failure after two persons' transactions", 1, 2},
		{"a failure after every person's", 1, 3},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			authSourceDetachBatch = tt.batch
			s, _, _, a := directoryService(t, srv, false)
			rep, err := s.ImportAuthSource(ctx, a.ID)
			if err != nil || len(rep.Created) != 3 {
				t.Fatalf("import: %s, %v", rep, err)
			}
			var toks []string
			for _, p := range rep.Created {
				tk, err := s.IssueTokens(ctx, p.ID, 0)
				if err != nil {
					t.Fatal(err)
				}
				toks = append(toks, tk.AccessToken)
			}
			f := kvtest.NewStepFailer(s.db, tt.fail)
			s.db = f
			err = s.DeleteAuthSource(ctx, a.ID)
			f.Arm(-1)
			if !errors.Is(err, kvtest.ErrStep) {
				t.Fatalf("delete: %v, want the failed step", err)
			}
			_, err = s.AuthSource(ctx, a.ID)
			if errors.Is(err, ErrNotFound) {
				for i, tk := range toks {
					if _, err := s.AccessCaller(ctx, tk); !errors.Is(err, ErrInvalidToken) {
						t.Errorf("the source is gone, but %s's session: %v", rep.Created[i].Username, err)
					}
				}
				if n := countKeys(t, s, pfxAuthSourcePerson); n != 0 {
					t.Errorf("the source is gone, but %d links to it stay", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteAuthSource(ctx, a.ID); err != nil {
				t.Fatalf("deleting again: %v", err)
			}
			for i, tk := range toks {
				if _, err := s.AccessCaller(ctx, tk); !errors.Is(err, ErrInvalidToken) {
					t.Errorf("deleted again, %s's session: %v", rep.Created[i].Username, err)
				}
			}
			if n := countKeys(t, s, pfxAuthSourcePerson); n != 0 {
				t.Errorf("deleted again, %d links to the source stay", n)
			}
		})
	}
}

// alongside runs during inside the closure of the delete's Update number
// at (0 the first), after the closure's own reads and writes and before
// its commit: a change that commits between the two, as another request
// or node's would.
type alongside struct {
	kv.Store
	mu     sync.Mutex
	at     int
	during func()
}

// MetaGeneration passes the store's on, which embedding would hide.
func (a *alongside) MetaGeneration() uint64 { return kv.MetaGeneration(a.Store) }

func (a *alongside) Update(ctx context.Context, fn func(kv.Txn) error) error {
	a.mu.Lock()
	run := a.at == 0
	a.at--
	a.mu.Unlock()
	if !run {
		return a.Store.Update(ctx, fn)
	}
	ran := false
	return a.Store.Update(ctx, func(tx kv.Txn) error {
		err := fn(tx)
		if !ran {
			ran = true
			a.during()
		}
		return err
	})
}

// A person an import links to the source while the deletion's last
// transaction runs is let go with it, or not made: the import's link
// and the deletion's scan of the links touch no common key, so the
// import writes the source's record, which the deletion reads. Before,
// the deletion committed over the new link: a person linked to a source
// that was gone.
func TestAuthSourceDeleteDuringImport(t *testing.T) {
	srv := directorytest.Start(t)
	srv.Add(directorytest.User{UID: "ann", GivenName: "ann", SN: "Doe", Password: "ann-password-1"})
	defer func(n int) { authSourceDetachBatch = n }(authSourceDetachBatch)
	for _, tt := range []struct {
		name   string
		batch  int  // persons let go per transaction
		before bool // ann imported before the deletion
		at     int  // the deletion's transaction the import commits in
	}{
		{"in the only transaction", 100, false, 0},
		{"in the last, after one letting ann go", 1, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			authSourceDetachBatch = tt.batch
			s, _, _, a := directoryService(t, srv, false)
			if tt.before {
				if rep, err := s.ImportAuthSource(ctx, a.ID); err != nil || len(rep.Created) != 1 {
					t.Fatalf("import: %s, %v", rep, err)
				}
			}
			var made []Person
			var madeErr error
			s.db = &alongside{Store: s.db, at: tt.at, during: func() {
				var rep ImportReport
				madeErr = s.createMember(ctx, a, directoryEntry{DN: "uid=zed", UID: "zed", GivenName: "Zed", SN: "Doe"}, "zed", &rep)
				made = rep.Created
			}}
			if err := s.DeleteAuthSource(ctx, a.ID); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := s.AuthSource(ctx, a.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the source after its deletion: %v", err)
			}
			if madeErr != nil && !errors.Is(madeErr, ErrNotFound) {
				t.Fatalf("the import alongside: %v", madeErr)
			}
			if n := countKeys(t, s, pfxAuthSourcePerson); n != 0 {
				t.Errorf("the source is gone, but %d links to it stay", n)
			}
			for _, p := range made {
				if got, err := s.Person(ctx, p.ID); err != nil || got.AuthSourceID != 0 {
					t.Errorf("%s after the deletion: source %d, %v", p.Username, got.AuthSourceID, err)
				}
			}
		})
	}
}
