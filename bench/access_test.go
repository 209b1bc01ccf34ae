package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/rest"
	"berth/share"
	"berth/vfs"
	"net/http/httptest"
)

// BenchmarkPermissionCost puts issue 12's target on numbers: the
// permission checks of a request cost under 5% of the 4 KiB GET rate. In
// one run it measures a 4 KiB download over loopback TLS (32 clients,
// keep-alive), then the checks that request makes alone: the caller's
// token (AccessCaller) and share's decision on the root (share.Root), the
// latter as an owner and as an administrator browsing under
// admin_browse_files (the path with the most reads). It logs each check
// as a share of one GET's time.
func BenchmarkPermissionCost(b *testing.B) {
	ctx := context.Background()
	st := berthtest.New(b, berthtest.Options{})
	shares := share.New(share.Options{FS: st.FS, Accounts: st.Accounts})
	owner, root, token := st.AddPerson(b, "owner", "correct horse battery")
	admin, _, _ := st.AddPerson(b, "admin", "correct horse battery")
	if _, err := st.Accounts.UpdatePerson(ctx, admin.ID, func(p *account.Person) error { p.Admin = true; return nil }); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Accounts.UpdatePolicy(ctx, st.Org.ID, func(p *account.Policy) error { p.AdminBrowseFiles = true; return nil }); err != nil {
		b.Fatal(err)
	}
	n, err := st.FS.WriteFile(ctx, root.ID, root.FolderID, "small.bin", strings.NewReader(strings.Repeat("x", 4096)), vfs.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(rest.New(rest.Options{FS: st.FS, Accounts: st.Accounts, Share: shares}))
	srv.StartTLS()
	b.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport)
	tr.MaxIdleConnsPerHost = 64
	url := fmt.Sprintf("%s/api/2/files/%d/%d/download", srv.URL, root.ID, n.ID)
	_ = owner

	perOp := map[string]time.Duration{}
	b.Run("get-4k", func(b *testing.B) {
		b.SetParallelism(16) // 32 clients on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := srv.Client().Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("GET: %d", resp.StatusCode)
					return
				}
			}
		})
		perOp["get-4k"] = b.Elapsed() / time.Duration(b.N)
	})
	c, err := st.Accounts.AccessCaller(ctx, token)
	if err != nil {
		b.Fatal(err)
	}
	ac, err := st.Accounts.Caller(ctx, admin.ID)
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		op   func() error
	}{
		{"token", func() error { _, err := st.Accounts.AccessCaller(ctx, token); return err }},
		{"root-owner", func() error { _, err := shares.Root(ctx, c, root.ID); return err }},
		{"root-admin-browse", func() error { _, err := shares.Root(ctx, ac, root.ID); return err }},
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
	if get := perOp["get-4k"]; get > 0 {
		for _, k := range []string{"token", "root-owner", "root-admin-browse"} {
			if d, ok := perOp[k]; ok {
				b.Logf("%s: %v per check, %.2f%% of a 4 KiB GET (%v; %.0f GETs/s)", k, d, 100*float64(d)/float64(get), get, float64(time.Second)/float64(get))
			}
		}
	}
}
