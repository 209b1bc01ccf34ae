package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/rest"
	"berth/share"
	"berth/vfs"
)

// BenchmarkPermissionCost puts issue 12's target on numbers: the
// permission checks of a request cost under 5% of the 4 KiB GET rate. In
// one run it measures a 4 KiB download over loopback TLS (32 clients,
// keep-alive), then the checks that request makes alone: the caller's
// token (AccessCaller) and share's decision on the root (share.Root), the
// latter as an owner and as an administrator browsing under
// admin_browse_files (the path with the most reads). It logs each check
// as a share of one GET's time. BenchmarkAccounts runs the same parts
// beside issue 12's other targets.
func BenchmarkPermissionCost(b *testing.B) {
	e := newAccessEnv(b, berthtest.New(b, berthtest.Options{}))
	perOp := map[string]time.Duration{}
	e.runPermissionCost(b, perOp)
	logPermissionCost(b, perOp)
}

// accessEnv is a real berth served by rest.New over loopback TLS, with a
// person who owns a root holding one 4 KiB file, and an administrator of
// the same organization whose policy lets administrators browse files.
type accessEnv struct {
	st     *berthtest.Stack
	shares *share.Service
	srv    *httptest.Server
	root   vfs.Root
	file   string // the 4 KiB file's download URL
	token  string // the owner's access token
	admin  account.Person
	atoken string // the administrator's access token
}

func newAccessEnv(b *testing.B, st *berthtest.Stack) *accessEnv {
	b.Helper()
	ctx := context.Background()
	e := &accessEnv{st: st, shares: share.New(share.Options{FS: st.FS, Accounts: st.Accounts})}
	_, e.root, e.token = st.AddPerson(b, "owner", "correct horse battery")
	admin, _, atoken := st.AddPerson(b, "admin", "correct horse battery")
	var err error
	if e.admin, err = st.Accounts.UpdatePerson(ctx, admin.ID, func(p *account.Person) error { p.Admin = true; return nil }); err != nil {
		b.Fatal(err)
	}
	e.atoken = atoken
	if _, err := st.Accounts.UpdatePolicy(ctx, st.Org.ID, func(p *account.Policy) error { p.AdminBrowseFiles = true; return nil }); err != nil {
		b.Fatal(err)
	}
	n, err := st.FS.WriteFile(ctx, e.root.ID, e.root.FolderID, "small.bin", strings.NewReader(strings.Repeat("x", 4096)), vfs.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	e.srv = httptest.NewUnstartedServer(rest.New(rest.Options{FS: st.FS, Accounts: st.Accounts, Share: e.shares}))
	e.srv.StartTLS()
	b.Cleanup(e.srv.Close)
	e.srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	e.file = fmt.Sprintf("%s/api/2/files/%d/%d/download", e.srv.URL, e.root.ID, n.ID)
	return e
}

// get sends GET url with token and drains the answer; it returns the
// status, and the body when the status is not 200.
func (e *accessEnv) get(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(body), nil
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, "", err
}

// permissionChecks are the names runPermissionCost measures besides
// get-4k, in the order it logs them.
var permissionChecks = []string{"token", "root-owner", "root-admin-browse", "org-manage"}

// runPermissionCost runs get-4k and then each check alone as
// sub-benchmarks of b, and stores each one's time per operation in perOp.
func (e *accessEnv) runPermissionCost(b *testing.B, perOp map[string]time.Duration) {
	ctx := context.Background()
	b.Run("get-4k", func(b *testing.B) {
		b.SetParallelism(16) // 32 clients on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if st, body, err := e.get(e.file, e.token); err != nil || st != http.StatusOK {
					b.Errorf("GET: %d %s %v", st, body, err)
					return
				}
			}
		})
		perOp["get-4k"] = b.Elapsed() / time.Duration(b.N)
	})
	c, err := e.st.Accounts.AccessCaller(ctx, e.token)
	if err != nil {
		b.Fatal(err)
	}
	ac, err := e.st.Accounts.Caller(ctx, e.admin.ID)
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		op   func() error
	}{
		{"token", func() error { _, err := e.st.Accounts.AccessCaller(ctx, e.token); return err }},
		{"root-owner", func() error { _, err := e.shares.Root(ctx, c, e.root.ID); return err }},
		{"root-admin-browse", func() error { _, err := e.shares.Root(ctx, ac, e.root.ID); return err }},
		// The check of the organization routes (persons, metrics/usage).
		{"org-manage", func() error { _, err := e.shares.Organization(ctx, ac, e.st.Org.ID, share.OrgManage); return err }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := tt.op(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			perOp[tt.name] = b.Elapsed() / time.Duration(b.N)
		})
	}
}

// logPermissionCost logs each check measured as a share of one GET.
func logPermissionCost(b *testing.B, perOp map[string]time.Duration) {
	get := perOp["get-4k"]
	if get <= 0 {
		return
	}
	for _, k := range permissionChecks {
		if d, ok := perOp[k]; ok {
			b.Logf("%s: %v per check, %.2f%% of a 4 KiB GET (%v; %.0f GETs/s); target under 5%%", k, d, 100*float64(d)/float64(get), get, float64(time.Second)/float64(get))
		}
	}
	// The organization routes pay org-manage instead of a root's check;
	// next to their own answer it is what they pay for permission.
	if d, ok := perOp["org-manage"]; ok {
		if u, ok := perOp["org-usage"]; ok {
			b.Logf("token+org-manage: %v per GET, %.2f%% of a metrics/usage GET (%v)", perOp["token"]+d, 100*float64(perOp["token"]+d)/float64(u), u)
		}
	}
	// What one download pays in all: its token, then its root.
	for _, root := range []string{"root-owner", "root-admin-browse"} {
		tok, ok1 := perOp["token"]
		r, ok2 := perOp[root]
		if ok1 && ok2 {
			b.Logf("token+%s: %v per GET, %.2f%% of a 4 KiB GET; target under 5%%", root, tok+r, 100*float64(tok+r)/float64(get))
		}
	}
}
