package rest

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"berth/account"
	"berth/vfs"
)

// personIDs matches the id fields of a person body, which depend on the
// order the fixture created things in.
var personIDs = regexp.MustCompile(`"(id|root_id|company_id)":\d+`)

func normalisePersonIDs(b []byte) []byte {
	return personIDs.ReplaceAll(b, []byte(`"$1":1`))
}

func TestPersonSelfGolden(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.SpaceQuota = "5000000000"
	pol.ExcludedExtensions = ".exe,.tmp"
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	ctx := context.Background()
	if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "a.txt", bytes.NewReader(make([]byte, 1500)), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	status, body := f.get("/api/2/person")
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	var p personBody
	decode(t, body, &p)
	if p.ID != f.person.ID || p.RootID == nil || *p.RootID != f.root.ID || p.CompanyID != f.org.ID ||
		len(p.Roots) != 1 || p.Roots[0].ID != f.root.ID || p.CompanyPolicy.CompanyID != f.org.ID {
		t.Fatalf("ids do not match the fixture: %s", body)
	}
	golden(t, "person.json", normalisePersonIDs(body))
}

func TestPersonByIDAndEmail(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bob, _, bobToken := f.addPerson("bob")
	carol, _, carolToken := f.addPerson("carol")
	if _, err := f.accounts.UpdatePerson(ctx, carol.ID, func(p *account.Person) error {
		p.Admin = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// dave administers another organization.
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	dave, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: other.ID, Username: "dave",
		Email: "dave@example.org", Password: fixturePassword, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	daveToks, err := f.accounts.IssueTokens(ctx, dave.ID, 0)
	if err != nil {
		t.Fatal(err)
	}

	id := func(p account.Person) string { return strconv.FormatUint(p.ID, 10) }
	for _, c := range []struct {
		name, token, ref string
		want             uint64 // 0: 404
	}{
		{"self by id", f.token, id(f.person), f.person.ID},
		{"self by e-mail", f.token, "alice@example.com", f.person.ID},
		{"self by e-mail, other case", f.token, "Alice@Example.COM", f.person.ID},
		{"self by escaped e-mail", f.token, "alice%40example.com", f.person.ID},
		{"another by id", f.token, id(bob), 0},
		{"another by e-mail", f.token, "bob@example.com", 0},
		{"no such id", f.token, "999999", 0},
		{"no such e-mail", f.token, "nobody@example.com", 0},
		{"username is not an e-mail", f.token, "bob", 0},
		{"not an integer", f.token, "1x", 0},
		{"negative", f.token, "-1", 0},
		{"too large", f.token, "18446744073709551616", 0},
		{"bob reads himself", bobToken, id(bob), bob.ID},
		{"admin reads a member by id", carolToken, id(bob), bob.ID},
		{"admin reads a member by e-mail", carolToken, "alice@example.com", f.person.ID},
		{"admin of another organization", daveToks.AccessToken, id(bob), 0},
		{"member does not read an admin", bobToken, id(carol), 0},
		{"member does not read another organization", f.token, id(dave), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.readAll(f.request(http.MethodGet, "/api/2/person/"+c.ref, c.token, nil, nil))
			if c.want == 0 {
				wantError(t, status, body, http.StatusNotFound, "not_found")
				return
			}
			var p personBody
			decode(t, body, &p)
			if status != http.StatusOK || p.ID != c.want || p.Type != "person" {
				t.Fatalf("%d %s, want person %d", status, body, c.want)
			}
		})
	}

	status, body := f.readAll(f.request(http.MethodGet, "/api/2/person/1", "", nil, nil))
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")
}

func TestPersonQuotaAndDeletedRoot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Default policy: no quota.
	_, body := f.get("/api/2/person")
	var p personBody
	decode(t, body, &p)
	if p.SpaceQuota != 0 || p.SpaceQuotaFormatted != "unlimited" || p.CompanyPolicy.SpaceQuota != "0" ||
		p.CompanyPolicy.SpaceQuotaFormatted != "unlimited" || p.SpaceUsage != 0 || p.SpaceUsageFormatted != "0 B" {
		t.Fatalf("unlimited quota: %s", body)
	}
	// The person's own quota wins over the organization's.
	if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error {
		p.SpaceQuota = 2_500_000
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, body = f.get("/api/2/person")
	decode(t, body, &p)
	if p.SpaceQuota != 2_500_000 || p.SpaceQuotaFormatted != "2.5 MB" {
		t.Fatalf("person quota: %s", body)
	}
	// A deleted sync root is no longer listed.
	if err := f.fs.DeleteRoot(ctx, f.root.ID); err != nil {
		t.Fatal(err)
	}
	status, body := f.get("/api/2/person")
	if status != http.StatusOK || !strings.Contains(string(body), `"roots":[]`) {
		t.Fatalf("after deleting the root: %d %s", status, body)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 999: "999 B", 1000: "1.0 KB", 1500: "1.5 KB", 999_949: "999.9 KB",
		999_950: "1.0 MB", 5_000_000_000: "5.0 GB", 1 << 62: "4.6 EB",
	} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
