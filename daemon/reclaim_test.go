package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"berth/config"
	"berth/vfs"
)

// diskUsage is what the files under dir take on disk: the blocks
// allocated (Badger's open logs are sparse, so their length says
// little) and the directories' own blocks, as du counts them.
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// TestSmallFilesSpaceReturns: about 100 MiB of small files, kept in
// their revision records and so in Badger's value log, deleted, purged
// and collected as the daemon's periodic collection does, give their
// space back.
func TestSmallFilesSpaceReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MiB")
	}
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Storage.Reserve = 0
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.close(log) }()
	root, err := st.files.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	empty := diskUsage(t, cfg.Data)

	const files, size = 8000, 12 << 10
	dir, err := st.files.Mkdir(ctx, root.ID, root.FolderID, "small", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			for i := w; i < files; i += 4 {
				name := fmt.Sprintf("f%05d.bin", i)
				if _, err := st.files.WriteFile(ctx, root.ID, dir.ID, name, bytes.NewReader(content(uint64(i), size)), vfs.WriteOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	full := diskUsage(t, cfg.Data)

	if err := st.files.Delete(ctx, root.ID, dir.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	start := time.Now()
	collectOnce(ctx, time.Nanosecond, st, log) // one run of the periodic collection
	after := diskUsage(t, cfg.Data)
	t.Logf("data directory: empty %d MiB, %d small files %d MiB, deleted, purged and collected %d MiB (collection %v)",
		empty>>20, files, full>>20, after>>20, time.Since(start).Round(time.Millisecond))
	if full-empty < 90<<20 {
		t.Fatalf("the files took %d MiB, want about 94", (full-empty)>>20)
	}
	// What the value log is writing cannot be rewritten yet: up to one
	// value-log file (16 MiB) stays.
	if after-empty > 20<<20 {
		t.Errorf("%d MiB of the deleted files are still on disk", (after-empty)>>20)
	}
	if _, err := st.files.Stat(ctx, root.ID, dir.ID); err == nil {
		t.Error("the deleted folder was not purged")
	}
}
