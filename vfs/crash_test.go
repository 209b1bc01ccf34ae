package vfs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"berth/vfs"
)

// TestCrash holds the cases where the process dies (SIGKILL, in a child
// process) in the middle of a change and the store, reopened, must show
// the change whole or not at all and leak nothing. Each row starts its
// child through startChild; the children are the Test*Child functions,
// which do nothing unless their environment names a directory.
func TestCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"WriteKilled", crashSafety},
		// was intent_crash_test.go
		{"SplitOperationKilled", splitCrashSafety},
		// A deleted root's purge, the policy job's, and a root deleted
		// with uploads in flight, killed at many points.
		{"PurgeKilled", purgeCrashSafety},
	} {
		t.Run(tc.name, tc.run)
	}
}

// crashSizes are the sizes of the files the child writes before it is
// killed: empty, small, chunk-sized and several chunks.
var crashSizes = []int{0, 1, 4096, 1 << 20, 3<<20 + 5, 64 << 10}

// TestCrashChild is the child of TestCrash/WriteKilled, run in its own process.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("BERTH_CRASH_DIR")
	if dir == "" {
		t.Skip("only run as the child of TestCrash/WriteKilled")
	}
	e := openEnv(t, dir)
	root, err := e.fs.CreateRoot(ctx, "crash", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("root %d %d\n", root.ID, root.FolderID)
	for i, size := range crashSizes {
		n, err := e.fs.WriteFile(ctx, root.ID, root.FolderID, fmt.Sprintf("f%d", i), bytes.NewReader(randBytes(uint64(i), size)), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("done %d %d\n", i, n.ID)
	}
	// Overwrite f1 slowly: the parent kills us in the middle, and f1 must
	// keep its old contents.
	fmt.Println("slow")
	slow := &slowReader{r: bytes.NewReader(randBytes(99, 48<<20))}
	e.fs.WriteFile(ctx, root.ID, root.FolderID, "f1", slow, vfs.WriteOptions{})
	e.fs.WriteFile(ctx, root.ID, root.FolderID, "never", slow, vfs.WriteOptions{})
	t.Fatal("not killed")
}

type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(2 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 64<<10)])
}

// crashSafety kills a writer mid-write with SIGKILL and checks that
// every write that returned is intact, the interrupted one is invisible,
// and nothing leaks or goes missing.
func crashSafety(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			dir := t.TempDir()
			cmd, out := startChild(t, "TestCrashChild", "BERTH_CRASH_DIR="+dir)
			var rootID uint64
			ids := map[int]uint64{}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				var i int
				var id, folder uint64
				switch {
				case strings.HasPrefix(line, "root "):
					fmt.Sscanf(line, "root %d %d", &rootID, &folder)
				case strings.HasPrefix(line, "done "):
					fmt.Sscanf(line, "done %d %d", &i, &id)
					ids[i] = id
				}
				if line == "slow" {
					break
				}
			}
			// Kill once the slow write has stored chunks, at a different
			// point of it each round.
			base := countChunkFiles(t, dir)
			for deadline := time.Now().Add(10 * time.Second); countChunkFiles(t, dir) <= base && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(time.Duration(100*round) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if len(ids) != len(crashSizes) {
				t.Fatalf("child finished %d writes", len(ids))
			}

			left := countChunkFiles(t, dir)
			e := openEnv(t, dir)
			defer e.close()
			e.root = vfs.Root{ID: rootID}
			for i, size := range crashSizes {
				if got := e.read(t, ids[i]); !bytes.Equal(got, randBytes(uint64(i), size)) {
					t.Errorf("f%d: contents differ after the crash", i)
				}
			}
			if _, err := e.fs.Lookup(context.Background(), rootID, "/never"); err == nil {
				t.Error("the interrupted write is visible")
			}
			revs, err := e.fs.Revisions(ctx, rootID, ids[1])
			if err != nil || len(revs) != 1 {
				t.Errorf("f1 has %d revisions after an interrupted overwrite (%v)", len(revs), err)
			}
			rep, err := e.fs.Fsck(ctx, true)
			if err != nil || !rep.OK() {
				t.Fatalf("fsck after the crash: %v (%v)", rep, err)
			}
			after := countChunkFiles(t, dir)
			t.Logf("fsck: %v; the killed write had left %d chunk files, recovery removed them", rep, left-after)
			if left <= after || after != rep.Chunks {
				t.Errorf("the kill left no partial chunks (%d files): the test did not interrupt a write", left)
			}
		})
	}
}

func countChunkFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "chunks"), func(p string, d fs.DirEntry, err error) error {
		// Staged (temp-named) chunk files count: an interrupted upload
		// may leave either kind.
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startChild runs the test binary's test named test in a child process
// with env added, and returns it with its standard output (what it has
// made durable so far, line by line); the caller kills it.
func startChild(t *testing.T, test string, env ...string) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// splitCrashSafety kills a process with SIGKILL between two
// transactions of a split write, copy and purge, and checks that the next
// Open releases what the operation held: earlier writes intact, the
// interrupted write and copy invisible, the purged file gone, usage exact,
// fsck clean.
func splitCrashSafety(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpCopy, vfs.OpPurge} {
		t.Run(string(op), func(t *testing.T) {
			dir := t.TempDir()
			cmd, out := startChild(t, "TestSplitCrashChild", "BERTH_SPLIT_CRASH_DIR="+dir, "BERTH_SPLIT_CRASH_MODE="+string(op))
			var rootID, keepID, goneID uint64
			var files, folders, delFiles, physical int64
			paused := false
			sc := bufio.NewScanner(out)
			timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
			for !paused && sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "root "):
					fmt.Sscanf(line, "root %d", &rootID)
				case strings.HasPrefix(line, "keep "):
					fmt.Sscanf(line, "keep %d", &keepID)
				case strings.HasPrefix(line, "gone "):
					fmt.Sscanf(line, "gone %d", &goneID)
				case strings.HasPrefix(line, "usage "):
					fmt.Sscanf(line, "usage %d %d %d %d", &files, &folders, &delFiles, &physical)
				case line == "paused":
					paused = true
				}
			}
			timer.Stop()
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if !paused {
				t.Fatal("the child never paused between batches")
			}

			var logs bytes.Buffer
			e := openEnvWith(t, dir, vfs.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			defer e.close()
			e.root = vfs.Root{ID: rootID}
			if !strings.Contains(logs.String(), "released the references of interrupted operations") {
				t.Errorf("open released nothing: %s", logs.String())
			}
			if got := e.read(t, keepID); !bytes.Equal(got, randBytes(40, 5<<20)) {
				t.Error("keep differs after the crash")
			}
			for _, p := range []string{"/new", "/d2"} {
				if _, err := e.fs.Lookup(ctx, rootID, p); err == nil {
					t.Errorf("%s is visible after the crash", p)
				}
			}
			if op == vfs.OpPurge {
				if _, err := e.fs.Stat(ctx, rootID, goneID); !errors.Is(err, vfs.ErrNotExist) {
					t.Errorf("the purged file: %v", err)
				}
				delFiles, physical = delFiles-1, physical-4<<20
			}
			u, err := e.fs.Usage(ctx, rootID)
			if err != nil {
				t.Fatal(err)
			}
			if u.FileCount != files || u.FolderCount != folders || u.DelFileCount != delFiles || u.PhysicalSize != physical {
				t.Errorf("usage after the crash %+v, want %d files, %d folders, %d deleted, %d bytes", u, files, folders, delFiles, physical)
			}
			rep, err := e.fs.Fsck(ctx, true)
			if err != nil || !rep.OK() {
				t.Fatalf("fsck after the crash: %v (%v)", rep, err)
			}
			if n, err := e.fs.IntentParts(ctx); err != nil || n != 0 {
				t.Fatalf("%d intent parts left (%v)", n, err)
			}
			if n := countChunkFiles(t, dir); n != rep.Chunks {
				t.Fatalf("%d chunk files, fsck counted %d", n, rep.Chunks)
			}
		})
	}
}

// TestSplitCrashChild is the child of TestCrash/SplitOperationKilled, run in its own
// process: it stores a few things, then starts a split operation and
// stops between two of its transactions, to be killed there.
func TestSplitCrashChild(t *testing.T) {
	dir, mode := os.Getenv("BERTH_SPLIT_CRASH_DIR"), os.Getenv("BERTH_SPLIT_CRASH_MODE")
	if dir == "" {
		t.Skip("only run as the child of TestCrash/SplitOperationKilled")
	}
	var armed atomic.Bool
	opts := vfs.WithBatchHook(vfs.WithRefBatch(vfs.Options{}, tinyBatch), func(op vfs.Op) {
		if armed.Load() && string(op) == mode {
			fmt.Println("paused")
			select {}
		}
	})
	e := openEnvWith(t, dir, opts)
	root, err := e.fs.CreateRoot(ctx, "crash", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	fmt.Printf("root %d\n", root.ID)
	keep := e.write(t, root.FolderID, "keep", randBytes(40, 5<<20))
	fmt.Printf("keep %d\n", keep.ID)
	d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, d.ID, "a", []byte("small"))
	e.write(t, d.ID, "b", randBytes(41, 20<<10))
	e.write(t, d.ID, "big", randBytes(42, 4<<20))
	gone := e.write(t, root.FolderID, "gone", randBytes(43, 4<<20))
	if err := e.fs.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("gone %d\n", gone.ID)
	u, err := e.fs.Usage(ctx, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("usage %d %d %d %d\n", u.FileCount, u.FolderCount, u.DelFileCount, u.PhysicalSize)
	armed.Store(true)
	switch vfs.Op(mode) {
	case vfs.OpWrite:
		_, err = e.fs.WriteFile(ctx, root.ID, root.FolderID, "new", bytes.NewReader(randBytes(44, 5<<20)), vfs.WriteOptions{})
	case vfs.OpCopy:
		_, err = e.fs.Copy(ctx, root.ID, d.ID, root.ID, root.FolderID, "d2", vfs.WriteOptions{})
	case vfs.OpPurge:
		err = e.fs.Purge(ctx, root.ID, gone.ID)
	}
	t.Fatalf("%s did not pause between batches (%v)", mode, err)
}
