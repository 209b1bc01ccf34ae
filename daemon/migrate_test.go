package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/berthtest"
	"berth/config"
	"berth/kv/postgres/pgtest"
	"berth/vfs"
	"berth/vfs/chunk/s3/s3test"
)

// migrateFiles is how many files the migrated data directory holds.
const migrateFiles = 10_000

// migrateBody is file i's contents: mostly small files, every hundredth
// big enough to be cut into chunks.
func migrateBody(i int) []byte {
	if i%100 == 0 {
		return content(uint64(i), 200<<10+i)
	}
	return content(uint64(i), 300+i%700)
}

// TestMigrate fills a single-node data directory with 10,000 files,
// migrates it into PostgreSQL and S3, and serves the files from a node on
// the target, byte-identical; a second run refuses the non-empty target,
// and --resume verifies clean.
func TestMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary, PostgreSQL and versitygw")
	}
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	s3 := s3test.Start(t)
	bucket := s3.Bucket(t)
	bin := berthtest.BuildBerth(t)
	src := filepath.Join(t.TempDir(), "single")
	pwEnv := "BERTH_ADMIN_PASSWORD=" + clusterPassword

	// The first run on the single node: organization and administrator.
	p := startDaemonEnv(t, bin, src, []string{pwEnv})
	rootID := loginAs(t, p, filepath.Join(src, "tls", "cert.pem"), clusterPassword).root
	p.stop(t)

	// The files, written in-process: faster than 10,000 requests.
	ctx := t.Context()
	cfg := config.Default()
	cfg.Data = src
	st, err := openStores(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.Root(ctx, uint64(rootID))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < migrateFiles; i += 8 {
				if _, err := st.files.WriteFile(ctx, root.ID, root.FolderID, fmt.Sprintf("f%05d.bin", i), bytes.NewReader(migrateBody(i)), vfs.WriteOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st.close(slog.New(slog.DiscardHandler))

	target := filepath.Join(t.TempDir(), "target.yaml")
	yaml := fmt.Sprintf("metadata:\n  backend: postgres\n  postgres:\n    dsn: %q\nstorage:\n  backend: s3\n  s3:\n    endpoint: %q\n    bucket: %q\n    region: %q\n    path_style: true\n",
		dsn, s3.Endpoint, bucket, s3.Region)
	if err := os.WriteFile(target, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := []string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey}
	migrate := func(extra ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"migrate", "--data", src, "--to-config", target}, extra...)...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, creds...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The first run is killed partway: --resume must go on from there.
	t.Logf("the first run: %s", runKilledEnv(t, bin, creds, 3*time.Second, "migrate", "--data", src, "--to-config", target, "--batch-keys", "500"))
	switch out, err := migrate(); {
	case err == nil && strings.Contains(out, "migration verified"):
		// Killed before it wrote anything: the target was empty.
		t.Logf("the killed run had written nothing; a plain run migrated:\n%s", out)
	case err == nil || !strings.Contains(out, "already holds"):
		t.Fatalf("migrate into a non-empty target: %v, want a refusal\n%s", err, out)
	}
	out, err := migrate("--resume")
	if err != nil || !strings.Contains(out, "migration verified") || !strings.Contains(out, fmt.Sprintf("fsck of the target: %d revisions", migrateFiles)) {
		t.Fatalf("migrate --resume: %v\n%s", err, out)
	}
	t.Logf("migrate --resume:\n%s", out)
	// Run again on the finished target, it verifies clean.
	if out, err := migrate("--resume"); err != nil || !strings.Contains(out, "chunks copied: 0 ") {
		t.Fatalf("migrate --resume of a finished migration: %v\n%s", err, out)
	}

	// A node on the target serves the files as they were.
	env := append(s3.Env(bucket), "BERTH_METADATA_BACKEND=postgres", "BERTH_METADATA_POSTGRES_DSN="+dsn, pwEnv)
	node := filepath.Join(t.TempDir(), "node")
	n := startDaemonEnv(t, bin, node, env)
	lc := loginAs(t, n, filepath.Join(node, "tls", "cert.pem"), clusterPassword)
	if lc.root != rootID {
		t.Fatalf("the administrator's root on the target: %d, want %d", lc.root, rootID)
	}
	for _, i := range []int{0, 1, 99, 100, 4321, 5000, 9999} {
		name := fmt.Sprintf("f%05d.bin", i)
		if st, got := lc.read(name); st != 200 || !bytes.Equal(got, migrateBody(i)) {
			t.Fatalf("%s from the migrated store: %d, %d bytes, equal %v", name, st, len(got), bytes.Equal(got, migrateBody(i)))
		}
	}
	// New ids do not collide with migrated ones: a new file is stored.
	if st, err := lc.upload("after-migration.bin", []byte("new"), false); err != nil || st != 200 {
		t.Fatalf("upload after the migration: %d %v", st, err)
	}
	if st, got := lc.read("f00100.bin"); st != 200 || !bytes.Equal(got, migrateBody(100)) {
		t.Fatalf("f00100.bin after a new upload: %d", st)
	}
	n.stop(t)
}
