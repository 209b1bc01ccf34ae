package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth/account"
	"berth/config"
	"berth/kv/postgres/pgtest"
)

// TestMetadataPostgres: with metadata.backend postgres the daemon's stores
// open on the database (dsn and dsn_file alike), a first run creates an
// administrator who logs in, and nothing is written to the data
// directory's meta/; a database that cannot be reached stops the start
// with an error naming the setting, not the password.
func TestMetadataPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte(srv.NewDatabase(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		set  func(*config.MetadataPostgres)
	}{
		{"dsn", func(p *config.MetadataPostgres) { p.DSN = srv.NewDatabase(t) }},
		{"dsn_file", func(p *config.MetadataPostgres) { p.DSNFile = dsnFile }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Data = t.TempDir()
			cfg.Metadata.Backend = "postgres"
			tc.set(&cfg.Metadata.Postgres)
			cfg.Admin.Password = "correct horse battery"
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			st, err := openStores(ctx, cfg, log, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.close(log)
			accounts := account.New(st.db, accountOptions(cfg))
			if err := firstRun(ctx, cfg, st.files, accounts, log, io.Discard); err != nil {
				t.Fatal(err)
			}
			if _, err := accounts.Authenticate(ctx, cfg.Admin.Login, cfg.Admin.Password); err != nil {
				t.Fatalf("the administrator cannot log in: %v", err)
			}
			if _, err := os.Stat(filepath.Join(cfg.Data, "meta")); err == nil {
				t.Error("a Badger directory was created beside a postgres backend")
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		cfg := config.Default()
		cfg.Data = t.TempDir()
		cfg.Metadata.Backend = "postgres"
		// srv, with a database that does not exist and a password.
		cfg.Metadata.Postgres.DSN = strings.Replace(srv.DSN("nosuchdb"), "postgres@", "postgres:s3cretpw@", 1)
		_, err := openStores(ctx, cfg, log, nil)
		if err == nil {
			t.Fatal("openStores succeeded on a database that does not exist")
		}
		if !strings.Contains(err.Error(), "metadata.postgres") || strings.Contains(err.Error(), "s3cretpw") {
			t.Fatalf("error %q: want one naming metadata.postgres, without the password", err)
		}
	})
}
