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
