package daemon

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
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

// TestFirstRunOnFullDisk: a first start on a disk already down to the
// reserve fails without storing the organization, so the next start, with
// room, creates the organization and its administrator. Storing the
// organization first left one without an administrator: every later start
// took the first run as done, and nobody could log in.
func TestFirstRunOnFullDisk(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Storage.Reserve = 1 << 62 // more than any disk has
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = firstRun(ctx, cfg, st.files, account.New(st.db, accountOptions(cfg)), log, io.Discard)
	if !errors.Is(err, vfs.ErrNoSpace) {
		t.Errorf("first run on a full disk: %v, want ErrNoSpace", err)
	}
	st.close(log)

	cfg.Storage.Reserve = 0
	st, err = openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	accounts := account.New(st.db, accountOptions(cfg))
	if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
		t.Fatalf("first run with room: %v", err)
	}
	p, err := accounts.PersonByLogin(ctx, cfg.Admin.Login)
	if err != nil {
		t.Fatalf("the administrator after the second start: %v", err)
	}
	if _, err := st.files.Root(ctx, p.RootID); err != nil {
		t.Fatalf("the administrator's root: %v", err)
	}
}

// TestFirstRunFailingAtAdministrator: a first start refused while creating
// the administrator (here a password config validation would have caught)
// stores no organization, so the next start runs the first run again and
// an administrator exists; before, the organization stayed and every later
// start skipped the first run, leaving nobody to log in.
func TestFirstRunFailingAtAdministrator(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Admin.Password = "short"
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	accounts := account.New(st.db, accountOptions(cfg))
	if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err == nil {
		t.Fatal("first run with a 5-character password succeeded")
	}
	if has, err := accounts.HasOrganizations(ctx); err != nil || has {
		t.Fatalf("after the failed first run: organizations %v, %v", has, err)
	}
	cfg.Admin.Password = "correct horse battery"
	if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
		t.Fatalf("second first run: %v", err)
	}
	if _, err := accounts.Authenticate(ctx, cfg.Admin.Login, cfg.Admin.Password); err != nil {
		t.Fatalf("the administrator cannot log in: %v", err)
	}
}
