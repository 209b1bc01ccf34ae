package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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

// openSpaceStores opens the daemon's stores on a new data directory with
// no disk reserve, as the space tests measure it, and makes alice's root;
// the caller closes the stores (a test may reopen them).
func openSpaceStores(t *testing.T) (config.Config, *slog.Logger, *stores, vfs.Root) {
	t.Helper()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Storage.Reserve = 0
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(context.Background(), cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.CreateRoot(context.Background(), "alice", vfs.RootSync)
	if err != nil {
		st.close(log)
		t.Fatal(err)
	}
	return cfg, log, st, root
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
	cfg, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	empty := diskUsage(t, cfg.Data)
	var err error

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

// cutBody is an upload body that fails after n bytes, as a request body
// does when the client goes away.
type cutBody struct {
	r io.Reader
	n int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.r.Read(p[:min(len(p), c.n)])
	c.n -= n
	return n, err
}

// chunkFiles counts the files under the chunk store: chunks, temp files
// (.tmp-) and the fan-out directories.
func chunkFiles(t testing.TB, dir string) (chunks, temps, dirs int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case path == dir:
		case d.IsDir():
			dirs++
		case strings.HasPrefix(d.Name(), ".tmp-"):
			temps++
		default:
			chunks++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return chunks, temps, dirs
}

// TestLargeFilesSpaceReturns: 50 MiB in chunk files, deleted, purged and
// collected, and the chunks of an upload cut halfway, leave the disk;
// temp files a crash left are removed at the next start.
func TestLargeFilesSpaceReturns(t *testing.T) {
	ctx := context.Background()
	cfg, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	chunksDir := filepath.Join(cfg.Data, "chunks")
	empty := diskUsage(t, cfg.Data)

	big, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "big.bin", bytes.NewReader(content(1, 50<<20)), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := diskUsage(t, cfg.Data)
	n, _, dirs := chunkFiles(t, chunksDir)
	t.Logf("50 MiB file: data directory %d MiB, %d chunk files in %d fan-out directories", full>>20, n, dirs)

	_, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "cut.bin", &cutBody{r: bytes.NewReader(content(2, 40<<20)), n: 20 << 20}, vfs.WriteOptions{})
	if err == nil {
		t.Fatal("an upload whose body failed was stored")
	}
	cut := diskUsage(t, cfg.Data)
	n, temps, _ := chunkFiles(t, chunksDir)
	t.Logf("after an upload cut at 20 MiB: %d MiB, %d chunk files, %d temp files", cut>>20, n, temps)
	if temps != 0 {
		t.Errorf("the cut upload left %d temp files", temps)
	}

	if err := st.files.Delete(ctx, root.ID, big.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	collectOnce(ctx, time.Nanosecond, st, log)
	after := diskUsage(t, cfg.Data)
	n, temps, dirs = chunkFiles(t, chunksDir)
	t.Logf("deleted, purged and collected: %d MiB, %d chunk files, %d temp files, %d empty fan-out directories left", after>>20, n, temps, dirs)
	if n != 0 || temps != 0 {
		t.Errorf("%d chunk files and %d temp files left", n, temps)
	}
	if after-empty > 4<<20 {
		t.Errorf("%d MiB still on disk", (after-empty)>>20)
	}

	// A crash while a chunk was being written leaves its temp file.
	stray := filepath.Join(chunksDir, "ab", ".tmp-0123456789abcdef")
	if err := os.MkdirAll(filepath.Dir(stray), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, make([]byte, 1<<20), 0o640); err != nil {
		t.Fatal(err)
	}
	collectOnce(ctx, time.Nanosecond, st, log)
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("the collector removed a temp file while uploads may be writing it: %v", err)
	}
	st.close(log)
	st, err = openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temp file a crash left is still there after a start: %v", err)
	}
}

// TestRevisionsSpace: every overwrite keeps the file's older revision
// (nothing trims them; the policy's trim_revisions is not acted on), and
// their space, chunked and kept in the metadata store, comes back when
// the file is deleted, purged and collected.
func TestRevisionsSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 60 MiB")
	}
	ctx := context.Background()
	cfg, log, st, root := openSpaceStores(t)
	defer func() { st.close(log) }()
	empty := diskUsage(t, cfg.Data)
	var err error
	const overwrites = 40
	var big, small vfs.Node
	for i := range overwrites {
		if big, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "big.bin", bytes.NewReader(content(uint64(i), 1<<20)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if small, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "small.bin", bytes.NewReader(content(uint64(1000+i), 12<<10)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	full := diskUsage(t, cfg.Data)
	for _, n := range []vfs.Node{big, small} {
		revs, err := st.files.Revisions(ctx, root.ID, n.ID)
		if err != nil || len(revs) != overwrites {
			t.Errorf("%s: %d revisions, %v; want %d", n.Name, len(revs), err, overwrites)
		}
	}
	collectOnce(ctx, time.Hour, st, log)
	if kept := diskUsage(t, cfg.Data); kept < full-(4<<20) {
		t.Errorf("the collection freed the space of live revisions: %d MiB of %d", kept>>20, full>>20)
	}
	for _, n := range []vfs.Node{big, small} {
		if err := st.files.Delete(ctx, root.ID, n.ID, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Millisecond)
	collectOnce(ctx, time.Nanosecond, st, log)
	after := diskUsage(t, cfg.Data)
	t.Logf("%d overwrites of a 1 MiB and a 12 KiB file: empty %d MiB, with every revision %d MiB, deleted, purged and collected %d MiB",
		overwrites, empty>>20, full>>20, after>>20)
	if after-empty > 4<<20 {
		t.Errorf("%d MiB of the revisions still on disk", (after-empty)>>20)
	}
}
