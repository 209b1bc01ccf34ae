package daemon

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth/account"
	"berth/config"
	"berth/vfs"
)

// TestFirstRunRemovesStalePasswordFile: a first start with a generated
// password that was interrupted before the administrator existed leaves
// initial-admin-password behind. When the next start takes the password
// from admin.password instead, that file holds a password nobody has; it
// is removed, so an operator does not try it.
func TestFirstRunRemovesStalePasswordFile(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	pwFile := filepath.Join(cfg.Data, initialPasswordFile)
	// What the interrupted first start left.
	if err := os.WriteFile(pwFile, []byte("STALEPASSWORDFROMACRASH\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	cfg.Admin.Password = "correct horse battery"
	accounts := account.New(st.db, accountOptions(cfg))
	if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pwFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after a first run with admin.password: %v, want it gone", pwFile, err)
	}
	if _, err := accounts.Authenticate(ctx, cfg.Admin.Login, cfg.Admin.Password); err != nil {
		t.Fatalf("the administrator cannot log in: %v", err)
	}
}

// TestFirstRunRetried: a first run refused part way stores no
// organization, so the next start, with the cause fixed, runs the first
// run again and ends with an administrator who logs in to a sync root.
// Storing the organization first left one without an administrator:
// every later start took the first run as done, and nobody could log in.
func TestFirstRunRetried(t *testing.T) {
	for _, tc := range []struct {
		name         string
		broken, fine func(*config.Config)
		want         error // what the broken first run fails with; nil: any error
	}{
		// TestFirstRunOnFullDisk: a first start on a disk already down
		// to the reserve fails without storing the organization.
		{
			name:   "disk down to the reserve",
			broken: func(c *config.Config) { c.Storage.Reserve = 1 << 62 }, // more than any disk has
			fine:   func(c *config.Config) { c.Storage.Reserve = 0 },
			want:   vfs.ErrNoSpace,
		},
		// TestFirstRunFailingAtAdministrator: refused while creating
		// the administrator (here a password config validation would
		// have caught).
		{
			name:   "administrator refused",
			broken: func(c *config.Config) { c.Admin.Password = "short" },
			fine:   func(c *config.Config) { c.Admin.Password = "correct horse battery" },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := config.Default()
			cfg.Data = t.TempDir()
			tc.broken(&cfg)
			log := slog.New(slog.DiscardHandler)
			st, err := openStores(ctx, cfg, log, nil)
			if err != nil {
				t.Fatal(err)
			}
			accounts := account.New(st.db, accountOptions(cfg))
			err = firstRun(ctx, cfg, st.files, accounts, log, io.Discard)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("the broken first run: %v, want %v", err, tc.want)
			}
			if has, err := accounts.HasOrganizations(ctx); err != nil || has {
				t.Errorf("after the failed first run: organizations %v, %v", has, err)
			}
			st.close(log)

			tc.fine(&cfg)
			st, err = openStores(ctx, cfg, log, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.close(log)
			accounts = account.New(st.db, accountOptions(cfg))
			if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
				t.Fatalf("the first run again, with the cause fixed: %v", err)
			}
			p, err := accounts.PersonByLogin(ctx, cfg.Admin.Login)
			if err != nil {
				t.Fatalf("the administrator after the second start: %v", err)
			}
			if _, err := st.files.Root(ctx, p.RootID); err != nil {
				t.Fatalf("the administrator's root: %v", err)
			}
			// With no admin.password the first run generates one
			// into the data directory.
			password := cfg.Admin.Password
			if password == "" {
				b, err := os.ReadFile(filepath.Join(cfg.Data, initialPasswordFile))
				if err != nil {
					t.Fatal(err)
				}
				password = strings.TrimSpace(string(b))
			}
			if _, err := accounts.Authenticate(ctx, cfg.Admin.Login, password); err != nil {
				t.Fatalf("the administrator cannot log in: %v", err)
			}
		})
	}
}

// TestFirstRunCountsTheAdministratorsRoot: the first run's root counts
// into the administrator's and the organization's tallies; so does the
// root of a data directory made before the ledger (its only root is the
// first run's: no other person could be added), at the next start, once.
func TestFirstRunCountsTheAdministratorsRoot(t *testing.T) {
	ctx := context.Background()
	for _, old := range []bool{false, true} {
		cfg := config.Default()
		cfg.Data = t.TempDir()
		cfg.Admin.Password = "correct horse battery"
		log := slog.New(slog.DiscardHandler)
		st, err := openStores(ctx, cfg, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		accounts := account.New(st.db, accountOptions(cfg))
		if old {
			// What a first run before the ledger left.
			root, err := st.files.CreateRoot(ctx, cfg.Admin.Login, vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := accounts.Bootstrap(ctx, account.OrganizationInput{Name: "Old"}, account.PersonInput{
				Username: cfg.Admin.Login, Email: "admin@localhost", Password: cfg.Admin.Password, Admin: true, RootID: root.ID,
			}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		p, err := accounts.PersonByLogin(ctx, cfg.Admin.Login)
		if err != nil {
			t.Fatal(err)
		}
		for _, tally := range []uint64{account.TallyPerson(p.ID), account.TallyOrg(p.OrganizationID, "sync"), account.TallyOrg(p.OrganizationID, "")} {
			if u, err := st.files.TallyUsage(ctx, tally); err != nil || u.RootCount != 1 {
				t.Errorf("old data directory %v: tally %#x counts %d roots (%v), want 1", old, tally, u.RootCount, err)
			}
		}
		st.close(log)
	}
}
