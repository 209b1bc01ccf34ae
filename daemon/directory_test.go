package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/account/directorytest"
	"berth/config"
	"berth/kv/badger"
	"berth/share"
	"berth/vfs"
	"berth/vfs/chunk"
)

// The scheduled import walks every source against a real slapd: it
// imports those whose organization enables directories, gives the new
// persons their sync roots, passes over the others, and logs and counts
// a server that fails without stopping the walk.
func TestDirectoryJobs(t *testing.T) {
	srv := directorytest.Start(t)
	srv.Add(directorytest.User{UID: "olivia", SN: "Octavia", Mail: "olivia@example.com", Password: "olivia-pw"})
	ctx := context.Background()
	dir := t.TempDir()
	db, err := badger.Open(badger.Options{Dir: filepath.Join(dir, "meta"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := chunk.NewDisk(filepath.Join(dir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := vfs.Open(ctx, db, chunks, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close(); db.Close() })
	accounts := account.New(db, account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1},
		Directory: account.DirectoryOptions{RootCAs: srv.RootCAs, Timeout: 5 * time.Second}})
	shares := share.New(share.Options{FS: fs, Accounts: accounts, Store: db})

	source := func(name string, ad bool, port int) account.AuthSource {
		t.Helper()
		pol := account.DefaultPolicy()
		pol.ADEnabled = true
		org, err := accounts.CreateOrganization(ctx, account.OrganizationInput{Name: name, Policy: &pol})
		if err != nil {
			t.Fatal(err)
		}
		a, err := accounts.CreateAuthSource(ctx, account.AuthSourceInput{OrganizationID: org.ID, Host: directorytest.Host, Port: port, SSL: true,
			Domain: directorytest.Domain, Login: directorytest.AdminDN, Password: directorytest.AdminPassword})
		if err != nil {
			t.Fatal(err)
		}
		if !ad {
			if _, err := accounts.UpdatePolicy(ctx, org.ID, func(p *account.Policy) error { p.ADEnabled = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		return a
	}
	broken := source("Broken", true, 1)
	good := source("Good", true, srv.TLSPort)
	off := source("Off", false, srv.TLSPort)

	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	j := newDirectoryJobs(accounts, shares, slog.New(slog.NewTextHandler(&logs, nil)), reg)
	j.run(ctx)

	olivia, err := accounts.PersonByLogin(ctx, "olivia")
	if err != nil || olivia.AuthSourceID != good.ID || olivia.RootID == 0 {
		t.Fatalf("olivia: %+v %v\n%s", olivia, err, logs.String())
	}
	if persons, _, _ := accounts.Persons(ctx, off.OrganizationID, 0, 10); len(persons) != 0 {
		t.Errorf("the organization with ad_enabled off got %d persons", len(persons))
	}
	if a, _ := accounts.AuthSource(ctx, broken.ID); a.LastError == "" {
		t.Errorf("the broken source keeps no error: %+v", a)
	}
	if !strings.Contains(logs.String(), "directory import failed") {
		t.Errorf("no failure logged:\n%s", logs.String())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if got["ok"] != 1 || got["error"] != 1 {
		t.Errorf("imports counted %v, want 1 ok and 1 error", got)
	}
}

// directory.ca_file is read at start: a file of no certificate is refused.
func TestDirectoryOptions(t *testing.T) {
	if o, err := directoryOptions(config.Directory{Timeout: time.Second}); err != nil || o.RootCAs != nil || o.Timeout != time.Second {
		t.Fatalf("no file: %+v %v", o, err)
	}
	bad := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := directoryOptions(config.Directory{CAFile: bad}); err == nil || !strings.Contains(err.Error(), "directory.ca_file") {
		t.Fatalf("a file of no certificate: %v", err)
	}
	if _, err := directoryOptions(config.Directory{CAFile: bad + ".missing"}); err == nil {
		t.Fatal("a missing file was accepted")
	}
}
