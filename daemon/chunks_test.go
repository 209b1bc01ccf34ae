package daemon

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth/config"
	"berth/vfs"
	"berth/vfs/chunk/s3"
	"berth/vfs/chunk/s3/s3test"
)

// s3Config is a configuration keeping its chunks in a fresh bucket of
// srv.
func s3Config(t *testing.T, srv *s3test.Server) config.Config {
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Storage.Backend = "s3"
	cfg.Storage.S3.Endpoint = srv.Endpoint
	cfg.Storage.S3.Bucket = srv.Bucket(t)
	cfg.Storage.S3.Region = srv.Region
	cfg.Storage.S3.PathStyle = true
	cfg.Storage.S3.AccessKey = srv.AccessKey
	cfg.Storage.S3.SecretKey = srv.SecretKey
	return cfg
}

// TestS3Backend: with storage.backend s3 a file's contents go to the
// bucket, none to the data directory, and read back the same.
func TestS3Backend(t *testing.T) {
	srv := s3test.Start(t)
	ctx := t.Context()
	cfg := s3Config(t, srv)
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, newRegistry())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			st.close(log)
		}
	}()
	root, err := st.files.CreateRoot(ctx, "r", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	want := content(7, 3<<20) // several chunks, over vfs.InlineMax
	n, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "f.bin", bytes.NewReader(want), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := st.files.Open(ctx, root.ID, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(want))
	}
	objects, _ := filepath.Glob(filepath.Join(srv.Dir, cfg.Storage.S3.Bucket, "chunks", "*", "*"))
	if len(objects) == 0 {
		t.Fatal("no chunk objects in the bucket")
	}
	if _, err := os.Stat(filepath.Join(cfg.Data, "chunks")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a chunks directory in the data directory with the s3 backend: %v", err)
	}
	st.close(log)
	closed = true

	// fsck, configured as an operator would, walks the bucket: clean,
	// then naming the object taken away.
	for _, kv := range srv.Env(cfg.Storage.S3.Bucket) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"fsck", "--data", cfg.Data}, &stdout, &stderr); err != nil {
		t.Fatalf("fsck of a clean S3 store: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if err := os.Remove(objects[0]); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	err = run(ctx, []string{"fsck", "--data", cfg.Data}, &stdout, &stderr)
	if want := "missing " + filepath.Base(objects[0]); !errors.Is(err, errFsckProblems) || !strings.Contains(stdout.String(), want) {
		t.Fatalf("fsck with an object gone = %v, printing %q; want a line %q", err, stdout.String(), want)
	}
}

// TestS3BackendStartErrors: a misconfigured bucket stops the start with
// an error that names the backend and what is wrong.
func TestS3BackendStartErrors(t *testing.T) {
	srv := s3test.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name string
		edit func(*config.S3)
		want error
	}{
		{"MissingBucket", func(s *config.S3) { s.Bucket = "no-such-bucket" }, s3.ErrNoBucket},
		{"WrongSecret", func(s *config.S3) { s.SecretKey = "not" + s.SecretKey }, s3.ErrCredentials},
		{"Unreachable", func(s *config.S3) { s.Endpoint = closed }, s3.ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := s3Config(t, srv)
			tc.edit(&cfg.Storage.S3)
			st, err := openStores(t.Context(), cfg, slog.New(slog.DiscardHandler), nil)
			if err == nil {
				st.close(slog.New(slog.DiscardHandler))
				t.Fatal("openStores succeeded")
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "storage.backend s3") {
				t.Fatalf("openStores = %v, want %v naming storage.backend s3", err, tc.want)
			}
		})
	}
}

// TestS3BackendReserve: with the chunks in S3 the metadata store still
// writes to the data directory's disk, so uploads stop at its reserve.
func TestS3BackendReserve(t *testing.T) {
	srv := s3test.Start(t)
	ctx := t.Context()
	cfg := s3Config(t, srv)
	cfg.Storage.Reserve = 1 << 60 // more than any disk has free
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	root, err := st.files.CreateRoot(ctx, "r", vfs.RootSync)
	if err == nil {
		_, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "f.bin", bytes.NewReader(content(1, 100<<10)), vfs.WriteOptions{})
	}
	if !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("upload with the data disk below its reserve = %v, want vfs.ErrNoSpace", err)
	}
}
