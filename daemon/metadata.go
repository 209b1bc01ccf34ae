package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"berth/config"
	"berth/kv"
	"berth/kv/badger"
	"berth/kv/postgres"
)

// openMetadata opens the metadata store that cfg.Metadata names: Badger in
// the data directory (the default), or a PostgreSQL database that several
// nodes share. Everything after it holds a kv.Store and reaches what only
// one engine has by interface (kv.GCer, kv.Failer, metricsCollector).
func openMetadata(ctx context.Context, cfg config.Config, log *slog.Logger) (kv.Store, error) {
	switch cfg.Metadata.Backend {
	case "postgres":
		dsn, err := postgresDSN(cfg.Metadata.Postgres)
		if err != nil {
			return nil, err
		}
		db, err := postgres.Open(ctx, postgres.Options{DSN: dsn, Logger: log.With("component", "kv")})
		if err != nil {
			// The driver's errors name the host and the reason, never
			// the password.
			return nil, fmt.Errorf("opening the metadata store on PostgreSQL (metadata.postgres): %w", err)
		}
		return db, nil
	case "badger", "":
		db, err := badger.Open(badger.Options{
			Dir: filepath.Join(cfg.Data, "meta"), Logger: log.With("component", "kv"),
			MemTableSize:   int64(cfg.Memory.KVMemtable),
			BlockCacheSize: int64(cfg.Memory.KVBlockCache),
			IndexCacheSize: int64(cfg.Memory.KVIndexCache),
		})
		if errors.Is(err, kv.ErrInUse) {
			return nil, fmt.Errorf("data directory %s is in use by another berth (serve, fsck, gc, purge-deleted or reset-password); stop it first: %w", cfg.Data, err)
		}
		if err != nil {
			return nil, fmt.Errorf("opening metadata store in %s: %w", cfg.Data, err)
		}
		return db, nil
	default:
		return nil, fmt.Errorf("metadata.backend %q is not badger or postgres", cfg.Metadata.Backend)
	}
}

// postgresDSN returns the connection string, from the configuration or
// from the file it names.
func postgresDSN(p config.MetadataPostgres) (string, error) {
	if p.DSNFile == "" {
		return p.DSN, nil
	}
	b, err := os.ReadFile(p.DSNFile)
	if err != nil {
		return "", fmt.Errorf("reading metadata.postgres.dsn_file: %w", err)
	}
	dsn := strings.TrimSpace(string(b))
	if dsn == "" {
		return "", fmt.Errorf("metadata.postgres.dsn_file %s is empty", p.DSNFile)
	}
	return dsn, nil
}
