package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/vfs"
)

// Issue 12's targets, each for one answer of the REST handler over
// loopback TLS.
const (
	deepPageTarget = 50 * time.Millisecond // persons page at offset 99,900 of 100,000
	usageTarget    = 5 * time.Millisecond  // metrics/usage of 10,000 roots and 100 children
	checkShare     = 0.05                  // the permission checks, as a share of a 4 KiB GET
)

// BenchmarkAccounts measures issue 12's three targets in one run, against
// one real berth (Badger, the disk chunk store, vfs, accounts, share and
// rest.New behind httptest's TLS server), as the parent organization's
// administrator:
//
//   - persons-deep-page: GET /api/2/organization/<id>/persons?offset=99900&limit=100
//     of a child organization of 100,000 persons (account.CreatePersons,
//     without passwords); the 100 persons of that page have a sync root
//     each (share.NewRoot), so their objects carry a root as most do;
//   - org-usage: GET /api/2/organization/<id>/metrics/usage of a child
//     organization with 100 children of its own and 10,000 roots among
//     them (share.NewRoot: vfs, the ledger's tallies and the owner record);
//   - get-4k, token, root-owner, root-admin-browse, org-manage: a 4 KiB
//     download by 32 clients, then the permission checks alone
//     (BenchmarkPermissionCost's parts).
//
// Each sub-benchmark builds what it needs the first time it runs, so a
// -bench filter that selects one skips the others' setup. The parent logs
// each figure beside its target.
func BenchmarkAccounts(b *testing.B) {
	e := newAccessEnv(b, berthtest.New(b, berthtest.Options{}))
	perOp := map[string]time.Duration{}

	var deep string // the persons page's URL, once its organization exists
	b.Run("persons-deep-page", func(b *testing.B) {
		if deep == "" {
			deep = e.bigOrganization(b)
		}
		b.ResetTimer()
		for range b.N {
			if st, body, err := e.get(deep, e.atoken); err != nil || st != http.StatusOK {
				b.Fatalf("GET persons: %d %s %v", st, body, err)
			}
		}
		perOp["persons-deep-page"] = b.Elapsed() / time.Duration(b.N)
	})
	var usage string
	b.Run("org-usage", func(b *testing.B) {
		if usage == "" {
			usage = e.usageOrganization(b)
		}
		b.ResetTimer()
		for range b.N {
			if st, body, err := e.get(usage, e.atoken); err != nil || st != http.StatusOK {
				b.Fatalf("GET usage: %d %s %v", st, body, err)
			}
		}
		perOp["org-usage"] = b.Elapsed() / time.Duration(b.N)
	})
	e.runPermissionCost(b, perOp)

	for _, t := range []struct {
		name   string
		target time.Duration
	}{{"persons-deep-page", deepPageTarget}, {"org-usage", usageTarget}} {
		if d, ok := perOp[t.name]; ok {
			b.Logf("%s: %v per GET; target under %v (%.2f of it)", t.name, d, t.target, float64(d)/float64(t.target))
		}
	}
	logPermissionCost(b, perOp)
}

// getJSON decodes the answer to GET url as the administrator into out.
func (e *accessEnv) getJSON(b *testing.B, url string, out any) {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.atoken)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		b.Fatal(err)
	}
}

// bigOrganization creates a child organization of 100,000 persons, gives
// the last 100 a sync root, checks the page at offset 99,900, and returns
// its URL.
func (e *accessEnv) bigOrganization(b *testing.B) string {
	const n, limit = 100_000, 100
	ctx := context.Background()
	start := time.Now()
	org, err := e.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: e.st.Org.ID, Name: "Big"})
	if err != nil {
		b.Fatal(err)
	}
	ins := make([]account.PersonInput, n)
	for i := range ins {
		name := fmt.Sprintf("user%06d", i)
		ins[i] = account.PersonInput{OrganizationID: org.ID, Username: name, Email: name + "@big.example",
			FirstName: "User", LastName: fmt.Sprint(i), NoPassword: true}
	}
	ps, err := e.st.Accounts.CreatePersons(ctx, ins)
	if err != nil {
		b.Fatal(err)
	}
	created := time.Since(start)
	for _, p := range ps[n-limit:] {
		if _, err := e.shares.NewRoot(ctx, p, p.Username, vfs.RootSync); err != nil {
			b.Fatal(err)
		}
	}
	url := fmt.Sprintf("%s/api/2/organization/%d/persons?offset=%d&limit=%d", e.srv.URL, org.ID, n-limit, limit)
	var page struct {
		Total   int `json:"total"`
		Results []struct {
			ID     uint64            `json:"id"`
			RootID *uint64           `json:"root_id"`
			Roots  []json.RawMessage `json:"roots"`
		} `json:"results"`
	}
	e.getJSON(b, url, &page)
	if page.Total != n || len(page.Results) != limit || page.Results[0].ID != ps[n-limit].ID ||
		page.Results[0].RootID == nil || len(page.Results[limit-1].Roots) != 1 {
		b.Fatalf("page at offset %d: total %d, %d results, first %+v", n-limit, page.Total, len(page.Results), page.Results[0])
	}
	b.Logf("setup: %d persons created in %v (CreatePersons), %d sync roots, in %v", n, created.Round(time.Millisecond), limit, time.Since(start).Round(time.Millisecond))
	return url
}

// usageOrganization creates a child organization with 100 children and
// 10,000 roots of the three types owned by those children (through
// share.NewRoot, 8 at a time), checks its metrics/usage, and returns its
// URL.
func (e *accessEnv) usageOrganization(b *testing.B) string {
	const children, roots, workers = 100, 10_000, 8
	ctx := context.Background()
	start := time.Now()
	org, err := e.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: e.st.Org.ID, Name: "Usage"})
	if err != nil {
		b.Fatal(err)
	}
	kids := make([]account.Organization, children)
	for i := range kids {
		if kids[i], err = e.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: org.ID, Name: fmt.Sprint("child ", i)}); err != nil {
			b.Fatal(err)
		}
	}
	types := []vfs.RootType{vfs.RootSync, vfs.RootShare, vfs.RootBackup}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < roots; i += workers {
				owner := account.Person{OrganizationID: kids[i%children].ID} // the organization's own
				if _, err := e.shares.NewRoot(ctx, owner, fmt.Sprint("r", i), types[i%len(types)]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	url := fmt.Sprintf("%s/api/2/organization/%d/metrics/usage", e.srv.URL, org.ID)
	var body struct {
		Total struct {
			RootCount int `json:"root_count"`
		} `json:"total_space_usage"`
		Counts struct {
			Organizations int `json:"organizations"`
		} `json:"counts"`
	}
	e.getJSON(b, url, &body)
	if body.Total.RootCount != roots || body.Counts.Organizations != children {
		b.Fatalf("usage of %d roots and %d organizations, want %d and %d", body.Total.RootCount, body.Counts.Organizations, roots, children)
	}
	b.Logf("setup: %d child organizations and %d roots in %v", children, roots, time.Since(start).Round(time.Millisecond))
	return url
}
